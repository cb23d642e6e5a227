package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// openIters opens every encoded input and returns one iterator per input.
func openIters(t tb, inputs [][]byte, wrap func(io.ReaderAt) io.ReaderAt) []*Iterator {
	t.Helper()
	its := make([]*Iterator, len(inputs))
	for i, b := range inputs {
		var ra io.ReaderAt = bytes.NewReader(b)
		if wrap != nil {
			ra = wrap(ra)
		}
		r, err := Open(ra, int64(len(b)))
		if err != nil {
			t.Fatalf("open input %d: %v", i, err)
		}
		its[i] = r.Iter()
	}
	return its
}

// latest is the brute-force model: the highest-seq version of every key,
// without keys whose newest version is a delete when dropDeletes.
func latest(inputs [][]Record, dropDeletes bool) []Record {
	best := map[string]Record{}
	for _, in := range inputs {
		for _, r := range in {
			if b, ok := best[r.Key]; !ok || r.Seq > b.Seq {
				best[r.Key] = r
			}
		}
	}
	var out []Record
	for _, r := range best {
		if !(dropDeletes && r.Delete) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out
}

// genInputs draws up to 5 sorted inputs over a small key space, with globally
// unique seqs (as the publisher assigns them).
func genInputs(t *rapid.T) [][]Record {
	keys := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-f]{1,3}`), 0, 40, rapid.ID[string]).Draw(t, "keys")
	slices.Sort(keys)
	n := rapid.IntRange(0, 5).Draw(t, "inputs")
	inputs := make([][]Record, n)
	total := 0
	for i := range inputs {
		for _, k := range keys {
			if rapid.Bool().Draw(t, fmt.Sprintf("in%d/%s", i, k)) {
				inputs[i] = append(inputs[i], Record{Key: k})
				total++
			}
		}
	}
	seqs := rapid.SliceOfNDistinct(rapid.Uint64Range(1, 1<<40), total, total, rapid.ID[uint64]).Draw(t, "seqs")
	for i := range inputs {
		for j := range inputs[i] {
			r := &inputs[i][j]
			r.Seq, seqs = seqs[0], seqs[1:]
			r.Delete = rapid.IntRange(0, 3).Draw(t, "delete") == 0
			r.TsUnixMs = rapid.Int64Range(-5, 1<<41).Draw(t, "ts")
			r.Payload = rapid.SliceOfN(rapid.Byte(), 0, 60).Draw(t, "payload")
		}
	}
	return inputs
}

func TestMergeEqualsLatestSeqPerKey(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		inputs := genInputs(t)
		opts := MergeOptions{
			DropDeletes:       rapid.Bool().Draw(t, "dropDeletes"),
			TargetObjectBytes: rapid.Int64Range(0, 2000).Draw(t, "target"),
			Writer:            WriterOptions{BlockSize: rapid.IntRange(1, 400).Draw(t, "block")},
		}
		encoded := make([][]byte, len(inputs))
		var in int64
		for i, recs := range inputs {
			encoded[i], _ = encode(t, recs, WriterOptions{BlockSize: rapid.IntRange(1, 300).Draw(t, "inBlock")})
			in += int64(len(recs))
		}
		var out MemoryOutputs
		st, err := Merge(context.Background(), openIters(t, encoded, nil), &out, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []Record
		for i, b := range out.Buffers {
			recs, f, err := decodeAll(b.Bytes())
			if err != nil {
				t.Fatalf("output %d: %v", i, err)
			}
			if len(recs) == 0 {
				t.Fatalf("output %d is empty", i)
			}
			if i < len(out.Buffers)-1 && opts.TargetObjectBytes > 0 && f.IndexOffset < opts.TargetObjectBytes {
				t.Fatalf("output %d closed at %d bytes, below target %d", i, f.IndexOffset, opts.TargetObjectBytes)
			}
			got = append(got, recs...) // strict key order across outputs is checked by the model comparison
		}
		want := latest(inputs, opts.DropDeletes)
		if !equalRecords(got, want) {
			t.Fatalf("merge output differs from the latest-seq model:\n got %v\nwant %v", got, want)
		}
		if st.RecordsIn != in || st.RecordsOut != int64(len(want)) || st.RecordsIn != st.RecordsOut+st.DroppedVersions+st.DroppedDeletes {
			t.Fatalf("stats do not add up: %+v (in %d, want out %d)", st, in, len(want))
		}
		if !opts.DropDeletes && st.DroppedDeletes != 0 {
			t.Fatalf("dropped %d deletes without DropDeletes", st.DroppedDeletes)
		}
		if len(st.Outputs) != len(out.Buffers) || !slices.Equal(st.Outputs, out.Footers) {
			t.Fatalf("stats outputs disagree with finished outputs")
		}
		// A retry over the same inputs writes the same bytes.
		var again MemoryOutputs
		if _, err := Merge(context.Background(), openIters(t, encoded, nil), &again, opts); err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(out.Buffers, again.Buffers, func(a, b *bytes.Buffer) bool { return bytes.Equal(a.Bytes(), b.Bytes()) }) {
			t.Fatal("retried merge wrote different bytes")
		}
	})
}

func TestMergeSplitsAtTarget(t *testing.T) {
	a, _ := encode(t, sampleRecords(1000), WriterOptions{BlockSize: 1024})
	var out MemoryOutputs
	st, err := Merge(context.Background(), openIters(t, [][]byte{a}, nil), &out, MergeOptions{TargetObjectBytes: 8 << 10, Writer: WriterOptions{BlockSize: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Outputs) < 3 {
		t.Fatalf("want several outputs, got %d", len(st.Outputs))
	}
	for i, f := range st.Outputs {
		if i > 0 && f.MinKey <= st.Outputs[i-1].MaxKey {
			t.Fatalf("output %d overlaps output %d", i, i-1)
		}
		if i < len(st.Outputs)-1 && f.IndexOffset < 8<<10 {
			t.Fatalf("output %d has %d data bytes, below the 8 KiB target", i, f.IndexOffset)
		}
		if f.Checksum == "" || f.Size != int64(out.Buffers[i].Len()) {
			t.Fatalf("output %d footer does not describe its bytes", i)
		}
	}
}

func TestMergeDetectsCorruptInput(t *testing.T) {
	a, _ := encode(t, sampleRecords(300), WriterOptions{BlockSize: 512})
	b, _ := encode(t, sampleRecords(300), WriterOptions{BlockSize: 512})
	r, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	blk := r.blocks[4]
	b = corruptAt(b, int(blk.Offset)+7)
	_, err = Merge(context.Background(), openIters(t, [][]byte{a, b}, nil), &MemoryOutputs{}, MergeOptions{})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Section != SectionBlock || ce.Block != 4 || ce.Offset != blk.Offset {
		t.Fatalf("want a corrupt block 4 at %d, got %v", blk.Offset, err)
	}
	if want := "merge input 1"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}

func TestMergeStopsOnCancel(t *testing.T) {
	a, _ := encode(t, sampleRecords(5000), WriterOptions{BlockSize: 512})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Merge(ctx, openIters(t, [][]byte{a}, nil), &MemoryOutputs{}, MergeOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestMergeReportsOutputErrors(t *testing.T) {
	a, _ := encode(t, sampleRecords(100), WriterOptions{})
	out := OutputFuncs{New: func(int) (io.Writer, error) { return &failWriter{}, nil }}
	if _, err := Merge(context.Background(), openIters(t, [][]byte{a}, nil), out, MergeOptions{}); !errors.Is(err, errSink) {
		t.Fatalf("want the sink error, got %v", err)
	}
	if _, err := Merge(context.Background(), []*Iterator{nil}, out, MergeOptions{}); !errors.Is(err, ErrNilInput) {
		t.Fatalf("want ErrNilInput, got %v", err)
	}
}

func TestMergeOfNothingWritesNothing(t *testing.T) {
	onlyDeletes := []Record{{Key: "a", Seq: 2, Delete: true}, {Key: "b", Seq: 3, Delete: true}}
	a, _ := encode(t, onlyDeletes, WriterOptions{})
	var out MemoryOutputs
	st, err := Merge(context.Background(), openIters(t, [][]byte{a}, nil), &out, MergeOptions{DropDeletes: true})
	if err != nil || len(out.Buffers) != 0 || st.DroppedDeletes != 2 {
		t.Fatalf("got %d outputs, %+v, %v", len(out.Buffers), st, err)
	}
}

// countingReaderAt records the largest single read issued after Open.
type countingReaderAt struct {
	io.ReaderAt
	mu       sync.Mutex
	armed    bool
	maxRead  int
	total    int64
	requests int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	if c.armed {
		c.maxRead = max(c.maxRead, len(p))
		c.total += int64(len(p))
		c.requests++
	}
	c.mu.Unlock()
	return c.ReaderAt.ReadAt(p, off)
}

// The merge reads ranges of whole blocks: the largest read does not grow
// with the size of the inputs (at most the range size), while the bytes
// read do, and every block byte is read once.
func TestMergeMemoryDoesNotGrowWithInputSize(t *testing.T) {
	const block = 4 << 10
	const maxPayload = 200
	const rangeBytes = 64 << 10
	limit := rangeBytes
	var prevTotal int64
	for _, n := range []int{2_000, 20_000, 100_000} {
		var counters []*countingReaderAt
		its := make([]*Iterator, 3)
		for i := range its {
			recs := make([]Record, n)
			for j := range recs {
				recs[j] = Record{Key: fmt.Sprintf("k%08d", j*3+i%2), Seq: uint64(i*n + j + 1), Payload: make([]byte, j%maxPayload)}
			}
			b, _ := encode(t, recs, WriterOptions{BlockSize: block})
			c := &countingReaderAt{ReaderAt: bytes.NewReader(b)}
			r, err := OpenWith(c, int64(len(b)), ReadOptions{RangeBytes: rangeBytes})
			if err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			c.armed = true // the reads after Open: the blocks
			c.mu.Unlock()
			counters = append(counters, c)
			its[i] = r.Iter()
		}
		st, err := Merge(context.Background(), its, OutputFuncs{New: func(int) (io.Writer, error) { return io.Discard, nil }}, MergeOptions{Writer: WriterOptions{BlockSize: block}, TargetObjectBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for i, c := range counters {
			if c.maxRead > limit {
				t.Fatalf("n=%d input %d: a single read of %d bytes, more than a range (%d)", n, i, c.maxRead, limit)
			}
			total += c.total
		}
		if total != st.BytesRead || total <= prevTotal {
			t.Fatalf("n=%d: read %d bytes (stats %d, previous size %d)", n, total, st.BytesRead, prevTotal)
		}
		t.Logf("n=%d records/input: %d bytes read in reads of at most %d bytes, %d outputs", n, total, limit, len(st.Outputs))
		prevTotal = total
	}
}
