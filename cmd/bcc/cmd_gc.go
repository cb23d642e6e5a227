package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/store"
)

// listed is how many keys of a list the human output shows without --keys.
const listed = 10

func (c *cli) gcPlanCmd() *cobra.Command {
	var coll, now string
	var keys bool
	cmd := c.command("gc-plan", "what a GC sweep would delete now, defer and why",
		`GC-plan runs GC's own planning (gc.PlanSweep over read-only ports) for one
collection: what a sweep would delete now, what it defers and why (counts
by reason), the roots it would trim, the coordinator's never-committed
outputs it would reclaim, and a refusal (head_regression, unreadable
facts, a manifest it cannot verify) with its reason. Up to 10 keys of
each list are shown; --keys lists them all.

Exit 2 when GC refuses or a source is unreadable (nothing would be
deleted).`,
		`  bcc --stack bcc-coordinator gc-plan --collection orders
  bcc --stack bcc-coordinator gc-plan --collection orders --keys`,
		func(*cobra.Command) (int, error) {
			s, err := c.open(now, false)
			if err != nil {
				return exitError, err
			}
			if err := s.checkCollection(coll); err != nil {
				return exitError, err
			}
			return s.gcPlan(coll, keys)
		})
	collectionFlag(cmd.Flags(), &coll, "the collection (required)")
	nowFlag(cmd.Flags(), &now)
	cmd.Flags().BoolVar(&keys, "keys", false, "list every key (default: the first 10 of each list, with counts)")
	_ = cmd.MarkFlagRequired("collection")
	return cmd
}

// gcVerdict judges a GC plan's error: a refusal for unreadable facts or a
// read failure is Unknown, any other refusal Degraded.
func gcVerdict(err error) (status.State, string) {
	var re *gc.RefusedError
	switch {
	case err == nil:
		return status.Running, ""
	case errors.As(err, &re) && re.Reason != gc.RefusedFacts:
		return status.Degraded, err.Error()
	}
	return status.Unknown, err.Error()
}

func (s *session) gcPlanOf(coll string) (gc.Plan, error) {
	ports := gcReadPorts(s.d.cfg, s.d.cl) // read-only by type
	return gc.PlanSweep(s.ctx, ports, gc.ConfigFrom(s.d.cfg.Policy, guard.All()), coll, s.now)
}

func (s *session) gcPlan(coll string, keys bool) (int, error) {
	plan, planErr := s.gcPlanOf(coll)
	st, why := gcVerdict(planErr)
	doc := gcPlanDoc{header: header{SchemaVersion: schemaVersion, Command: "gc-plan", AsOf: time.UnixMilli(plan.NowUnixMs).UTC(), Deployment: s.d.name,
		State: st, Reasons: []string{}, Unknown: []unknownSource{}}, Collection: coll, Plan: plan}
	if plan.NowUnixMs == 0 {
		doc.AsOf = s.now
	}
	doc.planned = planErr == nil
	if st == status.Running {
		// A plan counted from a source GC could not read (the watermark:
		// it deletes nothing; the data listing: it proposes nothing
		// never-committed) is a blind read: Unknown, not Running.
		for _, u := range status.GCUnreadable(plan.Blocked, plan.ListingError) {
			doc.State = status.Unknown
			doc.Unknown = append(doc.Unknown, unknownSource{u.What, u.Err})
			doc.Reasons = append(doc.Reasons, u.What+" unreadable: "+u.Err)
		}
	}
	switch {
	case len(doc.Unknown) > 0:
	case st == status.Unknown:
		doc.Unknown = append(doc.Unknown, unknownSource{"gc plan", why})
		doc.Reasons = append(doc.Reasons, "gc plan unreadable: "+why)
	case st == status.Degraded:
		doc.Refused = why
		doc.Reasons = append(doc.Reasons, "gc refused: "+why)
	default:
		if plan.Tombstoned {
			// status's word for it: CCS dropped the collection and its
			// cleanup is what GC plans here.
			doc.State = status.Stopping
			doc.Reasons = append(doc.Reasons, fmt.Sprintf("tombstoned by CCS (facts v%d); cleanup outstanding", plan.FactsVersion))
		}
		doc.Reasons = append(doc.Reasons, fmt.Sprintf("%d to delete now, %d deferred", len(plan.Delete), plan.DeferredCount))
	}
	code := codeOf(doc.State)
	if s.asJSON() {
		return code, s.json(&doc)
	}
	printGCPlan(s.out, doc, keys)
	return code, nil
}

