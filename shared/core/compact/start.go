package compact

import (
	"context"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Sleeper waits for d or until ctx ends.
type Sleeper func(ctx context.Context, d time.Duration) error

// SleepContext is the real Sleeper.
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// StartRule decides when a coalesced rewrite task starts its work. A
// rewrite's result is dropped when the head moves before its cutover (SYSTEM
// rule 2: never rebased), so a rewrite started while the writer is
// committing is likely wasted. The worker waits, before it takes the task,
// until the head has been still for Quiet (the burst is over) or, once
// MaxWait has passed, starts right after the next commit (the whole commit
// interval ahead of it: a collection that never pauses still compacts when
// its rewrite fits between two commits), and at the latest after MaxWait +
// Quiet. Heads committed during the wait coalesce into this task (its claim
// is still pending), so one task serves the whole burst. The wait never
// drops a task: it only delays it, within the invocation, by a bounded time.
//
// The head's age is measured from its committed_at (the publisher's clock)
// to this worker's clock: skew shortens or lengthens the wait, never beyond
// its bounds, and never affects safety (the task stays pinned and fenced).
type StartRule struct {
	Quiet   time.Duration // 0: start at once (no wait)
	MaxWait time.Duration
}

// alignPoll is how often the head is read once MaxWait has passed (to
// start right after a commit): a twentieth of Quiet, within 10..250 ms.
func (r StartRule) alignPoll() time.Duration {
	return min(max(r.Quiet/20, 10*time.Millisecond), 250*time.Millisecond)
}

// maxPolls bounds the head reads of one wait, whatever the clock does (a
// clock that does not move while the worker sleeps cannot hold it).
func (r StartRule) maxPolls() int {
	return 2 + int((r.MaxWait+r.Quiet)/r.alignPoll())
}

// Start reasons (the RewriteStarted metric's Why dimension).
const (
	StartNoWait  = "no_wait"  // the head was already still for Quiet
	StartQuiet   = "quiet"    // the head became still for Quiet while waiting
	StartAligned = "aligned"  // after MaxWait, right after a commit
	StartMaxWait = "max_wait" // MaxWait + Quiet passed
)

// decide is the rule at one look at the head: start (and why) or sleep d.
// waited is how long the wait has lasted (by the clock, or by the sleeps
// when the clock does not move); aligning says the previous look was past
// MaxWait, with prevVersion the head it saw.
func (r StartRule) decide(waited time.Duration, now time.Time, head contract.Head, aligning bool, prevVersion uint64) (start bool, why string, d time.Duration) {
	if r.Quiet <= 0 {
		return true, StartNoWait, 0
	}
	age := now.Sub(time.UnixMilli(head.CommittedAtUnixMs))
	switch {
	case age >= r.Quiet:
		return true, StartQuiet, 0
	case waited >= r.MaxWait+r.Quiet:
		return true, StartMaxWait, 0
	case waited >= r.MaxWait && aligning && head.Version != prevVersion:
		return true, StartAligned, 0
	case waited >= r.MaxWait:
		return false, "", r.alignPoll()
	}
	// Sleep until the head would be still for Quiet, or until MaxWait.
	return false, "", max(min(r.Quiet-age, r.MaxWait-waited), r.alignPoll())
}

// waited is how long task has waited for its start at now: since it was
// enqueued (the observer's clock: skew is clamped), at most MaxWait, so a
// task that arrives late (a backlog, a deferral's rounding to seconds)
// still looks for the start right after a commit, for up to Quiet.
func (r StartRule) waited(task contract.Task, now time.Time) time.Duration {
	return min(max(now.Sub(time.UnixMilli(task.EnqueuedAtUnixMs)), 0), r.MaxWait)
}

// StartDelay says how long a coalesced rewrite task should go back to its
// queue before it is tried again (0: run it now): while the head is not
// still and the task has waited (since it was enqueued) less than MaxWait.
// A consumer that can return a message for later (a visibility change)
// asks first, so the wait occupies no worker; the rest of the wait (the
// start right after a commit, past MaxWait) happens in Run. The task's
// claim stays pending meanwhile: heads committed during the wait coalesce
// into it.
func (e *Executor) StartDelay(ctx context.Context, task contract.Task) time.Duration {
	r := e.cfg.Start
	if e.rewrites == nil || r.Quiet <= 0 || !task.Kind.Rewrites() {
		return 0
	}
	head, err := e.lin.Head(ctx, task.Collection)
	if err != nil || head.Inc() != task.Inc() {
		return 0
	}
	e.seen.put(task.TaskID, head)
	now := e.now()
	waited := r.waited(task, now)
	start, _, d := r.decide(waited, now, head, false, 0)
	if start || waited >= r.MaxWait {
		return 0
	}
	e.metrics.AddDim("RewriteStartDeferred", "Kind", string(task.Kind), 1)
	e.log.Info("rewrite goes back to its queue until the head is still", "task", task.TaskID, "collection", task.Collection,
		"head", head.Version, "delay_ms", d.Milliseconds())
	return d
}

// awaitStill waits, before a coalesced rewrite task is taken, until
// StartRule says it may start (counting the time since the task was
// enqueued), and returns the head it last read (ok false: none). It
// returns only ctx's error; a head it cannot read ends the wait (the
// run's own checks decide about the task). Its first look is the head
// StartDelay read for this task just before, when it did.
func (e *Executor) awaitStill(ctx context.Context, task contract.Task) (contract.Head, bool, error) {
	r := e.cfg.Start
	if r.Quiet <= 0 {
		return contract.Head{}, false, nil
	}
	began := e.now()
	before := r.waited(task, began)
	aligning, prev, slept := false, uint64(0), time.Duration(0)
	for polls := 0; ; polls++ {
		head, ok := contract.Head{}, false
		if polls == 0 {
			head, ok = e.seen.take(task.TaskID)
		}
		if !ok {
			var err error
			if head, err = e.lin.Head(ctx, task.Collection); err != nil {
				return contract.Head{}, false, nil
			}
		}
		if head.Inc() != task.Inc() {
			return contract.Head{}, false, nil
		}
		now := e.now()
		waited := before + max(now.Sub(began), slept)
		start, why, d := r.decide(waited, now, head, aligning, prev)
		if !start && polls >= r.maxPolls() {
			start, why = true, StartMaxWait
		}
		if start {
			if polls == 0 && why == StartQuiet {
				why = StartNoWait
			}
			e.metrics.AddDim("RewriteStarted", "Why", why, 1)
			if polls > 0 {
				e.metrics.Duration("RewriteStartWaitMs", waited-before)
			}
			return head, true, nil
		}
		if polls == 0 {
			e.metrics.AddDim("RewriteStartDeferred", "Kind", string(task.Kind), 1)
			e.log.Info("rewrite waits for a still head", "task", task.TaskID, "collection", task.Collection, "head", head.Version)
		}
		aligning, prev = waited >= r.MaxWait, head.Version
		if err := e.sleep(ctx, d); err != nil {
			return contract.Head{}, false, err
		}
		slept += d
	}
}
