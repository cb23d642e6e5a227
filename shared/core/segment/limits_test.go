package segment

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// rawSegment encodes blocks of records as a segment without the writer's
// checks (so a test can build what a faulty or hostile writer would), with
// the exact footer of those records, then lets adjust change the footer's
// fields before the footer CRC is computed.
func rawSegment(blocks [][]Record, adjust func(f *Footer)) []byte {
	var out []byte
	var index []blockInfo
	var f Footer
	for _, recs := range blocks {
		var body []byte
		for i := range recs {
			r := &recs[i]
			body = appendRecord(body, r)
			if f.Records == 0 {
				f.MinKey, f.MinTsUnixMs, f.MaxTsUnixMs, f.MinSeq, f.MaxSeq = r.Key, r.TsUnixMs, r.TsUnixMs, r.Seq, r.Seq
			}
			f.MaxKey = r.Key
			f.Records++
			if r.Delete {
				f.Deletes++
			}
			f.MinTsUnixMs, f.MaxTsUnixMs = min(f.MinTsUnixMs, r.TsUnixMs), max(f.MaxTsUnixMs, r.TsUnixMs)
			f.MinSeq, f.MaxSeq = min(f.MinSeq, r.Seq), max(f.MaxSeq, r.Seq)
		}
		c := crc(body)
		body = le.AppendUint32(body, c)
		index = append(index, blockInfo{Offset: int64(len(out)), Length: int64(len(body)), Records: len(recs), CRC: c, FirstKey: recs[0].Key})
		out = append(out, body...)
	}
	var idx []byte
	for i := range index {
		idx = appendIndexEntry(idx, &index[i])
	}
	idx = append(idx, f.MinKey...)
	idx = append(idx, f.MaxKey...)
	f.Blocks, f.IndexOffset, f.IndexLength = len(index), int64(len(out)), int64(len(idx))
	if adjust != nil {
		adjust(&f)
	}
	out = append(out, idx...)
	return append(out, encodeFooter(&f, crc(idx))...)
}

// sparse is an object of size bytes: zeros, then tail at its end. It lets a
// test claim a huge index or block without holding it, and records the
// largest single read asked of it.
type sparse struct {
	tail    []byte
	size    int64
	mu      sync.Mutex
	maxRead int
}

func (s *sparse) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	s.maxRead = max(s.maxRead, len(p))
	s.mu.Unlock()
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= s.size {
		return 0, io.EOF
	}
	n := 0
	start := s.size - int64(len(s.tail))
	for n < len(p) && off+int64(n) < s.size {
		at := off + int64(n)
		if at < start {
			k := min(int64(len(p)-n), start-at)
			clear(p[n : n+int(k)])
			n += int(k)
			continue
		}
		n += copy(p[n:], s.tail[at-start:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// readAll opens r and iterates every record, returning the first error.
func readAll(r io.ReaderAt, size int64) ([]Record, error) {
	rd, err := Open(r, size)
	if err != nil {
		return nil, err
	}
	var out []Record
	it := rd.Iter()
	for it.Next() {
		rec := it.Record()
		rec.Payload = bytes.Clone(rec.Payload)
		out = append(out, rec)
	}
	return out, it.Err()
}

// allocated runs fn and returns the bytes it allocated on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const claimed = 200 << 20 // what a hostile footer or index claims

// hugeIndexSegment: a 200 MiB object whose footer (valid CRC) claims a
// 200 MiB index. Before: Open allocated and read all of it.
func hugeIndexSegment() *sparse {
	footer := encodeFooter(&Footer{IndexOffset: 0, IndexLength: claimed}, 0)
	return &sparse{tail: footer, size: claimed + FooterSize}
}

// hugeBlockSegment: a small index (valid CRCs) whose one entry claims a
// 200 MiB block. Before: Open accepted it and the first Next allocated and
// read 200 MiB.
func hugeBlockSegment() *sparse {
	key := "a"
	bi := blockInfo{Offset: 0, Length: claimed, Records: 1, CRC: 0, FirstKey: key}
	idx := appendIndexEntry(nil, &bi)
	idx = append(idx, key...)
	idx = append(idx, key...)
	f := Footer{Blocks: 1, Records: 1, MinKey: key, MaxKey: key, IndexOffset: claimed, IndexLength: int64(len(idx))}
	tail := append(idx, encodeFooter(&f, crc(idx))...)
	return &sparse{tail: tail, size: claimed + int64(len(tail))}
}

// Issue 19 finding 2: lengths are checked against the format's limits
// before anything is allocated or read.
func TestClaimedLengthsAreCheckedBeforeAllocating(t *testing.T) {
	for name, s := range map[string]*sparse{"index": hugeIndexSegment(), "block": hugeBlockSegment()} {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = readAll(s, s.size) })
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want corruption", err)
			}
			if s.maxRead > MaxIndexLength || s.maxRead > MaxBlockLength {
				t.Fatalf("a single read of %d bytes (limits: index %d, block %d)", s.maxRead, MaxIndexLength, MaxBlockLength)
			}
			if n > 1<<20 {
				t.Fatalf("allocated %d bytes for a rejected %d-byte claim", n, claimed)
			}
			t.Logf("%s claim of %d bytes refused: %v (allocated %d bytes)", name, claimed, err, n)
		})
	}
}

