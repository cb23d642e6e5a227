package gc

import (
	"context"
	"errors"
	"fmt"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// CorruptPart is a manifest part that fails verification.
type CorruptPart struct {
	Key     string `json:"key"`
	Version uint64 `json:"version"` // the root that references it (the newest)
	Error   string `json:"error"`
}

// verifyParts reads and verifies every part of the walked lineage and of
// the roots above the head that this sweep has not read yet: a corrupt
// part is reported (ManifestPartCorrupt, the plan, status) whether or not
// a candidate fell in its key range. Memory: one part at a time. A corrupt
// part of a root a token may open (the head, a retained root, a root above
// the head) refuses the collection (GCRefused manifest, alarmed). A root
// no token can open is only being trimmed: a part of it already gone is
// the trim in progress (parts go before their root), and a corrupt one is
// reported but refuses nothing (the trim deletes it).
func (pl planner) verifyParts(ctx context.Context, v *view, fr *frame, p *Plan) error {
	seen := map[string]bool{}
	refused := 0
	var first error
	check := func(m *contract.Manifest, trimmable bool) error {
		type pending struct {
			key    string
			verify func() error
		}
		var todo []pending
		for _, ref := range m.Parts {
			todo = append(todo, pending{ref.Key, func() error { return pl.lin.VerifyPart(ctx, ref) }})
		}
		for _, ref := range m.Change.Parts {
			todo = append(todo, pending{ref.Key, func() error { return pl.lin.VerifyChangePart(ctx, m, ref) }})
		}
		for _, t := range todo {
			if seen[t.key] || pl.lin.Verified(t.key) {
				continue
			}
			seen[t.key] = true
			err := t.verify()
			switch {
			case err == nil || (trimmable || m.Version > v.walk.Head.Version) && errors.Is(err, store.ErrNotFound):
			case definite(err):
				p.CorruptParts = append(p.CorruptParts, CorruptPart{Key: t.key, Version: m.Version, Error: err.Error()})
				if !trimmable {
					refused++
					if first == nil {
						first = err
					}
				}
			default:
				return fmt.Errorf("gc of %s: verify part %s: %w", v.c, t.key, err)
			}
		}
		return nil
	}
	for i := range v.walk.Roots {
		if err := check(&v.walk.Roots[i], i > 0 && !fr.retained[i]); err != nil {
			return err
		}
	}
	for i := range fr.above {
		// A root above the head is nobody's lineage now: a part of it that
		// is gone (trimmed while it was not protected) protects nothing.
		if err := check(&fr.above[i], fr.aboveUntil[i] <= fr.now); err != nil {
			return err
		}
	}
	if refused > 0 {
		return refuse(v.c, RefusedManifest, fmt.Errorf("%d manifest parts fail verification, the first: %w", refused, first))
	}
	return nil
}

// partFailed turns a lineage error into the sweep's answer, recording a
// part that failed verification while a candidate was judged.
func (p *Plan) partFailed(c string, err error) error {
	var de *contract.DecodeError
	var ce *contract.ChecksumError
	switch {
	case errors.As(err, &de) && (de.Doc == "manifest part" || de.Doc == "change part"):
		p.CorruptParts = append(p.CorruptParts, CorruptPart{Key: de.Where, Error: err.Error()})
	case errors.As(err, &ce) && contract.IsManifestKey(c, ce.Where):
		if _, root := contract.RootVersion(c, ce.Where); !root {
			p.CorruptParts = append(p.CorruptParts, CorruptPart{Key: ce.Where, Error: err.Error()})
		}
	}
	return lineageErr(c, err)
}