// more prints "... and N more (--keys lists them)" when a list was cut.
func more(w io.Writer, shown, total int, keys bool) {
	if total > shown {
		hint := " (--keys lists them)"
		if keys {
			hint = ""
		}
		fmt.Fprintf(w, "    ... and %d more%s\n", total-shown, hint)
	}
}

func printGCPlan(w io.Writer, d gcPlanDoc, keys bool) {
	p := d.Plan
	limit := func(n int) int {
		if keys || n < listed {
			return n
		}
		return listed
	}
	fmt.Fprintf(w, "GC plan for %s at %s (dry run: nothing was changed): %s\n", d.Collection, d.AsOf.Format(time.RFC3339), d.State)
	if len(p.RootsAbove) > 0 || p.HighestObserved > p.HeadVersion || p.Confirmation != nil {
		fmt.Fprintf(w, "  incarnation %d head v%d; %d roots above it; highest head observed: v%d; lineage confirmed by an operator: %v\n",
			contract.Lifetime(p.Incarnation), p.HeadVersion, len(p.RootsAbove), p.HighestObserved, p.LineageConfirmed)
		for _, r := range p.RootsAbove[:limit(len(p.RootsAbove))] {
			fmt.Fprintf(w, "    %s\n", r)
		}
		more(w, limit(len(p.RootsAbove)), len(p.RootsAbove), keys)
	}
	if c := p.Confirmation; c != nil {
		fmt.Fprintf(w, "  lineage confirmation: incarnation %d, head v%d by %s at %s\n", c.Inc(), c.HeadVersion, c.ConfirmedBy, time.UnixMilli(c.ConfirmedAtUnixMs).UTC().Format(time.RFC3339))
	}
	for _, c := range p.CorruptParts {
		fmt.Fprintf(w, "  CORRUPT PART %s (root v%d): %s\n", c.Key, c.Version, c.Error)
	}
	switch {
	case d.State == status.Unknown && !d.planned:
		printUnknown(w, d.Unknown)
		fmt.Fprintln(w, "  nothing would be deleted")
		return
	case d.State == status.Unknown:
		printUnknown(w, d.Unknown)
	case d.State == status.Degraded:
		fmt.Fprintf(w, "  REFUSED: %s\n  nothing would be deleted\n", d.Refused)
		return
	}
	fmt.Fprintf(w, "  head v%d (%s), %d roots walked (oldest v%d, complete %v), %d retained\n", p.HeadVersion, p.HeadChecksum, p.Roots, p.OldestVersion, p.LineageComplete, len(p.Retained))
	fmt.Fprintf(w, "  global_safe_ts %s, tombstoned %v, lifecycle retention %s\n", time.UnixMilli(p.GlobalSafeTsUnixMs).UTC().Format(time.RFC3339), p.Tombstoned, time.Duration(p.LifecycleRetentionMs)*time.Millisecond)
	if d := p.LifecycleRetention; d != nil {
		fmt.Fprintf(w, "  release dependency %s: %s (%s)\n", d.Name, d.State, d.Evidence)
	}
	if p.Blocked != "" {
		fmt.Fprintf(w, "  BLOCKED: %s\n", p.Blocked)
	}
	fmt.Fprintf(w, "  would delete %d objects now (%d more are eligible but already gone)", len(p.Delete), p.AlreadyGone)
	if p.Truncated {
		fmt.Fprint(w, "; more than one sweep holds: the next sweep continues")
	}
	fmt.Fprintln(w)
	for _, c := range p.Delete[:limit(len(p.Delete))] {
		fmt.Fprintf(w, "    %s (evicted v%d at %s, max_ts %s)\n", c.Entry.Key, c.EvictVersion, ms(c.EvictTsUnixMs), ms(c.Entry.MaxTsUnixMs))
	}
	more(w, limit(len(p.Delete)), len(p.Delete), keys)
	fmt.Fprintf(w, "  deferred %d objects (%d bytes)%s\n", p.DeferredCount, p.DeferredBytes, byReason(p.DeferredByReason))
	if keys {
		for _, d := range p.Deferred {
			fmt.Fprintf(w, "    %s: %s (due %s)\n", d.Key, d.Reason, ms(d.DueUnixMs))
		}
		if len(p.Deferred) < p.DeferredCount {
			fmt.Fprintf(w, "    ... and %d more (a plan lists the first %d)\n", p.DeferredCount-len(p.Deferred), len(p.Deferred))
		}
	}
	fmt.Fprintf(w, "  would trim %d roots (oldest first, each after its candidates are confirmed gone)\n", len(p.Trim))
	for _, t := range p.Trim[:limit(len(p.Trim))] {
		fmt.Fprintf(w, "    v%d %s (+%d parts, needs %d candidates gone first)\n", t.Version, t.RootKey, len(t.Parts), t.Needs)
	}
	more(w, limit(len(p.Trim)), len(p.Trim), keys)
	fmt.Fprintf(w, "  the coordinator's never-committed outputs: %d to reclaim, %d inside the reclaim grace\n", len(p.Orphans), p.OrphansYoung)
	for _, o := range p.Orphans[:limit(len(p.Orphans))] {
		fmt.Fprintf(w, "    %s\n", o.Key)
	}
	more(w, limit(len(p.Orphans)), len(p.Orphans), keys)
	if p.ForeignUncommitted > 0 {
		fmt.Fprintf(w, "  other writers' uploads no manifest references: %d (never deleted by GC)\n", p.ForeignUncommitted)
	}
	if p.ListingError != "" {
		fmt.Fprintf(w, "  Unknown: listing failed (%s): nothing proposed as never-committed\n", p.ListingError)
	}
	if len(p.Remaining) > 0 {
		fmt.Fprintf(w, "  remaining publisher-owned dependencies: %d\n", len(p.Remaining))
	}
}

