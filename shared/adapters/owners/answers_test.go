package owners

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/testkit/jsonref"
)

// canned answers every request with body (status 200), in process.
type canned struct{ body []byte }

func (c canned) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(c.body)), Header: http.Header{}, Request: r}, nil
}

func cannedClient(body []byte) *Client {
	c := New("https://owner.invalid", time.Second)
	c.http.Transport = canned{body: body}
	return c
}

// Owner answers kinds, in the order FuzzOwnerAnswers selects them.
const (
	answerCutover = iota
	answerFacts
	answerCollections
	answerIntent
	answerKinds
)

// callOwner sends one request of kind to an owner answering body and
// returns what the client decoded, re-encoded.
func callOwner(kind int, body []byte) ([]byte, error) {
	ctx := context.Background()
	c := cannedClient(body)
	// The request the answer names (an answer to another request is
	// refused: TestOwnerAnswersNameTheirRequest).
	var ids struct {
		RequestID  string `json:"request_id"`
		IntentID   string `json:"intent_id"`
		Collection string `json:"collection"`
	}
	_ = json.Unmarshal(body, &ids)
	var v any
	var err error
	switch kind {
	case answerCutover:
		v, err = NewPublisher(c).Cutover(ctx, contract.CutoverRequest{SchemaVersion: 1, RequestID: ids.RequestID, Collection: "orders"})
	case answerFacts:
		v, err = NewCCS(c).Facts(ctx, ids.Collection)
	case answerCollections:
		var names []string
		names, err = NewCCS(c).Collections(ctx)
		v = struct {
			Collections []string `json:"collections"`
		}{names}
	default:
		v, err = NewCCS(c).RecordReleaseIntent(ctx, contract.ReleaseIntentRequest{SchemaVersion: 1, IntentID: ids.IntentID, Collection: "orders"})
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func events(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every owner answer is read with exact, unique member names: a case
// variant beside the real member (which encoding/json would let win) and a
// duplicate are refused; the documented examples are accepted.
func TestOwnerAnswersAreStrict(t *testing.T) {
	for _, tc := range []struct {
		kind    int
		example []byte
		member  string
	}{
		{answerCutover, events(t, "cutover-answer.json"), `"status"`},
		{answerFacts, events(t, "ccs-facts.json"), `"tombstoned"`},
		{answerCollections, []byte(`{"collections": ["orders", "users"]}`), `"collections"`},
		{answerIntent, events(t, "release-intent-answer.json"), `"status"`},
	} {
		if _, err := callOwner(tc.kind, tc.example); err != nil {
			t.Fatalf("kind %d example: %v", tc.kind, err)
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(tc.example, &doc); err != nil {
			t.Fatal(err)
		}
		value := string(doc[strings.Trim(tc.member, `"`)])
		trimmed := strings.TrimSuffix(strings.TrimSpace(string(tc.example)), "}")
		for _, extra := range []string{
			`,` + tc.member + `:` + value,                                      // duplicate
			`,` + strings.ToUpper(tc.member[:2]) + tc.member[2:] + `:` + value, // case variant beside it
		} {
			body := trimmed + extra + "}"
			if _, err := callOwner(tc.kind, []byte(body)); err == nil {
				t.Errorf("kind %d accepted %s", tc.kind, body)
			}
		}
	}
	_, err := callOwner(answerCollections, []byte(`{"collections":["a"],"Collections":["b"]}`))
	if err == nil || !strings.Contains(err.Error(), `"Collections"`) {
		t.Fatalf("collection list case variant: %v", err)
	}
}

// FuzzOwnerAnswers: whatever an owner answers, the client either refuses
// it or decodes exactly what was written (a case-sensitive,
// duplicate-rejecting reader reads the same members and values).
func FuzzOwnerAnswers(f *testing.F) {
	f.Add(uint16(answerCutover), events(f, "cutover-answer.json"))
	f.Add(uint16(answerFacts), events(f, "ccs-facts.json"))
	f.Add(uint16(answerCollections), []byte(`{"collections":["orders","users"]}`))
	f.Add(uint16(answerIntent), events(f, "release-intent-answer.json"))
	f.Fuzz(func(t *testing.T, kind uint16, body []byte) {
		out, err := callOwner(int(kind%answerKinds), body)
		if err != nil {
			var de *contract.DecodeError
			if !errors.As(err, &de) && !errors.Is(err, ErrUnexpectedAnswer) && !strings.Contains(err.Error(), "decode collection list") {
				t.Fatalf("refusal is not a decode error: %v", err)
			}
			return
		}
		written, err := jsonref.Parse(body)
		if err != nil {
			t.Fatalf("accepted %q, which a duplicate-rejecting reader refuses: %v", body, err)
		}
		read, err := jsonref.Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := jsonref.Covered(written, read); err != nil {
			t.Fatalf("decoded answer differs from what the owner wrote: %v\nwritten: %s\nread:    %s", err, body, out)
		}
	})
}
