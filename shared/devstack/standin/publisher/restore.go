package publisher

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Restore puts the head of collection back to an older committed version
// of its lineage (a restore, a rollback, an operator's mistake): the head
// pointer is CASed to that version's existing root; nothing is rewritten.
// The newer roots stay where they are, abandoned.
func (p *Publisher) Restore(ctx context.Context, collection string, version uint64) (contract.Head, error) {
	cur, err := p.Read(ctx, collection)
	if err != nil {
		return contract.Head{}, err
	}
	key, sum, root := cur.Head.ManifestKey, cur.Head.ManifestChecksum, cur.Root
	for root.Version > version {
		if root.ParentVersion == 0 {
			return contract.Head{}, fmt.Errorf("restore %s to v%d: not in the lineage of v%d", collection, version, cur.Head.Version)
		}
		key, sum = root.ParentKey, root.ParentChecksum
		if root, err = p.openRoot(ctx, key, sum); err != nil {
			return contract.Head{}, fmt.Errorf("restore %s to v%d: %w", collection, version, err)
		}
	}
	if root.Version != version {
		return contract.Head{}, fmt.Errorf("restore %s to v%d: no such version", collection, version)
	}
	head := contract.Head{SchemaVersion: contract.SchemaVersion, Collection: collection, Incarnation: root.Incarnation, Version: version, ManifestKey: key,
		ManifestChecksum: sum, CommittedAtUnixMs: p.now().UnixMilli()}
	body, err := contract.Encode(head)
	if err != nil {
		return head, err
	}
	if _, err := p.objects.PutIfMatch(ctx, contract.HeadKey(collection), body, cur.etag); err != nil {
		if errors.Is(err, store.ErrPreconditionFailed) {
			return head, fmt.Errorf("restore %s: %w", collection, ErrConflict)
		}
		return head, fmt.Errorf("restore %s: %w", collection, err)
	}
	p.log.Warn("head restored to an older version", "collection", collection, "from", cur.Head.Version, "to", version)
	return head, nil
}
