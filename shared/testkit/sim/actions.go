package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/compact"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/core/lease"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/core/observe"
	"github.com/searchfabric/bcc/shared/core/segment"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/testkit/naive"
)

// The use cases' configurations, derived from the simulated policy exactly
// as the functions derive theirs (package app).
func (w *World) gcConfig() gc.Config { return gc.ConfigFrom(w.pol, w.cfg.Guards) }

func (w *World) compactionPolicy() compact.Policy { return compact.PolicyFrom(w.pol.Compaction) }

func (w *World) gcReadPorts() gc.ReadPorts {
	data := app.GCBucket{B: w.bucket}
	return gc.ReadPorts{Objects: data, Lister: data, Memory: w.memory(), Seen: w.progress, Facts: w.ccs,
		Watermark: gc.WatermarkObject{Objects: data, Key: WatermarkKey}}
}

// ---------------------------------------------------------------------------
// The coordinator's functions: each invocation is the real Lambda handler
// over the real use case, wired as the functions wire it (package app), with
// the shipped adapters (awsio) over the simulated AWS (memaws).

// observerHandler is the observer function.
func (w *World) observerHandler(r fnRun) *handler.Observer {
	uc := observe.New(w.bucket, w.state, w.queues, w.ccs, r.now, observe.ConfigFrom(w.pol, w.compactionPolicy().Due), r.m, r.log).WithGuards(w.cfg.Guards)
	uc.SetCleanups(w.progress)
	uc.SetNamespaceReleaser(handoff.NewNamespaceRequester(w.ccs, w.ccs, w.queues, r.now, w.cfg.Guards, r.m, r.log))
	return handler.NewObserver(uc, w.ccs, w.queues, handler.Batch{Reserve: w.pol.BatchReserve(), Guards: w.cfg.Guards}, r.m, r.out, r.now, r.log)
}

// deliver hands the i-th pending head notification to the observer
// function as an S3 event. A failed invocation is retried by S3's async
// invoke at most twice; after that the notification is lost (reconcile
// recovers it).
func (w *World) deliver(i int, keep bool) {
	n := w.notes[i]
	if !keep {
		w.notes = slices.Delete(w.notes, i, i+1)
	}
	var resp handler.ObserverResponse
	// The facts CCS holds when the invocation starts: the observer reads
	// them at some point of it, and an action nested in the invocation may
	// change them after that read (transition-nothing judges the
	// observation by the facts it may have read).
	factsFrom := map[string]uint64{}
	for c, f := range w.ccs.facts {
		factsFrom[c] = f.FactsVersion
	}
	crashed, err := w.invoke(resources.FnObserver, true, "", func(r fnRun) error {
		var err error
		resp, err = w.observerHandler(r).Handle(r.ctx, s3Event(w.def.Bucket.Name, n.key, n.seq))
		return err
	})
	w.logf("  observe %s (notification %d): %s crashed=%v err=%v", n.key, n.seq, compactJSON(resp.Results), crashed, err)
	if !crashed && err == nil {
		for _, r := range resp.Results {
			w.checkObservation(r, factsFrom[r.Collection])
		}
	}
	if (crashed || err != nil) && !keep {
		w.count("notify-failed")
		if w.rng.IntN(3) > 0 { // async retry; otherwise lost
			w.notes = append(w.notes, n)
		}
	}
}

// reconcile is the scheduled pass: the observer fans the catalog out to
// the reconcile queue (chunks, then one request per collection), and the
// queue's event source mapping delivers them (a crashed or failed batch
// returns after its visibility timeout and is consumed by a later pass or
// the drain).
func (w *World) reconcile() {
	var resp handler.ObserverResponse
	crashed, err := w.invoke(resources.FnObserver, true, "", func(r fnRun) error {
		var err error
		resp, err = w.observerHandler(r).Handle(r.ctx, scheduledEvent)
		return err
	})
	w.logf("  reconcile: %s crashed=%v err=%v", compactJSON(resp.Reconcile), crashed, err)
	for i := 0; i < 100 && w.consume(resources.QueueReconcile); i++ {
	}
}

// reconcileHandler is the observer function as the reconcile queue's
// event source mapping invokes it.
type reconcileHandler struct{ h *handler.Observer }

func (r reconcileHandler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return r.h.HandleReconcile(ctx, ev)
}

// consume is the queue's event source mapping: it receives one batch (up
// to the queue's batch size) and invokes the consumer with it. What the
// handler does not report failed is deleted; a batch whose invocation
// failed or crashed stays in flight until its visibility timeout (then it
// is redelivered, or redriven to the DLQ).
func (w *World) consume(class string) bool {
	url := w.urls[class]
	def, _ := w.def.Queue(class)
	dlq := w.sqs.Len(w.dlqs[class])
	var msgs []sqstypes.Message
	w.system(func() {
		out, err := w.sqs.ReceiveMessage(w.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: int32(def.BatchSize)})
		if err != nil {
			panic(err) // no faults outside a function: a receive cannot fail
		}
		msgs = out.Messages
	})
	w.Counts["sqs-dlq"] += w.sqs.Len(w.dlqs[class]) - dlq
	if class == resources.QueueHandoff {
		var lost int
		if msgs, lost = w.loseCompletions(msgs); len(msgs) == 0 && lost > 0 {
			return true
		}
	}
	if len(msgs) == 0 {
		return false
	}
	ev := events.SQSEvent{}
	var ids []string
	incs := map[string]map[uint64]bool{}
	for _, m := range msgs {
		if class == resources.QueueGC || class == resources.QueueCompaction {
			if t, err := contract.DecodeTask("sim", []byte(aws.ToString(m.Body))); err == nil {
				if incs[t.Collection] == nil {
					incs[t.Collection] = map[uint64]bool{}
				}
				incs[t.Collection][t.Inc()] = true
				w.remember(heldMsg{class: class, group: m.Attributes["MessageGroupId"], body: aws.ToString(m.Body), inc: t.Inc()}, t.Collection)
			}
		}
		if n, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"]); n > 1 {
			w.count("sqs-redelivered")
		}
		ids = append(ids, aws.ToString(m.MessageId)+"/r"+m.Attributes["ApproximateReceiveCount"])
		if class == resources.QueueHandoff {
			if c, err := contract.DecodeCompletion("sim", []byte(aws.ToString(m.Body))); err == nil && c.Coverage != nil {
				w.handing[contract.CutoverRequestID(c.TaskID, *c.Coverage)] = c
			}
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + def.Name, AWSRegion: "us-east-1"})
	}
	// During one owner's outage for one collection, handoff batches run
	// without other faults: then only that collection's records may fail
	// (invariant isolation, rule 9).
	outage := class == resources.QueueHandoff && w.ownerDown != ""
	if outage {
		groups := map[string]bool{}
		for _, r := range ev.Records {
			groups[r.Attributes["MessageGroupId"]] = true
		}
		if len(groups) > 1 && groups[w.ownerDown] {
			w.count("outage-batch-mixed")
		}
	}
	var resp events.SQSEventResponse
	w.nextIncs = incs
	w.compacting = compactionMsg{}
	if class == resources.QueueCompaction && len(msgs) == 1 {
		if t, err := contract.DecodeTask("sim", []byte(aws.ToString(msgs[0].Body))); err == nil {
			sent, _ := strconv.ParseInt(msgs[0].Attributes["SentTimestamp"], 10, 64)
			w.compacting = compactionMsg{id: aws.ToString(msgs[0].MessageId), taskID: t.TaskID, sentAt: sent}
		}
	}
	defer func() { w.compacting = compactionMsg{} }()
	crashed, err := w.invoke(def.Consumer, !outage, class, func(r fnRun) error {
		var err error
		resp, err = w.consumer(class, ev.Records[0].Attributes["MessageGroupId"], r).Handle(r.ctx, ev)
		return err
	})
	w.checkSlots(class, crashed)
	acked := 0
	if !crashed && err == nil {
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		w.system(func() {
			for _, rec := range ev.Records {
				if failed[rec.MessageId] {
					continue
				}
				if _, err := w.sqs.DeleteMessage(w.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(rec.ReceiptHandle)}); err != nil {
					panic(err)
				}
				acked++
			}
		})
	}
	w.logf("  %s batch %v: crashed=%v err=%v failed=%d acked=%d", class, ids, crashed, err, len(resp.BatchItemFailures), acked)
	if outage && !crashed && err == nil {
		group := map[string]string{}
		for _, rec := range ev.Records {
			group[rec.MessageId] = rec.Attributes["MessageGroupId"]
		}
		for _, f := range resp.BatchItemFailures {
			if g := group[f.ItemIdentifier]; g != w.ownerDown {
				w.violate("isolation", "the publisher is down for %s only, but a handoff record of %s failed in the same batch (its receives are used up towards the DLQ)", w.ownerDown, g)
				break
			}
		}
	}
	return true
}

