package owners

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Client is a JSON client of one owner endpoint.
type Client struct {
	base string
	http *http.Client
	sign *signing // nil: unsigned (AuthNone)
}

// New returns a client for base (e.g. http://127.0.0.1:4566/_bcc/publisher).
func New(base string, timeout time.Duration) *Client {
	return &Client{base: base, http: &http.Client{Timeout: timeout}}
}

// ErrRefused: the owner answered 4xx (a definite refusal).
var ErrRefused = errors.New("refused by owner")

func (c *Client) do(ctx context.Context, method, path string, in any, write bool) ([]byte, error) {
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
	case resp.StatusCode == http.StatusNotFound && !write:
		return nil, fmt.Errorf("%s %s: %w: %s", method, path, store.ErrNotFound, bytes.TrimSpace(out))
	case resp.StatusCode >= 500 && write:
		return nil, fmt.Errorf("%s %s: %w: status %d: %s", method, path, store.ErrAmbiguous, resp.StatusCode, bytes.TrimSpace(out))
	case resp.StatusCode >= 400:
		return nil, fmt.Errorf("%s %s: %w: status %d: %s", method, path, ErrRefused, resp.StatusCode, bytes.TrimSpace(out))
	}
	return out, nil
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
	return contract.DecodeCutoverAnswer("cutover answer", b)
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
	return contract.DecodeCollectionFacts("ccs facts "+collection, b)
}

// NamespaceFacts reads a namespace's facts.
func (s *CCS) NamespaceFacts(ctx context.Context, namespace string) (contract.NamespaceFacts, error) {
	b, err := s.c.do(ctx, http.MethodGet, "/namespaces/"+url.PathEscape(namespace)+"/facts", nil, false)
	if err != nil {
		return contract.NamespaceFacts{}, err
	}
	return contract.DecodeNamespaceFacts("ccs namespace facts "+namespace, b)
}

// Collections lists the collections CCS knows.
func (s *CCS) Collections(ctx context.Context) ([]string, error) {
	b, err := s.c.do(ctx, http.MethodGet, "/collections", nil, false)
	if err != nil {
		return nil, err
	}
	var out struct {
		Collections []string `json:"collections"`
	}
	if err := decodeLoose(b, &out); err != nil {
		return nil, fmt.Errorf("decode collection list: %w", err)
	}
	return out.Collections, nil
}

// RecordReleaseIntent asks CCS to record a release intent (idempotent by id).
func (s *CCS) RecordReleaseIntent(ctx context.Context, req contract.ReleaseIntentRequest) (contract.ReleaseIntentAnswer, error) {
	b, err := s.c.do(ctx, http.MethodPost, "/release-intents", req, true)
	if err != nil {
		return contract.ReleaseIntentAnswer{}, err
	}
	return contract.DecodeReleaseIntentAnswer("release intent answer", b)
}
