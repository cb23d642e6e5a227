package publisher

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/searchfabric/bcc/shared/contract"
)

// The conflict check of a cutover on a moved head (issue 26, SYSTEM rule 2
// as revised; contract.ConflictCheckV1, events/PUBLISHER.md "Conflict-
// checked cutover"). A rewrite replaces inputs by outputs holding exactly
// the inputs' versions, each record keeping its sequence number. Applied to
// a head newer than its base, it reads the same as that head when:
//
//   - incarnation: the head is of the request's lifetime and the base is in
//     its lineage (a re-created name starts a lineage of its own at v1);
//   - input_gone / checksum_changed: every removed input is in the head
//     with exactly the entry the request names (another rewrite, a
//     transition or a writer removed or replaced it: the outputs would
//     bring back what that change took away, or drop what it brought);
//   - delete_since_base: no commit since the base other than a cutover
//     added an object over an input's record key range that is not ordered
//     after every input record (min_seq <= the inputs' largest max_seq).
//     Deletes ordered after the inputs keep applying to the outputs (their
//     sequence numbers are higher), as Iceberg's rewrites keep their data
//     sequence number so newer equality deletes still apply; deletes (and
//     any records) ordered among the inputs' would be reordered by the
//     rewrite, and a delete marker the rewrite dropped (drop_deletes)
//     would let an older record resurface (rule 7). Cutovers since the
//     base only rewrite versions already committed (their own inputs, if
//     they took one of ours, fail input_gone);
//   - the CCS facts the request carries still hold at the head CAS
//     (facts.go, as for a request on its base).
//
// The coordinator never rebases: the request stays pinned to its base and
// names its exact coverage; the publisher alone decides, at its head CAS,
// that the rewrite still holds on the newer head, and applies the request's
// own change there. A head that moves again before the CAS is judged again.

// checkConflicts judges req against head, a version past its base. It
// returns the change to apply (the request's, or with a clause switched
// off the one such a publisher would apply) and, when refused, the clause
// and why.
func (p *Publisher) checkConflicts(ctx context.Context, head Snapshot, req contract.CutoverRequest, m *memo) (removed []contract.ObjectEntry, clause, why string, err error) {
	since, clause, why, err := p.sinceBase(ctx, head, req, m)
	if err != nil || clause != "" {
		return nil, clause, why, err
	}
	for _, r := range req.Removed {
		held, ok, err := p.lookup(ctx, &head.Root, r.Key, m)
		switch {
		case err != nil:
			return nil, "", "", err
		case !ok && !p.skip(contract.ClauseInputGone):
			return nil, contract.ClauseInputGone, fmt.Sprintf("input %s is no longer in head v%d", r.Key, head.Head.Version), nil
		case !ok:
			continue // the mutation: only what is still there is removed
		case held != r && !p.skip(contract.ClauseChecksumChanged):
			return nil, contract.ClauseChecksumChanged, fmt.Sprintf("input %s is in head v%d with checksum %s (tier %s), the request replaces checksum %s (tier %s)",
				r.Key, head.Head.Version, held.Checksum, held.Tier, r.Checksum, r.Tier), nil
		}
		removed = append(removed, held) // removed by key: the mutation removes what is there
	}
	if !p.skip(contract.ClauseDeleteSinceBase) {
		if why, err := p.interleaved(ctx, since, req.Removed); err != nil || why != "" {
			return nil, contract.ClauseDeleteSinceBase, why, err
		}
	}
	return removed, "", "", nil
}

// skip says whether a clause of the check is switched off (mutation proofs
// only: Options.SkipClauses).
func (p *Publisher) skip(clause string) bool { return slices.Contains(p.opts.SkipClauses, clause) }