// checkObservation judges one successful observation from outside.
//
// lost-enqueue: a duplicate observation (the state already records this
// head) that enqueued nothing while the recorded state has compaction due
// and no task for the head is queued or leased: the work waits for
// reconciliation (the state was written, its enqueue lost).
//
// transition-nothing: the observer scheduled a lifecycle transition for a
// head none of whose objects in another tier than the target is old
// enough, even on the fastest clock, under any of the facts CCS held
// while the observation ran (factsFrom: the facts version when the
// invocation started; an action nested in the invocation may change the
// facts after the observer read them, and its task then carries the
// facts it was planned under, which the handoff drops as stale): the
// transition moves nothing (and, taking precedence, keeps compaction from
// being scheduled).
func (w *World) checkObservation(r handler.ObservedHead, factsFrom uint64) {
	col := w.cols[r.Collection]
	if col == nil {
		return
	}
	if r.Outcome == "duplicate" && len(r.Tasks) == 0 {
		var st observe.Observed
		w.system(func() { st, _ = w.state.Get(w.ctx, r.Collection, col.inc) })
		if st.Version == r.Version && st.Debt.CompactionDue && !st.Debt.TombstoneActive && !w.taskFor(st) {
			w.violate("lost-enqueue", "%s v%d: compaction is due, the duplicate observation enqueued nothing and no task for the head is queued or leased", r.Collection, r.Version)
		}
	}
	if !slices.Contains(r.Tasks, string(contract.KindLifecycleTransition)) {
		return
	}
	var ver *version
	for _, v := range col.versions {
		if v.v == r.Version {
			ver = v
		}
	}
	if ver == nil {
		return
	}
	now := w.ccs.facts[r.Collection]
	var judged []string
	for fv := min(factsFrom, now.FactsVersion); fv <= now.FactsVersion; fv++ {
		f, ok := w.ccs.history[r.Collection][fv]
		if !ok {
			continue
		}
		lc := f.Lifecycle
		cutoff, ok := lc.TransitionCutoff(contract.SweepMinute(w.t + w.pol.ClockSkew.D().Milliseconds()))
		if !ok {
			judged = append(judged, fmt.Sprintf("facts v%d: no transition", fv))
			continue
		}
		for _, o := range ver.objects {
			if o.TransitionDue(lc.TransitionToTier, cutoff) {
				return
			}
		}
		judged = append(judged, fmt.Sprintf("facts v%d: to %s, no object in another tier has max_ts <= %d", fv, lc.TransitionToTier, cutoff))
	}
	if len(judged) == 0 {
		return
	}
	w.violate("transition-nothing", "%s v%d: a lifecycle transition was scheduled that moves nothing under any facts the observation may have read (%s)", r.Collection, r.Version, strings.Join(judged, "; "))
}

// taskFor reports whether a compaction or transition task for st's head is
// queued (or in flight) or has a lease record.
func (w *World) taskFor(st observe.Observed) bool {
	for _, m := range w.sqs.Messages(w.urls[resources.QueueCompaction]) {
		if t, err := contract.DecodeTask(m.ID, m.Body); err == nil && t.Collection == st.Collection && t.BaseManifestVersion == st.Version {
			return true
		}
	}
	inc := w.cols[st.Collection].inc
	for _, t := range []contract.Task{
		contract.NewTask(contract.KindCompaction, st.Collection, st.Version, st.Checksum, st.FactsVersion, st.ObservedAtUnixMs).In(inc),
		contract.NewSweepTask(contract.KindLifecycleTransition, st.Collection, st.Version, st.Checksum, st.FactsVersion, st.ObservedAtUnixMs).In(inc),
	} {
		if _, ok := decodeLeaseItem(w.ddb.Item(w.def.Table.Name, leaseKey(t.TaskID))); ok {
			return true
		}
	}
	return false
}

// gate is the fleet-wide class concurrency gate of the consumer of class
// (the shipped slots and deferrals over the simulated DynamoDB and SQS,
// on the invocation's skewed clock).
func (w *World) gate(class string, r fnRun) handler.ClassGate {
	q, _ := w.def.Queue(class)
	fn, _ := w.def.Function(q.Consumer)
	g := handler.GateFrom(w.pol, fn.Timeout, awsio.NewSlots(w.ddb, w.def.Table.Name), awsio.NewDeferrals(w.sqs, w.urls[class], q.MaxReceiveCount))
	g.Now = r.now
	return g
}

// slotKinds are the task classes whose fleet-wide concurrency is bounded.
var slotKinds = []contract.TaskKind{contract.KindCompaction, contract.KindLifecycleTransition, contract.KindGC,
	contract.KindRetentionReclaim, contract.KindTombstoneCleanup}

// checkSlots is the class-slots invariant after a consumer invocation of
// queue class: no class has more live holders than its limit, and every
// live holder is a crashed invocation whose slot has not reached its lease
// end yet (an invocation that returned gave its slot back, whatever the
// faults on the slots item: an applied write whose answer was lost is
// recognised, neither leaked nor taken twice). A finished invocation holds
// nothing; the consumers still running (other actions run inside them)
// may.
func (w *World) checkSlots(class string, crashed bool) {
	q, _ := w.def.Queue(class)
	fn, _ := w.def.Function(q.Consumer)
	lease := fn.Timeout + w.pol.ClockSkew.D()
	if crashed {
		// Its slot (if it took one) lives until its lease end on its own
		// clock, at most half the skew ahead of the true clock.
		w.crashedSlots = append(w.crashedSlots, w.t+w.pol.ClockSkew.Ms()/2+lease.Milliseconds())
	}
	live := 0
	for _, end := range w.crashedSlots {
		if end > w.t-w.pol.ClockSkew.Ms()/2 {
			w.crashedSlots[live] = end
			live++
		}
	}
	w.crashedSlots = w.crashedSlots[:live]
	// Other actions run inside an invocation (during a backoff, a wait):
	// the consumers still running hold their slots.
	for _, inv := range w.stack {
		if inv.queue == resources.QueueCompaction || inv.queue == resources.QueueGC {
			live++
		}
	}
	slots := awsio.NewSlots(w.ddb, w.def.Table.Name)
	for _, k := range slotKinds {
		var holders map[string]int64
		var err error
		// Holders alive on the earliest clock of the deployment.
		w.system(func() { holders, err = slots.Holders(w.ctx, string(k), time.UnixMilli(w.t-w.pol.ClockSkew.Ms()/2)) })
		if err != nil {
			w.violate("class-slots", "read the %s slots: %v", k, err)
			continue
		}
		if limit := w.pol.Budgets.ClassConcurrency.For(k); len(holders) > limit {
			w.violate("class-slots", "%d holders of %s slots, limit %d: %v", len(holders), k, limit, holders)
		}
		if len(holders) > live {
			w.violate("class-slots", "%s slots held by %v after a %s invocation, but only %d crashed or running invocations may hold one (a leaked slot)", k, holders, class, live)
		}
	}
}

// sqsHandler is an SQS-triggered function's handler.
type sqsHandler interface {
	Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
}

