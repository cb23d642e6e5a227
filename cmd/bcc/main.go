// Command bcc is the operator's view of the coordinator.
//
//	bcc status  -bucket B -collection C [-endpoint URL] [-ccs URL] [-table T]
//	bcc gc-plan -bucket B -collection C [-endpoint URL] [-ccs URL] [-table T] [-json]
//	bcc confirm-lineage -bucket B -collection C -table T -by NAME [-reason TEXT] [-yes]
//
// status prints the committed head, the lineage GC can see, the watermark
// and (with -table) the coordinator's observed state. gc-plan prints what a
// GC sweep would delete now, what it would defer and why, and which manifest
// roots it would trim. Neither changes anything (rule 10): they are given
// read-only ports only — no delete, no queue, no table write.
//
// confirm-lineage is the one write: after a head regression (GCRefused
// head_regression), an operator confirms that the current head's lineage is
// the truth and the versions above it are abandoned. Without -yes it only
// prints what it would record.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bcc:", err)
		os.Exit(1)
	}
}

type options struct {
	endpoint, bucket, collection, ccs, table, wmBucket, wmKey, policy string
	asJSON, yes                                                       bool
	by, reason                                                        string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "status" && args[0] != "gc-plan" && args[0] != "confirm-lineage") {
		return fmt.Errorf("usage: bcc status|gc-plan|confirm-lineage -bucket B -collection C [-endpoint URL] [-ccs URL] [-table T] [-json] [-by NAME -reason TEXT -yes]")
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var o options
	fs.StringVar(&o.endpoint, "endpoint", "", "AWS endpoint (local stacks); empty: the default AWS configuration")
	fs.StringVar(&o.bucket, "bucket", "", "data bucket")
	fs.StringVar(&o.collection, "collection", "", "collection")
	fs.StringVar(&o.ccs, "ccs", "", "CCS endpoint (facts); without it GC refuses (fail closed)")
	fs.StringVar(&o.table, "table", "", "coordinator table (status: observed state)")
	fs.StringVar(&o.wmBucket, "watermark-bucket", "", "watermark bucket (default: -bucket)")
	fs.StringVar(&o.wmKey, "watermark-key", "query-plane/global_safe_ts.json", "watermark key")
	fs.StringVar(&o.policy, "policy", "", "policy JSON (as BCC_POLICY) overriding the defaults")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.StringVar(&o.by, "by", "", "confirm-lineage: who confirms")
	fs.StringVar(&o.reason, "reason", "", "confirm-lineage: why the head went back")
	fs.BoolVar(&o.yes, "yes", false, "confirm-lineage: record the confirmation (otherwise only print it)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.bucket == "" || !contract.ValidCollection(o.collection) {
		return fmt.Errorf("-bucket and a valid -collection are required")
	}
	cfg := app.Config{Bucket: o.bucket, Table: o.table, CCSEndpoint: o.ccs, WatermarkBucket: o.wmBucket, WatermarkKey: o.wmKey,
		AWSEndpoint: o.endpoint}
	if cfg.WatermarkBucket == "" {
		cfg.WatermarkBucket = o.bucket
	}
	pol, err := policy.Parse([]byte(o.policy))
	if err != nil {
		return fmt.Errorf("-policy: %w", err)
	}
	cfg.Policy = pol
	cl, err := app.NewClients(ctx, cfg)
	if err != nil {
		return err
	}
	ports := app.GCReadPorts(cfg, cl) // read-only by type
	now := time.Now()
	plan, planErr := gc.PlanSweep(ctx, ports, gc.ConfigFrom(cfg.Policy, guard.All()), o.collection, now)
	switch cmd {
	case "gc-plan":
		return printPlan(out, plan, planErr, o.asJSON)
	case "confirm-lineage":
		return confirmLineage(ctx, out, cfg, cl, plan, o, now)
	}
	return printStatus(ctx, out, cfg, cl, ports, plan, planErr, o)
}

