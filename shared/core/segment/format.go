package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Format constants. The byte layout they describe is documented in doc.go.
const (
	// FormatVersion is the only segment format version this build writes and reads.
	FormatVersion = 1
	// FooterSize is the fixed size of the footer at the end of every segment.
	FooterSize = 100
	// DefaultBlockSize is the target size of a block's record area.
	DefaultBlockSize = 64 << 10
	// MaxKeyLen bounds a record key (bytes).
	MaxKeyLen = 1 << 16
	// MaxBlockLength bounds a block, its CRC included: the largest buffer an
	// iterator allocates and the largest single read it issues.
	MaxBlockLength = 8 << 20
	// MaxPayloadLen bounds a record payload (bytes) so that any record fits
	// in one block: header + MaxKeyLen + MaxPayloadLen + CRC <= MaxBlockLength.
	MaxPayloadLen = MaxBlockLength - 2*MaxKeyLen
	// MaxIndexLength bounds the block index (entries and min/max keys): the
	// largest buffer Open allocates. A writer whose index would exceed it
	// refuses the record (ErrSegmentFull) and Merge starts a new output.
	MaxIndexLength = 8 << 20

	magic          = "BCC-SEG\x00"
	recordHeader   = 4 + 1 + 8 + 8 + 4 // record_length, flags, seq, ts, key_length
	recordFixed    = recordHeader - 4  // bytes counted by record_length besides key and payload
	crcSize        = 4
	indexEntryBase = 8 + 4 + 4 + 4 + 4 // offset, length, record_count, crc, first_key_length
	flagDelete     = 0x01
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Sentinel errors to branch on with errors.Is.
var (
	// ErrCorrupt: stored bytes fail a checksum or a structural check. Always
	// carried by a *CorruptError saying where.
	ErrCorrupt = errors.New("segment corrupt")
	// ErrKeyOrder: a writer was given a key not strictly greater than the previous one.
	ErrKeyOrder = errors.New("keys not strictly increasing")
	// ErrInvalidRecord: a record cannot be stored (empty or oversized key or payload).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrClosed: the writer was already closed.
	ErrClosed = errors.New("writer closed")
	// ErrSegmentFull: the record would take the segment's index past
	// MaxIndexLength; close the writer and start another segment.
	ErrSegmentFull = errors.New("segment index full")
	// ErrVersion: the segment was written by a newer (or unknown) format version.
	ErrVersion = errors.New("unsupported segment format version")
)

// Sections named by a CorruptError.
const (
	SectionFooter = "footer"
	SectionIndex  = "index"
	SectionBlock  = "block"
)

// CorruptError says which part of a segment failed verification.
type CorruptError struct {
	Section string // SectionFooter, SectionIndex or SectionBlock
	Block   int    // block number when Section is SectionBlock, else -1
	Offset  int64  // byte offset of the section in the object
	Reason  string
	Err     error // ErrCorrupt or ErrVersion
}

func (e *CorruptError) Error() string {
	where := e.Section
	if e.Section == SectionBlock {
		where = fmt.Sprintf("block %d", e.Block)
	}
	return fmt.Sprintf("segment: %v: %s at offset %d: %s", e.Err, where, e.Offset, e.Reason)
}

func (e *CorruptError) Unwrap() error { return e.Err }

func corrupt(section string, block int, offset int64, format string, args ...any) *CorruptError {
	return &CorruptError{Section: section, Block: block, Offset: offset, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

var le = binary.LittleEndian

// appendRecord encodes r (layout in doc.go) onto b.
func appendRecord(b []byte, r *Record) []byte {
	var flags byte
	if r.Delete {
		flags = flagDelete
	}
	b = le.AppendUint32(b, uint32(recordFixed+len(r.Key)+len(r.Payload)))
	b = append(b, flags)
	b = le.AppendUint64(b, r.Seq)
	b = le.AppendUint64(b, uint64(r.TsUnixMs))
	b = le.AppendUint32(b, uint32(len(r.Key)))
	b = append(b, r.Key...)
	return append(b, r.Payload...)
}

// decodeRecord decodes the record at the start of b. The payload aliases b.
// It returns the number of bytes consumed, or a reason the bytes are not a record.
func decodeRecord(b []byte) (Record, int, string) {
	if len(b) < recordHeader {
		return Record{}, 0, fmt.Sprintf("%d bytes left, shorter than a record header", len(b))
	}
	n := int(le.Uint32(b))
	if n < recordFixed || n > len(b)-4 {
		return Record{}, 0, fmt.Sprintf("record_length %d out of range (%d bytes left)", n, len(b)-4)
	}
	flags := b[4]
	if flags&^flagDelete != 0 {
		return Record{}, 0, fmt.Sprintf("unknown record flags %#x", flags)
	}
	keyLen := int(le.Uint32(b[21:]))
	if keyLen == 0 || keyLen > MaxKeyLen || keyLen > n-recordFixed {
		return Record{}, 0, fmt.Sprintf("key_length %d out of range (1..%d)", keyLen, min(MaxKeyLen, n-recordFixed))
	}
	key := b[recordHeader : recordHeader+keyLen]
	return Record{
		Key:      string(key),
		Seq:      le.Uint64(b[5:]),
		Delete:   flags&flagDelete != 0,
		TsUnixMs: int64(le.Uint64(b[13:])),
		Payload:  b[recordHeader+keyLen : 4+n : 4+n],
	}, 4 + n, ""
}

// blockInfo is one block index entry.
type blockInfo struct {
	Offset   int64
	Length   int64 // record area + 4-byte CRC
	Records  int
	CRC      uint32
	FirstKey string
}

func appendIndexEntry(b []byte, bi *blockInfo) []byte {
	b = le.AppendUint64(b, uint64(bi.Offset))
	b = le.AppendUint32(b, uint32(bi.Length))
	b = le.AppendUint32(b, uint32(bi.Records))
	b = le.AppendUint32(b, bi.CRC)
	b = le.AppendUint32(b, uint32(len(bi.FirstKey)))
	return append(b, bi.FirstKey...)
}

// encodeFooter encodes f's stored fields (layout in doc.go).
func encodeFooter(f *Footer, indexCRC uint32) []byte {
	b := make([]byte, 0, FooterSize)
	b = le.AppendUint32(b, FormatVersion)
	b = le.AppendUint32(b, uint32(f.Blocks))
	b = le.AppendUint64(b, uint64(f.IndexOffset))
	b = le.AppendUint64(b, uint64(f.IndexLength))
	b = le.AppendUint32(b, indexCRC)
	b = le.AppendUint32(b, uint32(len(f.MinKey)))
	b = le.AppendUint32(b, uint32(len(f.MaxKey)))
	b = le.AppendUint32(b, 0) // reserved
	b = le.AppendUint64(b, uint64(f.Records))
	b = le.AppendUint64(b, uint64(f.Deletes))
	b = le.AppendUint64(b, uint64(f.MinTsUnixMs))
	b = le.AppendUint64(b, uint64(f.MaxTsUnixMs))
	b = le.AppendUint64(b, f.MinSeq)
	b = le.AppendUint64(b, f.MaxSeq)
	b = le.AppendUint32(b, crc(b))
	return append(b, magic...)
}

// rawFooter is the decoded footer before the index is read.
type rawFooter struct {
	Footer
	indexCRC  uint32
	minKeyLen int
	maxKeyLen int
}

func decodeFooter(b []byte, size int64) (rawFooter, error) {
	off := size - FooterSize
	if string(b[92:]) != magic {
		return rawFooter{}, corrupt(SectionFooter, -1, off, "bad magic %q", b[92:])
	}
	if got, want := crc(b[:88]), le.Uint32(b[88:]); got != want {
		return rawFooter{}, corrupt(SectionFooter, -1, off, "crc32c %#08x, footer says %#08x", got, want)
	}
	if v := le.Uint32(b); v != FormatVersion {
		return rawFooter{}, &CorruptError{Section: SectionFooter, Block: -1, Offset: off, Reason: fmt.Sprintf("format version %d, this reader knows %d", v, FormatVersion), Err: ErrVersion}
	}
	if le.Uint32(b[36:]) != 0 {
		return rawFooter{}, corrupt(SectionFooter, -1, off, "reserved field is not zero")
	}
	rf := rawFooter{
		Footer: Footer{
			Blocks:      int(le.Uint32(b[4:])),
			IndexOffset: int64(le.Uint64(b[8:])),
			IndexLength: int64(le.Uint64(b[16:])),
			Records:     int64(le.Uint64(b[40:])),
			Deletes:     int64(le.Uint64(b[48:])),
			MinTsUnixMs: int64(le.Uint64(b[56:])),
			MaxTsUnixMs: int64(le.Uint64(b[64:])),
			MinSeq:      le.Uint64(b[72:]),
			MaxSeq:      le.Uint64(b[80:]),
			Size:        size,
		},
		indexCRC:  le.Uint32(b[24:]),
		minKeyLen: int(le.Uint32(b[28:])),
		maxKeyLen: int(le.Uint32(b[32:])),
	}
	return rf, rf.check(off)
}

// check verifies what the footer alone can tell, before anything it claims
// is allocated or read: the index fits the object and MaxIndexLength, the
// counts agree, and an empty segment claims no ranges.
func (rf *rawFooter) check(off int64) error {
	f := &rf.Footer
	switch {
	case f.IndexOffset < 0 || f.IndexLength < 0 || f.IndexLength > off || f.IndexOffset != off-f.IndexLength:
		return corrupt(SectionFooter, -1, off, "index [%d,+%d) does not end at the footer", f.IndexOffset, f.IndexLength)
	case f.IndexLength > MaxIndexLength:
		return corrupt(SectionFooter, -1, off, "index length %d exceeds the format's %d", f.IndexLength, MaxIndexLength)
	case f.Records < 0 || f.Deletes < 0 || f.Deletes > f.Records:
		return corrupt(SectionFooter, -1, off, "record count %d / delete count %d inconsistent", f.Records, f.Deletes)
	case (f.Records == 0) != (f.Blocks == 0):
		return corrupt(SectionFooter, -1, off, "%d records in %d blocks", f.Records, f.Blocks)
	case rf.minKeyLen > MaxKeyLen || rf.maxKeyLen > MaxKeyLen:
		return corrupt(SectionFooter, -1, off, "min/max key length out of range")
	case f.IndexLength < int64(f.Blocks)*indexEntryBase+int64(rf.minKeyLen+rf.maxKeyLen):
		return corrupt(SectionFooter, -1, off, "index length %d too short for %d blocks", f.IndexLength, f.Blocks)
	case f.Records == 0 && (f.MinTsUnixMs != 0 || f.MaxTsUnixMs != 0 || f.MinSeq != 0 || f.MaxSeq != 0 || rf.minKeyLen != 0 || rf.maxKeyLen != 0):
		return corrupt(SectionFooter, -1, off, "an empty segment claims key/seq/ts ranges")
	case f.Records > 0 && (f.MinTsUnixMs > f.MaxTsUnixMs || f.MinSeq > f.MaxSeq || rf.minKeyLen == 0 || rf.maxKeyLen == 0):
		return corrupt(SectionFooter, -1, off, "min > max or an empty min/max key")
	}
	return nil
}
