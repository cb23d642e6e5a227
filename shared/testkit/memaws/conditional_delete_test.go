package memaws_test

import (
	"errors"
	"testing"

	"github.com/searchfabric/bcc/shared/store"
)

// S3's conditional delete (If-Match on DeleteObject), as the stand-in
// publisher retires a head: the current ETag deletes, another is 412 and
// keeps the object, a missing key is 404.
func TestS3ConditionalDelete(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		bk := newBucket(t, b)
		e1, err := bk.PutIfAbsent(ctx, "head", []byte("v1"))
		if err != nil {
			t.Fatal(err)
		}
		e2, err := bk.PutIfMatch(ctx, "head", []byte("v2"), e1)
		if err != nil {
			t.Fatal(err)
		}
		if err := bk.DeleteIfMatch(ctx, "head", e1); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Fatalf("delete with a stale ETag: %v, want 412", err)
		}
		if got, err := bk.Get(ctx, "head"); err != nil || string(got) != "v2" {
			t.Fatalf("after a refused conditional delete: %q %v", got, err)
		}
		if err := bk.DeleteIfMatch(ctx, "head", e2); err != nil {
			t.Fatalf("delete with the current ETag: %v", err)
		}
		if err := bk.DeleteIfMatch(ctx, "head", e2); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("conditional delete of a missing key: %v, want 404", err)
		}
	})
}
