package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/store"
)

func (c *cli) leasesCmd() *cobra.Command {
	var coll, now string
	var all bool
	cmd := c.command("leases", "every lease record, classified, with its evidence",
		`Leases lists the lease records (of one collection, or every record in the
table) and classifies each at the clock: healthy, suspect-heartbeat-overdue,
terminal-contradiction, identity-mismatch, invalid, indeterminate, or
lease-not-held (expired or finished). A summary counts them by class;
the records that need a look are listed, --all lists every one.

Exit 2 when a lease is neither healthy nor lease-not-held, or when the
lease records (or the facts that classify them) cannot be read.`,
		`  bcc --stack bcc-coordinator leases
  bcc --stack bcc-coordinator leases --collection orders --all`,
		func(*cobra.Command) (int, error) {
			s, err := c.open(now, false)
			if err != nil {
				return exitError, err
			}
			if err := s.checkCollection(coll); err != nil {
				return exitError, err
			}
			return s.leases(coll, all)
		})
	collectionFlag(cmd.Flags(), &coll, "one collection (default: every lease record)")
	nowFlag(cmd.Flags(), &now)
	cmd.Flags().BoolVar(&all, "all", false, "list every lease record, healthy and finished ones too")
	return cmd
}

func needsLook(c lease.Class) bool { return c != lease.ClassHealthy && c != lease.ClassNotHeld }

// leaseHeader is the verdict of a lease view: Unknown when a source is,
// Degraded when a lease needs a look.
func (s *session) leaseHeader(command string, snap status.Snapshot) header {
	h := s.headerOf(command, snap, false) // the lease records' error included
	if h.State == status.Unknown {
		return h
	}
	for _, c := range snap.Collections {
		for _, r := range c.Current.Leases {
			if needsLook(r.Class) {
				h.State = status.Degraded
				h.Reasons = append(h.Reasons, fmt.Sprintf("lease %s is %s", r.Lease.TaskID, r.Class))
			}
		}
	}
	return h
}

func (s *session) leases(coll string, all bool) (int, error) {
	snap := s.snapshot(coll, true)
	doc := leasesDoc{header: s.leaseHeader("leases", snap), Leases: []leaseView{}}
	for _, c := range snap.Collections {
		for _, r := range c.Current.Leases {
			doc.Leases = append(doc.Leases, leaseOf(c.Name, r))
		}
	}
	code := codeOf(doc.State)
	if s.asJSON() {
		return code, s.json(&doc)
	}
	w := s.out
	var classes []string
	for _, l := range doc.Leases {
		classes = append(classes, string(l.Class))
	}
	fmt.Fprintf(w, "leases at %s: %s, %d records", doc.AsOf.Format(time.RFC3339), doc.State, len(doc.Leases))
	if len(classes) > 0 {
		fmt.Fprintf(w, " (%s)", classList(countClasses(classes)))
	}
	fmt.Fprintln(w)
	printUnknown(w, doc.Unknown)
	hidden := 0
	for _, l := range doc.Leases {
		if !all && !needsLook(l.Class) {
			hidden++
			continue
		}
		fmt.Fprintf(w, "  %-26s %s (%s) epoch %d holder %q\n      %s\n", l.Class, l.Lease.TaskID, l.Collection, l.Lease.LeaseEpoch, l.Lease.Holder, l.Detail)
	}
	if hidden > 0 {
		fmt.Fprintf(w, "  (%d healthy or not held not listed: --all lists every lease)\n", hidden)
	}
	return code, nil
}

func printUnknown(w io.Writer, us []unknownSource) {
	for _, u := range us {
		fmt.Fprintf(w, "  Unknown: %s unreadable: %s\n", u.Source, u.Error)
	}
}

