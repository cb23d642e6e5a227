package segment

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Reader reads a segment through an io.ReaderAt (an S3 object read with
// range GETs, a file, a byte slice). Open reads and verifies the footer and
// the block index with one read of the object's tail (the whole object
// when it is no larger than one range); blocks are read on demand by
// iterators, a range of whole blocks per read.
type Reader struct {
	r      io.ReaderAt
	f      Footer
	blocks []blockInfo
	opts   ReadOptions
	whole  []byte // the object, when Open read it whole
}

// Read sizes (ReadOptions.RangeBytes). Object storage answers a GET after
// tens of milliseconds whatever its size, so a reader asks for megabytes
// at a time, not for one block.
const (
	// DefaultRangeBytes is the read size when ReadOptions leaves it zero.
	DefaultRangeBytes = 4 << 20
	// MinRangeBytes and MaxRangeBytes bound a configured read size
	// (policy compaction.read_range_bytes).
	MinRangeBytes = 1 << 20
	MaxRangeBytes = 8 << 20
	// TailBytes is what Open reads of a larger object's end: the footer
	// and, for every object up to about 100 MiB of 64 KiB blocks with
	// keys of up to about 100 bytes, the whole index. A larger index
	// costs one more read.
	TailBytes = 128 << 10
)

// ReadOptions tunes how a Reader reads. The zero value is usable.
type ReadOptions struct {
	// RangeBytes is the size of one read: an object of at most this many
	// bytes is read whole by Open; an iterator over a larger one reads
	// runs of whole blocks of at most this many bytes (one block when a
	// block is larger). Zero or negative: DefaultRangeBytes. Not bounded
	// here (tests read tiny ranges); the policy bounds what it configures
	// to MinRangeBytes..MaxRangeBytes.
	RangeBytes int64
	// NoReadAhead: an iterator reads its next range only when it needs it.
	// By default it reads the next range while the current one is decoded
	// (two ranges in memory), so decoding overlaps the read.
	NoReadAhead bool
}

func (o ReadOptions) rangeBytes() int64 {
	if o.RangeBytes <= 0 {
		return DefaultRangeBytes
	}
	return o.RangeBytes
}

// Open verifies the footer and the block index of the size-byte segment in
// r, reading with the default ReadOptions.
func Open(r io.ReaderAt, size int64) (*Reader, error) { return OpenWith(r, size, ReadOptions{}) }

// OpenWith verifies the footer and the block index of the size-byte
// segment in r: one read of the object's last TailBytes (of the whole
// object when it is at most o.RangeBytes: its iterators then read
// nothing more), and one more for an index that does not fit the tail.
// Verification failures are *CorruptError (errors.Is ErrCorrupt or
// ErrVersion).
func OpenWith(r io.ReaderAt, size int64, o ReadOptions) (*Reader, error) {
	if size < FooterSize {
		return nil, corrupt(SectionFooter, -1, 0, "object of %d bytes is shorter than a footer", size)
	}
	rd := &Reader{r: r, opts: o}
	tailLen := min(size, TailBytes)
	if size <= o.rangeBytes() {
		tailLen = size
	}
	tail := make([]byte, tailLen)
	tailOff := size - tailLen
	if err := readAt(r, tail, tailOff, SectionFooter, -1); err != nil {
		return nil, err
	}
	if tailOff == 0 {
		rd.whole = tail
	}
	rf, err := decodeFooter(tail[tailLen-FooterSize:], size)
	if err != nil {
		return nil, err
	}
	var idx []byte
	if rf.IndexOffset >= tailOff {
		idx = tail[rf.IndexOffset-tailOff : rf.IndexOffset-tailOff+rf.IndexLength]
	} else {
		idx = make([]byte, rf.IndexLength)
		if err := readAt(r, idx, rf.IndexOffset, SectionIndex, -1); err != nil {
			return nil, err
		}
	}
	if got := crc(idx); got != rf.indexCRC {
		return nil, corrupt(SectionIndex, -1, rf.IndexOffset, "crc32c %#08x, footer says %#08x", got, rf.indexCRC)
	}
	blocks, err := decodeIndex(idx, &rf)
	if err != nil {
		return nil, err
	}
	rd.f, rd.blocks = rf.Footer, blocks
	return rd, nil
}

// Footer returns the verified footer (Checksum is empty).
func (r *Reader) Footer() Footer { return r.f }

// MaxBlockLength is the largest block (record area and CRC): an iterator's
// memory and the largest single read it issues.
func (r *Reader) MaxBlockLength() int64 {
	var m int64
	for _, b := range r.blocks {
		m = max(m, b.Length)
	}
	return m
}

// Iter returns a new iterator over every record in key order. Iterators are
// independent; each holds at most two ranges (ReadOptions) and starts
// reading its first one at once.
func (r *Reader) Iter() *Iterator {
	it := &Iterator{r: r}
	it.readAhead(0)
	return it
}

// decodeIndex parses and cross-checks the index against the footer.
func decodeIndex(idx []byte, rf *rawFooter) ([]blockInfo, error) {
	bad := func(format string, args ...any) error {
		return corrupt(SectionIndex, -1, rf.IndexOffset, format, args...)
	}
	blocks := make([]blockInfo, 0, rf.Blocks)
	var off, records int64
	p := idx
	for i := 0; i < rf.Blocks; i++ {
		if len(p) < indexEntryBase {
			return nil, bad("entry %d truncated", i)
		}
		b := blockInfo{Offset: int64(le.Uint64(p)), Length: int64(le.Uint32(p[8:])), Records: int(le.Uint32(p[12:])), CRC: le.Uint32(p[16:])}
		kl := int(le.Uint32(p[20:]))
		if kl == 0 || kl > MaxKeyLen || kl > len(p)-indexEntryBase {
			return nil, bad("entry %d first key length %d out of range", i, kl)
		}
		b.FirstKey = string(p[indexEntryBase : indexEntryBase+kl])
		p = p[indexEntryBase+kl:]
		switch {
		case b.Offset != off:
			return nil, bad("block %d at offset %d, expected %d", i, b.Offset, off)
		case b.Length < recordHeader+1+crcSize || b.Length > MaxBlockLength || b.Records <= 0:
			return nil, bad("block %d has length %d (format: %d..%d) and %d records", i, b.Length, recordHeader+1+crcSize, MaxBlockLength, b.Records)
		case int64(b.Records) > (b.Length-crcSize)/(recordHeader+1):
			return nil, bad("block %d of %d bytes cannot hold %d records", i, b.Length, b.Records)
		case i > 0 && b.FirstKey <= blocks[i-1].FirstKey:
			return nil, bad("block %d first key %q not after block %d's", i, b.FirstKey, i-1)
		}
		off += b.Length
		records += int64(b.Records)
		blocks = append(blocks, b)
	}
	if len(p) != rf.minKeyLen+rf.maxKeyLen {
		return nil, bad("%d bytes after the entries, expected %d", len(p), rf.minKeyLen+rf.maxKeyLen)
	}
	rf.MinKey, rf.MaxKey = string(p[:rf.minKeyLen]), string(p[rf.minKeyLen:])
	switch {
	case off != rf.IndexOffset:
		return nil, bad("blocks end at %d, index starts at %d", off, rf.IndexOffset)
	case records != rf.Records:
		return nil, bad("blocks hold %d records, footer says %d", records, rf.Records)
	case len(blocks) > 0 && (blocks[0].FirstKey != rf.MinKey || rf.MaxKey < blocks[len(blocks)-1].FirstKey):
		return nil, bad("min/max key disagree with the block first keys")
	}
	return blocks, nil
}

// readAt fills p from off. A short object is corruption (it is shorter than
// its footer claims); any other failure is the transport's, wrapped.
func readAt(r io.ReaderAt, p []byte, off int64, section string, block int) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return corrupt(section, block, off, "object ends after %d of %d bytes", n, len(p))
	}
	what := section
	if section == SectionBlock {
		what = fmt.Sprintf("block %d", block)
	}
	return fmt.Errorf("segment: read %s at offset %d: %w", what, off, err)
}

