package owners

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/store"
)

// Issue 25 item 2: an owner answer decides what GC may delete and what is
// made visible, so the client takes one only from an https endpoint (plain
// http only to this machine's loopback: the embedded stack), never follows
// a redirect, and accepts only a 200 whose strictly decoded document
// answers the request it sent.

// Plain http to anything but a loopback host is refused before anything is
// sent; https and loopback http are called.
func TestOwnerEndpointMustBeHTTPS(t *testing.T) {
	for _, tc := range []struct {
		base string
		ok   bool
	}{
		{"https://abc123.execute-api.us-east-1.amazonaws.com/prod", true},
		{"https://ccs.example.com", true},
		{"http://127.0.0.1:4566/_bcc/ccs", true},
		{"http://localhost:4566/_bcc/ccs", true},
		{"http://[::1]:4566/_bcc/ccs", true},
		{"http://ccs.example.com", false},
		{"http://10.0.0.7:8080/ccs", false},
		{"http://127.0.0.1.example.com/ccs", false},
		{"ftp://ccs.example.com", false},
		{"ccs.example.com/prod", false},
		{"https://user:pw@ccs.example.com", false},
		{"https://ccs.example.com/prod?x=1", false},
	} {
		c := New(tc.base, time.Second)
		if got := c.err == nil; got != tc.ok {
			t.Errorf("%s: accepted %v, want %v (%v)", tc.base, got, tc.ok, c.err)
		}
	}
	var hits atomic.Int32
	c := New("http://ccs.example.com", time.Second)
	c.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		hits.Add(1)
		return nil, errors.New("sent")
	})
	_, err := NewCCS(c).Facts(context.Background(), "orders")
	if !errors.Is(err, ErrEndpoint) || hits.Load() != 0 {
		t.Fatalf("facts over plain http to a remote host: %v (%d requests sent), want ErrEndpoint and none sent", err, hits.Load())
	}
	_, err = NewCCS(c).RecordReleaseIntent(context.Background(), contract.ReleaseIntentRequest{IntentID: "i"})
	if !errors.Is(err, ErrEndpoint) || errors.Is(err, store.ErrAmbiguous) {
		t.Fatalf("intent over plain http: %v, want ErrEndpoint (nothing sent: not ambiguous)", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A redirect is never followed, whatever its status: the host it names
// gets nothing (neither the signed request nor its session token), and
// the redirect is no answer (a write's outcome is unknown).
func TestOwnerRedirectsAreNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write(events(t, "ccs-facts-tombstoned.json"))
	}))
	defer other.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, status)
		}))
		creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "session-token")
		c := NewSigned(owner.URL, time.Second, Signing{Credentials: creds, Service: ServiceAPIGateway, Region: "us-east-1"})
		_, err := NewCCS(c).Facts(context.Background(), "orders")
		if !errors.Is(err, ErrUnexpectedAnswer) || !strings.Contains(err.Error(), "not followed") {
			t.Errorf("facts redirected with %d: %v, want ErrUnexpectedAnswer (redirect not followed)", status, err)
		}
		_, err = NewCCS(c).RecordReleaseIntent(context.Background(), contract.ReleaseIntentRequest{SchemaVersion: 1, IntentID: "i"})
		if !errors.Is(err, ErrUnexpectedAnswer) || !errors.Is(err, store.ErrAmbiguous) {
			t.Errorf("intent redirected with %d: %v, want ErrUnexpectedAnswer and ErrAmbiguous", status, err)
		}
		owner.Close()
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests", n)
	}
}

// Only a 200 is an answer: a valid document under 201, 202, 203 or 204
// is refused; a 200 whose document answers another request (another
// request id, intent id or collection) is refused too.
func TestOwnerAnswersAreOnly200ForTheRequestSent(t *testing.T) {
	ctx := context.Background()
	serve := func(status int, body []byte) *Client {
		c := New("https://owner.invalid", time.Second)
		c.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			rec := httptest.NewRecorder()
			rec.WriteHeader(status)
			_, _ = rec.Write(body)
			return rec.Result(), nil
		})
		return c
	}
	facts := events(t, "ccs-facts-tombstoned.json") // collection "orders"
	for _, status := range []int{http.StatusCreated, http.StatusAccepted, http.StatusNonAuthoritativeInfo, http.StatusPartialContent, http.StatusMultipleChoices, http.StatusNotModified} {
		if _, err := NewCCS(serve(status, facts)).Facts(ctx, "orders"); !errors.Is(err, ErrUnexpectedAnswer) {
			t.Errorf("facts answered with status %d: %v, want ErrUnexpectedAnswer", status, err)
		}
		_, err := NewPublisher(serve(status, events(t, "cutover-answer.json"))).Cutover(ctx, contract.CutoverRequest{RequestID: "cutover-1fb346a631f51cdb9e7bf58325d7700c"})
		if !errors.Is(err, ErrUnexpectedAnswer) || !errors.Is(err, store.ErrAmbiguous) {
			t.Errorf("cutover answered with status %d: %v, want ErrUnexpectedAnswer and ErrAmbiguous", status, err)
		}
	}
	if f, err := NewCCS(serve(http.StatusOK, facts)).Facts(ctx, "orders"); err != nil || !f.Tombstoned {
		t.Fatalf("the documented facts: %+v %v", f, err)
	}
	if _, err := NewCCS(serve(http.StatusOK, facts)).Facts(ctx, "users"); !errors.Is(err, ErrUnexpectedAnswer) {
		t.Errorf("facts of orders answering for users: %v, want ErrUnexpectedAnswer", err)
	}
	if _, err := NewCCS(serve(http.StatusOK, events(t, "ccs-namespace-facts.json"))).NamespaceFacts(ctx, "other"); !errors.Is(err, ErrUnexpectedAnswer) {
		t.Errorf("namespace facts of another namespace: %v, want ErrUnexpectedAnswer", err)
	}
	_, err := NewPublisher(serve(http.StatusOK, events(t, "cutover-answer.json"))).Cutover(ctx, contract.CutoverRequest{RequestID: "cutover-mine"})
	if !errors.Is(err, ErrUnexpectedAnswer) || !errors.Is(err, store.ErrAmbiguous) {
		t.Errorf("cutover answer for another request: %v, want ErrUnexpectedAnswer and ErrAmbiguous", err)
	}
	_, err = NewCCS(serve(http.StatusOK, events(t, "release-intent-answer.json"))).RecordReleaseIntent(ctx, contract.ReleaseIntentRequest{IntentID: "intent-mine"})
	if !errors.Is(err, ErrUnexpectedAnswer) || !errors.Is(err, store.ErrAmbiguous) {
		t.Errorf("intent answer for another intent: %v, want ErrUnexpectedAnswer and ErrAmbiguous", err)
	}
}

// An owner's error body reaches the error (and the logs) cut to a few
// hundred bytes and quoted: no megabyte lines, no forged log lines.
func TestOwnerErrorBodiesAreCut(t *testing.T) {
	body := strings.Repeat("x", 100_000) + "\nlevel=ERROR msg=forged"
	c := New("https://owner.invalid", time.Second)
	c.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		rec := httptest.NewRecorder()
		rec.WriteHeader(http.StatusBadRequest)
		_, _ = rec.WriteString(body)
		return rec.Result(), nil
	})
	_, err := NewCCS(c).Facts(context.Background(), "orders")
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("400: %v", err)
	}
	if msg := err.Error(); len(msg) > 2*maxErrorBody+200 || strings.Contains(msg, "\n") {
		t.Fatalf("error of %d bytes (newline %v): %.300s", len(msg), strings.Contains(msg, "\n"), msg)
	}
}
