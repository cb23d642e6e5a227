package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/contract/strictjson"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

func (c *cli) planCmd() *cobra.Command {
	var coll, now string
	cmd := c.command("plan", "the reconcile plan and its fingerprint",
		`Plan derives the reconcile plan from a snapshot: typed intents (enqueue a
task, release_lease, inspect_dlq), each with its reason, and the
fingerprint of the facts it rests on. The enqueue intents are the rule
the scheduled reconciliation runs (observe.PlanReconcile). Nothing is
planned for a collection whose sources cannot be read (skipped, with
the reason).

Save it with -o json and execute it with bcc apply --plan FILE --confirm.

Exit 2 when there is something to apply, a collection was skipped, or a
source is unreadable.`,
		`  bcc --stack bcc-coordinator plan
  bcc --stack bcc-coordinator plan --collection orders -o json > plan.json`,
		func(*cobra.Command) (int, error) {
			s, err := c.open(now, false)
			if err != nil {
				return exitError, err
			}
			if err := s.checkCollection(coll); err != nil {
				return exitError, err
			}
			return s.plan(coll)
		})
	collectionFlag(cmd.Flags(), &coll, "one collection (default: the fleet)")
	nowFlag(cmd.Flags(), &now)
	return cmd
}

// planOf is the plan document of a snapshot.
func (s *session) planOf(snap status.Snapshot, scope string) planDoc {
	p := status.PlanFor(snap, observerConfig(s.d.cfg))
	h := s.headerOf("plan", snap, false)
	doc := planDoc{SchemaVersion: schemaVersion, Command: "plan", Deployment: s.d.name, State: h.State, Reasons: h.Reasons, Unknown: h.Unknown,
		AsOf: p.AsOf, Fingerprint: p.Fingerprint, Scope: scope, Intents: p.Intents, Skipped: []skipped{}}
	for c, why := range p.Skipped {
		doc.Skipped = append(doc.Skipped, skipped{c, why})
	}
	sort.Slice(doc.Skipped, func(i, j int) bool { return doc.Skipped[i].Collection < doc.Skipped[j].Collection })
	if doc.State != status.Unknown && len(doc.Skipped) > 0 {
		doc.State = status.Unknown
	}
	if doc.State != status.Unknown {
		doc.Reasons = append(doc.Reasons, fmt.Sprintf("%d intents", len(doc.Intents)))
	}
	noNulls(&doc)
	return doc
}

func (s *session) plan(coll string) (int, error) {
	doc := s.planOf(s.snapshot(coll, false), coll)
	code := exitOK
	if len(doc.Intents) > 0 || doc.State != status.Running {
		code = exitAction
	}
	if s.asJSON() {
		return code, s.json(&doc)
	}
	printPlan(s.out, doc, "dry run: nothing was changed; save it with -o json and run bcc apply --plan FILE --confirm")
	return code, nil
}

func printPlan(w io.Writer, p planDoc, mode string) {
	fmt.Fprintf(w, "reconcile plan at %s, fingerprint %s (%s): %s\n", p.AsOf.Format(time.RFC3339), p.Fingerprint, mode, p.State)
	printUnknown(w, p.Unknown)
	if len(p.Intents) == 0 {
		if p.State == status.Unknown {
			fmt.Fprintln(w, "  nothing planned: a source is unreadable")
		} else {
			fmt.Fprintln(w, "  nothing to do")
		}
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
	for _, sk := range p.Skipped {
		fmt.Fprintf(w, "  not planned   %-16s %s\n", sk.Collection, sk.Reason)
	}
}

// ErrStalePlan: the snapshot moved since the plan was made.
var ErrStalePlan = errors.New("stale plan: the snapshot moved since planning")

func (c *cli) applyCmd() *cobra.Command {
	var file, by string
	var confirm bool
	cmd := c.command("apply", "execute a saved plan (a dry run without --confirm); refused when stale",
		`Apply reads a plan file (bcc plan -o json > FILE), re-reads every source of
its scope and judges it at the plan's as_of: a different fingerprint, or
intents that are not the plan of that snapshot (an edited file), refuse
(stale plan, exit 1, nothing done). A plan made later than the system's
clock plus the skew allowance is refused.

With --confirm it executes exactly the file's intents, at the system's
clock: enqueue a task (enqueued at the clock; a sweep task's sweep time,
and so its id, is the clock's minute, not the plan's as_of), release a
lease (each justified again at the clock: a lease no longer releasable
now is refused), and leaves dead letters to a person (manual). A
collection the plan skipped (Unknown) is left out and the others' intents
are carried out. Without --confirm it only says whether the plan is
current.

Exit 2 when there is something left for a person: a dry run with
intents, a refused release, a dead letter, a skipped collection.`,
		`  bcc --stack bcc-coordinator plan -o json > plan.json
  bcc --stack bcc-coordinator apply --plan plan.json
  bcc --stack bcc-coordinator apply --plan plan.json --confirm --by alice`,
		func(*cobra.Command) (int, error) {
			s, err := c.open("", confirm)
			if err != nil {
				return exitError, err
			}
			return s.apply(file, confirm, first(by, "operator"))
		})
	cmd.Flags().StringVar(&file, "plan", "", "the plan file (bcc plan -o json > FILE)")
	cmd.Flags().BoolVar(&confirm, "confirm", false, "carry out the plan (writes, at the system's clock)")
	cmd.Flags().StringVar(&by, "by", "", "who applies (recorded on released leases: recovered-by:NAME)")
	_ = cmd.MarkFlagRequired("plan")
	_ = cmd.RegisterFlagCompletionFunc("plan", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
	})
	return cmd
}

