// Package segment is the format of the coordinator's data objects and the
// streaming k-way merge that compaction is built on.
//
// # Vocabulary
//
//   - record: one version of one key: key, seq, delete marker flag, timestamp
//     (unix ms) and payload.
//   - seq: the publisher-assigned sequence number of a write. For one key, the
//     version with the highest seq is the current one, wherever it is stored;
//     that is what lets any subset of objects be merged without reordering.
//   - delete marker: a record saying "this key is gone as of seq". It must
//     outlive every older version of its key, or the older version would
//     resurface.
//   - segment: an immutable object holding records strictly sorted by key, at
//     most one version per key.
//   - block: the unit of verification. Reads are of ranges: runs of whole
//     blocks of at most ReadOptions.RangeBytes (default 4 MiB), because
//     object storage answers a GET after tens of milliseconds whatever its
//     size; an object of at most one range is read whole.
//
// # Invariants
//
//   - Keys are non-empty and strictly increasing within a segment; readers
//     reject anything else as corruption rather than returning it.
//   - Every byte a reader returns was covered by a verified CRC-32C (block,
//     index or footer). Corruption is reported as *CorruptError naming the
//     section, block number and byte offset (errors.Is(err, ErrCorrupt)); a
//     transport failure is wrapped as is, so callers can tell "retry the read"
//     from "this object is bad".
//   - Memory is bounded by the range size, never by the object's: an
//     iterator holds at most two ranges (the one it decodes and the one read
//     ahead), each at most max(RangeBytes, one block); a Reader of an object
//     of at most one range holds that object, which its iterators share.
//     Merge holds that per input plus one output block, besides the block
//     indexes (about 24 bytes plus the first key per block of each input and
//     of the open output). So a Lambda can merge objects larger than its
//     memory: 2 x RangeBytes per input, whatever the inputs' sizes.
//   - Writing is deterministic: the same records with the same options give
//     the same bytes, so a retried compaction rewrites identical objects
//     under the same keys (and the same checksums).
//
// # Merge semantics and the DropDeletes contract
//
// Merge yields, for each key present in any input, the version with the
// highest seq (older versions are dropped: they can never be read again
// because a newer version exists in the merge output). A winning delete marker
// is kept unless MergeOptions.DropDeletes is set. The caller may set
// DropDeletes only when no object outside the merge can hold an older version
// of any key in the merged key range: every object outside the merge whose
// [min_record_key, max_record_key] overlaps the merge's range must be strictly
// newer (its min_seq greater than every seq in the merge). The compaction
// planner computes exactly that (compact.Job.DropDeletes); Merge cannot check
// it because it only sees its inputs.
//
// # Byte layout (format version 1)
//
// All integers are little-endian; CRCs are CRC-32C (Castagnoli).
//
//	segment  = block* index footer
//
//	block    = record+ block_crc
//	  block_crc  u32   CRC-32C of the block's record bytes (everything before it)
//	  A block's record bytes never exceed the block size (default 64 KiB): a
//	  record that would overflow the open block starts the next one, and a
//	  record larger than the block size gets a block to itself. A block, its
//	  CRC included, is at most MaxBlockLength (8 MiB) bytes.
//
//	record   = record_length u32   bytes after this field: 21 + key_length + payload length
//	           flags         u8    bit 0: delete marker; other bits must be 0
//	           seq           u64
//	           ts_unix_ms    i64
//	           key_length    u32   1..65536 (MaxKeyLen)
//	           key           [key_length]byte
//	           payload       [record_length - 21 - key_length]byte, at most
//	                         MaxPayloadLen (8 MiB - 128 KiB), so any record fits a block
//
//	index    = entry{block_count} min_key max_key
//	  entry  = offset           u64   of the block from the start of the object
//	           length           u32   of the block, block_crc included
//	           record_count     u32   > 0
//	           block_crc        u32   same value as the block's trailing CRC
//	           first_key_length u32
//	           first_key        [first_key_length]byte
//	  Blocks are contiguous from offset 0 in index order; first keys strictly
//	  increase. min_key / max_key are the first and last record keys
//	  (lengths in the footer; both empty for a segment with no records).
//	  The index is at most MaxIndexLength (8 MiB) bytes; a writer whose
//	  index would grow past it refuses the record (ErrSegmentFull) and Merge
//	  starts its next output instead.
//
//	footer   = 100 bytes at the end of the object:
//	  off  size  field
//	    0     4  format_version     = 1
//	    4     4  block_count
//	    8     8  index_offset       = end of the last block
//	   16     8  index_length       index_offset + index_length = object size - 100
//	   24     4  index_crc          CRC-32C of the index bytes
//	   28     4  min_key_length
//	   32     4  max_key_length
//	   36     4  reserved           = 0
//	   40     8  record_count       every record, delete markers included
//	   48     8  delete_count       records with the delete flag
//	   56     8  min_ts_unix_ms     i64
//	   64     8  max_ts_unix_ms     i64
//	   72     8  min_seq
//	   80     8  max_seq
//	   88     4  footer_crc         CRC-32C of footer bytes [0, 88)
//	   92     8  magic              "BCC-SEG\x00"
//
// A reader opens a segment with one read of its last TailBytes (128 KiB:
// the footer and, for any object up to about 100 MiB of 64 KiB blocks, the
// index; the whole object when it is at most one range), a second one only
// for an index that does not fit, verifies both CRCs and cross-checks the
// index against the footer. Its iterators read ranges of whole blocks, the
// next while the current one is decoded (ReadOptions.NoReadAhead turns that
// off), and verify each block's CRC as they reach it.
//
// # Limits a reader enforces (memory bounded by the format, not the object)
//
// Every length is checked against the format's limits before anything of
// that length is allocated or read: the index length against MaxIndexLength
// (at Open, from the footer alone), every block length against
// MaxBlockLength and its record count against what its length can hold (at
// Open, from the index). So Open allocates at most max(TailBytes,
// RangeBytes) + MaxIndexLength bytes (plus about 48 bytes per block of
// bookkeeping, at most MaxIndexLength / 25 blocks) and an iterator at most
// two ranges of max(RangeBytes, MaxBlockLength), whatever a footer or index
// claims. A key longer than MaxKeyLen inside a
// block is corruption at read. An empty segment must claim zero ranges; for
// a non-empty one, the footer's ts and seq ranges must be exactly the
// records' (checked when an iterator reaches the end), and its min/max keys
// the first and last keys. The manifest entry of a segment (contract.ObjectEntry) is derived
// from the footer by Footer.Entry: doc_count = record_count, delete_count,
// min/max ts, seq and record key; the object checksum is SHA-256 over the
// whole object, which a Writer computes while writing (Footer.Checksum).
// An empty segment (no records) is valid: no blocks, zero counts and ranges.
package segment
