package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Fuzz targets for the segment reader and the merge (make fuzz; make test
// replays testdata/fuzz, including the regression inputs of issue 19).

// maxRead is the largest single read the format allows a reader to issue
// (and so the largest buffer it allocates for one section).
const maxRead = max(FooterSize, MaxIndexLength, MaxBlockLength)

// writerSeeds are writer-made segments: empty, one record, many records in
// small and default blocks, deletes, a record alone in its block.
func writerSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, c := range []struct {
		n     int
		block int
	}{{0, 0}, {1, 0}, {40, 64}, {200, 512}, {300, 0}} {
		b, _ := encode(t, sampleRecords(c.n), WriterOptions{BlockSize: c.block})
		out = append(out, b)
	}
	b, _ := encode(t, []Record{{Key: "a", Seq: 1}, {Key: "big", Seq: 2, Payload: bytes.Repeat([]byte("p"), 3000)}, {Key: "c", Seq: 3, Delete: true}}, WriterOptions{BlockSize: 256})
	return append(out, b)
}

// FuzzSegmentOpen reads any bytes as a segment. The object is pad zero
// bytes followed by data (so a small input can claim a huge index or
// block). Properties:
//   - no read larger than the format's limits (memory bounded by the
//     format, not by what a footer or index claims);
//   - every failure is corruption (the reader itself never fails here);
//   - every record returned comes from a block whose stored CRC matches
//     its bytes (checked independently), has a key of 1..MaxKeyLen bytes,
//     keys strictly increase and lie in the footer's ranges;
//   - a read that ends cleanly saw exactly the footer's counts and ranges.
//
// With fix set, the CRCs of whatever the bytes claim to be blocks, index
// and footer are recomputed first, so the fuzzer reaches the structural
// checks behind the checksums (a hostile writer computes valid CRCs).
func FuzzSegmentOpen(f *testing.F) {
	for _, b := range writerSeeds(f) {
		f.Add(b, uint32(0), false)
		f.Add(b, uint32(0), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, pad uint32, fix bool) {
		pad &= 1<<28 - 1 // objects up to 256 MiB: room for any claim, bounded work per input
		if fix {
			data = refreshCRCs(data, int64(pad))
		}
		s := &sparse{tail: data, size: int64(pad) + int64(len(data))}
		defer func() {
			if s.maxRead > maxRead {
				t.Fatalf("a single read of %d bytes; the format allows %d", s.maxRead, maxRead)
			}
		}()
		r, err := Open(s, s.size)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Open: %v is not corruption", err)
			}
			return
		}
		f := r.Footer()
		if len(r.blocks) > MaxIndexLength/(indexEntryBase+1) {
			t.Fatalf("%d blocks from an index of at most %d bytes", len(r.blocks), MaxIndexLength)
		}
		it := r.Iter()
		var n, deletes int64
		var prev Record
		var minTs, maxTs int64
		var minSeq, maxSeq uint64
		verified := -1
		for it.Next() {
			rec := it.Record()
			if bi := it.next - 1; bi != verified {
				b := r.blocks[bi]
				body := make([]byte, b.Length)
				if _, err := s.ReadAt(body, b.Offset); err != nil {
					t.Fatalf("re-read block %d: %v", bi, err)
				}
				stored := le.Uint32(body[len(body)-crcSize:])
				if crc(body[:len(body)-crcSize]) != stored || stored != b.CRC {
					t.Fatalf("record %q returned from block %d whose CRC does not verify", rec.Key, bi)
				}
				verified = bi
			}
			switch {
			case len(rec.Key) == 0 || len(rec.Key) > MaxKeyLen:
				t.Fatalf("returned a key of %d bytes", len(rec.Key))
			case n > 0 && rec.Key <= prev.Key:
				t.Fatalf("key %q after %q", rec.Key, prev.Key)
			case rec.Key < f.MinKey || rec.Key > f.MaxKey || rec.Seq < f.MinSeq || rec.Seq > f.MaxSeq || rec.TsUnixMs < f.MinTsUnixMs || rec.TsUnixMs > f.MaxTsUnixMs:
				t.Fatalf("record %q outside the footer's ranges", rec.Key)
			}
			if n == 0 {
				minTs, maxTs, minSeq, maxSeq = rec.TsUnixMs, rec.TsUnixMs, rec.Seq, rec.Seq
				if rec.Key != f.MinKey {
					t.Fatalf("first key %q, footer min %q", rec.Key, f.MinKey)
				}
			}
			minTs, maxTs, minSeq, maxSeq = min(minTs, rec.TsUnixMs), max(maxTs, rec.TsUnixMs), min(minSeq, rec.Seq), max(maxSeq, rec.Seq)
			if rec.Delete {
				deletes++
			}
			n++
			prev = Record{Key: rec.Key}
		}
		if err := it.Err(); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("iteration: %v is not corruption", err)
			}
			return
		}
		switch {
		case n != f.Records || deletes != f.Deletes:
			t.Fatalf("clean read of %d records / %d deletes, footer says %d / %d", n, deletes, f.Records, f.Deletes)
		case n == 0 && (f.MinTsUnixMs != 0 || f.MaxTsUnixMs != 0 || f.MinSeq != 0 || f.MaxSeq != 0 || f.MinKey != "" || f.MaxKey != ""):
			t.Fatalf("empty segment with ranges %+v", f)
		case n > 0 && (minTs != f.MinTsUnixMs || maxTs != f.MaxTsUnixMs || minSeq != f.MinSeq || maxSeq != f.MaxSeq || prev.Key != f.MaxKey):
			t.Fatalf("records span ts [%d,%d] seq [%d,%d] last %q; footer says %+v", minTs, maxTs, minSeq, maxSeq, prev.Key, f)
		}
	})
}