// readPlan decodes a plan file strictly (a member it does not know, or
// one spelt in another case, is refused).
func readPlan(file string) (planDoc, error) {
	var p planDoc
	b, err := os.ReadFile(file)
	if err != nil {
		return p, err
	}
	if err := strictjson.Unmarshal(b, &p, strictjson.RejectUnknown); err != nil || p.Fingerprint == "" || p.Command != "plan" {
		return p, fmt.Errorf("--plan %s: not a plan made by bcc plan -o json: %v", file, err)
	}
	if p.SchemaVersion != schemaVersion {
		return p, fmt.Errorf("--plan %s: schema_version %d, this bcc reads %d: make the plan again", file, p.SchemaVersion, schemaVersion)
	}
	return p, nil
}

func (s *session) apply(file string, confirm bool, by string) (int, error) {
	p, err := readPlan(file)
	if err != nil {
		return exitError, err
	}
	if p.Deployment != s.d.name {
		return exitError, fmt.Errorf("--plan %s was made for deployment %q, not %q", file, p.Deployment, s.d.name)
	}
	// A plan is judged at its as_of to show that nothing moved, and that
	// as_of is an input: one in the future (beyond the clock skew
	// allowance) would judge healthy leases stalled (rule 16).
	sysNow := s.clock().UTC()
	if p.AsOf.After(sysNow.Add(s.d.cfg.Policy.ClockSkew.D())) {
		return exitError, fmt.Errorf("--plan %s: made at %s, later than the system's clock %s: refused", file, p.AsOf.Format(time.RFC3339), sysNow.Format(time.RFC3339))
	}
	// Re-read every source now and judge it at the plan's as_of: the same
	// facts then give the same intents, byte for byte.
	snap := s.snapshotAt(p.Scope, false, p.AsOf)
	// A collection the plan skipped as Unknown fails only itself (rule
	// 17): still Unknown, it is part of the fingerprint (readable again,
	// the plan is stale); every other source must be readable.
	if us := unknownExcept(snap, p.Skipped); len(us) > 0 {
		doc := applyDoc{header: s.headerOf("apply", snap, false), Fingerprint: p.Fingerprint, DryRun: !confirm, Intents: []applyResult{}}
		if s.asJSON() {
			return exitAction, s.json(&doc)
		}
		fmt.Fprintf(s.out, "plan %s not applied: Unknown\n", p.Fingerprint)
		printUnknown(s.out, us)
		return exitAction, nil
	}
	if fp := status.Fingerprint(snap); fp != p.Fingerprint {
		return exitError, fmt.Errorf("%w: plan %s made at %s, the sources re-read now fingerprint %s; run bcc plan again", ErrStalePlan, p.Fingerprint,
			p.AsOf.Format(time.RFC3339), fp)
	}
	fresh := s.planOf(snap, p.Scope)
	noNulls(&p)
	for _, v := range [][2]any{{fresh.Intents, p.Intents}, {skippedNames(fresh.Skipped), skippedNames(p.Skipped)}} {
		a, _ := json.Marshal(v[0])
		b, _ := json.Marshal(v[1])
		if !bytes.Equal(a, b) {
			return exitError, fmt.Errorf("%w: --plan %s: its intents are not the plan of its snapshot (edited?); run bcc plan again", ErrStalePlan, file)
		}
	}
	doc := applyDoc{header: header{SchemaVersion: schemaVersion, Command: "apply", AsOf: sysNow, Deployment: s.d.name, State: status.Running,
		Reasons: []string{}, Unknown: []unknownSource{}}, Fingerprint: p.Fingerprint, DryRun: !confirm, Intents: []applyResult{}}
	code := exitOK
	// The collections the plan skipped are left out (rule 17: one bad
	// collection fails only itself) and still need a person.
	if len(p.Skipped) > 0 {
		code, doc.State, doc.Unknown = exitAction, status.Unknown, unknownOf(snap)
	}
	for _, sk := range p.Skipped {
		doc.Reasons = append(doc.Reasons, fmt.Sprintf("%s not planned: %s", sk.Collection, sk.Reason))
	}
	if !confirm {
		for _, in := range p.Intents {
			doc.Intents = append(doc.Intents, applyResult{Intent: in, Outcome: "dry-run", Detail: "--confirm carries it out"})
			code = exitAction
		}
		if s.asJSON() {
			return code, s.json(&doc)
		}
		printPlan(s.out, p, "fingerprint still current; dry run: --confirm carries it out")
		return code, nil
	}
	// A release is justified at the system's clock, not the plan's: the
	// lease must still be releasable now, exactly as planned.
	releasable := map[contract.Lease]bool{}
	for _, c := range s.snapshotAt(p.Scope, true, sysNow).Collections {
		for _, r := range c.Current.Leases {
			if r.Releasable {
				releasable[r.Lease] = true
			}
		}
	}
	urls := map[string]string{}
	for _, in := range p.Intents {
		if in.Kind != status.IntentEnqueue {
			continue
		}
		class := resources.QueueForKind(in.Task.Kind)
		if _, ok := urls[class]; ok {
			continue
		}
		u, err := s.queueURL(class)
		if err != nil {
			return exitError, err
		}
		urls[class] = u
	}
	queues := awsio.NewFIFOQueues(s.d.cl.SQS, urls)
	table := awsio.NewLeaseTable(s.d.cl.Dynamo, s.d.cfg.Table)
	for _, in := range p.Intents {
		r := applyResult{Intent: in}
		switch in.Kind {
		case status.IntentEnqueue:
			// The enqueue is a write at the system's clock (rule 16): the
			// plan's as_of (any --now it was made with) dates neither the
			// task nor a sweep task's sweep time (a lifecycle transition's
			// cutoff), which is re-derived at the clock with its identity.
			task := in.Task.EnqueuedAt(s.clock().UnixMilli())
			if err := queues.Enqueue(s.ctx, []contract.Task{task}); err != nil {
				return exitError, fmt.Errorf("enqueue %s: %s", task.TaskID, oneLine(err))
			}
			r.Outcome, r.Detail = "enqueued", task.TaskID
			if task.TaskID != in.Task.TaskID {
				r.Detail += fmt.Sprintf(" (planned as %s: a sweep task's time is the system clock's)", in.Task.TaskID)
			}
		case status.IntentReleaseLease:
			if !releasable[*in.Lease] {
				code = exitAction
				r.Outcome, r.Detail = "refused", in.Lease.TaskID+": not releasable at the system's clock (a heartbeat since the plan, or the plan's time was not now)"
				break
			}
			now, err := table.Release(s.ctx, *in.Lease, "recovered-by:"+by, s.clock().UnixMilli())
			switch {
			case errors.Is(err, store.ErrConditionFailed):
				code = exitAction
				r.Outcome, r.Detail = "refused", fmt.Sprintf("%s: the lease moved (epoch %d holder %s)", in.Lease.TaskID, now.Lease.LeaseEpoch, now.Lease.Holder)
			case err != nil:
				return exitError, fmt.Errorf("release %s: %s", in.Lease.TaskID, oneLine(err))
			default:
				r.Outcome, r.Detail = "released", fmt.Sprintf("%s (epoch %d)", in.Lease.TaskID, now.Lease.LeaseEpoch)
			}
		default:
			code = exitAction
			r.Outcome, r.Detail = "manual", in.Reason
		}
		doc.Intents = append(doc.Intents, r)
	}
	if s.asJSON() {
		return code, s.json(&doc)
	}
	fmt.Fprintf(s.out, "applying plan %s (fingerprint still current)\n", p.Fingerprint)
	for _, r := range doc.Intents {
		fmt.Fprintf(s.out, "  %-13s %s\n", r.Outcome, r.Detail)
	}
	for _, sk := range p.Skipped {
		fmt.Fprintf(s.out, "  not planned   %-16s %s\n", sk.Collection, sk.Reason)
	}
	return code, nil
}

// skippedNames are the collections of a plan's skipped list (the reasons
// carry errors, which differ from one read to the next).
func skippedNames(sk []skipped) []string {
	out := []string{}
	for _, s := range sk {
		out = append(out, s.Collection)
	}
	return out
}

// unknownExcept is unknownOf(snap) without the collections a plan
// skipped (and says so in its intents: none for them).
func unknownExcept(snap status.Snapshot, skipped []skipped) []unknownSource {
	skip := map[string]bool{}
	for _, sk := range skipped {
		skip[sk.Collection] = true
	}
	kept := snap
	kept.Collections = nil
	for _, c := range snap.Collections {
		if !skip[c.Name] || c.State != status.Unknown {
			kept.Collections = append(kept.Collections, c)
		}
	}
	return unknownOf(kept)
}

// queueURL is a task queue's URL: the stack's, or resolved by name.
func (s *session) queueURL(class string) (string, error) {
	q := s.d.main[class]
	if q.url != "" {
		return q.url, nil
	}
	out, err := s.d.cl.SQS.GetQueueUrl(s.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)})
	if err != nil {
		return "", fmt.Errorf("queue %s: %s", q.name, oneLine(err))
	}
	return aws.ToString(out.QueueUrl), nil
}