// sinceBase returns the versions from head down to (excluding) the
// request's base, newest first, after the incarnation clause: the head is
// of the request's lifetime and its parent chain reaches exactly the base
// (version and checksum) within Options.ConflictWalk versions.
func (p *Publisher) sinceBase(ctx context.Context, head Snapshot, req contract.CutoverRequest, memo *memo) ([]contract.Manifest, string, string, error) {
	checked := !p.skip(contract.ClauseIncarnation)
	if checked && head.Head.Inc() != req.Inc() {
		return nil, contract.ClauseIncarnation, fmt.Sprintf("head is incarnation %d, the request's base is of incarnation %d", head.Head.Inc(), req.Inc()), nil
	}
	if checked && head.Head.Version <= req.BaseVersion {
		// Moved, but not past the base: the head went back (a restore)
		// or another lineage took over.
		return nil, contract.ClauseIncarnation, fmt.Sprintf("head v%d is not a descendant of the base v%d", head.Head.Version, req.BaseVersion), nil
	}
	m := head.Root
	var since []contract.Manifest
	for m.Version > req.BaseVersion {
		since = append(since, m)
		switch {
		case len(since) > p.opts.ConflictWalk:
			return nil, contract.ClauseUnproven, fmt.Sprintf("more than %d versions since the base v%d", p.opts.ConflictWalk, req.BaseVersion), nil
		case m.ParentVersion == 0 || m.ParentVersion < req.BaseVersion:
			if !checked {
				return since, "", "", nil // the mutation: versions above the base's number, whatever their lineage
			}
			return nil, contract.ClauseIncarnation, fmt.Sprintf("the base v%d is not in the lineage of head v%d", req.BaseVersion, head.Head.Version), nil
		case m.ParentVersion == req.BaseVersion:
			if checked && m.ParentChecksum != req.BaseChecksum {
				return nil, contract.ClauseIncarnation, fmt.Sprintf("head v%d descends from another v%d (%s) than the base (%s)", head.Head.Version, req.BaseVersion, m.ParentChecksum, req.BaseChecksum), nil
			}
			return since, "", "", nil
		}
		parent, err := memo.openRoot(ctx, p, m.ParentKey, m.ParentChecksum)
		if err != nil {
			return nil, contract.ClauseUnproven, fmt.Sprintf("read v%d: %v", m.ParentVersion, err), nil
		}
		m = parent
	}
	return since, "", "", nil
}

// interleaved names an object a non-cutover commit since the base added
// over an input's record key range that is not ordered after every input
// record ("" when none).
func (p *Publisher) interleaved(ctx context.Context, since []contract.Manifest, inputs []contract.ObjectEntry) (string, error) {
	var newest uint64
	for _, in := range inputs {
		newest = max(newest, in.MaxSeq)
	}
	for i := range since {
		m := &since[i]
		if m.Origin.Kind == contract.OriginCutover {
			continue
		}
		added, err := p.changeAdded(ctx, m)
		if err != nil {
			return "", err
		}
		for _, a := range added {
			if a.DocCount == 0 || a.MinSeq > newest {
				continue
			}
			for _, in := range inputs {
				if in.DocCount > 0 && a.MinRecordKey <= in.MaxRecordKey && a.MaxRecordKey >= in.MinRecordKey {
					return fmt.Sprintf("v%d added %s (%d records, %d deletes, seq %d..%d) over input %s [%s, %s], not ordered after the inputs (max seq %d)",
						m.Version, a.Key, a.DocCount, a.DeleteCount, a.MinSeq, a.MaxSeq, in.Key, in.MinRecordKey, in.MaxRecordKey, newest), nil
				}
			}
		}
	}
	return "", nil
}

// changeAdded is m's added entries (inline, or from its change parts).
func (p *Publisher) changeAdded(ctx context.Context, m *contract.Manifest) ([]contract.ObjectEntry, error) {
	if len(m.Change.Parts) == 0 {
		return m.Change.Added, nil
	}
	var out []contract.ObjectEntry
	for _, ref := range m.Change.Parts {
		if ref.Kind != contract.ChangeAdded {
			continue
		}
		b, err := p.objects.Get(ctx, ref.Key)
		if err != nil {
			return nil, fmt.Errorf("open change part %s: %w", ref.Key, err)
		}
		cp, err := contract.DecodeChangePart(ref, m.Version, b)
		if err != nil {
			return nil, err
		}
		out = append(out, cp.Objects...)
	}
	return out, nil
}

// lookup finds key in m's object set (one part read).
func (p *Publisher) lookup(ctx context.Context, m *contract.Manifest, key string, memo *memo) (contract.ObjectEntry, bool, error) {
	i := m.PartFor(key)
	if i < 0 {
		return contract.ObjectEntry{}, false, nil
	}
	part, err := memo.loadPart(ctx, p, m.Parts[i])
	if err != nil {
		return contract.ObjectEntry{}, false, err
	}
	j, ok := slices.BinarySearchFunc(part.Objects, key, func(o contract.ObjectEntry, k string) int { return cmp.Compare(o.Key, k) })
	if !ok {
		return contract.ObjectEntry{}, false, nil
	}
	return part.Objects[j], true, nil
}
