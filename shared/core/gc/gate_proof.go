package gc

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrStaleProof: a delete batch's proof is older than its bound (or the
// batch carries none) at the moment it would be sent; the batch is not
// sent and is proven again (SYSTEM rule 14).
var ErrStaleProof = errors.New("delete proof stale")

// Proof is what one delete batch rests on: which head was read (the
// lineage the keys were judged against), when the oldest of the readings
// it rests on was taken (head, watermark, CCS facts), on the executor's
// clock, and the bound on its age at the moment of the call.
type Proof struct {
	collection   string
	incarnation  uint64
	headVersion  uint64
	headChecksum string
	at           time.Time
	maxAge       time.Duration
	clock        func() time.Time
	enforce      bool // guard.FreshProof (off: mutation proof only)
}

// ProvenBatch is the keys of one delete call and the proof they rest on:
// the only thing the delete port (Deleter) accepts. Its fields are
// unexported, so only the gate makes one (deleteProven, after every
// budget, pacing and backoff wait); a zero ProvenBatch carries no proof
// and is refused. The adapter calls Fresh as the last thing before it
// sends, and on every attempt of its SDK's own retries.
type ProvenBatch struct {
	keys  []string
	proof *Proof
}

// Keys are the batch's keys (a copy).
func (b ProvenBatch) Keys() []string { return slices.Clone(b.keys) }

// Len is the number of keys.
func (b ProvenBatch) Len() int { return len(b.keys) }

// Collection is the collection whose keys these are ("" without a proof).
func (b ProvenBatch) Collection() string {
	if b.proof == nil {
		return ""
	}
	return b.proof.collection
}

// Head is the head (incarnation, version, manifest checksum) the keys were
// judged against.
func (b ProvenBatch) Head() (incarnation, version uint64, checksum string) {
	if b.proof == nil {
		return 0, 0, ""
	}
	return b.proof.incarnation, b.proof.headVersion, b.proof.headChecksum
}

// ProvenAt is when the oldest reading the proof rests on was taken.
func (b ProvenBatch) ProvenAt() time.Time {
	if b.proof == nil {
		return time.Time{}
	}
	return b.proof.at
}

// Age is how old the proof is now, on the clock it was taken with.
func (b ProvenBatch) Age() time.Duration {
	if b.proof == nil {
		return time.Duration(1<<63 - 1)
	}
	return b.proof.clock().Sub(b.proof.at)
}

// Remaining is how long the proof stays fresh (<= 0: stale).
func (b ProvenBatch) Remaining() time.Duration {
	if b.proof == nil {
		return 0
	}
	if !b.proof.enforce {
		return b.proof.maxAge
	}
	return b.proof.maxAge - b.Age()
}

// Fresh is nil while the proof is younger than its bound; otherwise an
// error wrapping ErrStaleProof: the batch must not be sent.
func (b ProvenBatch) Fresh() error {
	switch {
	case b.proof == nil:
		return fmt.Errorf("%w: the batch of %d keys carries no proof", ErrStaleProof, len(b.keys))
	case !b.proof.enforce:
		return nil
	}
	if age := b.Age(); age > b.proof.maxAge {
		return fmt.Errorf("%w: the proof behind %d keys of %s is %s old, the bound is %s", ErrStaleProof, len(b.keys), b.proof.collection, age, b.proof.maxAge)
	}
	return nil
}

// Only is the batch narrowed to those of keys it holds (its proof holds
// for any subset).
func (b ProvenBatch) Only(keys []string) ProvenBatch {
	out := ProvenBatch{proof: b.proof}
	for _, k := range keys {
		if slices.Contains(b.keys, k) {
			out.keys = append(out.keys, k)
		}
	}
	return out
}
