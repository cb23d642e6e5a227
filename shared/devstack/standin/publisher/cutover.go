package publisher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Cutover answers a cutover candidate: accepted (now or already), conflict
// (the head moved; nothing applied), rejected (does not apply to its base)
// or expired (its not_after passed before it could be applied; nothing
// applied). not_after is checked on arrival and again at the head CAS, the
// moment the result would become visible.
func (p *Publisher) Cutover(ctx context.Context, req contract.CutoverRequest) (contract.CutoverAnswer, error) {
	ans := contract.CutoverAnswer{SchemaVersion: contract.SchemaVersion, RequestID: req.RequestID}
	if p.opts.OnArrival != nil {
		p.opts.OnArrival(ctx, req)
	}
	queued := false
	m := newMemo()
	for attempt := 0; attempt < p.opts.MaxAttempts; attempt++ {
		base, err := p.read(ctx, req.Collection, m)
		if errors.Is(err, store.ErrNotFound) {
			// The collection has no head any more (dropped and cleaned
			// up): there is nothing to apply the candidate to.
			ans.Status, ans.Reason = contract.CutoverRejected, fmt.Sprintf("collection %s has no head: %v", req.Collection, err)
			return ans, nil
		}
		if err != nil {
			return ans, err
		}
		ans.HeadVersion = base.Head.Version
		if p.ConflictChecks(req) {
			// The capability is echoed on every answer to a request that
			// asks for it, moved head or not (an idempotent replay
			// included): the coordinator hands a moved-base result only to
			// a publisher that proved it.
			ans.ConflictCheck = contract.ConflictCheckV1
		}
		if v, sum, on, ok := p.applied(ctx, base, req.RequestID, m); ok {
			// A replay says what the request was applied on, as its
			// first answer did.
			ans.Status, ans.CommittedVersion, ans.CommittedChecksum, ans.AppliedOnVersion = contract.CutoverAccepted, v, sum, on
			return ans, nil
		}
		moved := base.Head.Version != req.BaseVersion || base.Head.ManifestChecksum != req.BaseChecksum
		checked := moved && p.ConflictChecks(req)
		removed := req.Removed
		switch {
		case checked:
			// The owner's conflict check (conflict.go): the request's own
			// change applies on this head only if it is conflict-free here.
			var clause, why string
			removed, clause, why, err = p.checkConflicts(ctx, base, req, m)
			if err != nil {
				return ans, err
			}
			ans.ConflictCheck = contract.ConflictCheckV1
			if clause != "" {
				p.log.Info("cutover refused by the conflict check", "collection", req.Collection, "base", req.BaseVersion, "head", base.Head.Version, "clause", clause, "reason", why)
				ans.Status, ans.ConflictClause, ans.Reason = contract.CutoverConflict, clause, fmt.Sprintf("head is v%d, candidate is based on v%d: %s", base.Head.Version, req.BaseVersion, why)
				return ans, nil
			}
		case moved && !p.opts.AcceptRebase:
			ans.Status, ans.Reason = contract.CutoverConflict, fmt.Sprintf("head is v%d, candidate is based on v%d", base.Head.Version, req.BaseVersion)
			return ans, nil
		}
		if now := p.now().UnixMilli(); now > req.NotAfterUnixMs {
			ans.Status, ans.Reason = contract.CutoverExpired, fmt.Sprintf("not_after %d passed (now %d)", req.NotAfterUnixMs, now)
			return ans, nil
		}
		if why := p.coverage(req); why != "" {
			p.log.Warn("cutover refused: its coverage is not a rewrite's", "collection", req.Collection, "request_id", req.RequestID, "reason", why)
			ans.Status, ans.Reason = contract.CutoverRejected, why
			return ans, nil
		}
		if err := p.CheckOutputs(ctx, req.Added); err != nil && !p.opts.OutputsChecked {
			ans.Status, ans.Reason = contract.CutoverRejected, err.Error()
			return ans, nil
		}
		if p.opts.Queue != nil && !queued {
			queued = true
			p.opts.Queue(ctx, req)
		}
		head, err := p.commitOn(ctx, base, Change{Added: req.Added, Removed: removed, NotAfterUnixMs: req.NotAfterUnixMs,
			Origin: contract.Origin{Kind: contract.OriginCutover, RequestID: req.RequestID}, Facts: req.CCSFacts, memo: m})
		switch {
		case errors.Is(err, ErrExpired):
			ans.Status, ans.Reason = contract.CutoverExpired, err.Error()
			return ans, nil
		case errors.Is(err, ErrStaleFacts):
			ans.Status, ans.Reason = contract.CutoverStaleFacts, err.Error()
			return ans, nil
		case err == nil:
			ans.Status, ans.CommittedVersion, ans.CommittedChecksum, ans.HeadVersion = contract.CutoverAccepted, head.Version, head.ManifestChecksum, head.Version
			ans.AppliedOnVersion = base.Head.Version
			if checked {
				p.log.Info("cutover accepted on a newer head by the conflict check", "collection", req.Collection, "base", req.BaseVersion, "applied_on", base.Head.Version)
			}
			return ans, nil
		case errors.Is(err, ErrChange):
			if moved {
				ans.Status = contract.CutoverConflict
			} else {
				ans.Status = contract.CutoverRejected
			}
			ans.Reason = err.Error()
			return ans, nil
		case errors.Is(err, ErrConflict) && !p.opts.AcceptRebase && !p.ConflictChecks(req):
			ans.Status, ans.Reason = contract.CutoverConflict, err.Error()
			return ans, nil
		case errors.Is(err, ErrConflict):
			continue
		default:
			return ans, err
		}
	}
	ans.Status, ans.Reason = contract.CutoverConflict, "head kept moving"
	return ans, nil
}

