package watermark

import (
	"context"
	"fmt"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// Objects is where the watermark is written.
type Objects interface {
	Put(ctx context.Context, key string, body []byte) (string, error)
}

// Publisher writes the watermark object.
type Publisher struct {
	objects Objects
	key     string
}

// New returns a publisher writing key.
func New(objects Objects, key string) *Publisher { return &Publisher{objects: objects, key: key} }

// Publish writes global_safe_ts = safeTs.
func (p *Publisher) Publish(ctx context.Context, safeTs, now time.Time) error {
	b, err := contract.Encode(contract.Watermark{SchemaVersion: contract.SchemaVersion, GlobalSafeTsUnixMs: safeTs.UnixMilli(), PublishedAtUnixMs: now.UnixMilli()})
	if err != nil {
		return err
	}
	if _, err := p.objects.Put(ctx, p.key, b); err != nil {
		return fmt.Errorf("publish watermark %s: %w", p.key, err)
	}
	return nil
}
