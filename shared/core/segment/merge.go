package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// MergeOptions tunes Merge.
type MergeOptions struct {
	// DropDeletes drops a key entirely when its newest version in the inputs
	// is a delete marker. Set it only when the inputs include every object
	// that could hold an older version of any key in the merged range (see the
	// package documentation); otherwise an older version outside the merge
	// would resurface once the marker is gone.
	DropDeletes bool
	// TargetObjectBytes closes an output once it holds at least this many
	// bytes and starts the next one. Zero or negative means one output.
	TargetObjectBytes int64
	// Writer configures every output segment.
	Writer WriterOptions
}

// Outputs receives a merge's output segments, in order. Output n is created
// only when it has a first record, written completely, then finished with its
// footer before output n+1 is created.
type Outputs interface {
	NewOutput(n int) (io.Writer, error)
	FinishOutput(n int, f Footer) error
}

// OutputFuncs adapts two functions to Outputs. A nil Finish does nothing.
type OutputFuncs struct {
	New    func(n int) (io.Writer, error)
	Finish func(n int, f Footer) error
}

// NewOutput calls o.New.
func (o OutputFuncs) NewOutput(n int) (io.Writer, error) { return o.New(n) }

// FinishOutput calls o.Finish when set.
func (o OutputFuncs) FinishOutput(n int, f Footer) error {
	if o.Finish == nil {
		return nil
	}
	return o.Finish(n, f)
}

// MemoryOutputs keeps every output in memory: for tests and small merges.
type MemoryOutputs struct {
	Buffers []*bytes.Buffer
	Footers []Footer
}

// NewOutput starts buffer n.
func (m *MemoryOutputs) NewOutput(n int) (io.Writer, error) {
	m.Buffers = append(m.Buffers, new(bytes.Buffer))
	return m.Buffers[n], nil
}

// FinishOutput records output n's footer.
func (m *MemoryOutputs) FinishOutput(n int, f Footer) error {
	m.Footers = append(m.Footers, f)
	return nil
}

// MergeStats accounts for one merge. RecordsIn = RecordsOut +
// DroppedVersions + DroppedDeletes.
type MergeStats struct {
	RecordsIn       int64
	RecordsOut      int64
	DroppedVersions int64 // versions shadowed by a newer version of the same key
	DroppedDeletes  int64 // newest versions that were delete markers, dropped
	BytesRead       int64 // block bytes read by the input iterators
	BytesWritten    int64 // bytes of every finished output
	Outputs         []Footer
}

// ErrNilInput: Merge was given a nil iterator.
var ErrNilInput = errors.New("nil merge input")

// Merge streams the union of inputs into outputs: keys in increasing order,
// one version per key (the highest seq; on an equal seq the lower input
// index), delete markers kept unless opts.DropDeletes. Memory is one block per
// input plus one output block, independent of object sizes. The same inputs
// in the same order always produce the same output bytes, so a retry
// rewrites identical objects. ctx is checked between records; cancelling it
// (a lost lease) stops the merge with ctx's error, leaving unfinished output.
func Merge(ctx context.Context, inputs []*Iterator, out Outputs, opts MergeOptions) (MergeStats, error) {
	m := &merger{out: out, opts: opts}
	if err := m.run(ctx, inputs); err != nil {
		return m.stats, err
	}
	return m.stats, nil
}

type merger struct {
	out   Outputs
	opts  MergeOptions
	h     sourceHeap
	w     *Writer
	stats MergeStats
}

func (m *merger) run(ctx context.Context, inputs []*Iterator) error {
	defer func() {
		for _, it := range inputs {
			if it != nil {
				m.stats.BytesRead += it.BytesRead()
			}
		}
	}()
	if err := m.init(inputs); err != nil {
		return err
	}
	for n := 0; m.h.Len() > 0; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("segment: merge stopped: %w", err)
			}
		}
		if err := m.step(); err != nil {
			return err
		}
	}
	return m.finishOutput()
}

