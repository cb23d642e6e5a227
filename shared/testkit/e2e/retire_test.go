package e2e

import (
	"context"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/guard"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/testkit/naive"
)

// retireScene is a dropped first incarnation of c1 whose cleanup is due.
func retireScene(t *testing.T, e *gcEnv) contract.Task {
	t.Helper()
	e.create("c1", contract.Lifecycle{})
	e.add("c1", 3, 0, 0)
	facts, err := dropSeen(t, e.Env, e.ctx, "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	head, _ := e.Lineage.Head(e.ctx, "c1")
	return contract.NewTask(contract.KindTombstoneCleanup, "c1", head.Version, head.ManifestChecksum, facts.FactsVersion, e.clk.Now().UnixMilli())
}

// recreate plays a second run of the same cleanup that finished first: it
// had the publisher retire the head, the release was recorded and the name
// was re-created as incarnation 2.
func (e *gcEnv) retireAndRecreate(t *testing.T) {
	t.Helper()
	h, err := e.Lineage.Head(e.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if ans, err := e.Publisher.Retire(e.ctx, contract.NewRetireRequest(h)); err != nil || ans.Status != contract.RetireAccepted {
		t.Fatalf("the other run's retirement: %+v %v", ans, err)
	}
	f, _ := e.CCS.Facts(e.ctx, "c1")
	f.ReleaseIntentRecorded = true
	if _, err := e.CCS.PutFacts(e.ctx, f); err != nil {
		t.Fatal(err)
	}
	e.create("c1", contract.Lifecycle{})
}

// The head is retired by its owner, the publisher, fenced on the exact head
// the cleanup read: a re-creation of the name between the cleanup's read of
// the head and its retirement never loses the new incarnation's head. Two
// windows: before the read (the coordinator's check that the head names
// the dropped incarnation, guard.IncarnationFence: off, the cleanup asks
// for the head it found, the new one, and the publisher retires it), and
// between the read and the retirement (closed by the publisher's
// conditional delete on the head's ETag, whatever the guard; the old GC
// path, a plain delete after the re-read, loses the new head there).
func TestHeadRetirementRacingRecreationKeepsNewHead(t *testing.T) {
	run := func(t *testing.T, g guard.Set, window string, heads func(*gcEnv) gc.HeadRetirer) []string {
		// The publisher's own check (guard retire_tombstoned: CCS dropped
		// the head's incarnation) is a second fence behind the
		// coordinator's: off with the mutation, so what is proven is the
		// coordinator's half.
		e := startGCWith(t, nil, localenv.Options{Publisher: publisher.Options{RetireLive: !g.IncarnationFence}})
		task := retireScene(t, e)
		ports := app.GCPorts(e.Config, e.FunctionClients(resources.FnGC))
		if heads != nil {
			ports.Heads = heads(e)
		}
		cfg := gc.ConfigFrom(e.Config.Policy, g)
		ex := gc.New(ports, cfg, nil, e.clk.Now, func(ctx context.Context, d time.Duration) error { e.clk.Advance(d); return ctx.Err() },
			metrics.New(resources.FnGC), e.Log)
		hook := func() { e.retireAndRecreate(t) }
		once := func(set func(func())) {
			set(func() { set(nil); hook() })
		}
		switch window {
		case "before-read":
			once(ex.SetBeforeHeadDelete)
		case "read-to-retire":
			once(ex.SetBeforeHeadRetire)
		}
		rep, err := ex.RunTombstone(e.ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		var v []string
		if !e.exists(contract.HeadKey("c1")) {
			v = append(v, window+": the new incarnation's head was removed by the old incarnation's cleanup")
		} else if h, err := e.Lineage.Head(e.ctx, "c1"); err != nil || h.Inc() != 2 {
			t.Fatalf("head after the race: %+v %v", h, err)
		} else if rep.Progress.HeadDeleted {
			t.Fatalf("%s: the cleanup says it retired a head, the head is incarnation 2's: %+v", window, rep)
		}
		t.Logf("%s: run %s phase %s", window, rep.Outcome, rep.Phase)
		return v
	}
	bothWays(t, mustWithout("incarnation_fence"), func(t *testing.T, g guard.Set) []string {
		return append(run(t, g, "before-read", nil), run(t, g, "read-to-retire", nil)...)
	})
	// The second window is the owner's: with the guard off it still holds.
	t.Run("read_to_retire_guard_off", func(t *testing.T) {
		if v := run(t, mustWithout("incarnation_fence"), "read-to-retire", nil); len(v) > 0 {
			t.Fatal(v)
		}
	})
	// And it is a real window: the old path (re-read, then a plain delete)
	// deletes the new head in it.
	t.Run("plain_delete_loses_the_new_head", func(t *testing.T) {
		plain := func(e *gcEnv) gc.HeadRetirer { return naive.PlainHeadDelete{Bucket: e.Bucket} }
		if v := run(t, guardsOn, "read-to-retire", plain); len(v) == 0 {
			t.Fatal("a plain delete after the re-read kept the new head: the test does not reach the window")
		}
	})
}

// A retirement is idempotent per request id and recognises its own applied
// delete: the stack applies the publisher's conditional delete of the head
// and answers 500, the SDK resends it and meets the missing key (404); the
// publisher reads the head again, finds none and answers accepted. The
// cleanup counts the head retired once; the same request sent again is
// accepted again and removes nothing; sent again after the name was
// re-created it is a conflict naming incarnation 2, and the new head stays.
func TestHeadRetirementIsIdempotentAndRecognisesItsOwnDelete(t *testing.T) {
	e := startGC(t, nil)
	task := retireScene(t, e)
	head, _ := e.Lineage.Head(e.ctx, "c1")
	fault := e.Stack.InjectFault(localaws.Fault{Service: "s3", Operation: "DeleteObject", Internal: true, Mode: localaws.ApplyThenFail,
		Match: func(r *http.Request, _ []byte) bool {
			return r.Header.Get("If-Match") != "" && strings.HasSuffix(r.URL.Path, contract.HeadKey("c1"))
		}})
	ex, m := e.executor(guardsOn, nil)
	rep, err := ex.RunTombstone(e.ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	if fault.Hits() != 1 {
		t.Fatalf("the fault struck %d times, want 1 (the publisher's conditional delete of the head)", fault.Hits())
	}
	if e.exists(contract.HeadKey("c1")) || !rep.Progress.HeadDeleted || rep.Phase != gc.PhaseWaiting && rep.Phase != gc.PhaseDone {
		t.Fatalf("after a retirement whose answer was lost: head exists %v, %+v", e.exists(contract.HeadKey("c1")), rep)
	}
	if n := m.Counts()["TombstoneHeadsRetired"]; n != 1 {
		t.Fatalf("TombstoneHeadsRetired %v, want 1", n)
	}
	// The same request again, signed as the GC function: accepted, nothing removed.
	pub := app.PublisherClient(e.Config, e.FunctionClients(resources.FnGC))
	req := contract.NewRetireRequest(head)
	if ans, err := pub.Retire(e.ctx, req); err != nil || ans.Status != contract.RetireAccepted {
		t.Fatalf("resent retirement: %+v %v", ans, err)
	}
	// After a re-creation the old request finds another lifetime's head.
	f, _ := e.CCS.Facts(e.ctx, "c1")
	f.ReleaseIntentRecorded = true
	if _, err := e.CCS.PutFacts(e.ctx, f); err != nil {
		t.Fatal(err)
	}
	e.create("c1", contract.Lifecycle{})
	ans, err := pub.Retire(e.ctx, req)
	if err != nil || ans.Status != contract.RetireConflict || ans.HeadIncarnation != 2 || ans.HeadVersion != 1 {
		t.Fatalf("old retirement after the re-creation: %+v %v", ans, err)
	}
	if h, err := e.Lineage.Head(e.ctx, "c1"); err != nil || h.Inc() != 2 {
		t.Fatalf("new head after the old request: %+v %v", h, err)
	}
	// A request that is not the identity of its fields is refused outright.
	bad := req
	bad.Incarnation = 2
	if _, err := pub.Retire(e.ctx, bad); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("a request whose id does not match its fields: %v, want refused with 400", err)
	}
	if h, err := e.Lineage.Head(e.ctx, "c1"); err != nil || h.Inc() != 2 {
		t.Fatalf("new head after a malformed request: %+v %v", h, err)
	}
}
