package segment

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"

	"github.com/searchfabric/bcc/shared/contract"
)

// Record is one version of one key.
type Record struct {
	Key      string
	Seq      uint64
	Delete   bool
	TsUnixMs int64
	Payload  []byte
}

// Footer describes a whole segment. A Writer returns it from Close; a Reader
// decodes it (then Checksum is empty: it is a property of the stored bytes
// that only a full read can establish).
type Footer struct {
	Blocks      int
	Records     int64
	Deletes     int64
	MinTsUnixMs int64
	MaxTsUnixMs int64
	MinSeq      uint64
	MaxSeq      uint64
	MinKey      string
	MaxKey      string
	IndexOffset int64
	IndexLength int64
	Size        int64  // total bytes of the object, footer included
	Checksum    string // contract checksum of the bytes written ("sha256:<hex>"); writer only
}

// Entry turns the footer into the manifest entry of the object stored under
// objectKey with the given size and checksum (the stored object's, which the
// caller verified or computed while uploading; normally f.Size and
// f.Checksum). doc_count counts every record, delete markers included.
func (f Footer) Entry(objectKey string, size int64, checksum string, tier string, level int) contract.ObjectEntry {
	return contract.ObjectEntry{
		Key: objectKey, Size: size, Checksum: checksum, Tier: tier, Level: level,
		DocCount: f.Records, DeleteCount: f.Deletes,
		MinTsUnixMs: f.MinTsUnixMs, MaxTsUnixMs: f.MaxTsUnixMs,
		MinSeq: f.MinSeq, MaxSeq: f.MaxSeq,
		MinRecordKey: f.MinKey, MaxRecordKey: f.MaxKey,
	}
}

// WriterOptions tunes a Writer. The zero value is usable.
type WriterOptions struct {
	// BlockSize is the maximum size of a block's record area: a record that
	// would overflow the open block starts the next one. Zero means
	// DefaultBlockSize; it is capped at MaxBlockLength - 4. A single record
	// larger than BlockSize gets a block of its own, so a block is at most
	// max(BlockSize, one record) + 4 <= MaxBlockLength bytes.
	BlockSize int
}

func (o WriterOptions) blockSize() int {
	if o.BlockSize <= 0 {
		return DefaultBlockSize
	}
	return min(o.BlockSize, MaxBlockLength-crcSize)
}

// Writer encodes records, given in strictly increasing key order, as a
// segment. It buffers one block; everything before it is already written.
type Writer struct {
	w         io.Writer
	sum       hash.Hash
	blockSize int
	block     []byte
	cur       blockInfo
	index     []blockInfo
	indexLen  int64 // bytes of the index entries of the sealed and open blocks
	off       int64
	f         Footer
	err       error // sticky: a failed writer stays failed
	closed    bool
}

// NewWriter returns a Writer encoding a segment onto w.
func NewWriter(w io.Writer, opts WriterOptions) *Writer {
	bs := opts.blockSize()
	return &Writer{w: w, sum: sha256.New(), blockSize: bs, block: make([]byte, 0, bs+recordHeader)}
}

// Add appends r. Its key must be non-empty and strictly greater than the
// previous record's key (ErrKeyOrder). The payload is copied.
func (w *Writer) Add(r Record) error {
	if err := w.usable(); err != nil {
		return err
	}
	if err := w.checkRecord(&r); err != nil {
		return err
	}
	if !w.Fits(r) {
		return fmt.Errorf("segment: key %q would take the index past %d bytes: %w", r.Key, MaxIndexLength, ErrSegmentFull)
	}
	if w.newBlock(&r) {
		if err := w.flushBlock(); err != nil {
			return err
		}
	}
	if w.cur.Records == 0 {
		w.cur.FirstKey = r.Key
		w.indexLen += indexEntryBase + int64(len(r.Key))
	}
	w.block = appendRecord(w.block, &r)
	w.cur.Records++
	w.account(&r)
	if len(w.block) >= w.blockSize {
		return w.flushBlock()
	}
	return nil
}

// newBlock reports whether r starts a new block (the open one is full for it).
func (w *Writer) newBlock(r *Record) bool {
	return w.cur.Records > 0 && len(w.block)+recordHeader+len(r.Key)+len(r.Payload) > w.blockSize
}

