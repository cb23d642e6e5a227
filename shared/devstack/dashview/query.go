package dashview

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/monitoring"
	"github.com/searchfabric/bcc/shared/resources"
)

// Names resolves the model's logical names (queue classes, functions) to
// the physical names the series carry, as the CDK app resolves them to its
// constructs.
type Names struct {
	Prefix         string
	Queue          map[string]string // class -> queue name
	DLQ            map[string]string // class -> DLQ name
	NotifyFailures string
	Function       map[string]string // function -> function name
}

// NamesOf is the names of deployment def as the embedded stack creates it.
func NamesOf(def resources.Definition) Names {
	n := Names{Prefix: def.Prefix, Queue: map[string]string{}, DLQ: map[string]string{}, Function: map[string]string{},
		NotifyFailures: def.Bucket.NotifyFailureQueue}
	for _, q := range def.Queues {
		n.Queue[q.Class], n.DLQ[q.Class] = q.Name, q.DLQName
	}
	for _, f := range def.Functions {
		n.Function[f.Name] = def.FunctionName(f.Name)
	}
	return n
}

// Line is one series of a widget as CloudWatch draws it: one value per
// period that has data.
type Line struct {
	Label  string
	Points []Datapoint
}

// Datapoint is a period's statistic.
type Datapoint struct {
	T time.Time // the period's start
	V float64
}

// Query evaluates one model metric over the store: the series it selects,
// each reduced to its statistic per period (periods aligned to the epoch,
// as CloudWatch aligns them). A single-metric source gives at most one
// line; a SEARCH gives one per matching series. Lines without datapoints
// are left out: CloudWatch draws nothing for them.
func (s *Store) Query(m monitoring.Metric, n Names) ([]Line, error) {
	return queryIn(s.All(), m, n)
}

// queryIn is Query over a copy of the store's series (Draw takes one for
// every widget and alarm).
func queryIn(all []Series, m monitoring.Metric, n Names) ([]Line, error) {
	var sel []Series
	for _, sr := range all {
		if matches(m, n, sr) {
			sel = append(sel, sr)
		}
	}
	var out []Line
	for _, sr := range sel {
		pts, err := reduce(sr.Points, m.Period, m.Stat)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if len(pts) == 0 {
			continue
		}
		out = append(out, Line{Label: label(m, sr), Points: pts})
	}
	return out, nil
}

// matches reports whether series sr is one the metric selects.
func matches(m monitoring.Metric, n Names, sr Series) bool {
	if sr.Namespace != m.Namespace() || sr.Name != m.Name {
		return false
	}
	exact := func(want map[string]string) bool { return maps.Equal(sr.Dims, want) }
	switch m.Source {
	case monitoring.FromQueue:
		return exact(map[string]string{monitoring.DimQueueName: n.Queue[m.Queue]})
	case monitoring.FromDLQ:
		return exact(map[string]string{monitoring.DimQueueName: n.DLQ[m.Queue]})
	case monitoring.FromNotifyFailures:
		return exact(map[string]string{monitoring.DimQueueName: n.NotifyFailures})
	case monitoring.FromFunction:
		return exact(map[string]string{monitoring.DimFunctionName: n.Function[m.Function]})
	case monitoring.FromEMF:
		return exact(m.Dims)
	case monitoring.FromSearch, monitoring.FromSearchKind:
		for k, v := range m.Dims {
			if sr.Dims[k] != v {
				return false
			}
		}
		if m.Source == monitoring.FromSearchKind {
			return slices.Equal(slices.Sorted(maps.Keys(sr.Dims)), slices.Sorted(slices.Values(m.Schema)))
		}
		return true
	}
	return false
}

// label is what CloudWatch shows for a series: the metric's label, and for
// a SEARCH the dimension values that tell its series apart.
func label(m monitoring.Metric, sr Series) string {
	l := m.Label
	if l == "" {
		l = m.Name
	}
	if !m.IsSearch() {
		return l
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(sr.Dims)) {
		if k != metrics.DimDeployment {
			parts = append(parts, sr.Dims[k])
		}
	}
	return strings.TrimSpace(l + " " + strings.Join(parts, " "))
}

// reduce groups points into periods and takes the statistic of each.
func reduce(points []Point, period time.Duration, stat string) ([]Datapoint, error) {
	if period <= 0 {
		return nil, fmt.Errorf("period %s", period)
	}
	buckets := map[int64][]float64{}
	for _, p := range points {
		b := p.T.UnixMilli() / period.Milliseconds()
		buckets[b] = append(buckets[b], p.Values...)
	}
	var out []Datapoint
	for _, b := range slices.Sorted(maps.Keys(buckets)) {
		v, err := statistic(buckets[b], stat)
		if errors.Is(err, errNoDatapoint) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Datapoint{T: time.UnixMilli(b * period.Milliseconds()), V: v})
	}
	return out, nil
}

// errNoDatapoint: CloudWatch computes no value of the statistic for the period.
var errNoDatapoint = errors.New("no datapoint")

// statistic is a CloudWatch statistic of the values of one period.
func statistic(vs []float64, stat string) (float64, error) {
	switch stat {
	case "Sum":
		var s float64
		for _, v := range vs {
			s += v
		}
		return s, nil
	case "Maximum":
		return slices.Max(vs), nil
	case "Minimum":
		return slices.Min(vs), nil
	case "Average":
		var s float64
		for _, v := range vs {
			s += v
		}
		return s / float64(len(vs)), nil
	case "SampleCount":
		return float64(len(vs)), nil
	}
	if p, ok := strings.CutPrefix(stat, "p"); ok {
		q, err := strconv.ParseFloat(p, 64)
		if err != nil || q <= 0 || q > 100 {
			return 0, fmt.Errorf("statistic %q", stat)
		}
		sorted := slices.Sorted(slices.Values(vs))
		if sorted[0] < 0 {
			return 0, errNoDatapoint // CloudWatch: no percentiles when any value is negative
		}
		i := int(math.Ceil(q/100*float64(len(sorted)))) - 1
		return sorted[max(i, 0)], nil
	}
	return 0, fmt.Errorf("statistic %q is not one CloudWatch computes here", stat)
}

// sortLines orders lines by label (stable output).
func sortLines(ls []Line) {
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].Label < ls[j].Label })
}