// ms renders a unix-millisecond time (0: "-").
func ms(t int64) string {
	if t == 0 {
		return "-"
	}
	return time.UnixMilli(t).UTC().Format(time.RFC3339)
}

func (c *cli) compactionPlanCmd() *cobra.Command {
	var coll, now string
	var keys bool
	cmd := c.command("compaction-plan", "the compaction jobs the planner would run now and why",
		`Compaction-plan runs the executor's own planning (compact.PlanRoot) on each
head: the debt by level and the jobs it would run, each with its reason,
tier, output level, inputs and bytes. Inputs are counted; --keys lists
them.

Exit 2 when a job is due or a source is unreadable.`,
		`  bcc --stack bcc-coordinator compaction-plan
  bcc --stack bcc-coordinator compaction-plan --collection orders --keys`,
		func(*cobra.Command) (int, error) {
			s, err := c.open(now, false)
			if err != nil {
				return exitError, err
			}
			if err := s.checkCollection(coll); err != nil {
				return exitError, err
			}
			return s.compactionPlan(coll, keys)
		})
	collectionFlag(cmd.Flags(), &coll, "one collection (default: every collection CCS lists)")
	nowFlag(cmd.Flags(), &now)
	cmd.Flags().BoolVar(&keys, "keys", false, "list every input key")
	return cmd
}