// consumer wires the function consuming class for one invocation of a
// batch of group's messages.
func (w *World) consumer(class, group string, r fnRun) sqsHandler {
	g := w.cfg.Guards
	batch := handler.Batch{Reserve: w.pol.BatchReserve(), Guards: g}
	switch class {
	case resources.QueueReconcile:
		return reconcileHandler{w.observerHandler(r)}
	case resources.QueueCompaction:
		cfg := compact.ExecConfigFrom(w.pol, g)
		cfg.Writer = segment.WriterOptions{BlockSize: 96}
		// Every read on the invocation's goroutine, in one order: seeds
		// replay, and a crash (a panic of the call) ends the invocation.
		// (Outputs never reach a part, so uploads send nothing in the
		// background either.)
		cfg.Sequential = true
		// A wait for a still head advances the simulated clock.
		sleep := func(ctx context.Context, d time.Duration) error {
			w.t += d.Milliseconds()
			return ctx.Err()
		}
		ex := compact.NewExecutor(w.bucket, checkedLeases{w: w, l: lease.New(w.leases, g).WithHeartbeat(cfg.Heartbeat)}, w.ccs, w.queues, r.now, cfg, r.m, r.log).WithRewrites(w.state).WithSleep(sleep)
		return handler.NewCompaction(ex, r.m, r.out, r.now, r.log).WithBatch(batch).WithGate(w.gate(class, r))
	case resources.QueueGC:
		ports := gc.Ports{ReadPorts: w.gcReadPorts(), Deleter: app.GCBucket{B: w.bucket}, Sweeps: w.state, Completions: w.queues,
			Progress: w.progress, Sightings: w.progress, Heads: retirePort{w}, Continuations: w.queues}
		if w.quiet && w.round < steadyRounds && group != "" && group == w.steadyCol {
			ports.Sweeps = &steadySweeps{ObservedTable: w.state, w: w, c: group}
		}
		// Paced as the seed's budget plan says (budgets.go); a backoff or
		// budget wait advances the simulated clock while the world moves
		// on (the collection of a GC batch is its group).
		sleep := func(ctx context.Context, d time.Duration) error {
			w.t += (d + time.Millisecond - 1).Milliseconds() // a wait of less than a millisecond still passes time
			w.duringBackoff(group)
			return ctx.Err()
		}
		pacer := w.gcPacer(r, group, sleep)
		return handler.NewGC(gc.New(ports, w.gcConfig(), pacer, r.now, sleep, r.m, r.log), r.m, r.out, r.now, r.log).WithBatch(batch).WithGate(w.gate(class, r))
	}
	var reclaim handoff.Reclaimer
	if !g.AmbiguousReread {
		reclaim = naive.Reclaimer{S3: w.s3, Bucket: w.def.Bucket.Name}
	}
	uc := handoff.New(lineage.New(w.bucket, 64), pubPort{w}, w.ccs, reclaim, r.now, handoff.ConfigFrom(w.pol, g), r.m, r.log).WithRemains(w.bucket).WithWritten(w.bucket)
	return handler.NewHandoff(uc, r.m, r.out, r.now, r.log).WithBatch(batch)
}

// ---------------------------------------------------------------------------
// Other actors: the workload, readers, the query plane's watermark, CCS.

func (w *World) liveCollections() []string {
	var out []string
	for _, c := range w.colNames {
		if !w.cols[c].tombstoned {
			out = append(out, c)
		}
	}
	return out
}

func (w *World) tombstonedCollections() []string {
	var out []string
	for _, c := range w.colNames {
		if w.cols[c].tombstoned {
			out = append(out, c)
		}
	}
	return out
}

func (w *World) appendTo(c string) {
	writes := w.gen.Random()
	_, err := w.invokeOwner(func() error {
		_, err := w.gen.Append(w.ctx, c, writes)
		return err
	})
	if err != nil {
		w.violate("workload", "append to %s failed without faults: %v", c, err)
	}
}

// foreignUpload models another writer (an ingest, a snapshot import) that
// stores a segment under data/ for a commit that lands later, or never.
// Its records have keys of their own, so a late commit changes what reads
// only by adding them.
func (w *World) foreignUpload(c string) {
	w.uploadN++
	key, level := fmt.Sprintf("%sl0/ingest-%06d.seg", contract.DataPrefix(c), w.uploadN), 0
	if w.rng.IntN(2) == 0 {
		key, level = fmt.Sprintf("%sl1/import-%06d/0000.seg", contract.DataPrefix(c), w.uploadN), 1
	}
	rec := fmt.Sprintf("late-%06d", w.uploadN)
	if w.uploadN%4 != 1 {
		// Three in four: a key of its own inside the workload's key range ("doc-..."):
		// committed late, its records are ordered among those of the
		// rewrites planned meanwhile over that range (the conflict
		// check's delete_since_base clause, invariant delete-gain).
		rec = fmt.Sprintf("doc-%06d~late-%06d", w.uploadN%6, w.uploadN)
	}
	writes := []workload.Write{{Key: rec, Payload: []byte(fmt.Sprintf("u%d", w.uploadN))}}
	var u workload.Upload
	_, err := w.invokeOwner(func() error {
		var err error
		u, err = w.gen.Upload(w.ctx, c, key, level, writes)
		return err
	})
	if err != nil {
		w.violate("workload", "upload to %s failed without faults: %v", c, err)
		return
	}
	w.uploads = append(w.uploads, u)
	w.foreign[key] = true
	w.count("foreign-upload")
	w.logf("  another writer uploads %s (commit pending)", key)
}

