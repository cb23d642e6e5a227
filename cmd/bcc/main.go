// Command bcc is the operator's view of the coordinator, and its few
// confirmed actions.
//
//	bcc status          [-collection C]   fleet and collection state (read-only)
//	bcc leases          [-collection C]   every lease, classified, with evidence (read-only)
//	bcc recover         [-collection C] [-confirm]   release stalled leases (dry run without -confirm)
//	bcc plan            [-collection C]   the reconcile plan with its fingerprint (read-only)
//	bcc apply -plan F   [-confirm]        execute a saved plan (`bcc plan -json > F`); refused when stale
//	bcc gc-plan          -collection C    what a GC sweep would delete now and why (read-only)
//	bcc compaction-plan [-collection C]   the compaction jobs the planner would run now and why (read-only)
//	bcc confirm-lineage  -collection C -by NAME [-incarnation N] [-reason TEXT] [-yes]
//	                     (for the head's incarnation; -incarnation N refuses when the head is another lifetime)
//
// Every command takes -endpoint (a local stack; empty: the default AWS
// configuration), -prefix (the deployment's resource prefix, default bcc,
// naming the bucket, table and queues; -bucket and -table override),
// -ccs (CCS endpoint; without it facts are Unknown and GC refuses), -policy
// (BCC_POLICY JSON), -json and -now (RFC 3339 or unix ms: judge the
// snapshot at that time, for reproducible output).
//
// Exit codes: 0 healthy / nothing to do; 1 error (bad flags, unreadable
// plan, stale fingerprint, failed write); 2 degraded or action needed
// (a Degraded or Unknown state, a stalled lease, a non-empty plan, a
// refused release).
//
// The read-only commands are given read-only ports and make no AWS write
// (rule 10; TestReadOnlyCommandsWriteNothing counts every call).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitAction = 2
)

func main() {
	code, err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bcc:", err)
		os.Exit(exitError)
	}
	os.Exit(code)
}

const usage = "usage: bcc status|leases|recover|plan|apply|gc-plan|compaction-plan|confirm-lineage [-endpoint URL] [-prefix P] [-ccs URL] [-collection C] [-json] [-now T] [-confirm] [-plan FILE]"

var commands = map[string]bool{"status": true, "leases": true, "recover": true, "plan": true, "apply": true,
	"gc-plan": true, "compaction-plan": true, "confirm-lineage": true}

type options struct {
	endpoint, prefix, bucket, collection, ccs, table, wmBucket, wmKey, policy, now string
	asJSON, yes, confirm                                                           bool
	by, reason, planFile                                                           string
	incarnation                                                                    uint64
}

type env struct {
	o   options
	cfg app.Config
	cl  app.Clients
	def resources.Definition
	now time.Time
	out io.Writer
}