// Issue 19 finding 3: a key longer than MaxKeyLen inside a block (not the
// block's first key, not the max key: only the record says so) is
// corruption at read, not an ErrInvalidRecord later in the merge.
func longKeySegment() []byte {
	return rawSegment([][]Record{{{Key: "a", Seq: 1}, {Key: "b" + strings.Repeat("x", MaxKeyLen), Seq: 2}, {Key: "c", Seq: 3}}}, nil)
}

func TestKeyLongerThanMaxKeyLenIsCorruption(t *testing.T) {
	b := longKeySegment()
	recs, err := readAll(bytes.NewReader(b), int64(len(b)))
	for _, r := range recs {
		if len(r.Key) > MaxKeyLen {
			t.Fatalf("returned a %d-byte key", len(r.Key))
		}
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "key_length") {
		t.Fatalf("err = %v, want the key length reported as corruption", err)
	}
}

// Issue 19 finding 4: a footer whose ranges are wider than its records,
// and an empty segment with ranges, are corruption.
func TestFooterRangesMustBeTheRecords(t *testing.T) {
	recs := [][]Record{{{Key: "a", Seq: 10, TsUnixMs: 100}, {Key: "b", Seq: 11, TsUnixMs: 200}}}
	for name, adjust := range map[string]func(*Footer){
		"min ts lower":  func(f *Footer) { f.MinTsUnixMs-- },
		"max ts higher": func(f *Footer) { f.MaxTsUnixMs += 1 << 40 },
		"min seq lower": func(f *Footer) { f.MinSeq = 1 },
		"max seq wider": func(f *Footer) { f.MaxSeq++ },
	} {
		t.Run(name, func(t *testing.T) {
			b := rawSegment(recs, adjust)
			if _, err := readAll(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "footer says") {
				t.Fatalf("err = %v, want the footer's ranges refused", err)
			}
		})
	}
	for name, adjust := range map[string]func(*Footer){
		"ts":  func(f *Footer) { f.MaxTsUnixMs = 5 },
		"seq": func(f *Footer) { f.MinSeq, f.MaxSeq = 1, 2 },
	} {
		t.Run("empty with "+name, func(t *testing.T) {
			b := rawSegment(nil, adjust)
			if _, err := Open(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want an empty segment with ranges refused", err)
			}
		})
	}
	b := rawSegment(recs, nil)
	if got, err := readAll(bytes.NewReader(b), int64(len(b))); err != nil || len(got) != 2 {
		t.Fatalf("exact footer: %d records, %v", len(got), err)
	}
}

// The writer never writes what its reader refuses: block size is capped,
// and an index that would pass MaxIndexLength refuses the record
// (ErrSegmentFull); Merge then starts its next output.
func TestWriterStaysWithinTheFormatLimits(t *testing.T) {
	big := Record{Key: "k", Payload: make([]byte, MaxPayloadLen)}
	b, f := encode(t, []Record{big}, WriterOptions{BlockSize: 1 << 30})
	if f.Blocks != 1 {
		t.Fatalf("%d blocks", f.Blocks)
	}
	if _, err := readAll(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("largest record: %v", err)
	}
	if err := NewWriter(io.Discard, WriterOptions{}).Add(Record{Key: "k", Payload: make([]byte, MaxPayloadLen+1)}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("oversized payload: %v", err)
	}

	// Every record its own block, 64 KiB keys: about 126 fit one index.
	key := func(i int) string {
		return string(rune('a'+i/26)) + string(rune('a'+i%26)) + strings.Repeat("x", MaxKeyLen-2)
	}
	w := NewWriter(io.Discard, WriterOptions{BlockSize: 1})
	full := -1
	for i := 0; i < 200; i++ {
		if err := w.Add(Record{Key: key(i), Seq: uint64(i)}); err != nil {
			if !errors.Is(err, ErrSegmentFull) {
				t.Fatal(err)
			}
			full = i
			break
		}
	}
	if full < 100 || full > 130 {
		t.Fatalf("index full after %d records", full)
	}
	f, err := w.Close()
	if err != nil || f.IndexLength > MaxIndexLength {
		t.Fatalf("close: %v, index %d", err, f.IndexLength)
	}

	var inputs [][]byte
	for in := 0; in < 2; in++ {
		var recs []Record
		for i := in; i < 200; i += 2 {
			recs = append(recs, Record{Key: key(i), Seq: uint64(i)})
		}
		b, _ := encode(t, recs, WriterOptions{BlockSize: 1})
		inputs = append(inputs, b)
	}
	var out MemoryOutputs
	st, err := Merge(context.Background(), openIters(t, inputs, nil), &out, MergeOptions{Writer: WriterOptions{BlockSize: 1}})
	if err != nil || len(st.Outputs) != 2 || st.RecordsOut != 200 {
		t.Fatalf("merge: %v, %d outputs, %d records", err, len(st.Outputs), st.RecordsOut)
	}
	for i, o := range out.Buffers {
		if got, err := readAll(bytes.NewReader(o.Bytes()), int64(o.Len())); err != nil || int64(len(got)) != st.Outputs[i].Records {
			t.Fatalf("output %d: %v", i, err)
		}
	}
}
