package contract

import "fmt"

// Size limits per document. A reader refuses a document above its limit
// with ErrTooLarge (a DecodeError naming the document and where), reading
// at most limit+1 bytes of it: memory is bounded by the limit, not by what
// a writer put in the bucket. The limits leave room for several times what
// the publisher writes (a part of MaxPartObjects entries is about 2 MB; a
// root of a 10,000,000-object collection about 1 MB, its change in parts).
const (
	MaxHeadBytes       = 64 << 10 // manifest_committed_head.json
	MaxRootBytes       = 8 << 20  // a manifest root (part and change-part references, summary, small inline change)
	MaxPartBytes       = 8 << 20  // a manifest part
	MaxChangePartBytes = 8 << 20  // a change part
	MaxWatermarkBytes  = 64 << 10 // the query plane's watermark object
	MaxFactsBytes      = 1 << 20  // CCS facts of one collection (an owner's answer)
	MaxOwnerAnswer     = 1 << 20  // any other owner answer (cutover, release intent)

	// MaxPartObjects is the most entries of one manifest part or change part.
	MaxPartObjects = 4096
)

// ErrTooLarge: a document is larger than its documented limit. It is also
// ErrInvalid (a definite answer: nothing is deleted or published from it).
var ErrTooLarge = fmt.Errorf("document larger than its limit: %w", ErrInvalid)

// TooLarge is the error for a document of kind doc at where that exceeds
// limit bytes (size < 0: unknown, only that it exceeds the limit).
func TooLarge(doc, where string, size int64, limit int) error {
	reason := fmt.Sprintf("more than %d bytes", limit)
	if size >= 0 {
		reason = fmt.Sprintf("%d bytes, the limit is %d", size, limit)
	}
	return &DecodeError{Doc: doc, Where: where, Reason: reason, Err: ErrTooLarge}
}

func checkSize(doc, where string, n, limit int) error {
	if n > limit {
		return TooLarge(doc, where, int64(n), limit)
	}
	return nil
}
