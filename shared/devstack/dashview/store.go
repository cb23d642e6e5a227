package dashview

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Series is one CloudWatch metric: a namespace, a name and an exact set of
// dimensions (CloudWatch's identity of a metric), with its datapoints.
type Series struct {
	Namespace string
	Name      string
	Dims      map[string]string
	Points    []Point
}

// Point is one datapoint: every value published at T (an EMF value array
// publishes several at once).
type Point struct {
	T      time.Time
	Values []float64
}

// key is the series identity as a string.
func seriesKey(ns, name string, dims map[string]string) string {
	var b strings.Builder
	b.WriteString(ns + "\x00" + name)
	for _, k := range slices.Sorted(maps.Keys(dims)) {
		b.WriteString("\x00" + k + "=" + dims[k])
	}
	return b.String()
}

// Store holds the datapoints of a run, as CloudWatch would after ingesting
// the functions' EMF lines and the services' own metrics. It is safe for
// concurrent use.
type Store struct {
	// Window is how far back from the newest datapoint the store keeps
	// datapoints (0: all). make local runs for days; CloudWatch dashboards
	// show the last 3 hours unless asked.
	Window time.Duration

	mu     sync.Mutex
	series map[string]*Series
	first  time.Time
	last   time.Time
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{series: map[string]*Series{}, Window: DefaultWindow} }

// DefaultWindow is the time range a new store keeps.
const DefaultWindow = 3 * time.Hour

// Put adds one datapoint.
func (s *Store) Put(ns, name string, dims map[string]string, t time.Time, values ...float64) {
	if len(values) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := seriesKey(ns, name, dims)
	sr := s.series[k]
	if sr == nil {
		sr = &Series{Namespace: ns, Name: name, Dims: maps.Clone(dims)}
		s.series[k] = sr
	}
	sr.Points = append(sr.Points, Point{T: t, Values: slices.Clone(values)})
	if w := s.Window; w > 0 && sr.Points[0].T.Before(t.Add(-w-w/8)) {
		// Amortized: drop what fell out of the window once it is an
		// eighth of it.
		cut := t.Add(-w)
		i := 0
		for i < len(sr.Points) && sr.Points[i].T.Before(cut) {
			i++
		}
		sr.Points = slices.Delete(sr.Points, 0, i)
	}
	if s.first.IsZero() || t.Before(s.first) {
		s.first = t
	}
	if t.After(s.last) {
		s.last = t
	}
}

// Span is the time range of every datapoint stored.
func (s *Store) Span() (first, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.Window; w > 0 && s.first.Before(s.last.Add(-w)) {
		return s.last.Add(-w), s.last
	}
	return s.first, s.last
}

// All returns a copy of every series, sorted by identity.
func (s *Store) All() []Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Series, 0, len(s.series))
	for _, k := range slices.Sorted(maps.Keys(s.series)) {
		sr := *s.series[k]
		sr.Points = slices.Clone(sr.Points)
		out = append(out, sr)
	}
	return out
}

// emfLine is the part of an EMF line CloudWatch reads.
type emfLine struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
}

// AddEMF ingests CloudWatch Embedded Metric Format lines as CloudWatch
// Logs does: every metric of a directive becomes a datapoint of one series
// per dimension set it declares, the dimension values taken from the line's
// members. Lines that are not EMF (other log output) are skipped; an EMF
// line that breaks the format is an error naming its line number.
func (s *Store) AddEMF(lines []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(lines))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var errs []error
	for n := 1; sc.Scan(); n++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 || raw[0] != '{' || !bytes.Contains(raw, []byte(`"_aws"`)) {
			continue
		}
		if err := s.addEMFLine(raw); err != nil {
			errs = append(errs, fmt.Errorf("EMF line %d: %w", n, err))
		}
	}
	return errors.Join(append(errs, sc.Err())...)
}

func (s *Store) addEMFLine(raw []byte) error {
	var head emfLine
	if err := json.Unmarshal(raw, &head); err != nil {
		return err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return err
	}
	if head.AWS.Timestamp == 0 || len(head.AWS.CloudWatchMetrics) == 0 {
		return fmt.Errorf("no _aws.Timestamp or CloudWatchMetrics")
	}
	t := time.UnixMilli(head.AWS.Timestamp)
	str := func(name string) (string, error) {
		var v string
		if err := json.Unmarshal(members[name], &v); err != nil {
			return "", fmt.Errorf("dimension %s: %w", name, err)
		}
		return v, nil
	}
	type put struct {
		ns, name string
		dims     map[string]string
		vals     []float64
	}
	var puts []put
	for _, d := range head.AWS.CloudWatchMetrics {
		for _, m := range d.Metrics {
			vals, err := emfValues(members[m.Name])
			if err != nil {
				return fmt.Errorf("metric %s: %w", m.Name, err)
			}
			if len(vals) > 100 {
				// EMF: CloudWatch Logs extracts nothing from the document.
				return fmt.Errorf("metric %s: %d values (EMF allows 100)", m.Name, len(vals))
			}
			for _, set := range d.Dimensions {
				dims := map[string]string{}
				for _, name := range set {
					v, err := str(name)
					if err != nil {
						return err
					}
					dims[name] = v
				}
				puts = append(puts, put{d.Namespace, m.Name, dims, vals})
			}
		}
	}
	for _, p := range puts {
		s.Put(p.ns, p.name, p.dims, t, p.vals...)
	}
	return nil
}

// emfValues reads a metric member: a number or an array of numbers.
func emfValues(raw json.RawMessage) ([]float64, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("declared but absent")
	}
	var one float64
	if err := json.Unmarshal(raw, &one); err == nil {
		return []float64{one}, nil
	}
	var many []float64
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, err
	}
	return many, nil
}
