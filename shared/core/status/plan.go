package status

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/observe"
)

// IntentKind is what one intent would change.
type IntentKind string

// Intent kinds.
const (
	// IntentEnqueue: enqueue a task (the reconciliation rule).
	IntentEnqueue IntentKind = "enqueue"
	// IntentReleaseLease: release a stalled lease with a write conditioned
	// on the planned epoch, holder and expiry.
	IntentReleaseLease IntentKind = "release_lease"
	// IntentInspectDLQ: dead-lettered messages need an operator: a
	// message dead-lettered once fails again unless its cause is fixed,
	// so apply never re-drives it by itself.
	IntentInspectDLQ IntentKind = "inspect_dlq"
)

// Intent is one mutation the plan proposes, with its reason.
type Intent struct {
	Kind       IntentKind      `json:"kind"`
	Collection string          `json:"collection,omitempty"`
	Task       *contract.Task  `json:"task,omitempty"`
	Lease      *contract.Lease `json:"lease,omitempty"`
	Class      string          `json:"class,omitempty"` // queue class (inspect_dlq) or lease class (release_lease)
	Reason     string          `json:"reason"`
}

// Plan is the reconcile plan of one snapshot.
type Plan struct {
	AsOf        time.Time `json:"as_of"`
	Fingerprint string    `json:"fingerprint"`
	Intents     []Intent  `json:"intents"`
	// Skipped are the collections nothing was planned for, and why
	// (Unknown: never plan from a guess).
	Skipped map[string]string `json:"skipped,omitempty"`
}

// PlanFor derives the reconcile plan of s: a pure function of the snapshot
// and the observer's configuration (whose reconciliation rule is
// observe.PlanReconcile).
func PlanFor(s Snapshot, cfg observe.Config) Plan {
	p := Plan{AsOf: s.AsOf, Fingerprint: Fingerprint(s), Intents: []Intent{}, Skipped: map[string]string{}}
	nowMs := s.AsOf.UnixMilli()
	for _, c := range s.Collections {
		if c.State == Unknown {
			p.Skipped[c.Name] = c.Reasons[0]
			continue
		}
		for _, r := range c.Current.Leases {
			if r.Releasable {
				l := r.Lease
				p.Intents = append(p.Intents, Intent{Kind: IntentReleaseLease, Collection: c.Name, Lease: &l, Class: string(r.Class), Reason: r.Detail})
			}
		}
		if c.Current.Preview == nil || c.Current.PreviewState == nil {
			if c.Current.PreviewError != "" {
				p.Skipped[c.Name] = "reconcile preview: " + c.Current.PreviewError
			}
			continue
		}
		res := *c.Current.Preview
		why := fmt.Sprintf("head v%d not yet observed (observed v%d): the observer's task", res.Version, res.Previous)
		if res.Outcome != observe.OutcomeAdvanced {
			why = fmt.Sprintf("the observer's task for head v%d, enqueued again (makes up for a lost enqueue; FIFO deduplication absorbs a copy)", res.Version)
		}
		for _, t := range res.Tasks {
			p.Intents = append(p.Intents, Intent{Kind: IntentEnqueue, Collection: c.Name, Task: &t, Reason: why})
		}
		for _, d := range observe.PlanReconcile(cfg, *c.Current.PreviewState, res, nowMs) {
			t := d.Task
			p.Intents = append(p.Intents, Intent{Kind: IntentEnqueue, Collection: c.Name, Task: &t, Reason: d.Reason})
		}
	}
	p.Intents = dedupe(p.Intents)
	for _, q := range s.Queues {
		if n := q.DLQ.Visible + q.DLQ.InFlight; n > 0 {
			p.Intents = append(p.Intents, Intent{Kind: IntentInspectDLQ, Class: q.Class,
				Reason: fmt.Sprintf("%d dead-lettered %s messages: fix the cause, then re-drive them (SQS StartMessageMoveTask)", n, q.Class)})
		}
	}
	if len(p.Skipped) == 0 {
		p.Skipped = nil
	}
	return p
}

// Fingerprint hashes the facts a plan is derived from — heads, observed
// records, CCS facts, lease records and queue counts — and not the time
// they were read at: two snapshots with the same fingerprint plan the
// same intents (up to the sweep minute of sweep tasks).
func Fingerprint(s Snapshot) string {
	type leaseFact struct {
		Task, Holder string
		Epoch        uint64
		Expiry       int64
		Done         bool
	}
	type collFact struct {
		Name      string
		State     State
		Head      *contract.Head
		Observed  *observe.Observed
		Facts     *contract.CollectionFacts
		Leases    []leaseFact
		Preview   string
		GCDeletes int
	}
	var facts struct {
		Colls  []collFact
		Queues []Queue
	}
	for _, c := range s.Collections {
		cf := collFact{Name: c.Name, State: c.State, Head: c.Current.Head, Observed: c.Current.Observed, Facts: c.Desired.Facts}
		for _, r := range c.Current.Leases {
			cf.Leases = append(cf.Leases, leaseFact{r.Lease.TaskID, r.Lease.Holder, r.Lease.LeaseEpoch, r.Lease.LeaseExpiryUnixMs, r.Done})
		}
		if pv := c.Current.Preview; pv != nil {
			cf.Preview = string(pv.Outcome)
		}
		if g := c.Current.GC; g != nil {
			cf.GCDeletes = g.Deletable
		}
		facts.Colls = append(facts.Colls, cf)
	}
	for _, q := range s.Queues {
		q.Main = QueueCounts{} // the main queues drain all the time: not a planning fact
		facts.Queues = append(facts.Queues, q)
	}
	b, _ := json.Marshal(facts)
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:12])
}

// Releases is the stalled-lease recovery plan: the releasable leases of
// s, and every other lease with the reason it is left alone.
func Releases(s Snapshot) (release []lease.Report, keep []lease.Report) {
	for _, c := range s.Collections {
		for _, r := range c.Current.Leases {
			if r.Releasable {
				release = append(release, r)
			} else {
				keep = append(keep, r)
			}
		}
	}
	return release, keep
}

// dedupe merges enqueue intents of one task identity (the observer's
// re-derived task and the reconciliation's can be the same task): one
// intent, both reasons.
func dedupe(in []Intent) []Intent {
	out := in[:0]
	at := map[string]int{}
	for _, it := range in {
		if it.Kind == IntentEnqueue {
			if i, ok := at[it.Task.TaskID]; ok {
				out[i].Reason += "; " + it.Reason
				continue
			}
			at[it.Task.TaskID] = len(out)
		}
		out = append(out, it)
	}
	return out
}