// refreshCRCs returns data (the tail of an object of pad zero bytes and
// data) with every CRC it can locate recomputed: each block the index
// names, the index entries' copies, the index CRC and the footer CRC.
func refreshCRCs(data []byte, pad int64) []byte {
	b := bytes.Clone(data)
	if len(b) < FooterSize {
		return b
	}
	size := pad + int64(len(b))
	in := func(off, n int64) bool { return off >= pad && n >= 0 && off <= size && n <= size-off }
	at := func(off, n int64) []byte { return b[off-pad : off-pad+n] }
	ft := b[len(b)-FooterSize:]
	idxOff, idxLen := int64(le.Uint64(ft[8:])), int64(le.Uint64(ft[16:]))
	if in(idxOff, idxLen) && idxOff+idxLen <= size-FooterSize {
		idx := at(idxOff, idxLen)
		p := idx
		for i := 0; i < int(le.Uint32(ft[4:])) && len(p) >= indexEntryBase; i++ {
			off, n := int64(le.Uint64(p)), int64(le.Uint32(p[8:]))
			if in(off, n) && n >= crcSize && off+n <= idxOff {
				blk := at(off, n)
				c := crc(blk[:n-crcSize])
				le.PutUint32(blk[n-crcSize:], c)
				le.PutUint32(p[16:], c)
			}
			kl := int(le.Uint32(p[20:]))
			if kl > len(p)-indexEntryBase {
				break
			}
			p = p[indexEntryBase+kl:]
		}
		le.PutUint32(ft[24:], crc(idx))
	}
	le.PutUint32(ft[88:], crc(ft[:88]))
	return b
}

// byteSource draws small numbers from fuzz input (0 once exhausted).
type byteSource struct{ b []byte }

func (s *byteSource) next() int {
	if len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0])
	s.b = s.b[1:]
	return v
}

// mergeCase derives inputs and options from fuzz bytes: up to 4 inputs
// over 24 keys, seqs from a small range (ties across inputs happen),
// deletes, payloads, block sizes and output splitting.
func mergeCase(data []byte) (inputs [][]Record, blocks []int, opts MergeOptions, flip []int) {
	src := &byteSource{b: data}
	n := 1 + src.next()%4
	for range n {
		var recs []Record
		mask := src.next() | src.next()<<8 | src.next()<<16
		for k := range 24 {
			if mask&(1<<k) == 0 {
				continue
			}
			v := src.next()
			recs = append(recs, Record{Key: fmt.Sprintf("k%02d", k), Seq: uint64(v % 16), Delete: v&0x10 != 0,
				TsUnixMs: int64(int8(src.next())) * 1000, Payload: bytes.Repeat([]byte{byte(k)}, src.next()%48)})
		}
		inputs = append(inputs, recs)
		blocks = append(blocks, 1+src.next()*4)
	}
	opts = MergeOptions{DropDeletes: src.next()&1 == 1, TargetObjectBytes: int64(src.next() * 24), Writer: WriterOptions{BlockSize: 1 + src.next()*8}}
	if src.next()&1 == 1 { // flip one byte of one input
		flip = []int{src.next(), src.next()<<8 | src.next(), 1 + src.next()%255}
	}
	return inputs, blocks, opts, flip
}