// Iterator streams a segment's records in key order, one verified block at a
// time. Unless the Reader holds the whole object, it reads ranges of whole
// blocks (ReadOptions.RangeBytes) and, by default, the next range while it
// decodes the current one: at most two ranges in memory.
type Iterator struct {
	r         *Reader
	next      int    // index of the next block to load
	buf       []byte // current block, record area only
	pos       int
	left      int // records of the current block not yet decoded
	rec       Record
	seen      int64
	deletes   int64
	minTs     int64 // real ranges of the records read, compared with the footer at the end
	maxTs     int64
	minSeq    uint64
	maxSeq    uint64
	bytesRead int64
	err       error
	done      bool

	span       []byte // blocks [spanFirst, spanEnd), read from spanOff
	spanFirst  int
	spanEnd    int
	spanOff    int64
	spare      []byte          // a range buffer no record refers to any more
	ahead      chan spanResult // the read ahead in flight (nil: none)
	aheadFirst int
	reads      int
}

// rangePool recycles range buffers between iterators (a merge's inputs,
// one task after another in a warm function): a buffer is put back when
// its iterator reached its end, when no record can refer to it any more.
var rangePool sync.Pool

// getRange returns a buffer of n bytes, with room for a whole range
// (ranges differ by a block or so: one buffer serves every range of an
// iterator), from the pool when it has one large enough.
func getRange(n, rangeBytes int64) []byte {
	if p, ok := rangePool.Get().(*[]byte); ok && int64(cap(*p)) >= n {
		return (*p)[:n]
	}
	return make([]byte, n, max(n, rangeBytes))
}

