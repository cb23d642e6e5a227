package dashview

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/monitoring"
	"github.com/searchfabric/bcc/shared/resources"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// emf writes the lines a deployed function's recorder flushes.
func emf(t *testing.T, at time.Time, record func(r *metrics.Recorder)) []byte {
	t.Helper()
	r := metrics.NewFor("bcc", resources.FnGC)
	record(r)
	var b bytes.Buffer
	if err := r.Flush(&b, at); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The store follows CloudWatch's identity of a metric: an EMF line that
// declares a metric on (Deployment, Function) and (Deployment, Function,
// Reason) makes two series; a single-metric query selects the exact set
// only, a SEARCH every set carrying its values, a schema SEARCH only its
// exact dimension names.
func TestQueriesSelectSeriesAsCloudWatchDoes(t *testing.T) {
	s := NewStore()
	if err := s.AddEMF(emf(t, t0, func(r *metrics.Recorder) {
		r.AddDim("GCDeferred", "Reason", "pinned_manifest", 3)
		r.AddDim("GCTasksRun", monitoring.DimKind, "gc", 1)
		r.Add("ObjectsDeleted", 5)
	})); err != nil {
		t.Fatal(err)
	}
	n := NamesOf(resources.Default("bcc"))
	count := func(m monitoring.Metric) (int, float64) {
		ls, err := s.Query(m, n)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, l := range ls {
			for _, p := range l.Points {
				sum += p.V
			}
		}
		return len(ls), sum
	}
	base := map[string]string{metrics.DimDeployment: "bcc", metrics.DimFunction: resources.FnGC}
	for _, tc := range []struct {
		name  string
		m     monitoring.Metric
		lines int
		sum   float64
	}{
		{"exact set", monitoring.Metric{Source: monitoring.FromEMF, Name: "GCDeferred", Dims: base, Stat: "Sum", Period: time.Minute}, 1, 3},
		{"exact set of another deployment", monitoring.Metric{Source: monitoring.FromEMF, Name: "GCDeferred",
			Dims: map[string]string{metrics.DimDeployment: "other", metrics.DimFunction: resources.FnGC}, Stat: "Sum", Period: time.Minute}, 0, 0},
		{"search: every set", monitoring.Metric{Source: monitoring.FromSearch, Name: "GCDeferred", Dims: map[string]string{metrics.DimDeployment: "bcc"}, Stat: "Sum", Period: time.Minute}, 2, 6},
		{"schema search: Kind sets only", monitoring.Metric{Source: monitoring.FromSearchKind, Name: "GCTasksRun", Dims: map[string]string{metrics.DimDeployment: "bcc"},
			Schema: []string{metrics.DimDeployment, metrics.DimFunction, monitoring.DimKind}, Stat: "Sum", Period: time.Minute}, 1, 1},
		{"schema search: a metric without Kind", monitoring.Metric{Source: monitoring.FromSearchKind, Name: "ObjectsDeleted", Dims: map[string]string{metrics.DimDeployment: "bcc"},
			Schema: []string{metrics.DimDeployment, metrics.DimFunction, monitoring.DimKind}, Stat: "Sum", Period: time.Minute}, 0, 0},
	} {
		if lines, sum := count(tc.m); lines != tc.lines || sum != tc.sum {
			t.Errorf("%s: %d lines summing %g, want %d summing %g", tc.name, lines, sum, tc.lines, tc.sum)
		}
	}
}

// Statistics are taken per period (aligned to the epoch) over every value
// published in it, EMF value arrays included.
func TestStatisticsPerPeriod(t *testing.T) {
	s := NewStore()
	for i, at := range []time.Time{t0, t0.Add(10 * time.Second), t0.Add(70 * time.Second)} {
		s.Put(metrics.Namespace, "LagMs", map[string]string{"Function": "observer"}, at, float64(10*(i+1)), float64(100*(i+1)))
	}
	m := monitoring.Metric{Source: monitoring.FromEMF, Name: "LagMs", Dims: map[string]string{"Function": "observer"}, Period: time.Minute}
	for stat, want := range map[string][]float64{"Sum": {330, 330}, "Maximum": {200, 300}, "p50": {20, 30}, "SampleCount": {4, 2}, "Average": {82.5, 165}} {
		m.Stat = stat
		ls, err := s.Query(m, Names{})
		if err != nil || len(ls) != 1 || len(ls[0].Points) != 2 || ls[0].Points[0].V != want[0] || ls[0].Points[1].V != want[1] {
			t.Errorf("%s: %+v, %v; want %v", stat, ls, err, want)
		}
	}
}

// An alarm is in ALARM when each of its last EvaluationPeriods periods
// breaches; a period without data does not breach.
func TestAlarmEvaluation(t *testing.T) {
	dims := map[string]string{"Function": "observer"}
	a := monitoring.Alarm{Name: "bcc-x", Threshold: 5, EvaluationPeriods: 3,
		Metric: monitoring.Metric{Source: monitoring.FromEMF, Name: "X", Dims: dims, Stat: "Sum", Period: time.Minute}}
	for _, tc := range []struct {
		name    string
		minutes []int // minutes with a breaching datapoint
		end     int
		state   string
		fired   bool
	}{
		{"three breaching periods", []int{0, 1, 2}, 2, StateAlarm, true},
		{"a gap breaks the run", []int{0, 1, 3}, 3, StateOK, false},
		{"fired, then quiet", []int{0, 1, 2}, 4, StateOK, true},
		{"no data", nil, 10, StateOK, false},
	} {
		s := NewStore()
		for _, m := range tc.minutes {
			s.Put(metrics.Namespace, "X", dims, t0.Add(time.Duration(m)*time.Minute), 6)
		}
		st, err := s.Evaluate(a, Names{}, t0.Add(time.Duration(tc.end)*time.Minute))
		if err != nil || st.State != tc.state || st.Fired.IsZero() == tc.fired {
			t.Errorf("%s: state %s fired %v (%v); want %s fired %v", tc.name, st.State, st.Fired, err, tc.state, tc.fired)
		}
	}
}

// The live page is drawn again on every request from the lines written so
// far.
func TestLiveDrawsWhatHasBeenEmittedSoFar(t *testing.T) {
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
	live := &Live{Model: monitoring.Build(def, def.FunctionName), Store: NewStore(), Names: NamesOf(def), Now: func() time.Time { return t0.Add(time.Minute) },
		Refresh: 10 * time.Second, EMF: since}
	srv := httptest.NewServer(live)
	defer srv.Close()
	get := func() string {
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	empty := strings.Count(get(), ">No data<")
	write(emf(t, t0, func(r *metrics.Recorder) { r.Add("ObjectsDeleted", 4) }))
	page := get()
	if n := strings.Count(page, ">No data<"); n != empty-1 || !strings.Contains(page, `http-equiv="refresh" content="10"`) {
		t.Fatalf("widgets without data: %d before, %d after a GC line (want one fewer); refresh tag present: %v", empty, n, strings.Contains(page, "refresh"))
	}
}