func (s *session) compactionPlan(coll string, keys bool) (int, error) {
	doc := compactionDoc{header: header{SchemaVersion: schemaVersion, Command: "compaction-plan", AsOf: s.now, Deployment: s.d.name, State: status.Running,
		Reasons: []string{}, Unknown: []unknownSource{}}, Collections: []compactionView{}}
	names := []string{coll}
	if coll == "" {
		var err error
		if names, err = ccsOf(s.d.cfg, s.d.cl).Collections(s.ctx); err != nil {
			doc.Unknown = append(doc.Unknown, unknownSource{"ccs collection list", oneLine(err)})
		}
	}
	lin := lineageOf(s.d)
	pol := compact.PolicyFrom(s.d.cfg.Policy.Compaction)
	jobs := 0
	for _, c := range names {
		v := compactionView{Collection: c, State: status.Running, Jobs: []jobView{}, Debt: compactionDebt{Levels: []levelDebt{}}}
		head, root, err := lin.HeadRoot(s.ctx, c)
		if err != nil {
			if _, herr := lin.Head(s.ctx, c); errors.Is(herr, store.ErrNotFound) {
				// No head (never committed, or a dropped incarnation's
				// cleanup deleted it): nothing to compact, a definite answer.
				v.State = status.NotConfigured
				doc.Collections = append(doc.Collections, v)
				continue
			}
		}
		if err == nil {
			v.Head = head.Version
			d := compact.Debt(root.Summary, pol)
			v.Due, v.Debt = d.Due(), compactionDebtOf(d)
			var js []compact.Job
			_, js, err = compact.PlanRoot(s.ctx, lin, c, root, head.ManifestChecksum, pol, s.now)
			for _, j := range js {
				jv := jobView{Reason: j.Reason, Tier: j.Tier, OutputLevel: j.OutputLevel, DropDeletes: j.DropDeletes, Debt: j.Debt, Bytes: j.Bytes(), Inputs: []string{}}
				for _, in := range j.Inputs {
					jv.Inputs = append(jv.Inputs, in.Key)
				}
				v.Jobs = append(v.Jobs, jv)
			}
		}
		if err != nil {
			v.State, v.Error = status.Unknown, oneLine(err)
			doc.Unknown = append(doc.Unknown, unknownSource{c + ": head and manifest", v.Error})
		}
		jobs += len(v.Jobs)
		doc.Collections = append(doc.Collections, v)
	}
	code := exitOK
	switch {
	case len(doc.Unknown) > 0:
		doc.State, code = status.Unknown, exitAction
		for _, u := range doc.Unknown {
			doc.Reasons = append(doc.Reasons, u.Source+" unreadable: "+u.Error)
		}
	case jobs > 0:
		code = exitAction
		doc.Reasons = append(doc.Reasons, fmt.Sprintf("%d jobs due", jobs))
	default:
		doc.Reasons = append(doc.Reasons, "no job due")
	}
	if s.asJSON() {
		return code, s.json(&doc)
	}
	w := s.out
	fmt.Fprintf(w, "compaction plan at %s (dry run: nothing was changed; the executor plans its base the same way): %s\n", doc.AsOf.Format(time.RFC3339), doc.State)
	if coll == "" {
		printUnknown(w, doc.Unknown[:min(len(doc.Unknown), 1)])
	}
	for _, v := range doc.Collections {
		if v.Error != "" {
			fmt.Fprintf(w, "%s: Unknown: %s\n", v.Collection, v.Error)
			continue
		}
		if v.State == status.NotConfigured {
			fmt.Fprintf(w, "%s: no committed head: nothing to compact\n", v.Collection)
			continue
		}
		fmt.Fprintf(w, "%s head v%d: compaction due %v, %d jobs\n", v.Collection, v.Head, v.Due, len(v.Jobs))
		for i, j := range v.Jobs {
			fmt.Fprintf(w, "  job %d: %s -> level %d (%s), %d inputs, %d bytes, debt %.2f, drop deletes %v\n", i+1, j.Reason, j.OutputLevel, j.Tier, len(j.Inputs), j.Bytes, j.Debt, j.DropDeletes)
			if keys {
				for _, k := range j.Inputs {
					fmt.Fprintf(w, "      %s\n", k)
				}
			}
		}
	}
	return code, nil
}

func (c *cli) confirmLineageCmd() *cobra.Command {
	var coll, now, by, reason string
	var inc uint64
	var yes bool
	cmd := c.command("confirm-lineage", "confirm that a head put back on purpose is the truth (answers a head_regression refusal)",
		`Confirm-lineage answers a GCRefused head_regression alarm when the head was
put back on purpose (a restore, a rollback): it records that the current
head's lineage is the truth and that the roots above it and the highest
head the coordinator observed are abandoned (events/lineage-confirmation.json).
GC then resumes; what the abandoned roots reference stays for a token
lifetime from the confirmation.

Without --yes it only prints what it would record. With --yes the
confirmation is recorded at the system's clock (--now is refused: a
confirmation dated in the past would protect nothing). A confirmation is
for one lifetime of the name: --incarnation N states the one the
operator means and is refused when the head names another.

Exit 0 when recorded or when there is nothing to confirm, 2 for a dry
run with a confirmation to make or an unreadable source.`,
		`  bcc --stack bcc-coordinator confirm-lineage --collection orders --by alice --reason "restored v41 after the bad deploy"
  bcc --stack bcc-coordinator confirm-lineage --collection orders --by alice --incarnation 1 --yes`,
		func(*cobra.Command) (int, error) {
			s, err := c.open(now, yes)
			if err != nil {
				return exitError, err
			}
			if err := s.checkCollection(coll); err != nil {
				return exitError, err
			}
			return s.confirmLineage(coll, by, reason, inc, yes)
		})
	collectionFlag(cmd.Flags(), &coll, "the collection (required)")
	nowFlag(cmd.Flags(), &now)
	cmd.Flags().StringVar(&by, "by", "", "who confirms (required; recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the head went back (recorded)")
	cmd.Flags().Uint64Var(&inc, "incarnation", 0, "the lifetime the operator means (default: the head's); refused when the head names another")
	cmd.Flags().BoolVar(&yes, "yes", false, "record the confirmation (a write, at the system's clock)")
	_ = cmd.MarkFlagRequired("collection")
	_ = cmd.MarkFlagRequired("by")
	return cmd
}

