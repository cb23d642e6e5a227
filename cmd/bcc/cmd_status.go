package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/status"
)

func (c *cli) statusCmd() *cobra.Command {
	var coll, now string
	cmd := c.command("status", "fleet and collection state, queues and every DLQ",
		`Status reads every source (CCS facts and catalog, heads, observed state,
the GC plan, leases, the task and reconcile queues with their DLQs, the
observer's failure queue) and judges each collection by the state model:
NotConfigured, Disabled, Starting, Running, Degraded, Stopping, Stopped,
or Unknown when a source it depends on could not be read. The fleet is
Unknown when any source is, Degraded when a DLQ holds messages or a
collection is Degraded.

Exit 0 when nothing needs a person, 2 when the fleet (or the collection)
is Degraded or Unknown.`,
		`  bcc --stack bcc-coordinator status
  bcc --stack bcc-coordinator status --collection orders -o json`,
		func(*cobra.Command) (int, error) {
			s, err := c.open(now, false)
			if err != nil {
				return exitError, err
			}
			if err := s.checkCollection(coll); err != nil {
				return exitError, err
			}
			return s.status(coll)
		})
	collectionFlag(cmd.Flags(), &coll, "one collection (default: every collection CCS lists)")
	nowFlag(cmd.Flags(), &now)
	return cmd
}

func (s *session) status(coll string) (int, error) {
	snap := s.snapshot(coll, false)
	doc := statusDoc{header: s.headerOf("status", snap, true), Queues: []queueView{}, Collections: []collectionView{}}
	if coll != "" && len(snap.Collections) == 1 {
		c := snap.Collections[0]
		doc.State, doc.Reasons = c.State, c.Reasons
		if len(doc.Unknown) > 0 {
			doc.State = status.Unknown
		}
	}
	for _, q := range snap.Queues {
		v := queueView{Class: q.Class, State: status.Running, Visible: q.Main.Visible, InFlight: q.Main.InFlight,
			DLQVisible: q.DLQ.Visible, DLQInFlight: q.DLQ.InFlight, Error: q.Error}
		if r, ok := s.d.main[q.Class]; ok {
			v.Queue = r.String()
		}
		v.DLQ = s.d.dlq[q.Class].String()
		switch {
		case q.Error != "":
			v.State = status.Unknown
		case q.DLQ.Visible+q.DLQ.InFlight > 0:
			v.State = status.Degraded
		}
		doc.Queues = append(doc.Queues, v)
	}
	for _, c := range snap.Collections {
		doc.Collections = append(doc.Collections, collectionViewOf(c))
	}
	code := codeOf(doc.State)
	if s.asJSON() {
		return code, s.json(&doc)
	}
	printStatus(s.out, doc, s.d.source)
	return code, nil
}

func collectionViewOf(c status.Collection) collectionView {
	v := collectionView{Collection: c.Name, State: c.State, Reasons: c.Reasons, Unknown: collectionUnknown(c), KnownToCCS: c.Desired.KnownToCCS,
		Paused: c.Desired.Paused, Facts: c.Desired.Facts, Head: c.Current.Head, Observed: observedOf(c.Current.Observed), GC: c.Current.GC,
		ReconcilePreview: previewOf(c.Current.Preview), TombstoneCleanup: c.Current.Cleanup, Owed: c.Owed}
	if v.Owed == nil {
		v.Owed = []status.Owed{}
	}
	var classes []string
	for _, r := range c.Current.Leases {
		classes = append(classes, string(r.Class))
		if r.Class != lease.ClassNotHeld {
			v.Leases.Live++
		}
	}
	v.Leases.Total, v.Leases.ByClass = len(classes), countClasses(classes)
	return v
}

func printStatus(w io.Writer, d statusDoc, source string) {
	fmt.Fprintf(w, "deployment %s (%s) at %s: %s\n", d.Deployment, source, d.AsOf.Format(time.RFC3339), d.State)
	for _, r := range d.Reasons {
		fmt.Fprintf(w, "  %s\n", r)
	}
	if len(d.Queues) > 0 {
		fmt.Fprintf(w, "\n%-18s %8s %10s %8s\n", "QUEUE", "VISIBLE", "IN FLIGHT", "DLQ")
		for _, q := range d.Queues {
			switch {
			case q.Error != "":
				fmt.Fprintf(w, "%-18s Unknown: %s\n", q.Class, q.Error)
			case q.Queue == "":
				fmt.Fprintf(w, "%-18s %8s %10s %8d\n", q.Class, "-", "-", q.DLQVisible+q.DLQInFlight)
			default:
				fmt.Fprintf(w, "%-18s %8d %10d %8d\n", q.Class, q.Visible, q.InFlight, q.DLQVisible+q.DLQInFlight)
			}
		}
	}
	if len(d.Collections) > 0 {
		fmt.Fprintf(w, "\n%-20s %-13s %s\n", "COLLECTION", "STATE", "WHY")
	}
	for _, c := range d.Collections {
		fmt.Fprintf(w, "%-20s %-13s %s\n", c.Collection, c.State, strings.Join(c.Reasons, "; "))
		more := func(format string, args ...any) { fmt.Fprintf(w, "%-34s "+format+"\n", append([]any{""}, args...)...) }
		if g := c.GC; g != nil && (g.Deletable+g.Deferred+g.Orphans+g.OrphansYoung > 0) {
			more("gc: %d deletable now, %d deferred%s, %d never-committed outputs (%d inside the grace)", g.Deletable, g.Deferred, byReason(g.DeferredByReason), g.Orphans, g.OrphansYoung)
		}
		if l := c.GC.LineageOf(); l != nil {
			more("lineage confirmed for incarnation %d (head v%d) by %s at %s", l.Incarnation, l.HeadVersion, l.ConfirmedBy, time.UnixMilli(l.ConfirmedAtUnixMs).UTC().Format(time.RFC3339))
		}
		if ob := c.Observed; ob != nil && (ob.Debt.CompactionDue || ob.Debt.GCObjects > 0) {
			due := fmt.Sprint(ob.CompactionOwed)
			if ob.Debt.CompactionDue && !ob.CompactionOwed {
				due = "false (due by the summary; a worker found nothing to compact at this head)"
			}
			more("debt: %d objects %d bytes, compaction due %s, gc %d objects", ob.Debt.Objects, ob.Debt.Bytes, due, ob.Debt.GCObjects)
		}
		if c.Leases.Total > 0 {
			more("leases: %d (%s)", c.Leases.Total, classList(c.Leases.ByClass))
		}
		for _, o := range c.Owed {
			since := ""
			if o.SinceUnixMs > 0 {
				since = fmt.Sprintf(" since %s (%s)", time.UnixMilli(o.SinceUnixMs).UTC().Format(time.RFC3339), d.AsOf.Sub(time.UnixMilli(o.SinceUnixMs)).Round(time.Second))
			}
			more("owed: %s%s, waiting on %s: %s", o.Kind, since, o.WaitingOn, o.Detail)
		}
	}
}

// byReason renders a count per reason, largest first: " (10
// token_lifetime, 2 retention)"; "" for none.
func byReason(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	type kv struct {
		k string
		n int
	}
	var l []kv
	for k, n := range m {
		l = append(l, kv{k, n})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || l[i].n == l[j].n && l[i].k < l[j].k })
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = fmt.Sprintf("%d %s", e.n, e.k)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func classList(cs []classCount) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d %s", c.Count, c.Class)
	}
	return strings.Join(parts, ", ")
}