func run(ctx context.Context, args []string, out io.Writer) (int, error) {
	if len(args) == 0 || !commands[args[0]] {
		return exitError, errors.New(usage)
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var o options
	fs.StringVar(&o.endpoint, "endpoint", "", "AWS endpoint (local stacks); empty: the default AWS configuration")
	fs.StringVar(&o.prefix, "prefix", "bcc", "the deployment's resource prefix (names bucket, table, queues)")
	fs.StringVar(&o.bucket, "bucket", "", "data bucket (default <prefix>-data)")
	fs.StringVar(&o.collection, "collection", "", "one collection (default: every collection CCS lists)")
	fs.StringVar(&o.ccs, "ccs", "", "CCS endpoint (facts); without it facts are Unknown and GC refuses (fail closed)")
	fs.StringVar(&o.table, "table", "", "coordinator table (default <prefix>-coordinator)")
	fs.StringVar(&o.wmBucket, "watermark-bucket", "", "watermark bucket (default: the data bucket)")
	fs.StringVar(&o.wmKey, "watermark-key", "", "watermark key (default the deployment's)")
	fs.StringVar(&o.policy, "policy", "", "policy JSON (as BCC_POLICY) overriding the defaults")
	fs.StringVar(&o.now, "now", "", "judge at this time (RFC 3339 or unix ms) instead of the clock")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.BoolVar(&o.confirm, "confirm", false, "recover/apply: carry it out (otherwise a dry run)")
	fs.StringVar(&o.planFile, "plan", "", "apply: the plan file (`bcc plan -json > FILE`)")
	fs.StringVar(&o.by, "by", "", "confirm-lineage/recover: who acts")
	fs.StringVar(&o.reason, "reason", "", "confirm-lineage: why the head went back")
	fs.BoolVar(&o.yes, "yes", false, "confirm-lineage: record the confirmation (otherwise only print it)")
	fs.Uint64Var(&o.incarnation, "incarnation", 0, "confirm-lineage: the lifetime the operator means (default: the head's); refused when the head names another")
	if err := fs.Parse(args[1:]); err != nil {
		return exitError, err
	}
	if o.collection != "" && !contract.ValidCollection(o.collection) {
		return exitError, fmt.Errorf("-collection %q is not a valid collection name", o.collection)
	}
	if (cmd == "gc-plan" || cmd == "confirm-lineage") && o.collection == "" {
		return exitError, fmt.Errorf("%s needs -collection", cmd)
	}
	pol, err := policy.Parse([]byte(o.policy))
	if err != nil {
		return exitError, fmt.Errorf("-policy: %w", err)
	}
	e := env{o: o, def: resources.For(o.prefix, pol), out: out}
	if e.now, err = parseNow(o.now); err != nil {
		return exitError, err
	}
	e.cfg = app.Config{Bucket: o.bucket, Table: o.table, CCSEndpoint: strings.TrimSuffix(o.ccs, "/"), WatermarkBucket: o.wmBucket,
		WatermarkKey: o.wmKey, AWSEndpoint: o.endpoint, Policy: pol, Deployment: o.prefix}
	if e.cfg.Bucket == "" {
		e.cfg.Bucket = e.def.Bucket.Name
	}
	if e.cfg.Table == "" {
		e.cfg.Table = e.def.Table.Name
	}
	if e.cfg.WatermarkBucket == "" {
		e.cfg.WatermarkBucket = e.cfg.Bucket
	}
	if e.cfg.WatermarkKey == "" {
		e.cfg.WatermarkKey = e.def.WatermarkKey
	}
	if e.cl, err = app.NewClients(ctx, e.cfg); err != nil {
		return exitError, err
	}
	switch cmd {
	case "status":
		return e.status(ctx)
	case "leases":
		return e.leases(ctx)
	case "recover":
		return e.recover(ctx)
	case "plan":
		return e.plan(ctx)
	case "apply":
		return e.apply(ctx)
	case "compaction-plan":
		return e.compactionPlan(ctx)
	}
	ports := app.GCReadPorts(e.cfg, e.cl) // read-only by type
	plan, planErr := gc.PlanSweep(ctx, ports, gc.ConfigFrom(e.cfg.Policy, guard.All()), o.collection, e.now)
	if cmd == "confirm-lineage" {
		return exitOK, confirmLineage(ctx, out, e.cfg, e.cl, plan, o, e.now)
	}
	if err := printGCPlan(out, plan, planErr, o.asJSON); err != nil {
		return exitError, err
	}
	if planErr != nil {
		return exitAction, nil
	}
	return exitOK, nil
}

func parseNow(s string) (time.Time, error) {
	if s == "" {
		return time.Now().UTC(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, fmt.Errorf("-now %q: want RFC 3339 or unix milliseconds", s)
	}
	return t.UTC(), nil
}

func (e env) snapshot(ctx context.Context, skipQueues bool) status.Snapshot {
	o := status.Options{Policy: e.cfg.Policy, SkipQueues: skipQueues}
	if e.o.collection != "" {
		o.Collections = []string{e.o.collection}
	}
	return status.Collect(ctx, statusPorts(e.cfg, e.cl, e.def, e.now), o, e.now)
}

func (e env) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.out, string(b))
	return err
}

func needsAction(s status.State) bool { return s == status.Degraded || s == status.Unknown }

