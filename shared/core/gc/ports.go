package gc

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/guard"
)

// Objects reads objects (the data bucket).
type Objects interface {
	Get(ctx context.Context, key string) ([]byte, error)
}

// Listed is one key a listing proposed.
type Listed struct {
	Key          string
	LastModified time.Time
}

// Lister proposes keys under a prefix. A listing is never the truth about
// what is live or what may be deleted (rule 5): every proposed key is
// checked against the committed lineage before anything happens to it.
type Lister interface {
	List(ctx context.Context, prefix string) ([]Listed, error)
}

// DeleteResult is one DeleteObjects call's answer: keys confirmed gone (a
// key that was already gone counts) and keys that failed with their reason.
type DeleteResult struct {
	Deleted []string
	Failed  map[string]string
}

// Deleter deletes up to 1000 keys in one call.
type Deleter interface {
	DeleteBatch(ctx context.Context, keys []string) (DeleteResult, error)
}

// FactsSource reads CCS scheduling facts (lifecycle retention, tombstone).
type FactsSource interface {
	Facts(ctx context.Context, collection string) (contract.CollectionFacts, error)
}

// WatermarkSource reads the query plane's published global_safe_ts.
type WatermarkSource interface {
	Watermark(ctx context.Context) (contract.Watermark, error)
}

// SweepRecorder records what a finished sweep left (disposable debt state).
type SweepRecorder interface {
	RecordGCSweep(ctx context.Context, collection string, remainingObjects, remainingBytes, nextDueUnixMs, sweptAtUnixMs int64) error
}

// CompletionSink reports a deleting task's completion to the handoff.
// dedupID is the message's identity.
type CompletionSink interface {
	Complete(ctx context.Context, c contract.Completion, dedupID string) error
}

// WatermarkObject reads the watermark from one object, strictly.
type WatermarkObject struct {
	Objects Objects
	Key     string
}

// Watermark reads and decodes the watermark object.
func (w WatermarkObject) Watermark(ctx context.Context) (contract.Watermark, error) {
	b, err := w.Objects.Get(ctx, w.Key)
	if err != nil {
		return contract.Watermark{}, fmt.Errorf("read watermark %s: %w", w.Key, err)
	}
	return contract.DecodeWatermark(w.Key, b)
}

// ReadPorts are everything a plan needs. They can only read: a plan (and
// the CLI, which gets nothing else) cannot change anything (rule 10).
type ReadPorts struct {
	Objects   Objects
	Lister    Lister
	Facts     FactsSource
	Watermark WatermarkSource
}

// Ports are everything the executor needs.
type Ports struct {
	ReadPorts
	Deleter     Deleter
	Sweeps      SweepRecorder  // optional
	Completions CompletionSink // optional (tombstone cleanup completions)
}

// Config tunes GC.
type Config struct {
	TokenLifetime   time.Duration // a superseded manifest stays openable this long
	RetentionWindow time.Duration // evict_commit_ts < global_safe_ts - RetentionWindow
	MaxTaskLifetime time.Duration // never-committed outputs are reclaimed after
	ClockSkew       time.Duration // ... MaxTaskLifetime + ClockSkew
	BatchSize       int           // keys per DeleteObjects call (<= 1000)
	MaxAttempts     int           // attempts per key before the task fails
	RetryBackoff    time.Duration // first retry backoff (doubles)
	RetryAfter      time.Duration // next due time when blocked (unreadable watermark)
	PartCache       int           // verified parts cached by the lineage reader
	Guards          guard.Set
}

// DefaultConfig is the production default (guards all on).
func DefaultConfig() Config {
	return Config{TokenLifetime: 15 * time.Minute, RetentionWindow: 5 * time.Minute, MaxTaskLifetime: 15 * time.Minute,
		ClockSkew: 2 * time.Minute, BatchSize: 1000, MaxAttempts: 5, RetryBackoff: 200 * time.Millisecond,
		RetryAfter: time.Minute, PartCache: 1024, Guards: guard.All()}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.BatchSize <= 0 || c.BatchSize > 1000 {
		c.BatchSize = d.BatchSize
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = d.RetryBackoff
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = d.RetryAfter
	}
	if c.PartCache <= 0 {
		c.PartCache = d.PartCache
	}
	return c
}