// mergeModel is the merge's specification: per key the version with the
// highest seq, on an equal seq the one of the lowest input index; a winning
// delete marker is dropped with DropDeletes.
func mergeModel(inputs [][]Record, dropDeletes bool) []Record {
	best := map[string]Record{}
	var keys []string
	for _, in := range inputs {
		for _, r := range in {
			b, ok := best[r.Key]
			if !ok {
				keys = append(keys, r.Key)
			}
			if !ok || r.Seq > b.Seq {
				best[r.Key] = r
			}
		}
	}
	var out []Record
	for _, k := range sortedStrings(keys) {
		if r := best[k]; !(dropDeletes && r.Delete) {
			out = append(out, r)
		}
	}
	return out
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// FuzzSegmentMerge merges writer-made inputs derived from the fuzz bytes.
// Properties: the output equals the model; every output reopens and reads
// cleanly with the footer the writer returned; outputs are in key order
// without overlap; the stats add up. With one byte of one input flipped,
// Open or Merge reports corruption (every byte is covered by a CRC).
func FuzzSegmentMerge(f *testing.F) {
	f.Add([]byte{3, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 0x0f, 0xf0, 0xaa, 9, 1, 0, 0x55, 0, 0, 0, 0, 1, 2})
	f.Add([]byte{1, 0x0f, 0, 0, 0x11, 5, 7, 0x12, 1, 2, 0x13, 3, 4, 0x14, 1, 1, 0, 0, 0})
	f.Add([]byte{2, 0xaa, 0xaa, 0x0a, 0x21, 9, 9, 0x22, 8, 8, 0x55, 0x55, 0x05, 0x31, 7, 7, 0x32, 6, 6, 1, 30, 2, 1, 1, 0x10, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		inputs, blocks, opts, flip := mergeCase(data)
		encoded := make([][]byte, len(inputs))
		for i, recs := range inputs {
			encoded[i], _ = encode(t, recs, WriterOptions{BlockSize: blocks[i]})
		}
		if flip != nil {
			b := encoded[flip[0]%len(encoded)]
			b[flip[1]%len(b)] ^= byte(flip[2])
		}
		its := make([]*Iterator, len(encoded))
		for i, b := range encoded {
			r, err := Open(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				if flip == nil || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("open input %d: %v", i, err)
				}
				return
			}
			its[i] = r.Iter()
		}
		var out MemoryOutputs
		st, err := Merge(context.Background(), its, &out, opts)
		if flip != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("merge of an input with a flipped byte: err = %v, want corruption", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var got []Record
		var total int64
		for i, buf := range out.Buffers {
			recs, footer, err := decodeAll(buf.Bytes())
			if err != nil {
				t.Fatalf("output %d does not read back: %v", i, err)
			}
			w := st.Outputs[i]
			if footer.Records != w.Records || footer.MinKey != w.MinKey || footer.MaxKey != w.MaxKey || footer.Size != w.Size || len(recs) == 0 {
				t.Fatalf("output %d footer %+v, writer said %+v", i, footer, w)
			}
			if len(got) > 0 && recs[0].Key <= got[len(got)-1].Key {
				t.Fatalf("output %d starts at %q, not after %q", i, recs[0].Key, got[len(got)-1].Key)
			}
			got = append(got, recs...)
			total += int64(buf.Len())
		}
		want := mergeModel(inputs, opts.DropDeletes)
		if !equalRecords(got, want) {
			t.Fatalf("merge output differs from the model:\n got %v\nwant %v", keysOf(got), keysOf(want))
		}
		var in int64
		for _, recs := range inputs {
			in += int64(len(recs))
		}
		if st.RecordsIn != in || st.RecordsOut != int64(len(want)) || st.RecordsIn != st.RecordsOut+st.DroppedVersions+st.DroppedDeletes || st.BytesWritten != total {
			t.Fatalf("stats %+v for %d records in, %d out, %d bytes", st, in, len(want), total)
		}
	})
}

func keysOf(recs []Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s@%d%s ", r.Key, r.Seq, map[bool]string{true: "x"}[r.Delete])
	}
	return b.String()
}

// TestWriteRegressionCorpus writes issue 19's segment regression inputs into
// testdata/fuzz/FuzzSegmentOpen (BCC_WRITE_CORPUS=1).
func TestWriteRegressionCorpus(t *testing.T) {
	if os.Getenv("BCC_WRITE_CORPUS") == "" {
		t.Skip("set BCC_WRITE_CORPUS=1 to rewrite testdata/fuzz regression inputs")
	}
	write := func(name string, data []byte, pad uint32) {
		dir := filepath.Join("testdata", "fuzz", "FuzzSegmentOpen")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n" + fmt.Sprintf("uint32(%d)\nbool(false)\n", pad)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hi := hugeIndexSegment()
	write("issue19-index-claims-200MiB", hi.tail, uint32(hi.size-int64(len(hi.tail))))
	hb := hugeBlockSegment()
	write("issue19-block-claims-200MiB", hb.tail, uint32(hb.size-int64(len(hb.tail))))
	write("issue19-key-longer-than-MaxKeyLen", longKeySegment(), 0)
	recs := [][]Record{{{Key: "a", Seq: 10, TsUnixMs: 100}, {Key: "b", Seq: 11, TsUnixMs: 200}}}
	write("issue19-footer-ts-range-wider", rawSegment(recs, func(f *Footer) { f.MinTsUnixMs-- }), 0)
	write("issue19-footer-seq-range-wider", rawSegment(recs, func(f *Footer) { f.MaxSeq++ }), 0)
	write("issue19-empty-segment-with-ranges", rawSegment(nil, func(f *Footer) { f.MinSeq, f.MaxSeq, f.MaxTsUnixMs = 1, 2, 5 }), 0)
}