func printPlan(out io.Writer, p gc.Plan, err error, asJSON bool) error {
	if asJSON {
		v := map[string]any{"plan": p}
		if err != nil {
			v["refused"] = err.Error()
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		_, werr := fmt.Fprintln(out, string(b))
		return werr
	}
	fmt.Fprintf(out, "GC plan for %s at %s (dry run: nothing was changed)\n", p.Collection, time.UnixMilli(p.NowUnixMs).UTC().Format(time.RFC3339))
	if len(p.RootsAbove) > 0 || p.HighestObserved > p.HeadVersion {
		fmt.Fprintf(out, "  head v%d; roots above it: %v; highest head observed: v%d; lineage confirmed by an operator: %v\n",
			p.HeadVersion, p.RootsAbove, p.HighestObserved, p.LineageConfirmed)
	}
	for _, c := range p.CorruptParts {
		fmt.Fprintf(out, "  CORRUPT PART %s (root v%d): %s\n", c.Key, c.Version, c.Error)
	}
	if err != nil {
		fmt.Fprintf(out, "  REFUSED: %v\n  nothing would be deleted\n", err)
		return nil
	}
	fmt.Fprintf(out, "  head v%d (%s), %d roots walked (oldest v%d, complete=%v), retained %v\n", p.HeadVersion, p.HeadChecksum, p.Roots, p.OldestVersion, p.LineageComplete, p.Retained)
	fmt.Fprintf(out, "  global_safe_ts %d, tombstoned=%v, lifecycle retention_ms=%d\n", p.GlobalSafeTsUnixMs, p.Tombstoned, p.LifecycleRetentionMs)
	if p.Blocked != "" {
		fmt.Fprintf(out, "  BLOCKED: %s\n", p.Blocked)
	}
	fmt.Fprintf(out, "  would delete %d objects (outstanding; %d more are eligible but already gone)", len(p.Delete), p.AlreadyGone)
	if p.Truncated {
		fmt.Fprint(out, " — more than one sweep holds: the next sweep continues")
	}
	fmt.Fprintln(out, ":")
	for _, c := range p.Delete {
		fmt.Fprintf(out, "    %s (evicted v%d at %d, max_ts %d)\n", c.Entry.Key, c.EvictVersion, c.EvictTsUnixMs, c.Entry.MaxTsUnixMs)
	}
	fmt.Fprintf(out, "  deferred %d (%d bytes): %v\n", p.DeferredCount, p.DeferredBytes, p.DeferredByReason)
	for _, d := range p.Deferred {
		fmt.Fprintf(out, "    %s: %s (due %d)\n", d.Key, d.Reason, d.DueUnixMs)
	}
	if len(p.Deferred) < p.DeferredCount {
		fmt.Fprintf(out, "    ... and %d more\n", p.DeferredCount-len(p.Deferred))
	}
	fmt.Fprintf(out, "  would trim %d roots (oldest first, each only after its candidates are confirmed gone):\n", len(p.Trim))
	for _, s := range p.Trim {
		fmt.Fprintf(out, "    v%d %s (+%d parts, needs %d candidates gone first)\n", s.Version, s.RootKey, len(s.Parts), s.Needs)
	}
	fmt.Fprintf(out, "  the coordinator's never-committed outputs: %d to reclaim, %d inside the reclaim grace\n", len(p.Orphans), p.OrphansYoung)
	for _, o := range p.Orphans {
		fmt.Fprintf(out, "    %s\n", o.Key)
	}
	if p.ForeignUncommitted > 0 {
		fmt.Fprintf(out, "  other writers' uploads no manifest references: %d (never deleted by GC)\n", p.ForeignUncommitted)
	}
	if p.ListingError != "" {
		fmt.Fprintf(out, "  listing failed (%s): existence unknown, nothing proposed as never-committed\n", p.ListingError)
	}
	if len(p.Remaining) > 0 {
		fmt.Fprintf(out, "  remaining publisher-owned dependencies: %v\n", p.Remaining)
	}
	return nil
}

func printStatus(ctx context.Context, out io.Writer, cfg app.Config, cl app.Clients, ports gc.ReadPorts, p gc.Plan, planErr error, o options) error {
	lin := lineage.New(ports.Objects, 64)
	head, err := lin.Head(ctx, o.collection)
	status := map[string]any{"collection": o.collection}
	if err != nil {
		status["head_error"] = err.Error()
	} else {
		status["head"] = head
	}
	if wm, err := ports.Watermark.Watermark(ctx); err != nil {
		status["watermark_error"] = err.Error()
	} else {
		status["watermark"] = wm
	}
	if len(p.RootsAbove) > 0 || p.HighestObserved > p.HeadVersion {
		status["lineage"] = map[string]any{"roots_above_head": p.RootsAbove, "highest_observed": p.HighestObserved, "confirmed": p.LineageConfirmed}
	}
	if len(p.CorruptParts) > 0 {
		status["corrupt_parts"] = p.CorruptParts
	}
	if planErr != nil {
		status["gc_refused"] = planErr.Error()
	} else {
		status["gc"] = map[string]any{"roots": p.Roots, "oldest_version": p.OldestVersion, "retained": p.Retained,
			"deletable_now": len(p.Delete), "already_gone": p.AlreadyGone, "more_than_one_sweep": p.Truncated,
			"deferred": p.DeferredCount, "deferred_by_reason": p.DeferredByReason, "trimmable_roots": len(p.Trim),
			"orphans": len(p.Orphans), "orphans_young": p.OrphansYoung, "foreign_uncommitted": p.ForeignUncommitted,
			"blocked": p.Blocked, "tombstoned": p.Tombstoned}
	}
	if o.table != "" {
		st, err := awsio.NewObservedTable(cl.Dynamo, cfg.Table).Get(ctx, o.collection)
		if err != nil {
			status["observed_error"] = err.Error()
		} else {
			status["observed"] = st
		}
	}
	b, _ := json.MarshalIndent(status, "", "  ")
	_, err = fmt.Fprintln(out, string(b))
	return err
}

// confirmLineage records that the current head's lineage is the truth and
// what GC sees as evidence of a regression is abandoned: the roots that
// exist above the head and the highest head the coordinator observed.
func confirmLineage(ctx context.Context, out io.Writer, cfg app.Config, cl app.Clients, p gc.Plan, o options, now time.Time) error {
	if o.table == "" || o.by == "" {
		return fmt.Errorf("confirm-lineage needs -table and -by")
	}
	conf, ok := gc.ConfirmationFor(p, o.by, o.reason, now)
	if !ok {
		_, err := fmt.Fprintf(out, "%s: head v%d, no regression to confirm\n", o.collection, p.HeadVersion)
		return err
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	fmt.Fprintf(out, "%s: head v%d is the truth; abandoned: roots %v, observed head v%d\n%s\n",
		o.collection, p.HeadVersion, conf.AbandonedRoots, conf.AbandonedHeadVersion, b)
	if !o.yes {
		_, err := fmt.Fprintln(out, "not recorded: run again with -yes to confirm")
		return err
	}
	if err := awsio.NewObservedTable(cl.Dynamo, cfg.Table).ConfirmLineage(ctx, conf); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, "recorded: GC resumes for the collection; what the abandoned roots reference stays for a token lifetime")
	return err
}