func (c *cli) recoverCmd() *cobra.Command {
	var coll, now, by string
	var confirm bool
	cmd := c.command("recover", "release stalled leases (a dry run without --confirm)",
		`Recover plans the release of every lease that is suspect (its holder missed
more than two of the heartbeats its lease record says it makes, not yet
expired) or a terminal contradiction (its task's base is gone), and leaves
every other lease alone, saying why. Without --confirm it is a dry run and
writes nothing.

With --confirm each release is one conditional write on the planned
epoch, holder and expiry, at the system's clock (--now is refused): a
heartbeat since the plan makes it refuse. The old holder's next
heartbeat then fails and the next delivery takes the task.

Exit 2 for a dry run with leases to release, a refused release, a lease
that needs a person (identity-mismatch, invalid or indeterminate: left
alone, inspect it by hand), or an unreadable source (nothing is released
from a guess).`,
		`  bcc --stack bcc-coordinator recover
  bcc --stack bcc-coordinator recover --confirm --by alice`,
		func(*cobra.Command) (int, error) {
			s, err := c.open(now, confirm)
			if err != nil {
				return exitError, err
			}
			if err := s.checkCollection(coll); err != nil {
				return exitError, err
			}
			return s.recover(coll, confirm, first(by, "operator"))
		})
	collectionFlag(cmd.Flags(), &coll, "one collection (default: every lease record)")
	nowFlag(cmd.Flags(), &now)
	cmd.Flags().BoolVar(&confirm, "confirm", false, "carry out the releases (writes, at the system's clock)")
	cmd.Flags().StringVar(&by, "by", "", "who recovers (recorded as the releasing holder: recovered-by:NAME)")
	return cmd
}

func (s *session) recover(coll string, confirm bool, by string) (int, error) {
	snap := s.snapshot(coll, true)
	doc := recoverDoc{header: s.leaseHeader("recover", snap), DryRun: !confirm, Leases: []recoverOutcome{}}
	// The exit code is the recovery's: 2 for a dry run with releases to
	// make, a refused release, a lease left for a person to inspect, or an
	// unreadable source (then nothing is released from a blind read).
	code := exitOK
	if doc.State == status.Unknown {
		code = exitAction
		if confirm {
			confirm = false
			doc.Reasons = append(doc.Reasons, "a source is unreadable: nothing released")
		}
	}
	release, keep := status.Releases(snap)
	collOf := map[string]string{}
	for _, c := range snap.Collections {
		for _, r := range c.Current.Leases {
			collOf[r.Lease.TaskID] = c.Name
		}
	}
	table := awsio.NewLeaseTable(s.d.cl.Dynamo, s.d.cfg.Table)
	for _, r := range release {
		oc := recoverOutcome{leaseView: leaseOf(collOf[r.Lease.TaskID], r), Action: "release", Outcome: "dry-run", Result: "-confirm releases it"}
		if !confirm {
			code = exitAction
		} else {
			beforeRelease()
			now, err := table.Release(s.ctx, r.Lease, "recovered-by:"+by, s.clock().UnixMilli())
			switch {
			case errors.Is(err, store.ErrConditionFailed):
				oc.Outcome, code = "refused", exitAction
				oc.Result = fmt.Sprintf("the lease moved since planning: now epoch %d holder %s expiry %d done %v", now.Lease.LeaseEpoch, now.Lease.Holder, now.Lease.LeaseExpiryUnixMs, now.Done)
			case err != nil:
				return exitError, fmt.Errorf("release %s: %s", r.Lease.TaskID, oneLine(err))
			default:
				oc.Outcome = "released"
				oc.Result = fmt.Sprintf("epoch %d -> %d: the holder's next heartbeat fails (lease lost), the next delivery takes the task", r.Lease.LeaseEpoch, now.Lease.LeaseEpoch)
			}
		}
		doc.Leases = append(doc.Leases, oc)
	}
	for _, r := range keep {
		if r.Class == lease.ClassNotHeld && r.Done {
			continue
		}
		action := "none"
		if needsLook(r.Class) {
			// Never released here, and a person must look at it: the
			// exit code says so (docs/bcc.md "Exit codes").
			action, code = "refuse: inspect by hand", exitAction
		}
		doc.Leases = append(doc.Leases, recoverOutcome{leaseView: leaseOf(collOf[r.Lease.TaskID], r), Action: action, Outcome: "left alone", Result: r.Detail})
	}
	if s.asJSON() {
		return code, s.json(&doc)
	}
	w := s.out
	mode := "dry run: nothing was changed; --confirm carries it out"
	if !doc.DryRun {
		mode = "confirmed"
	}
	fmt.Fprintf(w, "recovery plan at %s (%s): %s\n", doc.AsOf.Format(time.RFC3339), mode, doc.State)
	printUnknown(w, doc.Unknown)
	if len(doc.Leases) == 0 && doc.State != status.Unknown {
		fmt.Fprintln(w, "  no live lease")
	}
	for _, oc := range doc.Leases {
		fmt.Fprintf(w, "  %-10s %-26s %s (%s): %s\n             %s\n", oc.Outcome, oc.Class, oc.Lease.TaskID, oc.Collection, oc.Action, oc.Result)
	}
	return code, nil
}

// beforeRelease runs between planning and each release write (a test
// seam: a heartbeat racing the recovery).
var beforeRelease = func() {}