func (e env) status(ctx context.Context) (int, error) {
	s := e.snapshot(ctx, false)
	code := exitOK
	if needsAction(s.State) {
		code = exitAction
	}
	if e.o.asJSON {
		return code, e.printJSON(s)
	}
	w := e.out
	fmt.Fprintf(w, "as_of %s  deployment %s: %s\n", s.AsOf.Format(time.RFC3339), e.o.prefix, s.State)
	for _, r := range s.Reasons {
		fmt.Fprintf(w, "  %s\n", r)
	}
	for _, q := range s.Queues {
		if q.Error != "" {
			fmt.Fprintf(w, "  queue %-10s UNREADABLE: %s\n", q.Class, q.Error)
			continue
		}
		fmt.Fprintf(w, "  queue %-10s %d visible, %d in flight; DLQ %d\n", q.Class, q.Main.Visible, q.Main.InFlight, q.DLQ.Visible+q.DLQ.InFlight)
	}
	for _, c := range s.Collections {
		fmt.Fprintf(w, "%-16s %-13s %s\n", c.Name, c.State, strings.Join(c.Reasons, "; "))
		if g := c.Current.GC; g != nil && (g.Deletable+g.Deferred+g.Orphans > 0) {
			fmt.Fprintf(w, "%-16s %-13s gc: %d deletable now, %d deferred %v, %d never-committed outputs\n", "", "", g.Deletable, g.Deferred, g.DeferredByReason, g.Orphans)
		}
		if l := c.Current.GC.LineageOf(); l != nil {
			fmt.Fprintf(w, "%-16s %-13s lineage confirmed for incarnation %d (head v%d) by %s at %s\n", "", "", l.Incarnation, l.HeadVersion, l.ConfirmedBy, time.UnixMilli(l.ConfirmedAtUnixMs).UTC().Format(time.RFC3339))
		}
		if ob := c.Current.Observed; ob != nil && (ob.Debt.CompactionDue || ob.Debt.GCObjects > 0) {
			due := fmt.Sprint(ob.CompactionOwed(""))
			if ob.Debt.CompactionDue && !ob.CompactionOwed("") {
				due = "false (due by the summary; a worker found nothing to compact at this head)"
			}
			fmt.Fprintf(w, "%-16s %-13s debt: %d objects %d bytes, compaction due %s, gc %d objects\n", "", "", ob.Debt.Objects, ob.Debt.Bytes, due, ob.Debt.GCObjects)
		}
	}
	return code, nil
}

func (e env) leases(ctx context.Context) (int, error) {
	s := e.snapshot(ctx, true)
	code := exitOK
	var all []any
	for _, c := range s.Collections {
		if c.Current.LeasesError != "" {
			code = exitAction
		}
		for _, r := range c.Current.Leases {
			if r.Class != "healthy" && r.Class != "lease-not-held" {
				code = exitAction
			}
			all = append(all, r)
		}
	}
	if e.o.asJSON {
		return code, e.printJSON(map[string]any{"as_of": s.AsOf, "leases": all})
	}
	fmt.Fprintf(e.out, "as_of %s\n", s.AsOf.Format(time.RFC3339))
	done := 0
	for _, c := range s.Collections {
		if c.Current.LeasesError != "" {
			fmt.Fprintf(e.out, "%s: leases unreadable: %s\n", c.Name, c.Current.LeasesError)
		}
		for _, r := range c.Current.Leases {
			if r.Done {
				done++
				continue
			}
			fmt.Fprintf(e.out, "%-26s %s epoch %d holder %s\n    %s\n", r.Class, r.Lease.TaskID, r.Lease.LeaseEpoch, r.Lease.Holder, r.Detail)
		}
	}
	fmt.Fprintf(e.out, "(%d leases of finished tasks not listed; -json lists every lease)\n", done)
	return code, nil
}

