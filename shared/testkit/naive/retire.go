package naive

import (
	"context"

	"github.com/searchfabric/bcc/shared/contract"
)

// Deleter deletes one key unconditionally.
type Deleter interface {
	Delete(ctx context.Context, key string) error
}

// PlainHeadDelete is the head "retirement" the tombstone cleanup did before
// the publisher owned it: the cleanup re-read the head, then deleted the
// key with a plain DeleteObject. Whatever was written at the key between
// that read and the delete (a re-created name's first head) is deleted
// with it. It satisfies gc.HeadRetirer.
type PlainHeadDelete struct{ Bucket Deleter }

// Retire deletes the head key and answers accepted.
func (d PlainHeadDelete) Retire(ctx context.Context, req contract.RetireRequest) (contract.RetireAnswer, error) {
	if err := d.Bucket.Delete(ctx, contract.HeadKey(req.Collection)); err != nil {
		return contract.RetireAnswer{}, err
	}
	return contract.RetireAnswer{SchemaVersion: contract.SchemaVersion, RequestID: req.RequestID, Status: contract.RetireAccepted}, nil
}