// Fits reports whether adding r keeps the segment's index (entries, min and
// max key) within MaxIndexLength. When it does not, Add refuses r with
// ErrSegmentFull: close this segment and write r to the next one.
func (w *Writer) Fits(r Record) bool {
	n := w.indexLen + int64(len(r.Key)) // r's key becomes the max key
	if w.cur.Records == 0 || w.newBlock(&r) {
		n += indexEntryBase + int64(len(r.Key))
	}
	if w.f.Records == 0 {
		n += int64(len(r.Key)) // and the min key
	} else {
		n += int64(len(w.f.MinKey))
	}
	return n <= MaxIndexLength
}

// Len is the number of bytes the segment has so far, the open block included
// (the index and footer are not).
func (w *Writer) Len() int64 { return w.off + int64(len(w.block)) }

// Records is the number of records added so far.
func (w *Writer) Records() int64 { return w.f.Records }

// Close writes the open block, the index and the footer, and returns the
// footer. A segment with no records is valid (no blocks, empty min/max keys).
func (w *Writer) Close() (Footer, error) {
	if err := w.usable(); err != nil {
		return Footer{}, err
	}
	w.closed = true
	if err := w.flushBlock(); err != nil {
		return Footer{}, err
	}
	idx := make([]byte, 0, len(w.index)*(indexEntryBase+16)+len(w.f.MinKey)+len(w.f.MaxKey))
	for i := range w.index {
		idx = appendIndexEntry(idx, &w.index[i])
	}
	idx = append(idx, w.f.MinKey...)
	idx = append(idx, w.f.MaxKey...)
	w.f.Blocks = len(w.index)
	w.f.IndexOffset, w.f.IndexLength = w.off, int64(len(idx))
	if err := w.write(idx, "index"); err != nil {
		return Footer{}, err
	}
	if err := w.write(encodeFooter(&w.f, crc(idx)), "footer"); err != nil {
		return Footer{}, err
	}
	w.f.Size = w.off
	w.f.Checksum = "sha256:" + hex.EncodeToString(w.sum.Sum(nil))
	w.index = nil
	return w.f, nil
}

func (w *Writer) usable() error {
	switch {
	case w.err != nil:
		return w.err
	case w.closed:
		return ErrClosed
	}
	return nil
}

func (w *Writer) checkRecord(r *Record) error {
	switch {
	case r.Key == "" || len(r.Key) > MaxKeyLen:
		return fmt.Errorf("segment: key of %d bytes: %w", len(r.Key), ErrInvalidRecord)
	case len(r.Payload) > MaxPayloadLen:
		return fmt.Errorf("segment: payload of %d bytes for key %q: %w", len(r.Payload), r.Key, ErrInvalidRecord)
	case w.f.Records > 0 && r.Key <= w.f.MaxKey:
		return fmt.Errorf("segment: key %q after %q: %w", r.Key, w.f.MaxKey, ErrKeyOrder)
	}
	return nil
}

// account folds r into the footer statistics.
func (w *Writer) account(r *Record) {
	f := &w.f
	if f.Records == 0 {
		f.MinKey = r.Key
		f.MinTsUnixMs, f.MaxTsUnixMs = r.TsUnixMs, r.TsUnixMs
		f.MinSeq, f.MaxSeq = r.Seq, r.Seq
	}
	f.MaxKey = r.Key
	f.Records++
	if r.Delete {
		f.Deletes++
	}
	f.MinTsUnixMs, f.MaxTsUnixMs = min(f.MinTsUnixMs, r.TsUnixMs), max(f.MaxTsUnixMs, r.TsUnixMs)
	f.MinSeq, f.MaxSeq = min(f.MinSeq, r.Seq), max(f.MaxSeq, r.Seq)
}

// flushBlock seals the open block with its CRC and writes it.
func (w *Writer) flushBlock() error {
	if w.cur.Records == 0 {
		return nil
	}
	w.cur.CRC = crc(w.block)
	w.block = le.AppendUint32(w.block, w.cur.CRC)
	w.cur.Offset, w.cur.Length = w.off, int64(len(w.block))
	if err := w.write(w.block, fmt.Sprintf("block %d", len(w.index))); err != nil {
		return err
	}
	w.index = append(w.index, w.cur)
	w.cur = blockInfo{}
	w.block = w.block[:0]
	return nil
}

func (w *Writer) write(b []byte, what string) error {
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("segment: write %s at offset %d: %w", what, w.off, err)
		return w.err
	}
	w.sum.Write(b)
	w.off += int64(len(b))
	return nil
}