func (e env) recover(ctx context.Context) (int, error) {
	s := e.snapshot(ctx, true)
	release, keep := status.Releases(s)
	type outcome struct {
		Lease   any    `json:"lease"`
		Class   string `json:"class"`
		Action  string `json:"action"`
		Outcome string `json:"outcome"`
		Detail  string `json:"detail"`
	}
	var outs []outcome
	code := exitOK
	if len(release) > 0 && !e.o.confirm {
		code = exitAction
	}
	by := e.o.by
	if by == "" {
		by = "operator"
	}
	table := awsio.NewLeaseTable(e.cl.Dynamo, e.cfg.Table)
	for _, r := range release {
		if e.o.confirm {
			beforeRelease()
		}
		oc := outcome{Lease: r.Lease, Class: string(r.Class), Action: "release", Outcome: "dry-run", Detail: r.Detail}
		if e.o.confirm {
			now, err := table.Release(ctx, r.Lease, "recovered-by:"+by, e.now.UnixMilli())
			switch {
			case errors.Is(err, store.ErrConditionFailed):
				oc.Outcome, code = "refused", exitAction
				oc.Detail = fmt.Sprintf("the lease moved since planning: now epoch %d holder %s expiry %d done %v", now.Lease.LeaseEpoch, now.Lease.Holder, now.Lease.LeaseExpiryUnixMs, now.Done)
			case err != nil:
				return exitError, fmt.Errorf("release %s: %w", r.Lease.TaskID, err)
			default:
				oc.Outcome = "released"
				oc.Detail = fmt.Sprintf("epoch %d -> %d: the holder's next heartbeat fails (lease lost), the next delivery takes the task", r.Lease.LeaseEpoch, now.Lease.LeaseEpoch)
			}
		}
		outs = append(outs, oc)
	}
	for _, r := range keep {
		if r.Class == "lease-not-held" && r.Done {
			continue
		}
		action := "none"
		if r.Class != "healthy" && r.Class != "lease-not-held" {
			action = "refuse: inspect by hand"
		}
		outs = append(outs, outcome{Lease: r.Lease, Class: string(r.Class), Action: action, Outcome: "left alone", Detail: r.Detail})
	}
	if e.o.asJSON {
		return code, e.printJSON(map[string]any{"as_of": s.AsOf, "dry_run": !e.o.confirm, "leases": outs})
	}
	mode := "dry run: nothing was changed; -confirm carries it out"
	if e.o.confirm {
		mode = "confirmed"
	}
	fmt.Fprintf(e.out, "recovery plan at %s (%s)\n", s.AsOf.Format(time.RFC3339), mode)
	if len(outs) == 0 {
		fmt.Fprintln(e.out, "  no live lease")
	}
	for _, oc := range outs {
		b, _ := json.Marshal(oc.Lease)
		var l struct {
			TaskID string `json:"task_id"`
		}
		_ = json.Unmarshal(b, &l)
		fmt.Fprintf(e.out, "  %-8s %-26s %s: %s\n           %s\n", oc.Outcome, oc.Class, l.TaskID, oc.Action, oc.Detail)
	}
	return code, nil
}

// beforeRelease runs between planning and each release write (a test
// seam: a heartbeat racing the recovery).
var beforeRelease = func() {}

// savedPlan is the plan file apply executes.
type savedPlan struct {
	status.Plan
	// Scope is the -collection the plan was made for (empty: the fleet).
	Scope string `json:"scope"`
}

func (e env) plan(ctx context.Context) (int, error) {
	s := e.snapshot(ctx, false)
	p := savedPlan{Plan: status.PlanFor(s, observerConfig(e.cfg)), Scope: e.o.collection}
	code := exitOK
	if len(p.Intents) > 0 || len(p.Skipped) > 0 {
		code = exitAction
	}
	if e.o.asJSON {
		return code, e.printJSON(p)
	}
	printPlan(e.out, p, "dry run: nothing was changed; save it with -json and run bcc apply -plan FILE -confirm")
	return code, nil
}

func printPlan(w io.Writer, p savedPlan, mode string) {
	fmt.Fprintf(w, "reconcile plan at %s, fingerprint %s (%s)\n", p.AsOf.Format(time.RFC3339), p.Fingerprint, mode)
	if len(p.Intents) == 0 {
		fmt.Fprintln(w, "  nothing to do")
	}
	for _, in := range p.Intents {
		switch {
		case in.Task != nil:
			fmt.Fprintf(w, "  %-13s %-16s %s %s (base v%d)\n                %s\n", in.Kind, in.Collection, in.Task.Kind, in.Task.TaskID, in.Task.BaseManifestVersion, in.Reason)
		case in.Lease != nil:
			fmt.Fprintf(w, "  %-13s %-16s %s epoch %d holder %s (%s)\n                %s\n", in.Kind, in.Collection, in.Lease.TaskID, in.Lease.LeaseEpoch, in.Lease.Holder, in.Class, in.Reason)
		default:
			fmt.Fprintf(w, "  %-13s %-16s %s\n", in.Kind, in.Class, in.Reason)
		}
	}
	for c, why := range p.Skipped {
		fmt.Fprintf(w, "  not planned   %-16s %s\n", c, why)
	}
}

// ErrStalePlan: the snapshot moved since the plan was made.
var ErrStalePlan = errors.New("stale plan: the snapshot moved since planning")