// release puts the iterator's range buffers back in the pool (at its
// clean end: Record is void once Next returned false, and no read ahead
// is in flight).
func (it *Iterator) release() {
	for _, b := range [][]byte{it.span, it.spare} {
		if b != nil {
			rangePool.Put(&b)
		}
	}
	it.span, it.spare, it.buf = nil, nil, nil
}

// spanResult is one range read.
type spanResult struct {
	buf []byte
	err error
}

// Next advances to the next record and reports whether there is one. It
// returns false at the end or on error; then Err says which.
func (it *Iterator) Next() bool {
	if it.err != nil || it.done {
		return false
	}
	for it.left == 0 {
		if err := it.endOfBlock(); err != nil {
			it.err = err
			return false
		}
		if it.next == len(it.r.blocks) {
			it.err = it.finish()
			it.done = true
			it.release()
			return false
		}
		if err := it.load(it.next); err != nil {
			it.err = err
			return false
		}
		it.next++
	}
	if err := it.decode(); err != nil {
		it.err = err
		return false
	}
	return true
}

// Record is the current record. Its Payload aliases the iterator's block
// buffer and is valid only until the next call to Next; copy it to keep it.
func (it *Iterator) Record() Record { return it.rec }

// Err is the first error the iterator met, or nil at a clean end.
func (it *Iterator) Err() error { return it.err }

// BytesRead is the number of block bytes this iterator has read.
func (it *Iterator) BytesRead() int64 { return it.bytesRead }

// Reads is the number of reads this iterator issued (the Reader's Open
// reads not included).
func (it *Iterator) Reads() int { return it.reads }

// Footer is the footer of the segment being iterated.
func (it *Iterator) Footer() Footer { return it.r.f }

func (it *Iterator) load(i int) error {
	b := &it.r.blocks[i]
	var raw []byte
	if it.r.whole != nil {
		raw = it.r.whole[b.Offset : b.Offset+b.Length]
	} else {
		if i < it.spanFirst || i >= it.spanEnd || it.span == nil {
			if err := it.nextSpan(i); err != nil {
				return err
			}
		}
		raw = it.span[b.Offset-it.spanOff : b.Offset-it.spanOff+b.Length]
	}
	it.bytesRead += b.Length
	body := raw[:b.Length-crcSize]
	stored := le.Uint32(raw[len(body):])
	if got := crc(body); got != stored || stored != b.CRC {
		return corrupt(SectionBlock, i, b.Offset, "crc32c %#08x, block says %#08x, index says %#08x", got, stored, b.CRC)
	}
	it.buf, it.pos, it.left = body, 0, b.Records
	return nil
}

// spanEndFrom is the end of the range that starts at block first: whole
// blocks of at most RangeBytes together, at least one.
func (it *Iterator) spanEndFrom(first int) int {
	limit := it.r.opts.rangeBytes()
	var total int64
	end := first
	for end < len(it.r.blocks) && (end == first || total+it.r.blocks[end].Length <= limit) {
		total += it.r.blocks[end].Length
		end++
	}
	return end
}

// nextSpan makes the range starting at block first current: the read
// ahead when it is that range, else a read now; then reads ahead the
// range after it.
func (it *Iterator) nextSpan(first int) error {
	end := it.spanEndFrom(first)
	var res spanResult
	if it.ahead != nil {
		res = <-it.ahead
		it.ahead = nil
		if it.aheadFirst != first { // not the range wanted (never in key order): drop it
			it.spare, res = res.buf, spanResult{}
		}
	}
	if res.buf == nil && res.err == nil {
		buf := it.spare
		it.spare = nil
		it.reads++
		res = it.readSpan(buf, first, end)
	}
	if res.err != nil {
		return res.err
	}
	// The range left behind is no record's any more (Record is valid
	// until the next Next): it takes the next read ahead.
	it.spare, it.span = it.span, res.buf
	it.spanFirst, it.spanEnd, it.spanOff = first, end, it.r.blocks[first].Offset
	it.readAhead(end)
	return nil
}

