package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"pgregory.net/rapid"
)

// tb is what the helpers need from *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// encode writes recs as one segment and returns the bytes and footer.
func encode(t tb, recs []Record, opts WriterOptions) ([]byte, Footer) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts)
	for _, r := range recs {
		if err := w.Add(r); err != nil {
			t.Fatalf("Add(%q): %v", r.Key, err)
		}
	}
	f, err := w.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	return buf.Bytes(), f
}

// decodeAll opens b and returns every record (payloads copied).
func decodeAll(b []byte) ([]Record, Footer, error) {
	r, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, Footer{}, err
	}
	var out []Record
	it := r.Iter()
	for it.Next() {
		rec := it.Record()
		rec.Payload = bytes.Clone(rec.Payload)
		out = append(out, rec)
	}
	return out, r.Footer(), it.Err()
}

func sampleRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{
			Key:      fmt.Sprintf("key-%06d", i),
			Seq:      uint64(1000 + i*7%13),
			Delete:   i%5 == 0,
			TsUnixMs: int64(1_700_000_000_000 + i*3%11),
			Payload:  bytes.Repeat([]byte{byte(i)}, i%40),
		}
	}
	return recs
}

func equalRecords(a, b []Record) bool {
	return slices.EqualFunc(a, b, func(x, y Record) bool {
		return x.Key == y.Key && x.Seq == y.Seq && x.Delete == y.Delete && x.TsUnixMs == y.TsUnixMs && bytes.Equal(x.Payload, y.Payload)
	})
}

func TestRoundTrip(t *testing.T) {
	recs := sampleRecords(500)
	b, f := encode(t, recs, WriterOptions{BlockSize: 512})
	got, rf, err := decodeAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if !equalRecords(got, recs) {
		t.Fatal("records read back differ from records written")
	}
	if f.Blocks < 10 {
		t.Fatalf("expected many blocks at 512-byte blocks, got %d", f.Blocks)
	}
	if f.Size != int64(len(b)) || f.Checksum != contract.Checksum(b) {
		t.Fatalf("footer size/checksum %d %s, object %d %s", f.Size, f.Checksum, len(b), contract.Checksum(b))
	}
	want := f
	want.Checksum = ""
	if rf != want {
		t.Fatalf("read footer %+v, written %+v", rf, want)
	}
	if f.Records != 500 || f.Deletes != 100 || f.MinKey != "key-000000" || f.MaxKey != "key-000499" || f.MinSeq != 1000 || f.MaxSeq != 1012 {
		t.Fatalf("footer stats wrong: %+v", f)
	}
}

func TestFooterEntry(t *testing.T) {
	b, f := encode(t, sampleRecords(20), WriterOptions{})
	e := f.Entry("collections/c/data/append/1-0.seg", int64(len(b)), f.Checksum, contract.TierHot, 0)
	want := contract.ObjectEntry{
		Key: "collections/c/data/append/1-0.seg", Size: int64(len(b)), Checksum: contract.Checksum(b), Tier: "hot", Level: 0,
		DocCount: 20, DeleteCount: 4, MinTsUnixMs: f.MinTsUnixMs, MaxTsUnixMs: f.MaxTsUnixMs,
		MinSeq: f.MinSeq, MaxSeq: f.MaxSeq, MinRecordKey: "key-000000", MaxRecordKey: "key-000019",
	}
	if e != want {
		t.Fatalf("Entry = %+v\nwant %+v", e, want)
	}
}

