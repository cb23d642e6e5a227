package dashview

// Adversarial review of issue 31 (the local dashboard): each test here
// fails on main at 7686bd0 and names the defect it shows.

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localaws/sqsd"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/monitoring"
	"github.com/searchfabric/bcc/shared/resources"
)

// An alarm whose query matches no series the run emitted is OK here (and
// in CloudWatch, with missing data not breaching) for ever: the check
// "every alarm the demo should not trip is OK" cannot tell it from a
// healthy one. A renamed dimension of the observer-lag alarm's metric must
// be reported, as a renamed dimension of a widget's query is.
func TestAlarmMatchingNoSeriesIsAProblem(t *testing.T) {
	def := resources.Default("bcc")
	model := monitoring.Build(def, def.FunctionName)
	s := NewStore()
	// The observer emits its lag (as in every demo run).
	if err := s.AddEMF(func() []byte {
		r := metrics.NewFor("bcc", resources.FnObserver)
		r.Duration("ObserveLagMs", 200*time.Millisecond)
		var b bytes.Buffer
		if err := r.Flush(&b, t0); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}()); err != nil {
		t.Fatal(err)
	}
	var lag monitoring.Alarm
	for i, a := range model.Alarms {
		if a.Name == "bcc-observer-lag" {
			m := a.Metric
			m.Dims = map[string]string{metrics.DimDeployment: "bcc", "Fn": resources.FnObserver} // Function renamed
			model.Alarms[i].Metric = m
			lag = model.Alarms[i]
		}
	}
	view, err := Draw(model, s, NamesOf(def), t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range view.Problems(func(string) bool { return false }) {
		if strings.Contains(p, lag.Name) {
			return
		}
	}
	for _, a := range view.Alarms {
		if a.Alarm.Name == lag.Name {
			t.Fatalf("alarm %s with its Function dimension renamed matches no series (has data: %v), yet it is %s and the check reports nothing about it", lag.Name, a.HasData, a.State)
		}
	}
}

// CloudWatch computes no percentile for a period in which any value is
// negative (GetMetricStatistics: "Percentile statistics are not available
// for metrics when any of the metric values are negative numbers"). The
// observer's ObserveLagMs is now - the publisher's commit_ts, unclamped,
// so one skewed sample blanks the p99 widget line and the p99 alarm
// (missing data: not breaching) in CloudWatch, while the local page shows
// a value and a healthy alarm.
func TestPercentileWithNegativeValueHasNoDatapoint(t *testing.T) {
	s := NewStore()
	dims := map[string]string{metrics.DimDeployment: "bcc", metrics.DimFunction: resources.FnObserver}
	s.Put(metrics.Namespace, "ObserveLagMs", dims, t0, -3, 900_000, 900_000)
	m := monitoring.Metric{Source: monitoring.FromEMF, Name: "ObserveLagMs", Dims: dims, Stat: "p99", Period: 5 * time.Minute}
	ls, err := s.Query(m, Names{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 0 {
		t.Fatalf("p99 over a period with a negative value: local draws %+v; CloudWatch returns no datapoint", ls)
	}
}

// The live page reads the EMF lines written since its last read. When a
// line does not parse, AddEMF has already stored the lines before it, the
// offset is not advanced, and the next refresh stores them again: every
// refresh (10 s) adds another copy, and nothing after the bad line is ever
// shown.
func TestLiveStoresEachLineOnce(t *testing.T) {
	def := resources.Default("bcc")
	var mu sync.Mutex
	var out bytes.Buffer
	write := func(b []byte) { mu.Lock(); out.Write(b); mu.Unlock() }
	since := func(off int) ([]byte, int) {
		mu.Lock()
		defer mu.Unlock()
		b := out.Bytes()[off:]
		return bytes.Clone(b), off + len(b)
	}
	store := NewStore()
	live := &Live{Model: monitoring.Build(def, def.FunctionName), Store: store, Names: NamesOf(def), Now: func() time.Time { return t0.Add(time.Minute) },
		Refresh: 10 * time.Second, EMF: since, Log: discard()}
	srv := httptest.NewServer(live)
	defer srv.Close()
	get := func() {
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	write(emf(t, t0, func(r *metrics.Recorder) { r.Add("ObjectsDeleted", 4) }))
	// An EMF line CloudWatch would drop (a declared metric without its
	// member), e.g. from a function built from another revision.
	write([]byte(`{"_aws":{"Timestamp":1796126400000,"CloudWatchMetrics":[{"Namespace":"BCC","Dimensions":[["Deployment","Function"]],"Metrics":[{"Name":"Gone"}]}]},"Deployment":"bcc","Function":"gc"}` + "\n"))
	write(emf(t, t0, func(r *metrics.Recorder) { r.Add("ManifestsDeleted", 1) }))
	for range 3 {
		get()
	}
	sum := func(name string) float64 {
		var v float64
		for _, sr := range store.All() {
			if sr.Name == name && len(sr.Dims) == 2 {
				for _, p := range sr.Points {
					for _, x := range p.Values {
						v += x
					}
				}
			}
		}
		return v
	}
	if got, after := sum("ObjectsDeleted"), sum("ManifestsDeleted"); got != 4 || after != 1 {
		t.Fatalf("after 3 refreshes the store holds ObjectsDeleted %g (emitted 4) and ManifestsDeleted %g (emitted 1, after the bad line)", got, after)
	}
}

// ConcurrentExecutions is the most invocations running at one instant.
// The recorder counts every recent invocation that overlapped this one at
// any time: a long invocation during which two short ones ran one after
// the other is recorded as 3 concurrent executions; at most 2 ever ran at
// once.
func TestConcurrentExecutionsIsPeakOverlap(t *testing.T) {
	def := resources.Default("bcc")
	s := NewStore()
	r := NewRecorder(s, NamesOf(def), func() time.Time { return t0 })
	begin := time.Now()
	time.Sleep(5 * time.Millisecond)
	r.Invocation(localaws.Invocation{Function: resources.FnGC, Duration: time.Millisecond}) // A: ran [now-1ms, now]
	time.Sleep(20 * time.Millisecond)
	r.Invocation(localaws.Invocation{Function: resources.FnGC, Duration: time.Millisecond})  // B: after A ended
	r.Invocation(localaws.Invocation{Function: resources.FnGC, Duration: time.Since(begin)}) // C: spans A and B
	m := monitoring.Metric{Source: monitoring.FromFunction, Function: resources.FnGC, Name: "ConcurrentExecutions", Stat: "Maximum", Period: 5 * time.Minute}
	ls, err := s.Query(m, NamesOf(def))
	if err != nil || len(ls) != 1 {
		t.Fatalf("%v %v", ls, err)
	}
	if v := ls[0].Points[0].V; v != 2 {
		t.Fatalf("ConcurrentExecutions Maximum %g; at most 2 invocations ran at once", v)
	}
}

// make local serves the page for as long as it runs. The store keeps
// every datapoint it was ever given (the queue gauges alone: 4 per queue
// every 5 s) and every refresh clones the whole store once per query
// (Store.Query calls All). After a simulated day the store should hold a
// bounded window (CloudWatch dashboards show the last hours by default),
// not the whole day.
func TestLiveStoreIsBoundedOverALongRun(t *testing.T) {
	def := resources.Default("bcc")
	s := NewStore()
	clock := t0
	r := NewRecorder(s, NamesOf(def), func() time.Time { return clock })
	var stats []sqsd.QueueStats
	for _, q := range def.Queues {
		stats = append(stats, sqsd.QueueStats{Name: q.Name}, sqsd.QueueStats{Name: q.DLQName})
	}
	stats = append(stats, sqsd.QueueStats{Name: def.Bucket.NotifyFailureQueue})
	for ; clock.Before(t0.Add(24 * time.Hour)); clock = clock.Add(5 * time.Second) {
		r.Queues(stats)
	}
	points := 0
	for _, sr := range s.All() {
		points += len(sr.Points)
	}
	// A 3-hour window at one sample per 5 s, with a quarter's slack.
	bound := len(stats) * 4 * int(3*time.Hour/(5*time.Second)) * 5 / 4
	if points > bound {
		t.Fatalf("after a day of make local the store holds %d datapoints (bound for a 3 h window with slack: %d), and each refresh copies them once per query of %d widgets",
			points, bound, len(monitoring.Build(def, def.FunctionName).Widgets()))
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The store claims to ingest EMF "as CloudWatch Logs does", but takes a
// line CloudWatch extracts nothing from: an array of more than 100 values
// (the EMF limit). The page then shows ObjectsDeleted and GCBudgetWaitMs
// that the deployed dashboard would not.
func TestEMFLineOverTheArrayLimitYieldsNoMetrics(t *testing.T) {
	vals := make([]float64, 150)
	for i := range vals {
		vals[i] = 20
	}
	line := map[string]any{"Deployment": "bcc", "Function": resources.FnGC, "GCBudgetWaitMs": vals, "ObjectsDeleted": 150000,
		"_aws": map[string]any{"Timestamp": t0.UnixMilli(), "CloudWatchMetrics": []any{map[string]any{"Namespace": metrics.Namespace,
			"Dimensions": [][]string{{"Deployment", "Function"}},
			"Metrics":    []any{map[string]string{"Name": "GCBudgetWaitMs", "Unit": "Milliseconds"}, map[string]string{"Name": "ObjectsDeleted", "Unit": "Count"}}}}}}
	raw, err := json.Marshal(line)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore()
	_ = s.AddEMF(append(raw, '\n')) // an error naming the line is fine; stored metrics are not
	if n := len(s.All()); n != 0 {
		t.Fatalf("a line with a 150-value array (CloudWatch extracts nothing from it) made %d series locally", n)
	}
}