// confirmLineage records that the current head's lineage is the truth and
// what GC sees as evidence of a regression is abandoned.
func (s *session) confirmLineage(coll, by, reason string, inc uint64, yes bool) (int, error) {
	p, planErr := s.gcPlanOf(coll)
	st, why := gcVerdict(planErr)
	doc := confirmDoc{header: header{SchemaVersion: schemaVersion, Command: "confirm-lineage", AsOf: s.now, Deployment: s.d.name, State: st,
		Reasons: []string{}, Unknown: []unknownSource{}}, Collection: coll}
	if st == status.Unknown {
		// A blind read is no answer: nothing is confirmed from it.
		doc.Unknown = append(doc.Unknown, unknownSource{"gc plan", why})
		doc.Reasons = append(doc.Reasons, "gc plan unreadable: "+why+": nothing recorded")
		if s.asJSON() {
			return exitAction, s.json(&doc)
		}
		fmt.Fprintf(s.out, "%s: Unknown: gc plan unreadable: %s\nnothing recorded\n", coll, why)
		return exitAction, nil
	}
	if p.HeadVersion > 0 && inc != 0 && inc != contract.Lifetime(p.Incarnation) {
		return exitError, fmt.Errorf("confirm-lineage --incarnation %d: the head of %s is incarnation %d (a confirmation applies to one lifetime only)", inc, coll, contract.Lifetime(p.Incarnation))
	}
	// The system's clock (rule 16): s.now is the clock whenever --yes is
	// given (--now is refused with it).
	conf, ok := gc.ConfirmationFor(p, by, reason, s.clock())
	doc.Needed = ok
	code := exitOK
	switch {
	case !ok:
		doc.State = status.Running
		doc.Reasons = append(doc.Reasons, fmt.Sprintf("head v%d (incarnation %d), no regression to confirm", p.HeadVersion, contract.Lifetime(p.Incarnation)))
	case !yes:
		doc.Confirmation, code = &conf, exitAction
		doc.Reasons = append(doc.Reasons, "not recorded: run again with --yes to confirm")
	default:
		if err := awsio.NewObservedTable(s.d.cl.Dynamo, s.d.cfg.Table).ConfirmLineage(s.ctx, conf); err != nil {
			return exitError, fmt.Errorf("record the confirmation: %s", oneLine(err))
		}
		doc.Confirmation, doc.Recorded, doc.State = &conf, true, status.Running
		doc.Reasons = append(doc.Reasons, "recorded: GC resumes for the collection; what the abandoned roots reference stays for a token lifetime")
	}
	if s.asJSON() {
		return code, s.json(&doc)
	}
	w := s.out
	if !ok {
		fmt.Fprintf(w, "%s: %s\n", coll, doc.Reasons[0])
		return code, nil
	}
	fmt.Fprintf(w, "%s incarnation %d: head v%d is the truth; abandoned: %d roots above it, observed head v%d\n", coll, conf.Inc(), p.HeadVersion, len(conf.AbandonedRoots), conf.AbandonedHeadVersion)
	for _, r := range conf.AbandonedRoots {
		fmt.Fprintf(w, "    %s\n", r)
	}
	fmt.Fprintf(w, "  by %s at %s: %s\n", conf.ConfirmedBy, time.UnixMilli(conf.ConfirmedAtUnixMs).UTC().Format(time.RFC3339), first(conf.Reason, "(no reason given)"))
	fmt.Fprintln(w, doc.Reasons[0])
	return code, nil
}