func TestWriterRejects(t *testing.T) {
	cases := []struct {
		name string
		recs []Record
		want error
	}{
		{"equal key", []Record{{Key: "a"}, {Key: "a"}}, ErrKeyOrder},
		{"decreasing key", []Record{{Key: "b"}, {Key: "a"}}, ErrKeyOrder},
		{"empty key", []Record{{Key: ""}}, ErrInvalidRecord},
		{"oversized key", []Record{{Key: string(make([]byte, MaxKeyLen+1))}}, ErrInvalidRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(io.Discard, WriterOptions{})
			var err error
			for _, r := range tc.recs {
				if err = w.Add(r); err != nil {
					break
				}
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	w := NewWriter(io.Discard, WriterOptions{})
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(Record{Key: "a"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errSink
	}
	f.after--
	return len(p), nil
}

var errSink = errors.New("sink failed")

func TestWriterErrorIsSticky(t *testing.T) {
	w := NewWriter(&failWriter{after: 1}, WriterOptions{BlockSize: 16})
	var err error
	for _, r := range sampleRecords(10) {
		if err = w.Add(r); err != nil {
			break
		}
	}
	if !errors.Is(err, errSink) {
		t.Fatalf("want the sink's error, got %v", err)
	}
	if _, err := w.Close(); !errors.Is(err, errSink) {
		t.Fatalf("Close after failure: %v", err)
	}
}

func TestEmptySegment(t *testing.T) {
	b, f := encode(t, nil, WriterOptions{})
	if len(b) != FooterSize || f.Records != 0 || f.Blocks != 0 {
		t.Fatalf("empty segment: %d bytes, %+v", len(b), f)
	}
	got, _, err := decodeAll(b)
	if err != nil || len(got) != 0 {
		t.Fatalf("got %d records, %v", len(got), err)
	}
}

func TestWriterIsDeterministic(t *testing.T) {
	a, _ := encode(t, sampleRecords(300), WriterOptions{BlockSize: 300})
	b, _ := encode(t, sampleRecords(300), WriterOptions{BlockSize: 300})
	if !bytes.Equal(a, b) {
		t.Fatal("same records, different bytes")
	}
}

func TestLargeRecordGetsItsOwnBlock(t *testing.T) {
	recs := []Record{{Key: "a", Payload: make([]byte, 10)}, {Key: "b", Payload: make([]byte, 5000)}, {Key: "c"}}
	b, f := encode(t, recs, WriterOptions{BlockSize: 100})
	got, _, err := decodeAll(b)
	if err != nil || !equalRecords(got, recs) {
		t.Fatalf("round trip: %v", err)
	}
	if f.Blocks != 3 {
		t.Fatalf("blocks = %d, want 3", f.Blocks)
	}
}

// corruptAt flips one byte of a copy of b.
func corruptAt(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x5a
	return c
}

func TestCorruptionIsLocated(t *testing.T) {
	b, f := encode(t, sampleRecords(200), WriterOptions{BlockSize: 256})
	r, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	blk := r.blocks[3]
	cases := []struct {
		name    string
		at      int
		section string
		block   int
		offset  int64
	}{
		{"record byte in block 3", int(blk.Offset) + 10, SectionBlock, 3, blk.Offset},
		{"crc of block 3", int(blk.Offset+blk.Length) - 1, SectionBlock, 3, blk.Offset},
		{"index entry", int(f.IndexOffset) + 2, SectionIndex, -1, f.IndexOffset},
		{"footer field", len(b) - FooterSize + 45, SectionFooter, -1, int64(len(b) - FooterSize)},
		{"magic", len(b) - 1, SectionFooter, -1, int64(len(b) - FooterSize)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := decodeAll(corruptAt(b, tc.at))
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("want *CorruptError, got %v", err)
			}
			if ce.Section != tc.section || ce.Block != tc.block || ce.Offset != tc.offset {
				t.Fatalf("located at %s/%d/%d, want %s/%d/%d (%v)", ce.Section, ce.Block, ce.Offset, tc.section, tc.block, tc.offset, ce)
			}
		})
	}
}

func TestTruncatedAndTooShort(t *testing.T) {
	b, _ := encode(t, sampleRecords(50), WriterOptions{BlockSize: 256})
	for _, n := range []int{0, 10, FooterSize - 1, len(b) - 1, len(b) / 2} {
		if _, _, err := decodeAll(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d bytes: %v", n, err)
		}
	}
	// The object is shorter than the size the caller declares.
	if _, err := Open(bytes.NewReader(b[:len(b)-5]), int64(len(b))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short object: %v", err)
	}
}

func TestNewerFormatVersionIsRefused(t *testing.T) {
	b, _ := encode(t, sampleRecords(5), WriterOptions{})
	foot := b[len(b)-FooterSize:]
	le.PutUint32(foot, FormatVersion+1)
	le.PutUint32(foot[88:], crc(foot[:88]))
	_, err := Open(bytes.NewReader(b), int64(len(b)))
	if !errors.Is(err, ErrVersion) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("want ErrVersion, got %v", err)
	}
}

type failingReaderAt struct {
	io.ReaderAt
	failFrom int64
}

var errTransport = errors.New("range GET failed")

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.failFrom {
		return 0, errTransport
	}
	return f.ReaderAt.ReadAt(p, off)
}

func TestTransportErrorIsNotCorruption(t *testing.T) {
	// Larger than the tail Open reads, so that blocks are read later.
	b, f := encode(t, sampleRecords(5000), WriterOptions{BlockSize: 256})
	r, err := OpenWith(failingReaderAt{bytes.NewReader(b), f.IndexOffset + f.IndexLength + 1}, int64(len(b)), ReadOptions{RangeBytes: 512})
	if err != nil {
		t.Fatal(err)
	}
	// Blocks read fine; fail the reads from block 2 on.
	r.r = failingReaderAt{bytes.NewReader(b), r.blocks[2].Offset}
	it := r.Iter()
	for it.Next() {
	}
	if !errors.Is(it.Err(), errTransport) || errors.Is(it.Err(), ErrCorrupt) {
		t.Fatalf("want the transport error unwrapped, got %v", it.Err())
	}
}

// Every byte of a segment is covered by a checksum: flipping any one of them
// is reported, never returned as data.
func TestAnyFlippedByteIsDetected(t *testing.T) {
	b, _ := encode(t, sampleRecords(60), WriterOptions{BlockSize: 200})
	rapid.Check(t, func(t *rapid.T) {
		i := rapid.IntRange(0, len(b)-1).Draw(t, "byte")
		bit := rapid.IntRange(0, 7).Draw(t, "bit")
		c := bytes.Clone(b)
		c[i] ^= 1 << bit
		if _, _, err := decodeAll(c); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
			t.Fatalf("flipping bit %d of byte %d went unnoticed (err %v)", bit, i, err)
		}
	})
}