// foreignCommit lands the commit of a pending upload (picked at random:
// some wait long past every reclaim grace).
func (w *World) foreignCommit(quiet bool) {
	var live []int
	for i, u := range w.uploads {
		if !w.cols[u.Collection].tombstoned {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return
	}
	i := live[w.rng.IntN(len(live))]
	u := w.uploads[i]
	w.uploads = slices.Delete(w.uploads, i, i+1)
	delete(w.foreign, u.Entry.Key)
	if !quiet {
		w.count("foreign-commit-late")
	}
	w.logf("  another writer commits its upload %s to %s", u.Entry.Key, u.Collection)
	if _, err := w.invokeOwner(func() error { _, err := w.gen.CommitUpload(w.ctx, u); return err }); err != nil {
		w.violate("workload", "late commit of %s failed without faults: %v", u.Entry.Key, err)
	}
}

// applyQueuedCutover is the publisher working through a request it queued
// earlier: applied only if the head is still the request's base (the
// publisher's CAS) and its not_after has not passed.
func (w *World) applyQueuedCutover() {
	if len(w.queued) == 0 {
		return
	}
	i := w.rng.IntN(len(w.queued))
	req := w.queued[i]
	w.queued = slices.Delete(w.queued, i, i+1)
	var ans contract.CutoverAnswer
	_, err := w.invokeOwner(func() error {
		var err error
		ans, err = w.late.Cutover(w.ctx, req)
		return err
	})
	switch {
	case err != nil:
		w.violate("workload", "late cutover %s failed without faults: %v", req.RequestID, err)
	case ans.Status == contract.CutoverAccepted:
		w.count("cutover-applied-late")
	case ans.Status == contract.CutoverExpired:
		w.count("cutover-expired-late")
	}
	w.logf("  publisher applies queued cutover %s of %s (base v%d, not_after +%.1fm): %s %s", req.RequestID, req.Collection, req.BaseVersion,
		float64(req.NotAfterUnixMs-startMs)/60000, ans.Status, ans.Reason)
}

// aboveRefs returns every key the roots that exist above version head of
// c reference (what GC keeps while those roots exist).
func (w *World) aboveRefs(c string, head uint64) map[string]bool {
	out := map[string]bool{}
	for _, k := range w.s3.Keys(w.def.Bucket.Name, contract.ManifestsPrefix(c)) {
		if v, ok := contract.RootVersion(c, k); !ok || v <= head {
			continue
		}
		b, _ := w.s3.Peek(w.def.Bucket.Name, k)
		m, err := contract.DecodeManifest(k, b)
		if err != nil {
			continue
		}
		for _, ref := range m.Parts {
			pb, ok := w.s3.Peek(w.def.Bucket.Name, ref.Key)
			if !ok {
				continue
			}
			if p, err := contract.DecodePart(ref, pb); err == nil {
				for _, o := range p.Objects {
					out[o.Key] = true
				}
			}
		}
	}
	return out
}

// rollback is an owner putting the head of c back to an older version of
// its lineage (a restore): one of the last few versions whose root and
// objects all still exist. What it reads is the truth again.
func (w *World) rollback(c string) { w.rollbackTo(c, 8, false) }

// rollbackTo restores c to an intact version among its last back versions
// (oldest: the oldest of them; else at random, often the base of the
// newest cutover).
func (w *World) rollbackTo(c string, back uint64, oldest bool) {
	col := w.cols[c]
	// Re-created lifetimes are restored too: the operator's confirmation
	// names the lifetime it answers (invariant lineage-incarnation).
	h := col.head()
	var targets []*version
	for n := h.v - min(h.v-1, back); n < h.v; n++ {
		if v := col.byVersion[n]; v != nil && w.intact(v) {
			targets = append(targets, v)
		}
	}
	if len(targets) == 0 {
		return
	}
	to := targets[w.rng.IntN(len(targets))]
	if oldest {
		to = targets[0]
	} else if w.rng.IntN(2) == 0 {
		// Often a restore undoes a rewrite: back to the base of the newest
		// cutover (its outputs are then held only by abandoned versions).
		for _, v := range slices.Backward(targets) {
			if child := col.byVersion[v.v+1]; child != nil && child.root.Origin.Kind == contract.OriginCutover {
				to = v
				break
			}
		}
	}
	w.count("rollback")
	w.logf("  owner restores %s from v%d to v%d", c, h.v, to.v)
	if _, err := w.invokeOwner(func() error { _, err := w.pub.Restore(w.ctx, c, to.v); return err }); err != nil {
		w.violate("workload", "restore of %s to v%d failed without faults: %v", c, to.v, err)
		return
	}
	w.resetExpected(c)
}

// resetExpected makes what c's restored head reads the truth again.
func (w *World) resetExpected(c string) {
	var got map[string][]byte
	if _, err := w.invokeOwner(func() error {
		var err error
		got, _, err = workload.Read(w.ctx, lineage.New(w.bucket, 64), w.bucket, c)
		return err
	}); err != nil {
		w.violate("readable", "read %s after its restore: %v", c, err)
		return
	}
	w.gen.Reset(c, got)
}

// restoreNewestCutover puts one collection's head back to the base of its
// newest version when that version is a cutover (half the seeds).
func (w *World) restoreNewestCutover() {
	if w.rng.IntN(2) == 0 {
		return
	}
	for _, c := range w.liveCollections() {
		col := w.cols[c]
		h := col.head()
		base := col.byVersion[h.root.ParentVersion]
		if h.root.Origin.Kind != contract.OriginCutover || base == nil || !w.intact(base) {
			continue
		}
		w.count("restore-after-cutover")
		w.logf("  owner restores %s from v%d to v%d (undoing the cutover)", c, h.v, base.v)
		if _, err := w.invokeOwner(func() error { _, err := w.pub.Restore(w.ctx, c, base.v); return err }); err != nil {
			w.violate("workload", "restore of %s to v%d failed: %v", c, base.v, err)
			return
		}
		w.resetExpected(c)
		return
	}
}

// intact reports whether v's root, parts and objects all exist.
func (w *World) intact(v *version) bool {
	if !w.exists(v.rootKey) {
		return false
	}
	for _, k := range append(slices.Clone(v.parts), sortedKeys(v.objects)...) {
		if !w.exists(k) {
			return false
		}
	}
	return true
}

// duringBackoff: while a GC worker waits before retrying a delete, the
// world moves on; sometimes the owner restores an older head of the very
// collection (only a retry that re-proves against the head notices).
func (w *World) duringBackoff(c string) {
	inv := w.top()
	if inv == nil || !inv.faults || w.quiet || w.cols[c] == nil || w.cols[c].tombstoned || w.rng.IntN(3) == 0 {
		return
	}
	if len(w.stack) > 1 {
		// This worker runs nested inside another invocation's call (a
		// takeover while that one's DeleteObjects is in flight): a restore
		// now would race a delete already sent on a fresh proof, the
		// window rule 14 bounds and no check can close. Restores race
		// retries, not requests in flight.
		return
	}
	w.count("rollback-during-backoff")
	w.logf("   >> while %s backs off:", inv.name)
	w.rollbackTo(c, math.MaxUint64, w.rng.IntN(2) == 0) // often far back: what GC is trimming
}

// operatorConfirms answers a head regression the way an operator runs
// `bcc confirm-lineage` after the alarm: it records that the current
// head's lineage is the truth and that the roots above the head and the
// highest head the coordinator observed (unless it is the head's own
// lineage) are abandoned. The operator knows a restore happened; what it
// records does not depend on what GC saw.
func (w *World) operatorConfirms(c string) {
	col := w.cols[c]
	if col == nil || len(col.abandoned) == 0 {
		return
	}
	h := col.head()
	pl := gc.Plan{Collection: c, Incarnation: col.inc, HeadVersion: h.v, HeadChecksum: h.checksum, RootsAbove: []string{}}
	for _, k := range w.s3.Keys(w.def.Bucket.Name, contract.ManifestsPrefix(c)) {
		// Every root of the lifetime above the head, and every abandoned
		// one the new lineage has passed.
		if inc, v, ok := contract.RootOf(c, k); ok && inc == col.inc && (v > h.v || col.abandoned[k]) {
			pl.RootsAbove = append(pl.RootsAbove, k)
		}
	}
	if st, err := w.state.Get(w.ctx, c, col.inc); err == nil && st.Version != 0 {
		pl.HighestObserved, pl.HighestObservedChecksum = st.Version, st.Checksum
		if v := col.byVersion[st.UnverifiedFromVersion]; st.UnverifiedFromVersion > 0 && (v == nil || v.checksum != st.UnverifiedFromChecksum || col.abandoned[v.rootKey]) &&
			!(st.Version > h.v) {
			// The observer advanced over a gap from a head the lineage
			// abandoned: that head is the one to name.
			pl.HighestObserved, pl.HighestObservedChecksum = st.UnverifiedFromVersion, st.UnverifiedFromChecksum
		}
	}
	conf, ok := gc.ConfirmationFor(pl, "sim-operator", "", time.UnixMilli(w.t))
	if !ok {
		return
	}
	if err := w.memory().ConfirmLineage(w.ctx, conf); err != nil {
		w.violate("workload", "the operator's lineage confirmation of %s failed without faults: %v", c, err)
		return
	}
	w.recordConfirmation(conf)
	w.count("lineage-confirmed")
	w.logf("  operator confirms %s incarnation %d: head v%d is the truth; abandoned roots %v, observed head v%d", c, col.inc, h.v, conf.AbandonedRoots, conf.AbandonedHeadVersion)
	w.checkLineageOf(c)
}

// invokeOwner runs an owner's or the workload's action: no faults, no
// nesting, the true clock.
func (w *World) invokeOwner(fn func() error) (bool, error) {
	w.stack = append(w.stack, &invocation{name: "owner"})
	defer func() { w.stack = w.stack[:len(w.stack)-1] }()
	return false, fn()
}

func (w *World) openReader(c string) {
	col := w.cols[c]
	h := col.head()
	r := reader{c: c, v: h.v, ver: h, openedAt: w.t, till: w.t + w.pol.GC.TokenLifetime.Ms()}
	w.readers = append(w.readers, r)
	w.count("reader-opened")
	w.logf("  reader opens %s v%d until +%.1fm", c, h.v, float64(r.till-startMs)/60000)
}

func (w *World) readerRead() {
	w.expireReaders()
	if len(w.readers) == 0 {
		return
	}
	r := w.readers[w.rng.IntN(len(w.readers))]
	v := r.ver
	keys := sortedKeys(v.objects)
	if len(keys) == 0 {
		return
	}
	k := keys[w.rng.IntN(len(keys))]
	w.count("reader-reads")
	if !w.exists(k) {
		w.violate("pinned-delete", "reader of %s v%d cannot read %s", r.c, r.v, k)
	}
}

func (w *World) expireReaders() {
	w.readers = slices.DeleteFunc(w.readers, func(r reader) bool { return r.till <= w.t })
}

// safeTs is the query plane's true global_safe_ts: no live reader is older.
func (w *World) safeTs() int64 {
	w.expireReaders()
	s := w.t - w.rng.Int64N(30_000)
	for _, r := range w.readers {
		s = min(s, r.openedAt)
	}
	return s
}

func (w *World) publishWatermark(safe int64) {
	b, _ := contract.Encode(contract.Watermark{SchemaVersion: contract.SchemaVersion, GlobalSafeTsUnixMs: safe, PublishedAtUnixMs: w.t})
	_, _ = w.invokeOwner(func() error { _, err := w.bucket.Put(w.ctx, WatermarkKey, b); return err })
}

func (w *World) watermarkAction() {
	switch x := w.rng.IntN(10); {
	case x < 6:
		s := w.safeTs()
		w.publishWatermark(s)
		w.logf("  watermark published: -%.1fm", float64(w.t-s)/60000)
	case x < 7:
		s := w.safeTs() - w.rng.Int64N(40*60_000)
		w.publishWatermark(s)
		w.count("watermark-regressed")
		w.logf("  watermark regressed: -%.1fm", float64(w.t-s)/60000)
	case x < 9:
		bodies := [][]byte{[]byte(`{"schema_version":1,"global_safe_ts_unix_ms":0}`), []byte(`not json`),
			[]byte(fmt.Sprintf(`{"schema_version":1,"global_safe_ts_unix_ms":%d,"published_at_unix_ms":1,"extra":true}`, w.t)),
			[]byte(fmt.Sprintf(`{"schema_version":9,"global_safe_ts_unix_ms":%d}`, w.t))}
		b := bodies[w.rng.IntN(len(bodies))]
		_, _ = w.invokeOwner(func() error { _, err := w.bucket.Put(w.ctx, WatermarkKey, b); return err })
		w.count("watermark-corrupt")
		w.logf("  watermark corrupted: %s", b)
	default:
		_, _ = w.invokeOwner(func() error { return w.bucket.Delete(w.ctx, WatermarkKey) })
		w.count("watermark-deleted")
		w.logf("  watermark deleted")
	}
}

func (w *World) wipe() {
	if err := w.ddb.Clear(w.def.Table.Name); err != nil {
		panic(err)
	}
	w.count("wipe")
	w.logf("  coordinator state wiped (observed state + leases)")
}

func (w *World) tombstone(c string) {
	col := w.cols[c]
	f := w.ccs.facts[c]
	// The name stays reserved 0..45 minutes after the drop: a release
	// before the horizon is a violation (guard release_horizon).
	reserve := int64(w.rng.IntN(4)) * 15 * 60000
	f.Tombstoned, f.TombstonedAtUnixMs, f.ReservationHorizonUnixMs = true, w.t, w.t+reserve
	if w.rng.IntN(2) == 0 {
		// Dropped with a lifecycle retention longer than the token
		// lifetime and the retention window: the cleanup must wait for it
		// (guard dropped_retention, invariant lifecycle-retention).
		f.Lifecycle.RetentionMs = (time.Duration(30+w.rng.IntN(60)) * time.Minute).Milliseconds()
		w.count("tombstone-retention")
	}
	f = w.ccs.put(f)
	col.tombstoned, col.horizon = true, w.t
	w.count("tombstone")
	w.logf("  CCS tombstones %s (facts v%d, reserved for %dm, retention_ms %d)", c, f.FactsVersion, reserve/60000, f.Lifecycle.RetentionMs)
}

// retombstone: CCS replaces c's tombstone by a newer one (a drop after
// an un-drop): a cleanup of the old tombstone must not release the name.
func (w *World) retombstone(c string) {
	col := w.cols[c]
	f := w.ccs.facts[c]
	f.TombstonedAtUnixMs, f.ReservationHorizonUnixMs = w.t, w.t+int64(w.rng.IntN(4))*15*60000
	f = w.ccs.put(f)
	col.horizon = w.t
	w.count("tombstone-replaced")
	w.logf("  CCS replaces the tombstone of %s (facts v%d, horizon now)", c, f.FactsVersion)
}

// factsChangeInFlight: CCS changes the facts of a collection whose
// completion waits for the handoff (the executor reported; the cutover or
// release is still to come): a tombstone or a new transition policy under
// a rewrite, a newer tombstone under a cleanup.
func (w *World) factsChangeInFlight() {
	msgs := w.sqs.Messages(w.urls[resources.QueueHandoff])
	if len(msgs) == 0 {
		return
	}
	c, err := contract.DecodeCompletion("sim", msgs[w.rng.IntN(len(msgs))].Body)
	if err != nil || w.cols[c.Collection] == nil {
		return
	}
	w.count("facts-change-in-flight")
	w.logf("  while %s's %s completion waits for the handoff:", c.Collection, c.Kind)
	w.factsChangeFor(c.Collection)
}

// factsChangeFor changes what c's results depend on: a tombstone (or a
// newer one), or the transition policy.
func (w *World) factsChangeFor(c string) {
	switch {
	case w.cols[c].tombstoned:
		w.retombstone(c)
	case len(w.liveCollections()) > 1 && w.rng.IntN(3) == 0:
		w.tombstone(c)
	default:
		f := w.ccs.facts[c]
		f.Lifecycle = w.transitionPolicy(f.Lifecycle)
		f = w.ccs.put(f)
		w.count("facts-changed")
		w.logf("  CCS facts of %s -> v%d (transition after %dms to %q)", c, f.FactsVersion, f.Lifecycle.TransitionAfterMs, f.Lifecycle.TransitionToTier)
	}
}

func (w *World) changeFacts(c string) {
	f := w.ccs.facts[c]
	if w.rng.IntN(2) == 0 {
		if f.Lifecycle.RetentionMs == 0 {
			f.Lifecycle.RetentionMs = (20 * time.Minute).Milliseconds()
		} else {
			f.Lifecycle.RetentionMs = 0
		}
	} else {
		f.Lifecycle = w.transitionPolicy(f.Lifecycle)
	}
	f = w.ccs.put(f)
	w.count("facts-changed")
	w.logf("  CCS facts of %s -> v%d (retention_ms %d, transition after %dms to %q)", c, f.FactsVersion, f.Lifecycle.RetentionMs,
		f.Lifecycle.TransitionAfterMs, f.Lifecycle.TransitionToTier)
}

// transitionPolicy switches a lifecycle tier transition off, or on with a
// random age and target tier (objects start hot; a later change may move
// them on to another tier, or back).
func (w *World) transitionPolicy(lc contract.Lifecycle) contract.Lifecycle {
	if lc.TransitionAfterMs > 0 && w.rng.IntN(3) == 0 {
		lc.TransitionAfterMs, lc.TransitionToTier = 0, ""
		return lc
	}
	lc.TransitionAfterMs = (time.Duration(1+w.rng.IntN(30)) * time.Minute).Milliseconds()
	lc.TransitionToTier = []string{contract.TierWarm, contract.TierCold, contract.TierHot}[w.rng.IntN(3)]
	return lc
}

func (w *World) advance(d time.Duration) {
	w.t += d.Milliseconds()
}

func (w *World) pick(xs []string) string { return xs[w.rng.IntN(len(xs))] }

// ---------------------------------------------------------------------------
// The scheduler.

type action struct {
	weight int
	name   string
	run    func()
}

func (w *World) stepActions() []action {
	live := w.liveCollections()
	acts := []action{
		{14, "deliver", func() {
			if len(w.notes) == 0 {
				return
			}
			i := 0
			if w.rng.IntN(3) == 0 {
				i = w.rng.IntN(len(w.notes))
				if i > 0 {
					w.count("notify-reordered")
				}
			}
			w.deliver(i, false)
		}},
		{2, "duplicate-notification", func() {
			if len(w.notes) > 0 {
				w.count("notify-duplicated")
				w.deliver(w.rng.IntN(len(w.notes)), true)
			}
		}},
		{3, "drop-notification", func() {
			if len(w.notes) > 0 {
				i := w.rng.IntN(len(w.notes))
				w.logf("  notification %d for %s dropped", w.notes[i].seq, w.notes[i].key)
				w.notes = slices.Delete(w.notes, i, i+1)
				w.count("notify-dropped")
			}
		}},
		{6, "reconcile", w.reconcile},
		{10, "consume-compaction", func() { w.consume(resources.QueueCompaction) }},
		{8, "consume-gc", func() { w.consume(resources.QueueGC) }},
		{10, "consume-handoff", func() {
			if w.ownerDown == "" { // during an outage completions gather (outage-handoff)
				w.consume(resources.QueueHandoff)
			}
		}},
		{4, "outage-handoff", func() {
			// During an outage: let the failed records come back (their
			// visibility timeout passes) and take a batch, which then
			// mixes the down collection with others when they have
			// completions waiting.
			if w.ownerDown == "" {
				return
			}
			for range 3 {
				w.consume(resources.QueueCompaction)
			}
			if t := w.sqs.NextVisible(w.urls[resources.QueueHandoff]).UnixMilli(); t > w.t {
				w.advance(time.Duration(t-w.t) * time.Millisecond)
			}
			w.consume(resources.QueueHandoff)
		}},
		{2, "owner-outage", func() {
			switch {
			case w.ownerDown != "":
				w.logf("  the publisher is reachable again for %s", w.ownerDown)
				w.ownerDown = ""
			case len(live) > 0:
				w.ownerDown = w.pick(live)
				w.count("owner-outage")
				w.logf("  the publisher is unreachable for %s", w.ownerDown)
			}
		}},
		{2, "duplicate-message", func() {
			class := w.pick([]string{resources.QueueCompaction, resources.QueueGC, resources.QueueHandoff})
			if n := w.sqs.Len(w.urls[class]); n > 0 {
				id := w.sqs.Duplicate(w.urls[class], w.rng.IntN(n))
				w.count("sqs-duplicated")
				w.logf("  %s message duplicated as %s", class, id)
			}
		}},
		{12, "advance", func() {
			var d time.Duration
			switch x := w.rng.IntN(10); {
			case x < 4:
				d = time.Duration(w.rng.IntN(30)+1) * time.Second
			case x < 7:
				d = w.pol.LeaseDuration.D() + time.Duration(w.rng.IntN(120))*time.Second
			default:
				d = time.Duration(5+w.rng.IntN(20)) * time.Minute
			}
			w.advance(d)
			w.logf("  time advances %s", d)
		}},
		{2, "wipe", w.wipe},
		{8, "watermark", w.watermarkAction},
		{3, "watermark-stall", func() { w.count("watermark-stalled") }},
		{4, "reader-read", w.readerRead},
		{3, "publisher-applies-late", w.applyQueuedCutover},
		{8, "facts-change-in-flight", w.factsChangeInFlight},
		{1, "namespace-dropped-empty", w.dropEmptyNamespace},
	}
	if len(live) > 0 {
		acts = append(acts,
			action{20, "append", func() {
				c := w.pick(live)
				w.logf("  workload appends to %s", c)
				w.appendTo(c)
			}},
			action{4, "reader-open", func() { w.openReader(w.pick(live)) }},
			action{1, "facts-change", func() { w.changeFacts(w.pick(live)) }},
			action{2, "foreign-upload", func() { w.foreignUpload(w.pick(live)) }},
			action{1, "rollback", func() { w.rollback(w.pick(live)) }},
			action{2, "operator-confirms", func() { w.operatorConfirms(w.pick(live)) }},
			action{2, "foreign-commit", func() { w.foreignCommit(false) }},
		)
		if len(w.colNames) > 1 {
			acts = append(acts, action{1, "tombstone", func() { w.tombstone(w.pick(live)) }})
		}
		if w.forging() {
			acts = append(acts, action{2, "forge-completion", func() { w.forgeCompletion(w.pick(live)) }})
		}
	}
	if dropped := w.tombstonedCollections(); len(dropped) > 0 {
		acts = append(acts, action{1, "tombstone-replaced", func() { w.retombstone(w.pick(dropped)) }})
	}
	if released := w.recreatable(); len(released) > 0 {
		acts = append(acts, action{4, "recreate", func() { w.recreate(w.pick(released)) }})
	}
	if len(w.held) > 0 {
		acts = append(acts, action{3, "deliver-held", func() { w.redeliverHeld(w.rng.IntN(len(w.held))) }})
	}
	if len(w.lateConfs) > 0 {
		acts = append(acts, action{2, "late-confirmation", w.recordLateConfirmation})
	}
	return acts
}

func (w *World) choose(acts []action) action {
	total := 0
	for _, a := range acts {
		total += a.weight
	}
	x := w.rng.IntN(total)
	for _, a := range acts {
		if x < a.weight {
			return a
		}
		x -= a.weight
	}
	return acts[len(acts)-1]
}

// nested runs another actor's step in the middle of outer's port call.
func (w *World) nested(outer *invocation, op, key string) {
	w.count("nested-action")
	live := w.liveCollections()
	acts := []action{
		{4, "advance", func() {
			d := time.Duration(w.rng.IntN(20)+1) * time.Second
			w.advance(d)
			w.logf("   >> inside %s at %s %s: time advances %s", outer.name, op, key, d)
		}},
		{4, "lease-expiry", func() {
			d := w.pol.LeaseDuration.D() + time.Duration(w.rng.IntN(60))*time.Second
			w.advance(d)
			w.count("lease-expiry-mid-task")
			w.logf("   >> inside %s at %s %s: time advances %s (lease expires)", outer.name, op, key, d)
		}},
		{2, "wipe", func() { w.logf("   >> inside %s at %s %s:", outer.name, op, key); w.wipe() }},
		{2, "watermark", func() { w.logf("   >> inside %s at %s %s:", outer.name, op, key); w.watermarkAction() }},
		{2, "reconcile", func() { w.logf("   >> inside %s at %s %s:", outer.name, op, key); w.reconcile() }},
		{2, "deliver", func() {
			if len(w.notes) > 0 {
				w.logf("   >> inside %s at %s %s:", outer.name, op, key)
				w.deliver(w.rng.IntN(len(w.notes)), false)
			}
		}},
		{3, "consume-gc", func() { w.logf("   >> inside %s at %s %s:", outer.name, op, key); w.consume(resources.QueueGC) }},
		{2, "consume-compaction", func() {
			w.logf("   >> inside %s at %s %s:", outer.name, op, key)
			w.consume(resources.QueueCompaction)
		}},
	}
	if outer.queue != "" {
		acts = append(acts, action{4, "takeover", func() {
			q, _ := w.def.Queue(outer.queue)
			if outer.noHeadMoves && outer.queue == resources.QueueHandoff {
				return
			}
			d := q.VisibilityTimeout + time.Duration(w.rng.IntN(30)+1)*time.Second
			w.advance(d)
			w.count("takeover")
			w.logf("   >> inside %s at %s %s: time advances %s; another worker receives from %s", outer.name, op, key, d, outer.queue)
			w.consume(outer.queue)
		}})
	}
	if !outer.noHeadMoves {
		if len(live) > 0 {
			acts = append(acts, action{8, "append", func() {
				c := w.pick(live)
				w.count("concurrent-append")
				w.logf("   >> inside %s at %s %s: workload appends to %s", outer.name, op, key, c)
				w.appendTo(c)
			}})
		}
		acts = append(acts, action{2, "consume-handoff", func() {
			w.logf("   >> inside %s at %s %s:", outer.name, op, key)
			w.consume(resources.QueueHandoff)
		}})
	}
	if len(live) > 0 {
		acts = append(acts, action{2, "reader-open", func() { w.logf("   >> inside %s:", outer.name); w.openReader(w.pick(live)) }})
	}
	w.choose(acts).run()
}

// ---------------------------------------------------------------------------
// Setup, the faulty phase, the quiescent phase and convergence.

func (w *World) setup() {
	n := 1 + w.rng.IntN(3)
	for i := range n {
		c := fmt.Sprintf("c%d", i)
		var lc contract.Lifecycle
		if w.rng.IntN(2) == 0 {
			lc.RetentionMs = (time.Duration(20+w.rng.IntN(30)) * time.Minute).Milliseconds()
		}
		if w.rng.IntN(3) == 0 {
			lc = w.transitionPolicy(lc)
		}
		w.ccs.put(contract.CollectionFacts{Collection: c, Lifecycle: lc})
		w.colNames = append(w.colNames, c)
		_, err := w.invokeOwner(func() error { return w.gen.Create(w.ctx, c, lc) })
		if err != nil {
			panic(err)
		}
	}
	w.publishWatermark(w.t)
	w.logf("setup: %d collections, fault rate %.2f, nest rate %.2f, guards %+v", n, w.faultRate, w.nestRate, w.cfg.Guards)
}

func (w *World) run() {
	w.setup()
	for w.step = 1; w.step <= w.cfg.Steps && len(w.violations) == 0; w.step++ {
		w.advance(time.Duration(w.rng.IntN(20_000)) * time.Millisecond)
		a := w.choose(w.stepActions())
		w.logf("%s", a.name)
		a.run()
		w.StepsRun++
		if len(w.violations) == 0 {
			w.checkStep()
		}
	}
	if len(w.violations) > 0 {
		return
	}
	w.quiesce()
}

// quiesce stops every fault and drives the system until debt converges:
// time passes every horizon, the watermark is current, notifications are
// delivered, reconciliation runs and every queue drains.
func (w *World) quiesce() {
	w.quiet = true
	w.ownerDown = ""
	w.logf("quiescent phase: faults stop")
	for _, c := range w.colNames {
		w.operatorConfirms(c) // the head_regression alarm has been answered
	}
	for range len(w.uploads) / 2 {
		w.foreignCommit(true)
	}
	if live := w.liveCollections(); steadyWrites(w.cfg.Seed) && len(live) > 0 {
		w.steadyCol = live[0]
	}

	for round := 0; round < 10 && len(w.violations) == 0; round++ {
		w.round = round
		w.step++
		if round == 9 {
			// The last round comes after every due time of the previous
			// rounds' debt (commit + token lifetime + retention window is
			// 20 minutes: a cutover of round 8 is due only after a round
			// 9 twenty minutes later). Sweeps are judged by due time once
			// their records land, not at every pass.
			w.advance(20 * time.Minute)
		}
		w.advance(20 * time.Minute)
		w.expireReaders()
		w.publishWatermark(w.safeTs())
		for len(w.notes) > 0 {
			w.deliver(0, false)
		}
		// Tasks of released lifetimes arrive late, ahead of the new
		// lifetime's own (FIFO per collection).
		for i := range w.held {
			w.redeliverHeld(i)
		}
		if round == 0 && w.cfg.Seed%2 == 0 {
			w.dropEmptyNamespace() // after the faults: its release must come within releaseBound passes
		}
		w.reconcile()
		if round == 1 && bigRestores(w.cfg.Seed) {
			if live := w.liveCollections(); len(live) > 0 {
				w.bigRestore(live[len(live)-1], bigRestoreVersions(w.cfg.Seed))
			}
		}
		if round >= 1 && round <= 3 {
			// A re-created lifetime's owner restores an older head (half
			// the time, once the coordinator observed the newer one) and
			// the operator answers the regression for that lifetime:
			// whatever an earlier lifetime of the name confirmed must not
			// answer it, and its own confirmation touches nothing else
			// (invariant lineage-incarnation).
			for _, c := range w.liveCollections() {
				if w.cols[c].inc > 1 && w.rng.IntN(2) == 0 {
					w.rollback(c)
					w.operatorConfirms(c)
				}
			}
		}
		switch round {
		case 2:
			// An owner undoes a rewrite that landed since the faults
			// stopped (its outputs are old enough to be reclaimed as
			// never-committed by a GC that missed the regression).
			w.restoreNewestCutover()
		case 3:
			for _, c := range w.colNames {
				w.operatorConfirms(c)
			}
			for len(w.lateConfs) > 0 {
				w.recordLateConfirmation()
			}
		}
		if round <= 1 {
			// The publisher works through what it queued (a slow one still
			// queues in round 0), after a GC round, 20 minutes later: late,
			// maybe not too late.
			for i := 0; i < 50 && w.consume(resources.QueueGC); i++ {
			}
			for len(w.queued) > 0 {
				w.applyQueuedCutover()
			}
		}
		w.drain()
		if round <= 3 {
			// A re-created lifetime is dropped in its turn (half the
			// time): the old lifetime's late cleanup tasks then meet a
			// tombstoned name of another incarnation.
			for _, c := range w.liveCollections() {
				if w.cols[c].inc > 1 && w.rng.IntN(2) == 0 {
					w.tombstone(c)
				}
			}
		}
		if round <= 4 { // rounds 5..9 are left for the new lifetime to converge
			// A released name is created again (its next incarnation) and
			// written to: compaction and GC debt for the late tasks of
			// the old lifetime to meet.
			for _, c := range w.recreatable() {
				w.recreate(c)
				for range 3 {
					w.appendTo(c)
				}
			}
		}
		if splitsTiers(w.cfg.Seed) {
			w.tierSplit(round)
		}
		w.StepsRun++
		if len(w.violations) == 0 {
			w.checkStep()
		}
		if len(w.violations) == 0 {
			w.checkNamespaceLiveness()
		}
		if len(w.violations) == 0 {
			w.checkDebtAge()
		}
		if len(w.violations) == 0 {
			w.checkReleaseLiveness()
		}
	}
	if len(w.violations) == 0 {
		w.checkConverged()
	}
}

func (w *World) drain() {
	classes := []string{resources.QueueReconcile, resources.QueueCompaction, resources.QueueGC, resources.QueueHandoff}
	for i := 0; i < 200 && len(w.violations) == 0; i++ {
		progressed := false
		for _, c := range classes {
			if w.consume(c) {
				progressed = true
				if w.checkStep(); len(w.violations) > 0 {
					return
				}
			}
			for len(w.notes) > 0 {
				w.deliver(0, false)
			}
		}
		if progressed {
			continue
		}
		next := int64(0)
		for _, c := range classes {
			if t := w.sqs.NextVisible(w.urls[c]).UnixMilli(); t > 0 && (next == 0 || t < next) {
				next = t
			}
		}
		if next == 0 {
			return
		}
		w.t = next
	}
}

// checkConverged is invariant (e): once faults stop, all debt converges.
func (w *World) checkConverged() {
	for _, class := range []string{resources.QueueReconcile, resources.QueueCompaction, resources.QueueGC, resources.QueueHandoff} {
		if n := w.sqs.Len(w.urls[class]); n > 0 {
			w.violate("converged", "%s queue still holds %d messages after the quiescent phase", class, n)
			return
		}
		for _, m := range w.sqs.Messages(w.dlqs[class]) {
			var err error
			switch class {
			case resources.QueueHandoff:
				_, err = contract.DecodeHandoffMessage("dlq", m.Body)
			case resources.QueueReconcile:
				_, err = contract.DecodeReconcileRequest("dlq", m.Body)
			default:
				_, err = contract.DecodeTask("dlq", m.Body)
			}
			if err != nil {
				w.violate("converged", "%s DLQ holds a malformed message: %v", class, err)
				return
			}
		}
	}
	for _, c := range w.colNames {
		col := w.cols[c]
		if col.tombstoned {
			w.checkReleased(col)
			continue
		}
		if !w.releasedOnce(c) {
			return
		}
		h := col.head()
		snap := compact.Snapshot{Collection: c, Version: h.v, Checksum: h.checksum}
		for _, k := range sortedKeys(h.objects) {
			snap.Objects = append(snap.Objects, h.objects[k])
		}
		if !col.tombstoned {
			// Compaction debt as the product models it: the observer's
			// debt of the head. Due with work left for the executor is
			// stuck work; the executor's planner may also see jobs the
			// observer's summary-based model does not trigger (counted).
			st, err := w.state.Get(w.ctx, c, col.inc)
			if err != nil {
				w.violate("converged", "read observed state of %s: %v", c, err)
				return
			}
			jobs := compact.Plan(snap, w.compactionPolicy(), time.UnixMilli(w.t))
			switch {
			case st.Version != h.v:
				w.violate("converged", "%s: observed state is v%d, the head is v%d after the quiescent phase", c, st.Version, h.v)
				return
			case st.Debt.CompactionDue && len(jobs) > 0:
				w.violate("converged", "%s v%d still has compaction due: %d jobs (%s over %d inputs)", c, h.v, len(jobs), jobs[0].Reason, len(jobs[0].Inputs))
				return
			case st.CompactionOwed(w.pol.Compaction.Fingerprint()):
				// Due by the summary, nothing to plan, and not recorded
				// idle: reconciliation re-enqueues it and signals it due at
				// every pass (invariant idle-reenqueue, at convergence).
				w.violate("idle-reenqueue", "%s v%d: compaction is owed (the summary's debt is due, no worker recorded the head idle) but the full plan is empty", c, h.v)
				return
			case st.Debt.CompactionDue:
				w.count("end-compaction-due-but-nothing-to-plan")
			case len(jobs) > 0:
				w.count("end-planner-jobs-not-due-by-observer")
			}
			// Lifecycle transition as the product models it: nothing in
			// another tier than the target is past the transition age.
			if cutoff, ok := w.ccs.facts[c].Lifecycle.TransitionCutoff(contract.SweepMinute(w.t)); ok {
				tier := w.ccs.facts[c].Lifecycle.TransitionToTier
				for _, o := range snap.Objects {
					if o.TransitionDue(tier, cutoff-time.Minute.Milliseconds()) {
						w.violate("converged", "%s v%d: %s is %s with max_ts %d, due for %s since %d", c, h.v, o.Key, o.Tier, o.MaxTsUnixMs, tier, cutoff)
						return
					}
				}
				w.count("end-transition-checked")
			}
		}
		pl, err := gc.PlanSweep(w.ctx, w.gcReadPorts(), w.gcConfig(), c, time.UnixMilli(w.t))
		if w.checkConfirmation(c, pl); len(w.violations) > 0 {
			return
		}
		if err != nil {
			w.violate("converged", "gc plan of %s: %v", c, err)
			return
		}
		// The plan proposes candidates from the lineage without checking
		// existence (a delete of a gone key is confirmed); debt is what
		// still exists.
		var live []string
		for _, cd := range pl.Delete {
			if w.exists(cd.Entry.Key) {
				live = append(live, cd.Entry.Key)
			}
		}
		trim := 0
		for _, st := range pl.Trim {
			if w.exists(st.RootKey) {
				trim++
			}
		}
		if len(live) > 0 || len(pl.Deferred) > 0 || len(pl.Orphans) > 0 || trim > 0 || pl.OrphansYoung > 0 || pl.Blocked != "" {
			w.violate("converged", "%s GC debt remains: delete=%v deferred=%v orphans=%d young=%d trim=%d blocked=%q",
				c, live, pl.DeferredByReason, len(pl.Orphans), pl.OrphansYoung, trim, pl.Blocked)
			return
		}
		// Nothing is left but the head, its root, its parts and (unless
		// tombstoned) its objects; never-committed manifests are the
		// publisher's and are only counted.
		above := w.aboveRefs(c, h.v)
		for _, k := range w.s3.Keys(w.def.Bucket.Name, contract.CollectionPrefix(c)) {
			_, inHead := h.objects[k]
			switch {
			case k == contract.HeadKey(c) || k == h.rootKey || slices.Contains(h.parts, k):
			case col.abandoned[k] && !inHead:
				// Only versions a head regression abandoned hold it: an
				// output of the coordinator's is reclaimed (unless a root
				// above the head still names it); the rest is not GC's.
				if contract.IsDataKey(c, k) && owned(c, k) && !above[k] && !col.tombstoned {
					w.violate("converged", "%s: an output only abandoned versions hold is still not reclaimed (head v%d)", k, h.v)
					return
				}
				w.count("end-abandoned-left")
			case contract.IsDataKey(c, k) && !col.committed[k] && !owned(c, k) && writtenByRewrite(c, k):
				// The product's ownership parser disowns an output its own
				// rewrite tasks wrote: judged here by the task directory the
				// executors write into, not by the parser under test.
				w.violate("converged", "%s: a rewrite task's never-committed output is not recognised as the coordinator's (leaked forever)", k)
				return
			case contract.IsDataKey(c, k) && !col.committed[k] && !owned(c, k):
				w.count("end-foreign-uploads-left") // another writer's: never GC's to delete
			case contract.IsDataKey(c, k):
				if _, ok := h.objects[k]; !ok || col.tombstoned {
					w.violate("converged", "%s still exists after the quiescent phase (head v%d)", k, h.v)
					return
				}
			case col.committed[k]:
				w.violate("converged", "committed manifest object %s still exists after the quiescent phase (head v%d)", k, h.v)
				return
			default:
				w.count("uncommitted-manifest-objects-left")
			}
		}
	}
}

// checkReleased: after the quiescent phase a dropped incarnation is
// released: its release intent is recorded and nothing of it remains but
// what GC may never delete (another writer's never-committed uploads,
// what only a head regression's abandoned versions hold).
func (w *World) checkReleased(col *collection) {
	c := col.name
	if !w.releasedOnce(c) {
		return
	}
	f := w.ccs.facts[c]
	id := contract.ReleaseIntentID(contract.CollectionReleaseIntent, c, f.Inc())
	if _, ok := w.ccs.Intents[id]; !ok {
		w.violate("converged", "tombstoned %s (incarnation %d, facts v%d) has no release intent after the quiescent phase", c, f.Inc(), f.FactsVersion)
		return
	}
	if k := w.releaseBlocker(c); k != "" {
		w.violate("converged", "released %s: %s still exists after the quiescent phase", c, k)
	}
}

// ---------------------------------------------------------------------------
// Lifetimes: drop, release, re-create.

// remember keeps a task message of c's current lifetime (a few per name)
// to deliver again after the name is re-created.
func (w *World) remember(m heldMsg, c string) {
	col := w.cols[c]
	if col == nil || m.inc != col.inc {
		return
	}
	seen := w.seen[c]
	if len(seen) < 4 {
		w.seen[c] = append(seen, m)
		return
	}
	seen[w.rng.IntN(len(seen))] = m
}

// recreatable names the dropped collections whose release intent for
// their current incarnation is recorded: CCS lets the name be created
// again.
func (w *World) recreatable() []string {
	var out []string
	for _, c := range w.tombstonedCollections() {
		f := w.ccs.facts[c]
		if _, ok := w.ccs.Intents[contract.ReleaseIntentID(contract.CollectionReleaseIntent, c, f.Inc())]; ok && f.ReleaseIntentRecorded {
			out = append(out, c)
		}
	}
	return out
}

// recreate creates the released name c again as its next incarnation:
// CCS facts with incarnation+1 (not tombstoned), then its version 1 from
// the publisher, as the workload creates a collection. The old lifetime's
// tasks stay where they are (queued, in flight, leased); some of them are
// held back and delivered again later (redeliverHeld). The sim's model of
// c starts over; what the invariants need of the old lifetime stays: its
// release intent (releasedOnce) and the keys the old lifetime left that
// are never GC's (foreign uploads stay foreign).
func (w *World) recreate(c string) {
	old := w.cols[c]
	f := w.ccs.facts[c]
	inc := f.Inc()
	if w.exists(contract.HeadKey(c)) {
		w.violate("release-dependencies", "%s incarnation %d is released but its head still exists", c, inc)
		return
	}
	w.lifetimes[c] = append(w.lifetimes[c], inc)
	if cs := w.confirmed[c][inc]; len(cs) > 0 {
		// An operator's confirmation of this lifetime, planned before the
		// drop, may still be recorded after the re-creation.
		w.lateConfs = append(w.lateConfs, cs[len(cs)-1])
	}
	for _, m := range w.seen[c] {
		if len(w.held) < 8 {
			w.held = append(w.held, m)
		}
	}
	delete(w.seen, c)
	nf := w.ccs.put(contract.CollectionFacts{Collection: c, Incarnation: inc + 1, Lifecycle: f.Lifecycle})
	w.uploads = slices.DeleteFunc(w.uploads, func(u workload.Upload) bool { return u.Collection == c })
	w.readers = slices.DeleteFunc(w.readers, func(r reader) bool { return r.c == c })
	if w.ownerDown == c {
		w.ownerDown = ""
	}
	delete(w.cols, c)
	_, err := w.invokeOwner(func() error { _, err := w.pub.CreateIncarnation(w.ctx, c, inc+1); return err })
	if err != nil || w.cols[c] == nil {
		w.cols[c] = old
		w.violate("workload", "re-create of %s as incarnation %d failed: %v", c, inc+1, err)
		return
	}
	w.gen.Reset(c, nil)
	w.unread[c] = true
	w.count("recreate")
	w.logf("  CCS re-creates %s as incarnation %d (facts v%d); %d late tasks of old lifetimes held", c, inc+1, nf.FactsVersion, len(w.held))
	if len(w.confirmed[c]) > 0 {
		w.checkLineageOf(c)
	}
}

// redeliverHeld sends the i-th held task of a released lifetime to its
// queue again (a delayed or duplicated delivery after the re-creation).
func (w *World) redeliverHeld(i int) {
	m := w.held[i]
	w.heldN++
	w.system(func() {
		_, err := w.sqs.SendMessage(w.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(w.urls[m.class]), MessageBody: aws.String(m.body),
			MessageGroupId: aws.String(m.group), MessageDeduplicationId: aws.String(fmt.Sprintf("held-%d", w.heldN))})
		if err != nil {
			panic(err)
		}
	})
	w.count("held-redelivered")
	w.logf("  a %s task of %s incarnation %d arrives late (after the re-creation)", m.class, m.group, m.inc)
}

// releasedOnce checks, for every released lifetime of c, that exactly one
// release intent was recorded for it.
func (w *World) releasedOnce(c string) bool {
	for _, inc := range w.lifetimes[c] {
		n := 0
		for _, in := range w.ccs.Intents {
			if in.Req.Collection == c && contract.Lifetime(in.Req.Incarnation) == inc {
				n++
			}
		}
		if n != 1 {
			w.violate("release-dependencies", "released %s incarnation %d has %d release intents (want exactly one)", c, inc, n)
			return false
		}
	}
	return true
}
