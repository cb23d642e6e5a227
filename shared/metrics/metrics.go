package metrics

import (
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Namespace of every coordinator metric.
const Namespace = "BCC"

// Dimension names every line carries.
const (
	DimDeployment = "Deployment" // the deployment's name (resources.EnvDeployment): two stacks in one account never mix
	DimFunction   = "Function"
)

// Recorder accumulates counters keyed by metric name and one optional
// dimension value.
type Recorder struct {
	mu         sync.Mutex
	deployment string
	function   string
	counts     map[key]float64
	timings    map[key][]float64 // milliseconds, flushed as EMF value arrays
}

type key struct{ name, dimName, dimValue string }

// New returns a recorder for one function with no deployment dimension
// (tests and tools; deployed functions use NewFor).
func New(function string) *Recorder { return NewFor("", function) }

// NewFor returns a recorder for one function of one deployment: every
// metric is declared on (Deployment, Function) [and its own dimension], so
// dashboards and alarms select exactly their deployment's series.
func NewFor(deployment, function string) *Recorder {
	return &Recorder{deployment: deployment, function: function, counts: map[key]float64{}, timings: map[key][]float64{}}
}

// Duration records one observation of a duration metric (e.g. how far the
// observer lags behind a commit). CloudWatch keeps the distribution, so
// dashboards and alarms can use p99 and max.
func (r *Recorder) Duration(name string, d time.Duration) { r.duration(key{name: name}, d) }

// DurationDim records one observation of a duration metric with one
// dimension (e.g. OldestDueAgeMs by Kind): like AddDim, the line declares
// it on the base dimensions too, so the all-values series (its Maximum:
// the oldest of any kind) can be alarmed on.
func (r *Recorder) DurationDim(name, dim, value string, d time.Duration) {
	r.duration(key{name: name, dimName: dim, dimValue: value}, d)
}

func (r *Recorder) duration(k key, d time.Duration) {
	if r == nil {
		return
	}
	// A duration measured across two clocks (a commit's time is the
	// publisher's) can come out negative; CloudWatch computes no
	// percentile of a period holding a negative value, which would blank
	// the p99 series and its alarm. Such a skew is recorded as 0.
	d = max(d, 0)
	r.mu.Lock()
	r.timings[k] = append(r.timings[k], float64(d.Microseconds())/1000)
	r.mu.Unlock()
}

// Durations returns the recorded observations of name, every dimension
// value together (for tests).
func (r *Recorder) Durations(name string) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []float64
	for _, k := range slices.SortedFunc(maps.Keys(r.timings), func(a, b key) int { return strings.Compare(a.dimValue, b.dimValue) }) {
		if k.name == name {
			out = append(out, r.timings[k]...)
		}
	}
	return out
}

// Add adds v to name.
func (r *Recorder) Add(name string, v float64) { r.add(key{name: name}, v) }

// AddDim adds v to name with one dimension (e.g. Reason=watermark).
func (r *Recorder) AddDim(name, dim, value string, v float64) {
	r.add(key{name: name, dimName: dim, dimValue: value}, v)
}

func (r *Recorder) add(k key, v float64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.counts[k] += v
	r.mu.Unlock()
}

// Counts returns the current totals as "name" or "name|dim=value".
func (r *Recorder) Counts() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]float64{}
	for k, v := range r.counts {
		n := k.name
		if k.dimName != "" {
			n += "|" + k.dimName + "=" + k.dimValue
		}
		out[n] = v
	}
	return out
}

// Total returns the total of name over every dimension value (what the
// metric's series on the base dimensions shows).
func (r *Recorder) Total(name string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t float64
	for k, v := range r.counts {
		if k.name == name {
			t += v
		}
	}
	return t
}

// Flush writes one EMF line per dimension set and resets the counters.
func (r *Recorder) Flush(w io.Writer, now time.Time) error {
	r.mu.Lock()
	counts, timings := r.counts, r.timings
	r.counts, r.timings = map[key]float64{}, map[key][]float64{}
	r.mu.Unlock()
	groups := map[string]map[string]any{}
	for k, v := range counts {
		g := k.dimName + "=" + k.dimValue
		if groups[g] == nil {
			groups[g] = map[string]any{}
		}
		groups[g][k.name] = v
	}
	for k, vs := range timings {
		g := k.dimName + "=" + k.dimValue
		if groups[g] == nil {
			groups[g] = map[string]any{}
		}
		groups[g][k.name] = vs
	}
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		// EMF: a value array MUST NOT have more than MaxValues members
		// (CloudWatch Logs rejects the document): a longer one goes on in
		// further lines of the same dimension set.
		for vals := groups[g]; len(vals) > 0; {
			line, rest := map[string]any{}, map[string]any{}
			for name, v := range vals {
				if vs, ok := v.([]float64); ok && len(vs) > MaxValues {
					line[name], rest[name] = vs[:MaxValues], vs[MaxValues:]
					continue
				}
				line[name] = v
			}
			if err := r.writeLine(w, now, g, line); err != nil {
				return err
			}
			vals = rest
		}
	}
	return nil
}

// MaxValues is the most values one EMF value array may carry.
const MaxValues = 100

func (r *Recorder) writeLine(w io.Writer, now time.Time, group string, vals map[string]any) error {
	// A metric with a dimension (e.g. GCDeferred by Reason) is also
	// declared on Function alone, so CloudWatch keeps the per-function
	// total that alarms need (alarms cannot SEARCH across dimension values).
	base := []string{DimFunction}
	line := map[string]any{DimFunction: r.function}
	if r.deployment != "" {
		base = []string{DimDeployment, DimFunction}
		line[DimDeployment] = r.deployment
	}
	dimSets := [][]string{base}
	if dimName, dimValue, _ := cut(group); dimName != "" {
		dimSets = append(dimSets, append(slices.Clone(base), dimName))
		line[dimName] = dimValue
	}
	var defs []map[string]string
	for _, name := range slices.Sorted(maps.Keys(vals)) {
		unit := "Count"
		if _, ok := vals[name].([]float64); ok {
			unit = "Milliseconds"
		}
		defs = append(defs, map[string]string{"Name": name, "Unit": unit})
		line[name] = vals[name]
	}
	line["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace": Namespace, "Dimensions": dimSets, "Metrics": defs,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func cut(g string) (string, string, bool) {
	for i := range g {
		if g[i] == '=' {
			return g[:i], g[i+1:], true
		}
	}
	return "", "", false
}