// readAhead starts reading the range from block first, unless read-ahead
// is off or there is none.
func (it *Iterator) readAhead(first int) {
	if it.r.opts.NoReadAhead || it.r.whole != nil || first >= len(it.r.blocks) {
		return
	}
	end := it.spanEndFrom(first)
	buf := it.spare
	it.spare = nil
	ch := make(chan spanResult, 1) // the reader never blocks, even if the iterator is dropped
	it.ahead, it.aheadFirst = ch, first
	it.reads++
	go func() { ch <- it.readSpan(buf, first, end) }()
}

// readSpan reads blocks [first, end) into buf (grown when too small). It
// changes nothing of the iterator: a read ahead runs it on its own
// goroutine.
func (it *Iterator) readSpan(buf []byte, first, end int) spanResult {
	b0, bl := &it.r.blocks[first], &it.r.blocks[end-1]
	n := bl.Offset + bl.Length - b0.Offset
	if int64(cap(buf)) < n {
		buf = getRange(n, it.r.opts.rangeBytes())
	}
	buf = buf[:n]
	if err := readAt(it.r.r, buf, b0.Offset, SectionBlock, first); err != nil {
		return spanResult{err: err}
	}
	return spanResult{buf: buf}
}

// decode reads the next record of the current block and checks it against
// the ordering and the footer's ranges.
func (it *Iterator) decode() error {
	i := it.next - 1
	b := &it.r.blocks[i]
	rec, n, reason := decodeRecord(it.buf[it.pos:])
	if reason != "" {
		return corrupt(SectionBlock, i, b.Offset, "record at block offset %d: %s", it.pos, reason)
	}
	f := &it.r.f
	switch {
	case it.pos == 0 && rec.Key != b.FirstKey:
		return corrupt(SectionBlock, i, b.Offset, "first key %q, index says %q", rec.Key, b.FirstKey)
	case it.seen > 0 && rec.Key <= it.rec.Key:
		return corrupt(SectionBlock, i, b.Offset, "key %q not after %q", rec.Key, it.rec.Key)
	case rec.Key > f.MaxKey || rec.Seq < f.MinSeq || rec.Seq > f.MaxSeq || rec.TsUnixMs < f.MinTsUnixMs || rec.TsUnixMs > f.MaxTsUnixMs:
		return corrupt(SectionBlock, i, b.Offset, "record %q outside the footer's key/seq/ts ranges", rec.Key)
	}
	if it.seen == 0 {
		it.minTs, it.maxTs, it.minSeq, it.maxSeq = rec.TsUnixMs, rec.TsUnixMs, rec.Seq, rec.Seq
	}
	it.minTs, it.maxTs = min(it.minTs, rec.TsUnixMs), max(it.maxTs, rec.TsUnixMs)
	it.minSeq, it.maxSeq = min(it.minSeq, rec.Seq), max(it.maxSeq, rec.Seq)
	it.rec = rec
	it.pos += n
	it.left--
	it.seen++
	if rec.Delete {
		it.deletes++
	}
	return nil
}

// endOfBlock checks that a fully decoded block has no trailing bytes.
func (it *Iterator) endOfBlock() error {
	if it.next == 0 || it.pos == len(it.buf) {
		return nil
	}
	i := it.next - 1
	return corrupt(SectionBlock, i, it.r.blocks[i].Offset, "%d bytes after the last record", len(it.buf)-it.pos)
}

// finish cross-checks the totals and the ranges against the footer: the
// footer's ranges are exactly the records' (not merely covering them), so
// the manifest entry derived from it describes what the object holds.
func (it *Iterator) finish() error {
	f := &it.r.f
	switch {
	case it.seen != f.Records || it.deletes != f.Deletes:
		return corrupt(SectionFooter, -1, f.Size-FooterSize, "read %d records / %d deletes, footer says %d / %d", it.seen, it.deletes, f.Records, f.Deletes)
	case it.seen > 0 && it.rec.Key != f.MaxKey:
		return corrupt(SectionFooter, -1, f.Size-FooterSize, "last key %q, footer says %q", it.rec.Key, f.MaxKey)
	case it.seen > 0 && (it.minTs != f.MinTsUnixMs || it.maxTs != f.MaxTsUnixMs || it.minSeq != f.MinSeq || it.maxSeq != f.MaxSeq):
		return corrupt(SectionFooter, -1, f.Size-FooterSize, "records span ts [%d, %d] and seq [%d, %d], footer says [%d, %d] and [%d, %d]",
			it.minTs, it.maxTs, it.minSeq, it.maxSeq, f.MinTsUnixMs, f.MaxTsUnixMs, f.MinSeq, f.MaxSeq)
	}
	return nil
}
