package app

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/resources"
)

// Policy is the tunable behaviour, overridable with BCC_POLICY (JSON).
type Policy struct {
	Observe          observe.Config `json:"observe"`
	LeaseDuration    time.Duration  `json:"lease_duration"`
	MaxTaskLifetime  time.Duration  `json:"max_task_lifetime"`
	CutoverDeadline  time.Duration  `json:"cutover_deadline"` // a cutover's not_after = task start + this (>= max_task_lifetime)
	GCProofMaxAge    time.Duration  `json:"gc_proof_max_age"` // a delete call's eligibility proof is at most this old
	ClockSkew        time.Duration  `json:"clock_skew"`
	OwnerTimeout     time.Duration  `json:"owner_timeout"`
	GCDeletesPerSec  float64        `json:"gc_deletes_per_sec"` // per collection
	GCGlobalPerSec   float64        `json:"gc_global_per_sec"`  // all collections of one worker
	GCBatchSize      int            `json:"gc_batch_size"`
	TargetObjectSize int64          `json:"target_object_size"`
	MergeFactor      int            `json:"merge_factor"`
}

// DefaultPolicy is the production default.
func DefaultPolicy() Policy {
	return Policy{
		Observe: observe.DefaultConfig(), LeaseDuration: 2 * time.Minute, MaxTaskLifetime: 15 * time.Minute, CutoverDeadline: 30 * time.Minute,
		GCProofMaxAge: 10 * time.Second, ClockSkew: 2 * time.Minute,
		OwnerTimeout: 10 * time.Second, GCDeletesPerSec: 3000, GCGlobalPerSec: 3500, GCBatchSize: 1000,
		TargetObjectSize: 64 << 20, MergeFactor: 4,
	}
}

// Config is one function's configuration.
type Config struct {
	Bucket            string
	Table             string
	QueueURLs         map[string]string // by class
	PublisherEndpoint string
	CCSEndpoint       string
	WatermarkBucket   string
	WatermarkKey      string
	AWSEndpoint       string
	Policy            Policy
}

// FromEnv parses configuration from environment variables (getenv is
// os.Getenv on Lambda).
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Bucket: getenv(resources.EnvBucket), Table: getenv(resources.EnvTable),
		QueueURLs: map[string]string{
			resources.QueueCompaction: getenv(resources.EnvCompactionQueue),
			resources.QueueGC:         getenv(resources.EnvGCQueue),
			resources.QueueHandoff:    getenv(resources.EnvHandoffQueue),
		},
		PublisherEndpoint: strings.TrimSuffix(getenv(resources.EnvPublisherEndpoint), "/"),
		CCSEndpoint:       strings.TrimSuffix(getenv(resources.EnvCCSEndpoint), "/"),
		WatermarkBucket:   getenv(resources.EnvWatermarkBucket), WatermarkKey: getenv(resources.EnvWatermarkKey),
		AWSEndpoint: getenv(resources.EnvAWSEndpoint), Policy: DefaultPolicy(),
	}
	if p := getenv(resources.EnvPolicy); p != "" {
		if err := json.Unmarshal([]byte(p), &c.Policy); err != nil {
			return c, fmt.Errorf("%s: %w", resources.EnvPolicy, err)
		}
	}
	if c.Bucket == "" || c.Table == "" {
		return c, fmt.Errorf("configuration: %s and %s are required", resources.EnvBucket, resources.EnvTable)
	}
	if c.WatermarkBucket == "" {
		c.WatermarkBucket = c.Bucket
	}
	return c, nil
}

// Env renders c as the environment a function of def would get (used by
// the embedded stack so local functions are configured exactly as deployed).
func (c Config) Env() map[string]string {
	pol, _ := json.Marshal(c.Policy)
	return map[string]string{
		resources.EnvBucket: c.Bucket, resources.EnvTable: c.Table,
		resources.EnvCompactionQueue: c.QueueURLs[resources.QueueCompaction], resources.EnvGCQueue: c.QueueURLs[resources.QueueGC],
		resources.EnvHandoffQueue: c.QueueURLs[resources.QueueHandoff], resources.EnvPublisherEndpoint: c.PublisherEndpoint,
		resources.EnvCCSEndpoint: c.CCSEndpoint, resources.EnvWatermarkBucket: c.WatermarkBucket, resources.EnvWatermarkKey: c.WatermarkKey,
		resources.EnvAWSEndpoint: c.AWSEndpoint, resources.EnvPolicy: string(pol),
	}
}
