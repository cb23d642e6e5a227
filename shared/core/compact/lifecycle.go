package compact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/segment"
)

// ReasonLifecycleTransition is the reason of a lifecycle transition job.
const ReasonLifecycleTransition = "lifecycle_transition"

var errJobFull = errors.New("job full")

// runTransition executes a lifecycle tier transition: the same lease, base
// revalidation (before the work and before reporting) and heartbeat rules
// as compaction. It reads only the parts whose references say they may hold
// a due object (another tier than the target, minimum max_ts at or before
// the cutoff), selects the due objects in key order (bounded by the
// policy's MaxJobInputs and MaxJobBytes), copies each byte for byte into
// the target tier under the task's output keys at the object's own level,
// verifies the copy's checksum against the entry, and reports one
// completion replacing the old entries with the new ones (new key and tier;
// size, checksum, counts and timestamps unchanged). The cutoff is the
// task's sweep time minus transition_after_ms, so every attempt of one task
// identity selects the same objects and writes the same keys.
//
// The tier is the manifest's data tier; the copy is written with the
// bucket's default storage class (mapping tiers to S3 storage classes is
// the deployment's concern, not modelled here).
func (e *Executor) runTransition(ctx context.Context, task contract.Task, keep *lease.Keeper, started time.Time, seen *contract.Head) (Result, error) {
	facts, reason, err := e.revalidate(ctx, task, nil, seen)
	if err != nil || reason != "" {
		return Result{Outcome: OutcomeStale, Reason: reason}, err
	}
	if e.facts == nil {
		return Result{Outcome: OutcomeNothing, Reason: "no CCS facts: the lifecycle policy is unknown"}, nil
	}
	tier := facts.Lifecycle.TransitionToTier
	// The sweep time is the sender's word (rule 16): a task dated after
	// this executor's clock plus the skew allowance is refused, so no
	// message moves objects before they are due.
	if limit := started.Add(e.cfg.ClockSkew).UnixMilli(); e.cfg.Guards.SweepClock && task.SweepUnixMs > limit {
		return Result{Outcome: OutcomeStale, Reason: fmt.Sprintf("sweep time %d is after the executor's clock %d plus the skew allowance %s",
			task.SweepUnixMs, started.UnixMilli(), e.cfg.ClockSkew)}, nil
	}
	cutoff, ok := facts.Lifecycle.TransitionCutoff(task.SweepUnixMs)
	if !ok || task.SweepUnixMs <= 0 {
		return Result{Outcome: OutcomeNothing, Reason: "the lifecycle policy has no tier transition"}, nil
	}
	root, stale, err := e.openPinned(ctx, task)
	if stale != nil || err != nil {
		return orStale(stale), err
	}
	p := e.cfg.Policy.normalized()
	job := Job{Tier: tier, Reason: ReasonLifecycleTransition}
	var bytes int64
	err = e.lin.Each(ctx, &root, func(ref contract.PartRef) bool { return ref.TransitionDue(tier, cutoff) }, func(o contract.ObjectEntry) error {
		if !o.TransitionDue(tier, cutoff) {
			return nil
		}
		if len(job.Inputs) >= p.MaxJobInputs || len(job.Inputs) > 0 && o.Size > p.MaxJobBytes-bytes {
			return errJobFull
		}
		job.Inputs = append(job.Inputs, o)
		bytes = saturatingAdd(bytes, o.Size)
		return nil
	})
	if err != nil && !errors.Is(err, errJobFull) {
		return Result{}, fmt.Errorf("load due objects of %s v%d: %w", task.Collection, root.Version, err)
	}
	if len(job.Inputs) == 0 {
		return Result{Outcome: OutcomeNothing, Reason: fmt.Sprintf("no object outside tier %s with max_ts <= %d", tier, cutoff)}, nil
	}
	res := Result{Job: &job}
	e.metrics.Add("LifecycleTransitions", 1)
	added := make([]contract.ObjectEntry, 0, len(job.Inputs))
	var k kept
	for n, in := range job.Inputs {
		out := in
		out.Key, out.Tier = contract.RewriteOutputKey(task.Collection, in.Level, task.TaskID, n), tier
		if err := e.copyObject(ctx, keep, in, out.Key, &k); err != nil {
			if kerr := keep.Err(); kerr != nil {
				return res, kerr
			}
			return res, err
		}
		res.BytesRead = saturatingAdd(res.BytesRead, in.Size)
		res.BytesWritten = saturatingAdd(res.BytesWritten, in.Size)
		added = append(added, out)
		if err := keep.Beat(ctx); err != nil {
			return res, err
		}
	}
	c, reported, err := e.report1(ctx, task, facts, keep.Lease(), e.workStart(started, &k), ReasonLifecycleTransition+" to "+tier, job.Inputs, added, res.BytesRead, res.BytesWritten)
	if !reported {
		res.Outcome, res.Reason = OutcomeStale, "before reporting: "+c.Reason
		return res, err
	}
	if err != nil {
		return res, err
	}
	e.metrics.Add("CompletionsReported", 1)
	e.metrics.Add("LifecycleObjectsMoved", float64(len(added)))
	e.log.Info("lifecycle transition reported", "task", task.TaskID, "collection", task.Collection, "base", task.BaseManifestVersion,
		"tier", tier, "objects", len(added), "bytes", res.BytesWritten)
	res.Outcome, res.Completion = OutcomeReported, &c
	return res, nil
}

// readRange is the size of one input read.
func (e *Executor) readRange() int64 {
	if r := e.cfg.Read.RangeBytes; r > 0 {
		return r
	}
	return segment.DefaultRangeBytes
}

// copyObject streams in's bytes to key (multipart when the store streams,
// else one buffered Put) and verifies that they hash to in's checksum
// before the copy becomes visible (a mismatching stream is aborted). An
// earlier attempt's identical copy kept in its place is noted in k.
func (e *Executor) copyObject(ctx context.Context, keep *lease.Keeper, in contract.ObjectEntry, key string, k *kept) error {
	// A long copy heartbeats while it reads, as a long merge does.
	src := io.NewSectionReader(beating{ctx: ctx, r: e.objects.ReaderAt(ctx, in.Key, in.Size), keep: keep}, 0, in.Size)
	sum := sha256.New()
	verify := func(h hash.Hash) error {
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != in.Checksum {
			return fmt.Errorf("copy %s to %s: bytes hash to %s, the manifest entry says %s: %w", in.Key, key, got, in.Checksum, contract.ErrChecksumMismatch)
		}
		return nil
	}
	if _, ok := e.objects.(Streamer); ok {
		up, err := e.create(ctx, key)
		if err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		// One read per range (read_range_bytes); the upload sends its
		// parts in the background meanwhile.
		if _, err := io.CopyBuffer(io.MultiWriter(up, sum), src, make([]byte, min(e.readRange(), max(in.Size, 1)))); err != nil {
			_ = up.Abort()
			return fmt.Errorf("copy %s to %s: %w", in.Key, key, err)
		}
		if err := verify(sum); err != nil {
			_ = up.Abort()
			return err
		}
		if c, ok := up.(checksummed); ok {
			c.ExpectChecksum(in.Checksum)
		}
		if err := e.ours(ctx, key, in.Checksum, up.Close(), k); err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		return nil
	}
	body := make([]byte, in.Size)
	if _, err := io.ReadFull(src, body); err != nil {
		return fmt.Errorf("read %s: %w", in.Key, err)
	}
	sum.Write(body)
	if err := verify(sum); err != nil {
		return err
	}
	if err := e.put(ctx, key, body, in.Checksum, k); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}
