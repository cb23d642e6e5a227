package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
)

// callLog keeps the S3 calls of the product's functions by key kind.
type callLog struct {
	mu   sync.Mutex
	on   bool
	gets map[string]int // "head", "data", "manifest"
	data map[string]int // GETs per data key
}

func (l *callLog) record(c localaws.Call) {
	if c.Service != "s3" || c.Operation != "GetObject" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.on {
		return
	}
	switch {
	case strings.HasSuffix(c.Key, contract.HeadSuffix):
		l.gets["head"]++
	case strings.Contains(c.Key, "/data/"):
		l.gets["data"]++
		l.data[c.Key]++
	default:
		l.gets["manifest"]++
	}
}

func (l *callLog) start() {
	l.mu.Lock()
	l.on, l.gets, l.data = true, map[string]int{}, map[string]int{}
	l.mu.Unlock()
}

// Issue 27: a small compaction reads each input with one GET (footer,
// index and blocks together), reads the head three times (the take, after
// planning, before reporting) and extends no lease (its work is shorter
// than the heartbeat interval: the lease it acquired is the one it
// completes). Before: 3.6 GETs per small input, about 8 head reads and two
// forced extensions per compaction.
func TestSmallCompactionRequests(t *testing.T) {
	log := &callLog{}
	// The compaction's own reads: no wait for its cutover, which no
	// handoff delivers here (that wait has its own test,
	// TestReportedRewriteHoldsItsGroupUntilItLands).
	pol := cxPolicy(4)
	pol.Compaction.ResultWait = 0
	env := cxStart(t, localenv.Options{NoDelivery: true, OnCall: log.record, Policy: pol})
	cxSetup(t, env, "c1", 4)
	task, body := cxTask(t, env, "c1")
	log.start()
	cxInvoke(t, env, resources.FnCompaction, body)
	if n := cxMetric(env, "CompletionsReported"); n != 1 {
		t.Fatalf("%v completions reported, want 1", n)
	}
	inputs := cxMetric(env, "CompactionInputObjects")
	log.mu.Lock()
	gets, perKey := log.gets, log.data
	log.mu.Unlock()
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("input %s read with %d GETs, want 1", k, n)
		}
	}
	if float64(len(perKey)) != inputs || gets["head"] > 3 {
		t.Fatalf("%d inputs read (%v merged), %d head reads (want at most 3): %v", len(perKey), inputs, gets["head"], gets)
	}
	st, ok, err := awsio.NewLeaseTable(env.Clients.Dynamo, env.Config.Table).Get(context.Background(), task.TaskID)
	if err != nil || !ok {
		t.Fatalf("lease record: %v %v", ok, err)
	}
	if d := st.Lease.LeaseExpiryUnixMs - st.Lease.AcquiredAtUnixMs; d != env.Config.Policy.LeaseDuration.Ms() {
		t.Fatalf("lease expiry %d ms after its acquisition, want the acquired duration %d ms (no extension)", d, env.Config.Policy.LeaseDuration.Ms())
	}
	t.Logf("small compaction of %v inputs: GETs %v", inputs, gets)
}
