package lineage_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/store"
)

// objects is a map with S3's conditional-write outcomes, enough for the
// stand-in publisher to commit a head.
type objects struct {
	m   map[string][]byte
	err error // every Get fails with it when set
}

func etag(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:8]) }

func (o *objects) Get(_ context.Context, k string) ([]byte, error) {
	b, _, err := o.GetWithETag(context.Background(), k)
	return b, err
}

func (o *objects) GetWithETag(_ context.Context, k string) ([]byte, string, error) {
	if o.err != nil {
		return nil, "", o.err
	}
	b, ok := o.m[k]
	if !ok {
		return nil, "", fmt.Errorf("get %s: %w", k, store.ErrNotFound)
	}
	return b, etag(b), nil
}

func (o *objects) Put(_ context.Context, k string, b []byte) (string, error) {
	o.m[k] = b
	return etag(b), nil
}

func (o *objects) PutIfMatch(_ context.Context, k string, b []byte, e string) (string, error) {
	if cur, ok := o.m[k]; !ok || etag(cur) != e {
		return "", store.ErrPreconditionFailed
	}
	return o.Put(context.Background(), k, b)
}

func (o *objects) PutIfAbsent(_ context.Context, k string, b []byte) (string, error) {
	if _, ok := o.m[k]; ok {
		return "", store.ErrPreconditionFailed
	}
	return o.Put(context.Background(), k, b)
}

func (o *objects) Size(_ context.Context, k string) (int64, error) { return int64(len(o.m[k])), nil }

// HeadRoot is the one verified head -> root read: every reason not to trust
// a head is ErrBadHead (with its cause kept), a transient read failure is not.
func TestHeadRootClassifiesEveryUntrustworthyHead(t *testing.T) {
	ctx := context.Background()
	fresh := func(t *testing.T) (*objects, contract.Head) {
		o := &objects{m: map[string][]byte{}}
		h, err := publisher.New(o, time.Now, publisher.Options{}, nil).Create(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		return o, h
	}
	o, h := fresh(t)
	gotH, root, err := lineage.HeadRoot(ctx, o, "c1")
	if err != nil || gotH != h || root.Version != h.Version || root.Collection != "c1" {
		t.Fatalf("good head: %+v %+v %v", gotH, root, err)
	}
	cases := map[string]struct {
		edit  func(o *objects, h contract.Head)
		cause error
	}{
		"no head":       {func(o *objects, h contract.Head) { delete(o.m, contract.HeadKey("c1")) }, store.ErrNotFound},
		"head not JSON": {func(o *objects, h contract.Head) { o.m[contract.HeadKey("c1")] = []byte("{") }, nil},
		"root missing":  {func(o *objects, h contract.Head) { delete(o.m, h.ManifestKey) }, store.ErrNotFound},
		"root tampered": {func(o *objects, h contract.Head) { o.m[h.ManifestKey] = append(o.m[h.ManifestKey], ' ') }, contract.ErrChecksumMismatch},
		"other collection": {func(o *objects, h contract.Head) {
			h.Collection = "c2"
			o.m[contract.HeadKey("c1")], _ = contract.Encode(h)
		}, contract.ErrInvalid},
		"other version": {func(o *objects, h contract.Head) {
			h.Version++
			o.m[contract.HeadKey("c1")], _ = contract.Encode(h)
		}, contract.ErrInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, h := fresh(t)
			tc.edit(o, h)
			_, _, err := lineage.HeadRoot(ctx, o, "c1")
			if !errors.Is(err, lineage.ErrBadHead) || (tc.cause != nil && !errors.Is(err, tc.cause)) {
				t.Fatalf("err = %v, want ErrBadHead wrapping %v", err, tc.cause)
			}
		})
	}
	o.err = store.ErrThrottled
	if _, _, err := lineage.HeadRoot(ctx, o, "c1"); errors.Is(err, lineage.ErrBadHead) || !errors.Is(err, store.ErrThrottled) {
		t.Fatalf("throttled read: %v, want a retryable error, not a bad head", err)
	}
}
