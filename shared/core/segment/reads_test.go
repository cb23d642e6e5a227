package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
)

// readLog records every read asked of an object: offset and length, in
// the order they were asked.
type readLog struct {
	io.ReaderAt
	mu    sync.Mutex
	reads [][2]int64
}

func (l *readLog) ReadAt(p []byte, off int64) (int, error) {
	l.mu.Lock()
	l.reads = append(l.reads, [2]int64{off, int64(len(p))})
	l.mu.Unlock()
	return l.ReaderAt.ReadAt(p, off)
}

func (l *readLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reads)
}

func bigRecords(n, payload int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: fmt.Sprintf("key-%08d", i), Seq: uint64(i + 1), TsUnixMs: int64(i), Payload: bytes.Repeat([]byte{byte(i)}, payload)}
	}
	return recs
}

func iterate(t *testing.T, r *Reader) int {
	t.Helper()
	it := r.Iter()
	n := 0
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// An object no larger than one range costs one read in all: Open reads it
// whole and its iterators read nothing.
func TestSmallObjectIsOneRead(t *testing.T) {
	b, _ := encode(t, bigRecords(2000, 100), WriterOptions{BlockSize: 4 << 10})
	log := &readLog{ReaderAt: bytes.NewReader(b)}
	r, err := OpenWith(log, int64(len(b)), ReadOptions{RangeBytes: int64(len(b))})
	if err != nil {
		t.Fatal(err)
	}
	if n := iterate(t, r) + iterate(t, r); n != 4000 {
		t.Fatalf("read %d records, want 2 x 2000", n)
	}
	if log.count() != 1 || log.reads[0] != [2]int64{0, int64(len(b))} {
		t.Fatalf("reads %v, want one read of the whole %d-byte object", log.reads, len(b))
	}
}

// A larger object: Open reads the tail once (footer and index), and an
// iterator reads ranges of whole blocks of at most RangeBytes, contiguous,
// every block byte once, read ahead (the next range's read starts before
// the iterator needs it).
func TestLargeObjectReadsRangesOfWholeBlocks(t *testing.T) {
	const rangeBytes = 64 << 10
	b, f := encode(t, bigRecords(20000, 100), WriterOptions{BlockSize: 4 << 10})
	if int64(len(b)) <= TailBytes {
		t.Fatalf("fixture of %d bytes is not larger than the tail", len(b))
	}
	log := &readLog{ReaderAt: bytes.NewReader(b)}
	r, err := OpenWith(log, int64(len(b)), ReadOptions{RangeBytes: rangeBytes})
	if err != nil {
		t.Fatal(err)
	}
	if log.count() != 1 || log.reads[0] != [2]int64{int64(len(b)) - TailBytes, TailBytes} {
		t.Fatalf("Open: reads %v, want one read of the last %d bytes", log.reads, TailBytes)
	}
	it := r.Iter()
	if !it.Next() {
		t.Fatal(it.Err())
	}
	// The first range is in; the one after it was asked for already.
	if got := it.Reads(); got != 2 {
		t.Fatalf("after the first record: %d reads asked, want the first range and the one after it", got)
	}
	n := 1
	for it.Next() {
		n++
	}
	if it.Err() != nil || n != 20000 {
		t.Fatalf("read %d records: %v", n, it.Err())
	}
	starts := map[int64]bool{}
	for _, bl := range r.blocks {
		starts[bl.Offset] = true
	}
	var next int64
	for i, rd := range log.reads[1:] {
		if rd[0] != next || !starts[rd[0]] || rd[1] > rangeBytes || !(starts[rd[0]+rd[1]] || rd[0]+rd[1] == f.IndexOffset) {
			t.Fatalf("range read %d at %d of %d bytes: not whole blocks of at most %d from %d", i, rd[0], rd[1], rangeBytes, next)
		}
		next = rd[0] + rd[1]
	}
	if next != f.IndexOffset || it.Reads() != len(log.reads)-1 {
		t.Fatalf("ranges end at %d (blocks end at %d); iterator counted %d reads of %d", next, f.IndexOffset, it.Reads(), len(log.reads)-1)
	}
	t.Logf("%d-byte object: 1 tail read, %d range reads of at most %d bytes", len(b), len(log.reads)-1, rangeBytes)
}

// An index that does not fit the tail costs Open one more read, of the
// index alone.
func TestIndexLargerThanTheTailIsOneMoreRead(t *testing.T) {
	// Long keys and tiny blocks: an index of several tails.
	recs := make([]Record, 3000)
	for i := range recs {
		recs[i] = Record{Key: fmt.Sprintf("%0200d", i), Seq: uint64(i + 1), Payload: []byte("v")}
	}
	b, f := encode(t, recs, WriterOptions{BlockSize: 64})
	if f.IndexLength <= TailBytes {
		t.Fatalf("fixture index of %d bytes fits the tail", f.IndexLength)
	}
	log := &readLog{ReaderAt: bytes.NewReader(b)}
	r, err := OpenWith(log, int64(len(b)), ReadOptions{RangeBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if log.count() != 2 || log.reads[1] != [2]int64{f.IndexOffset, f.IndexLength} {
		t.Fatalf("Open: reads %v, want the tail and then the index [%d,+%d)", log.reads, f.IndexOffset, f.IndexLength)
	}
	if n := iterate(t, r); n != len(recs) {
		t.Fatalf("read %d records, want %d", n, len(recs))
	}
}

// A failed read ahead surfaces when the iterator reaches that range,
// unwrapped (a transport error, not corruption), and the records before
// it are all returned.
func TestReadAheadErrorSurfacesAtItsRange(t *testing.T) {
	b, _ := encode(t, bigRecords(20000, 100), WriterOptions{BlockSize: 4 << 10})
	const rangeBytes = 64 << 10
	r, err := OpenWith(bytes.NewReader(b), int64(len(b)), ReadOptions{RangeBytes: rangeBytes})
	if err != nil {
		t.Fatal(err)
	}
	failFrom := r.blocks[len(r.blocks)/2].Offset
	r.r = failingReaderAt{bytes.NewReader(b), failFrom}
	it := r.Iter()
	n := 0
	for it.Next() {
		n++
	}
	if it.Err() == nil || !errors.Is(it.Err(), errTransport) || errors.Is(it.Err(), ErrCorrupt) {
		t.Fatalf("want the transport error, got %v", it.Err())
	}
	// The range holding failFrom starts before it and reads fine; the
	// next one fails.
	if n == 0 || it.BytesRead() > failFrom+rangeBytes {
		t.Fatalf("%d records, %d block bytes before the failing reads from %d", n, it.BytesRead(), failFrom)
	}
}