func (m *merger) init(inputs []*Iterator) error {
	m.h = make(sourceHeap, 0, len(inputs))
	for i, it := range inputs {
		if it == nil {
			return fmt.Errorf("segment: merge input %d: %w", i, ErrNilInput)
		}
		s := &source{it: it, idx: i}
		ok, err := s.advance()
		if err != nil {
			return err
		}
		if ok {
			m.h = append(m.h, s)
		}
	}
	m.stats.RecordsIn = int64(len(m.h))
	m.h.init()
	return nil
}

// step emits the newest version of the smallest key and skips its older versions.
func (m *merger) step() error {
	top := m.h[0]
	key := top.rec.Key
	if err := m.emit(top.rec); err != nil {
		return err
	}
	if err := m.advance(top); err != nil {
		return err
	}
	for m.h.Len() > 0 && m.h[0].rec.Key == key {
		m.stats.DroppedVersions++
		if err := m.advance(m.h[0]); err != nil {
			return err
		}
	}
	return nil
}

// advance moves the heap's top source s to its next record.
func (m *merger) advance(s *source) error {
	ok, err := s.advance()
	switch {
	case err != nil:
		return err
	case ok:
		m.stats.RecordsIn++
		m.h.down(0)
	default:
		m.h.popTop()
	}
	return nil
}

func (m *merger) emit(r Record) error {
	if r.Delete && m.opts.DropDeletes {
		m.stats.DroppedDeletes++
		return nil
	}
	if m.w != nil && !m.w.Fits(r) {
		if err := m.finishOutput(); err != nil {
			return err
		}
	}
	if m.w == nil {
		n := len(m.stats.Outputs)
		dst, err := m.out.NewOutput(n)
		if err != nil {
			return fmt.Errorf("segment: create merge output %d: %w", n, err)
		}
		m.w = NewWriter(dst, m.opts.Writer)
	}
	if err := m.w.Add(r); err != nil {
		return fmt.Errorf("segment: merge output %d: %w", len(m.stats.Outputs), err)
	}
	m.stats.RecordsOut++
	if t := m.opts.TargetObjectBytes; t > 0 && m.w.Len() >= t {
		return m.finishOutput()
	}
	return nil
}

func (m *merger) finishOutput() error {
	if m.w == nil {
		return nil
	}
	n := len(m.stats.Outputs)
	f, err := m.w.Close()
	m.w = nil
	if err != nil {
		return fmt.Errorf("segment: merge output %d: %w", n, err)
	}
	if err := m.out.FinishOutput(n, f); err != nil {
		return fmt.Errorf("segment: finish merge output %d: %w", n, err)
	}
	m.stats.Outputs = append(m.stats.Outputs, f)
	m.stats.BytesWritten += f.Size
	return nil
}

// source is one input's position in the merge.
type source struct {
	it  *Iterator
	idx int
	rec Record
}

func (s *source) advance() (bool, error) {
	if s.it.Next() {
		s.rec = s.it.Record()
		return true, nil
	}
	if err := s.it.Err(); err != nil {
		return false, fmt.Errorf("segment: merge input %d: %w", s.idx, err)
	}
	return false, nil
}

// sourceHeap orders sources by key, then newest seq first, then input
// index: a binary min-heap kept by hand (the merge fixes its top once per
// record; container/heap's interface calls cost about a tenth of the
// merge's CPU).
type sourceHeap []*source

func (h sourceHeap) Len() int { return len(h) }

func (h sourceHeap) less(i, j int) bool {
	a, b := &h[i].rec, &h[j].rec
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	if a.Seq != b.Seq {
		return a.Seq > b.Seq
	}
	return h[i].idx < h[j].idx
}

func (h sourceHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down restores the heap order below i after h[i] grew.
func (h sourceHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(r, l) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// popTop removes the top source.
func (h *sourceHeap) popTop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	old[n] = nil
	*h = old[:n]
	h.down(0)
}
