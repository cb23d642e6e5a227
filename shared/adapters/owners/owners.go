package owners

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
	"github.com/searchfabric/bcc/shared/store"
)

// Client is a JSON client of one owner endpoint.
type Client struct {
	base string
	http *http.Client
	sign *signing // nil: unsigned (AuthNone)
	err  error    // the endpoint is refused (CheckOwnerEndpoint): every call fails
}

// New returns a client for base: an https URL, or plain http to a
// loopback host (the embedded stack's stand-ins, e.g.
// http://127.0.0.1:4566/_bcc/publisher). Any other base makes every call
// fail with ErrEndpoint, before anything is sent. Redirects are never
// followed (a 3xx is an answer the client refuses): a redirect could take
// a signed request, its session token included, to another host or to
// plain http.
func New(base string, timeout time.Duration) *Client {
	c := &Client{base: base, http: &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if err := resources.CheckOwnerEndpoint(base, true); err != nil {
		c.err = fmt.Errorf("%w: %w", ErrEndpoint, err)
	}
	return c
}

// ErrRefused: the owner answered 4xx (a definite refusal).
var ErrRefused = errors.New("refused by owner")

// ErrEndpoint: the client's endpoint is not one the functions may call
// (resources.CheckOwnerEndpoint); nothing was sent.
var ErrEndpoint = errors.New("owner endpoint refused")

// ErrUnexpectedAnswer: the owner's answer is none the contract has: a
// status other than 200 that is no 4xx or 5xx (a redirect, 201, 204), or
// a 200 whose document answers another request than the one sent (its
// request id, intent id or collection differs). It is never taken as an
// answer; for a write, the outcome is unknown (store.ErrAmbiguous too).
var ErrUnexpectedAnswer = errors.New("unexpected owner answer")

// maxErrorBody bounds how much of an owner's error body reaches an error
// message (and so the logs): an error answer is a diagnostic, not a
// document, and whoever answers may make it as long as they like.
const maxErrorBody = 256

// errorBody is b (an error answer's body) trimmed, cut to maxErrorBody
// bytes and quoted: what reaches a log line is bounded and escaped.
func errorBody(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > maxErrorBody {
		return fmt.Sprintf("%q (%d bytes, cut)", b[:maxErrorBody], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func (c *Client) do(ctx context.Context, method, path string, in any, write bool) ([]byte, error) {
	if c.err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, c.err)
	}
	var payload []byte
	var body io.Reader
	if in != nil {
		b, err := contract.Encode(in)
		if err != nil {
			return nil, err
		}
		payload, body = b, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.sign != nil {
		if err := signRequest(ctx, c.sign, req, payload); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if write {
			return nil, fmt.Errorf("%s %s: %w: %w", method, path, store.ErrAmbiguous, err)
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	// Every owner answer is a small document (contract.MaxFactsBytes is the
	// largest): read one byte more than that, never an unbounded body. A
	// longer answer reaches the strict decoder truncated and is refused.
	out, err := io.ReadAll(io.LimitReader(resp.Body, contract.MaxFactsBytes+1))
	switch {
	case err != nil && write:
		return nil, fmt.Errorf("%s %s: %w: %w", method, path, store.ErrAmbiguous, err)
	case err != nil:
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	case resp.StatusCode == http.StatusOK:
		return out, nil
	case resp.StatusCode == http.StatusNotFound && !write:
		return nil, fmt.Errorf("%s %s: %w: %s", method, path, store.ErrNotFound, errorBody(out))
	case resp.StatusCode >= 500 && resp.StatusCode < 600 && write:
		return nil, fmt.Errorf("%s %s: %w: status %d: %s", method, path, store.ErrAmbiguous, resp.StatusCode, errorBody(out))
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, fmt.Errorf("%s %s: %w: status %d: %s", method, path, ErrRefused, resp.StatusCode, errorBody(out))
	case resp.StatusCode >= 500 && resp.StatusCode < 600:
		return nil, fmt.Errorf("%s %s: status %d: %s", method, path, resp.StatusCode, errorBody(out))
	}
	// A redirect (never followed), another 2xx, anything else: no answer.
	// A write's outcome is then unknown; a read has no answer.
	why := fmt.Sprintf("status %d", resp.StatusCode)
	if loc := resp.Header.Get("Location"); loc != "" {
		why += fmt.Sprintf(" (redirect to %s not followed)", errorBody([]byte(loc)))
	}
	if write {
		return nil, fmt.Errorf("%s %s: %w: %w: %s", method, path, store.ErrAmbiguous, ErrUnexpectedAnswer, why)
	}
	return nil, fmt.Errorf("%s %s: %w: %s", method, path, ErrUnexpectedAnswer, why)
}

// wrongAnswer is the error of a decoded answer that names another request
// than the one sent (what, got, want).
func wrongAnswer(where, what, got, want string, write bool) error {
	if write {
		return fmt.Errorf("%s names %s %q, sent %q: %w: %w", where, what, got, want, store.ErrAmbiguous, ErrUnexpectedAnswer)
	}
	return fmt.Errorf("%s names %s %q, asked %q: %w", where, what, got, want, ErrUnexpectedAnswer)
}

// Publisher is the Manifest Publisher's client.
type Publisher struct{ c *Client }

// NewPublisher returns a publisher client.
func NewPublisher(c *Client) *Publisher { return &Publisher{c: c} }

// Cutover submits a cutover candidate.
func (p *Publisher) Cutover(ctx context.Context, req contract.CutoverRequest) (contract.CutoverAnswer, error) {
	b, err := p.c.do(ctx, http.MethodPost, "/cutover", req, true)
	if err != nil {
		return contract.CutoverAnswer{}, err
	}
	a, err := contract.DecodeCutoverAnswer("cutover answer", b)
	if err == nil && a.RequestID != req.RequestID {
		return contract.CutoverAnswer{}, wrongAnswer("cutover answer", "request", a.RequestID, req.RequestID, true)
	}
	return a, err
}

// Retire asks the publisher to retire a dropped incarnation's head (the
// publisher removes it only while it is the head the request names).
func (p *Publisher) Retire(ctx context.Context, req contract.RetireRequest) (contract.RetireAnswer, error) {
	b, err := p.c.do(ctx, http.MethodPost, "/retire", req, true)
	if err != nil {
		return contract.RetireAnswer{}, err
	}
	a, err := contract.DecodeRetireAnswer("retire answer", b)
	if err != nil {
		return a, err
	}
	if a.RequestID != req.RequestID {
		return a, fmt.Errorf("retire answer names request %q, sent %q: %w", a.RequestID, req.RequestID, ErrRefused)
	}
	return a, nil
}

// CCS is the Catalog Control Service's client.
type CCS struct{ c *Client }

// NewCCS returns a CCS client.
func NewCCS(c *Client) *CCS { return &CCS{c: c} }

// Facts reads a collection's scheduling facts.
func (s *CCS) Facts(ctx context.Context, collection string) (contract.CollectionFacts, error) {
	b, err := s.c.do(ctx, http.MethodGet, "/collections/"+url.PathEscape(collection)+"/facts", nil, false)
	if err != nil {
		return contract.CollectionFacts{}, err
	}
	f, err := contract.DecodeCollectionFacts("ccs facts "+collection, b)
	if err == nil && f.Collection != collection {
		return contract.CollectionFacts{}, wrongAnswer("ccs facts", "collection", f.Collection, collection, false)
	}
	return f, err
}

// NamespaceFacts reads a namespace's facts.
func (s *CCS) NamespaceFacts(ctx context.Context, namespace string) (contract.NamespaceFacts, error) {
	b, err := s.c.do(ctx, http.MethodGet, "/namespaces/"+url.PathEscape(namespace)+"/facts", nil, false)
	if err != nil {
		return contract.NamespaceFacts{}, err
	}
	f, err := contract.DecodeNamespaceFacts("ccs namespace facts "+namespace, b)
	if err == nil && f.Namespace != namespace {
		return contract.NamespaceFacts{}, wrongAnswer("ccs namespace facts", "namespace", f.Namespace, namespace, false)
	}
	return f, err
}

// TombstonedNamespaces lists every namespace CCS dropped, with its facts
// (every page of GET /namespaces/tombstoned, events/CCS.md). An entry the
// contract rejects (a name no namespace can have, facts that do not
// decode, a namespace not dropped, out of order or not after the page's
// after) fails alone: it is left out and reported in a
// *contract.RejectedEntriesError naming it, its page and its index, which
// comes with every other namespace of its page and of the following pages
// (SYSTEM rule 17). A page that cannot be read as a page (an owner error,
// a bad envelope) or that does not move past the previous one ends the
// listing: the namespaces of the pages before it are returned with that
// error (joined with the rejected entries, if any).
func (s *CCS) TombstonedNamespaces(ctx context.Context) ([]contract.NamespaceFacts, error) {
	var out []contract.NamespaceFacts
	rej := &contract.RejectedEntriesError{Listing: "ccs tombstoned namespaces"}
	done := func(err error) ([]contract.NamespaceFacts, error) {
		switch {
		case len(rej.Entries) == 0:
		case err == nil:
			err = rej
		default:
			err = errors.Join(err, rej)
		}
		return out, err
	}
	after := ""
	for {
		path := "/namespaces/tombstoned"
		if after != "" {
			path += "?after=" + url.QueryEscape(after)
		}
		b, err := s.c.do(ctx, http.MethodGet, path, nil, false)
		if err != nil {
			return done(err)
		}
		where := fmt.Sprintf("ccs tombstoned namespaces after %q", after)
		page, err := contract.DecodeTombstonedNamespaces(where, b)
		var pageRej *contract.RejectedEntriesError
		switch {
		case errors.As(err, &pageRej):
			rej.Entries = append(rej.Entries, pageRej.Entries...)
		case err != nil:
			return done(err)
		}
		for i, n := range page.Namespaces {
			if n.Namespace <= after {
				rej.Entries = append(rej.Entries, contract.RejectedEntry{Where: where, Name: n.Namespace,
					Err: &contract.DecodeError{Doc: "ccs tombstoned namespace", Where: where, Reason: fmt.Sprintf("namespace %s is not after %q", n.Namespace, after), Err: contract.ErrInvalid}})
				continue
			}
			out = append(out, page.Namespaces[i])
		}
		if page.NextAfter == "" {
			return done(nil)
		}
		if page.NextAfter <= after {
			return done(fmt.Errorf("%s: next page after %q does not move on: %w", where, page.NextAfter, contract.ErrInvalid))
		}
		after = page.NextAfter
	}
}

// Collections lists the collections CCS knows. An entry that is not a
// JSON string fails alone: it is left out and reported in a
// *contract.RejectedEntriesError, which comes with every other name (the
// names themselves are judged by the caller, observe's validNames).
func (s *CCS) Collections(ctx context.Context) ([]string, error) {
	b, err := s.c.do(ctx, http.MethodGet, "/collections", nil, false)
	if err != nil {
		return nil, err
	}
	var list struct {
		Collections []json.RawMessage `json:"collections"`
	}
	if err := decodeLoose(b, &list); err != nil {
		return nil, fmt.Errorf("decode collection list: %w", err)
	}
	out := make([]string, 0, len(list.Collections))
	rej := &contract.RejectedEntriesError{Listing: "ccs collections"}
	for i, raw := range list.Collections {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			where := fmt.Sprintf("ccs collections collections[%d]", i)
			rej.Entries = append(rej.Entries, contract.RejectedEntry{Where: where,
				Err: &contract.DecodeError{Doc: "ccs collection list", Where: where, Reason: fmt.Sprintf("entry %s is not a collection name (a JSON string)", errorBody(raw)), Err: contract.ErrInvalid}})
			continue
		}
		out = append(out, name)
	}
	if len(rej.Entries) > 0 {
		return out, rej
	}
	return out, nil
}

// RecordReleaseIntent asks CCS to record a release intent (idempotent by id).
func (s *CCS) RecordReleaseIntent(ctx context.Context, req contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	b, err := s.c.do(ctx, http.MethodPost, "/release-intents", req, true)
	if err != nil {
		return contract.ReleaseIntentAnswer{}, err
	}
	a, err := contract.DecodeReleaseIntentAnswer("release intent answer", b)
	if err == nil && a.IntentID != req.IntentID {
		return contract.ReleaseIntentAnswer{}, wrongAnswer("release intent answer", "intent", a.IntentID, req.IntentID, true)
	}
	return a, err
}
