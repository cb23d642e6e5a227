package app

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

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
	Policy            policy.Policy
	// OwnerAuth is how owner requests are authenticated: owners.AuthSigV4
	// (the default, also for "") or owners.AuthNone.
	OwnerAuth string
	// OwnerSigning is the SigV4 "<service>:<region>" of requests to an
	// owner endpoint whose host does not say (a custom domain); default:
	// API Gateway in the function's region.
	OwnerSigning string
	// Deployment names the deployment (the stack's prefix): a dimension of
	// every metric, so two deployments in one account never mix.
	Deployment string
	// HandoffSenders are, by function, the role ids SQS names as SenderId
	// of the handoff queue's messages (the handoff's only; see
	// resources.EnvHandoffSenders).
	HandoffSenders map[string]string
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
			resources.QueueReconcile:  getenv(resources.EnvReconcileQueue),
		},
		PublisherEndpoint: strings.TrimSuffix(getenv(resources.EnvPublisherEndpoint), "/"),
		CCSEndpoint:       strings.TrimSuffix(getenv(resources.EnvCCSEndpoint), "/"),
		WatermarkBucket:   getenv(resources.EnvWatermarkBucket), WatermarkKey: getenv(resources.EnvWatermarkKey),
		AWSEndpoint: getenv(resources.EnvAWSEndpoint),
		OwnerAuth:   getenv(resources.EnvOwnerAuth), OwnerSigning: getenv(resources.EnvOwnerSigning), Deployment: getenv(resources.EnvDeployment),
	}
	switch c.OwnerAuth {
	case "":
		c.OwnerAuth = owners.AuthSigV4
	case owners.AuthSigV4, owners.AuthNone:
	default:
		return c, fmt.Errorf("%s %q: want %s or %s", resources.EnvOwnerAuth, c.OwnerAuth, owners.AuthSigV4, owners.AuthNone)
	}
	for _, e := range []struct{ env, url string }{{resources.EnvPublisherEndpoint, c.PublisherEndpoint}, {resources.EnvCCSEndpoint, c.CCSEndpoint}} {
		// https, or plain http to a loopback stand-in (the local stack).
		if e.url != "" {
			if err := resources.CheckOwnerEndpoint(e.url, true); err != nil {
				return c, fmt.Errorf("%s: %w", e.env, err)
			}
		}
	}
	if c.OwnerSigning != "" {
		if _, _, err := owners.ParseSigning(c.OwnerSigning); err != nil {
			return c, fmt.Errorf("%s: %w", resources.EnvOwnerSigning, err)
		}
	}
	// Strict, validated, defaults from policy.Default(): a bad policy
	// stops the boot with an error naming the field.
	pol, err := policy.Parse([]byte(getenv(resources.EnvPolicy)))
	if err != nil {
		return c, fmt.Errorf("%s: %w", resources.EnvPolicy, err)
	}
	c.Policy = pol
	if v := getenv(resources.EnvHandoffSenders); v != "" {
		if err := json.Unmarshal([]byte(v), &c.HandoffSenders); err != nil {
			return c, fmt.Errorf("%s: %w", resources.EnvHandoffSenders, err)
		}
		for fn, id := range c.HandoffSenders {
			if !slices.Contains(resources.HandoffSenders, fn) || id == "" {
				return c, fmt.Errorf("%s: %q -> %q: want a role id for each of %v", resources.EnvHandoffSenders, fn, id, resources.HandoffSenders)
			}
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
	var senders []byte
	if len(c.HandoffSenders) > 0 {
		senders, _ = json.Marshal(c.HandoffSenders)
	}
	return map[string]string{
		resources.EnvBucket: c.Bucket, resources.EnvTable: c.Table,
		resources.EnvCompactionQueue: c.QueueURLs[resources.QueueCompaction], resources.EnvGCQueue: c.QueueURLs[resources.QueueGC],
		resources.EnvHandoffQueue: c.QueueURLs[resources.QueueHandoff], resources.EnvReconcileQueue: c.QueueURLs[resources.QueueReconcile],
		resources.EnvPublisherEndpoint: c.PublisherEndpoint,
		resources.EnvCCSEndpoint:       c.CCSEndpoint, resources.EnvWatermarkBucket: c.WatermarkBucket, resources.EnvWatermarkKey: c.WatermarkKey,
		resources.EnvAWSEndpoint: c.AWSEndpoint, resources.EnvPolicy: string(pol),
		resources.EnvOwnerAuth: c.OwnerAuth, resources.EnvOwnerSigning: c.OwnerSigning, resources.EnvDeployment: c.Deployment,
		resources.EnvHandoffSenders: string(senders),
	}
}
