package segment

import (
	"errors"
	"fmt"
	"io"
)

// Reader reads a segment through an io.ReaderAt (an S3 object read with
// range GETs, a file, a byte slice). Open reads and verifies the footer and
// the block index; blocks are read on demand by iterators.
type Reader struct {
	r      io.ReaderAt
	f      Footer
	blocks []blockInfo
}

// Open verifies the footer and the block index of the size-byte segment in r.
// Verification failures are *CorruptError (errors.Is ErrCorrupt or ErrVersion).
func Open(r io.ReaderAt, size int64) (*Reader, error) {
	if size < FooterSize {
		return nil, corrupt(SectionFooter, -1, 0, "object of %d bytes is shorter than a footer", size)
	}
	fb := make([]byte, FooterSize)
	if err := readAt(r, fb, size-FooterSize, SectionFooter, -1); err != nil {
		return nil, err
	}
	rf, err := decodeFooter(fb, size)
	if err != nil {
		return nil, err
	}
	idx := make([]byte, rf.IndexLength)
	if err := readAt(r, idx, rf.IndexOffset, SectionIndex, -1); err != nil {
		return nil, err
	}
	if got := crc(idx); got != rf.indexCRC {
		return nil, corrupt(SectionIndex, -1, rf.IndexOffset, "crc32c %#08x, footer says %#08x", got, rf.indexCRC)
	}
	blocks, err := decodeIndex(idx, &rf)
	if err != nil {
		return nil, err
	}
	return &Reader{r: r, f: rf.Footer, blocks: blocks}, nil
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
// independent; each holds one block in memory at a time.
func (r *Reader) Iter() *Iterator { return &Iterator{r: r} }

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
// time.
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

// Footer is the footer of the segment being iterated.
func (it *Iterator) Footer() Footer { return it.r.f }

func (it *Iterator) load(i int) error {
	b := &it.r.blocks[i]
	if cap(it.buf) < int(b.Length) {
		it.buf = make([]byte, b.Length)
	}
	it.buf = it.buf[:b.Length]
	if err := readAt(it.r.r, it.buf, b.Offset, SectionBlock, i); err != nil {
		return err
	}
	it.bytesRead += b.Length
	body := it.buf[:b.Length-crcSize]
	stored := le.Uint32(it.buf[len(body):])
	if got := crc(body); got != stored || stored != b.CRC {
		return corrupt(SectionBlock, i, b.Offset, "crc32c %#08x, block says %#08x, index says %#08x", got, stored, b.CRC)
	}
	it.buf, it.pos, it.left = body, 0, b.Records
	return nil
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