func (e env) apply(ctx context.Context) (int, error) {
	if e.o.planFile == "" {
		return exitError, errors.New("apply needs -plan FILE (made with bcc plan -json > FILE)")
	}
	b, err := os.ReadFile(e.o.planFile)
	if err != nil {
		return exitError, err
	}
	var p savedPlan
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || p.Fingerprint == "" {
		return exitError, fmt.Errorf("-plan %s: not a plan made by bcc plan -json: %v", e.o.planFile, err)
	}
	// Re-read every source now and judge it at the plan's as_of: the same
	// facts then give the same intents, byte for byte.
	judge := e
	judge.o.collection, judge.now = p.Scope, p.AsOf
	s := judge.snapshot(ctx, false)
	if fp := status.Fingerprint(s); fp != p.Fingerprint {
		return exitError, fmt.Errorf("%w: plan %s made at %s, the sources re-read now fingerprint %s; run bcc plan again", ErrStalePlan, p.Fingerprint,
			p.AsOf.Format(time.RFC3339), fp)
	}
	fresh, _ := json.Marshal(status.PlanFor(s, observerConfig(e.cfg)).Intents)
	filed, _ := json.Marshal(p.Intents)
	if !bytes.Equal(fresh, filed) {
		return exitError, fmt.Errorf("%w: -plan %s: its intents are not the plan of its snapshot (edited?); run bcc plan again", ErrStalePlan, e.o.planFile)
	}
	if !e.o.confirm {
		printPlan(e.out, p, "fingerprint still current; dry run: -confirm carries it out")
		if len(p.Intents) > 0 {
			return exitAction, nil
		}
		return exitOK, nil
	}
	urls := map[string]string{}
	for _, q := range e.def.Queues {
		d, err := awsio.QueueDepth(ctx, e.cl.SQS, q.Name)
		if err != nil {
			return exitError, err
		}
		urls[q.Class] = d.URL
	}
	queues := awsio.NewFIFOQueues(e.cl.SQS, urls)
	table := awsio.NewLeaseTable(e.cl.Dynamo, e.cfg.Table)
	by := e.o.by
	if by == "" {
		by = "operator"
	}
	code := exitOK
	fmt.Fprintf(e.out, "applying plan %s (fingerprint still current)\n", p.Fingerprint)
	for _, in := range p.Intents {
		switch in.Kind {
		case status.IntentEnqueue:
			if err := queues.Enqueue(ctx, []contract.Task{*in.Task}); err != nil {
				return exitError, fmt.Errorf("enqueue %s: %w", in.Task.TaskID, err)
			}
			fmt.Fprintf(e.out, "  enqueued      %s\n", in.Task.TaskID)
		case status.IntentReleaseLease:
			now, err := table.Release(ctx, *in.Lease, "recovered-by:"+by, e.now.UnixMilli())
			switch {
			case errors.Is(err, store.ErrConditionFailed):
				code = exitAction
				fmt.Fprintf(e.out, "  refused       %s: the lease moved (epoch %d holder %s)\n", in.Lease.TaskID, now.Lease.LeaseEpoch, now.Lease.Holder)
			case err != nil:
				return exitError, err
			default:
				fmt.Fprintf(e.out, "  released      %s (epoch %d)\n", in.Lease.TaskID, now.Lease.LeaseEpoch)
			}
		default:
			code = exitAction
			fmt.Fprintf(e.out, "  manual        %s\n", in.Reason)
		}
	}
	return code, nil
}