// ConflictChecks says whether this publisher judges req by the conflict
// check when its head moved past req's base: req asks for it
// (conflict_check v1) and the publisher has the capability.
func (p *Publisher) ConflictChecks(req contract.CutoverRequest) bool {
	return req.ConflictCheck == contract.ConflictCheckV1 && !p.opts.NoConflictCheck
}

// applied finds requestID among the origins of recent roots: the version
// and checksum that applied it, and the version it was applied on.
func (p *Publisher) applied(ctx context.Context, snap Snapshot, requestID string, m *memo) (uint64, string, uint64, bool) {
	root, key, sum := snap.Root, snap.Head.ManifestKey, snap.Head.ManifestChecksum
	for range p.opts.IdempotencyWalk {
		if root.Origin.RequestID == requestID {
			return root.Version, sum, root.ParentVersion, true
		}
		if root.ParentVersion == 0 {
			return 0, "", 0, false
		}
		key, sum = root.ParentKey, root.ParentChecksum
		next, err := m.openRoot(ctx, p, key, sum)
		if err != nil {
			return 0, "", 0, false
		}
		root = next
	}
	return 0, "", 0, false
}

// CheckOutputs verifies that every added object exists with its size.
func (p *Publisher) CheckOutputs(ctx context.Context, added []contract.ObjectEntry) error {
	for _, o := range added {
		size, err := p.objects.Size(ctx, o.Key)
		if err != nil {
			return fmt.Errorf("output %s: %w", o.Key, err)
		}
		if size != o.Size {
			return fmt.Errorf("output %s is %d bytes, candidate says %d", o.Key, size, o.Size)
		}
	}
	return nil
}

// Handler serves POST /cutover and POST /retire (retire.go) with the
// contract's JSON documents.
func (p *Publisher) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /retire", p.serveRetire)
	mux.HandleFunc("POST /cutover", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := contract.DecodeCutoverRequest("POST /cutover", body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ans, err := p.Cutover(r.Context(), req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out, _ := contract.Encode(ans)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
	return mux
}
