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

// ConditionalDeleter is S3's conditional delete (If-Match on DeleteObject):
// the head is removed only while its ETag is the one the publisher read.
// awsio.Bucket has it.
type ConditionalDeleter interface {
	DeleteIfMatch(ctx context.Context, key, etag string) error
}

// ErrNoConditionalDelete: the bucket the publisher was given cannot delete
// conditionally, so it refuses to retire heads rather than delete blindly.
var ErrNoConditionalDelete = errors.New("the publisher's bucket has no conditional delete")

// Retire answers a head retirement: the dropped incarnation's head is
// removed only while it is exactly the head the request names (incarnation,
// version, manifest checksum), by a conditional delete on the ETag just
// read: a head written between that read and the delete (a re-created
// name's first version) fails the condition and is never removed.
//
// The answer is decided from the head, so a request is idempotent per
// request id and its own retried write is recognised (SYSTEM rules 6, 13):
// no head is "accepted" (removed by this request's earlier attempt, an
// earlier copy of it, or the SDK's retry of a delete that was applied but
// whose answer was lost: the retry then meets the missing key, 404). A 412
// or an ambiguous answer is judged by reading the head again: gone is
// accepted, still the named head is tried again, another head is a
// conflict. Only heads are ever removed, and only by this publisher.
//
// The request is one caller's word: a head is retired only when CCS, asked
// right before the delete, dropped the head's incarnation (retirable); a
// live collection's head is never removed, whoever asks.
func (p *Publisher) Retire(ctx context.Context, req contract.RetireRequest) (contract.RetireAnswer, error) {
	ans := contract.RetireAnswer{SchemaVersion: contract.SchemaVersion, RequestID: req.RequestID}
	del, ok := p.objects.(ConditionalDeleter)
	if !ok {
		return ans, ErrNoConditionalDelete
	}
	key := contract.HeadKey(req.Collection)
	for attempt := 0; attempt < p.opts.MaxAttempts; attempt++ {
		b, etag, err := p.objects.GetWithETag(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			ans.Status, ans.Reason = contract.RetireAccepted, "no head: retired"
			return ans, nil
		}
		if err != nil {
			return ans, fmt.Errorf("retire head of %s: read it: %w", req.Collection, err)
		}
		head, err := contract.DecodeHead(key, b)
		if err != nil {
			ans.Status, ans.Reason = contract.RetireRejected, fmt.Sprintf("the head is not a head document this publisher wrote: %v", err)
			return ans, nil
		}
		if head.Inc() != req.Incarnation || head.Version != req.HeadVersion || head.ManifestChecksum != req.HeadChecksum {
			ans.Status, ans.HeadIncarnation, ans.HeadVersion = contract.RetireConflict, head.Inc(), head.Version
			ans.Reason = fmt.Sprintf("head names incarnation %d v%d, the request retires incarnation %d v%d", head.Inc(), head.Version, req.Incarnation, req.HeadVersion)
			return ans, nil
		}
		if why, err := p.retirable(ctx, req.Collection, head); err != nil {
			return ans, fmt.Errorf("retire head of %s: %w", req.Collection, err)
		} else if why != "" {
			p.log.Warn("head retirement refused: CCS has not dropped its incarnation", "collection", req.Collection, "incarnation", head.Inc(), "reason", why)
			ans.Status, ans.Reason = contract.RetireRejected, why
			return ans, nil
		}
		err = del.DeleteIfMatch(ctx, key, etag)
		switch {
		case err == nil:
			p.log.Info("head retired", "collection", req.Collection, "incarnation", req.Incarnation, "version", req.HeadVersion)
			ans.Status, ans.Reason = contract.RetireAccepted, "head retired"
			return ans, nil
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrPreconditionFailed), errors.Is(err, store.ErrAmbiguous):
			// Outcome decided by the head: read it again.
			continue
		default:
			return ans, fmt.Errorf("retire head of %s: %w", req.Collection, err)
		}
	}
	return ans, fmt.Errorf("retire head of %s: %w after %d attempts", req.Collection, ErrConflict, p.opts.MaxAttempts)
}

// serveRetire serves POST /retire with the contract's JSON documents.
func (p *Publisher) serveRetire(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := contract.DecodeRetireRequest("POST /retire", body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ans, err := p.Retire(r.Context(), req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out, _ := contract.Encode(ans)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// retirable says why head may not be retired ("" when it may): CCS's
// current facts must show its incarnation dropped, tombstoned or
// succeeded by a later lifetime of the name (guard retire_tombstoned).
// Facts CCS cannot answer are an error: nothing is retired.
func (p *Publisher) retirable(ctx context.Context, collection string, head contract.Head) (string, error) {
	if p.opts.RetireLive {
		return "", nil
	}
	if p.facts == nil {
		return "this publisher has no CCS to ask whether the head's incarnation was dropped", nil
	}
	f, err := p.facts.Facts(ctx, collection)
	if err != nil {
		return "", fmt.Errorf("read CCS facts: %w", err)
	}
	switch {
	case f.Inc() > head.Inc():
		return "", nil
	case f.Inc() == head.Inc() && f.Tombstoned:
		return "", nil
	}
	return fmt.Sprintf("CCS has not dropped incarnation %d of %s (its facts v%d: incarnation %d, tombstoned %v)",
		head.Inc(), collection, f.FactsVersion, f.Inc(), f.Tombstoned), nil
}