func (e env) compactionPlan(ctx context.Context) (int, error) {
	names := []string{e.o.collection}
	if e.o.collection == "" {
		var err error
		if names, err = ccsOf(e.cfg, e.cl).Collections(ctx); err != nil {
			return exitError, fmt.Errorf("list collections: %w", err)
		}
	}
	bucket := awsio.NewBucket(e.cl.S3, e.cfg.Bucket)
	lin := lineage.New(bucket, 64)
	pol := compact.PolicyFrom(e.cfg.Policy.Compaction)
	type jobView struct {
		Reason      string   `json:"reason"`
		Tier        string   `json:"tier"`
		OutputLevel int      `json:"output_level"`
		DropDeletes bool     `json:"drop_deletes"`
		Debt        float64  `json:"debt"`
		Inputs      []string `json:"inputs"`
		Bytes       int64    `json:"bytes"`
	}
	type collView struct {
		Collection string    `json:"collection"`
		Head       uint64    `json:"head_version,omitempty"`
		Due        bool      `json:"due"`
		Debt       any       `json:"debt,omitempty"`
		Jobs       []jobView `json:"jobs"`
		Error      string    `json:"error,omitempty"`
	}
	var views []collView
	code := exitOK
	for _, c := range names {
		v := collView{Collection: c, Jobs: []jobView{}}
		head, root, err := lin.HeadRoot(ctx, c)
		if err != nil {
			v.Error, code = err.Error(), exitAction
			views = append(views, v)
			continue
		}
		v.Head = head.Version
		d := compact.Debt(root.Summary, pol)
		v.Due, v.Debt = d.Due(), d
		_, jobs, err := compact.PlanRoot(ctx, lin, c, root, head.ManifestChecksum, pol, e.now)
		if err != nil {
			v.Error, code = err.Error(), exitAction
		}
		for _, j := range jobs {
			jv := jobView{Reason: j.Reason, Tier: j.Tier, OutputLevel: j.OutputLevel, DropDeletes: j.DropDeletes, Debt: j.Debt, Bytes: j.Bytes()}
			for _, in := range j.Inputs {
				jv.Inputs = append(jv.Inputs, in.Key)
			}
			v.Jobs = append(v.Jobs, jv)
		}
		if len(jobs) > 0 && code == exitOK {
			code = exitAction
		}
		views = append(views, v)
	}
	if e.o.asJSON {
		return code, e.printJSON(map[string]any{"as_of": e.now, "collections": views})
	}
	fmt.Fprintf(e.out, "compaction plan at %s (dry run: nothing was changed; the executor plans its base the same way)\n", e.now.Format(time.RFC3339))
	for _, v := range views {
		if v.Error != "" {
			fmt.Fprintf(e.out, "%s: UNREADABLE: %s\n", v.Collection, v.Error)
			continue
		}
		fmt.Fprintf(e.out, "%s head v%d: compaction due %v, %d jobs\n", v.Collection, v.Head, v.Due, len(v.Jobs))
		for i, j := range v.Jobs {
			fmt.Fprintf(e.out, "  job %d: %s -> level %d (%s), %d inputs, %d bytes, debt %.2f, drop deletes %v\n", i+1, j.Reason, j.OutputLevel, j.Tier, len(j.Inputs), j.Bytes, j.Debt, j.DropDeletes)
			for _, k := range j.Inputs {
				fmt.Fprintf(e.out, "      %s\n", k)
			}
		}
	}
	return code, nil
}

func printGCPlan(out io.Writer, p gc.Plan, err error, asJSON bool) error {
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
	if len(p.RootsAbove) > 0 || p.HighestObserved > p.HeadVersion || p.Confirmation != nil {
		fmt.Fprintf(out, "  incarnation %d head v%d; roots above it: %v; highest head observed: v%d; lineage confirmed by an operator: %v\n",
			contract.Lifetime(p.Incarnation), p.HeadVersion, p.RootsAbove, p.HighestObserved, p.LineageConfirmed)
	}
	if c := p.Confirmation; c != nil {
		fmt.Fprintf(out, "  lineage confirmation: incarnation %d, head v%d by %s at %s\n", c.Inc(), c.HeadVersion, c.ConfirmedBy, time.UnixMilli(c.ConfirmedAtUnixMs).UTC().Format(time.RFC3339))
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

// confirmLineage records that the current head's lineage is the truth and
// what GC sees as evidence of a regression is abandoned: the roots that
// exist above the head and the highest head the coordinator observed.
func confirmLineage(ctx context.Context, out io.Writer, cfg app.Config, cl app.Clients, p gc.Plan, o options, now time.Time) error {
	if o.by == "" {
		return fmt.Errorf("confirm-lineage needs -by")
	}
	if p.HeadVersion > 0 && o.incarnation != 0 && o.incarnation != contract.Lifetime(p.Incarnation) {
		return fmt.Errorf("confirm-lineage -incarnation %d: the head of %s is incarnation %d (a confirmation applies to one lifetime only)", o.incarnation, o.collection, contract.Lifetime(p.Incarnation))
	}
	conf, ok := gc.ConfirmationFor(p, o.by, o.reason, now)
	if !ok {
		_, err := fmt.Fprintf(out, "%s: head v%d (incarnation %d), no regression to confirm\n", o.collection, p.HeadVersion, contract.Lifetime(p.Incarnation))
		return err
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	fmt.Fprintf(out, "%s incarnation %d: head v%d is the truth; abandoned: roots %v, observed head v%d\n%s\n",
		o.collection, conf.Inc(), p.HeadVersion, conf.AbandonedRoots, conf.AbandonedHeadVersion, b)
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
