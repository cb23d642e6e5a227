package owners

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
)

// pagedCCS answers GET /namespaces/tombstoned with the page for the
// request's after (in process).
type pagedCCS map[string]string

func (p pagedCCS) RoundTrip(r *http.Request) (*http.Response, error) {
	body, ok := p[r.URL.Query().Get("after")]
	status := http.StatusOK
	if !ok {
		body, status = `{"error":"no such page"}`, http.StatusNotFound
	}
	return &http.Response{StatusCode: status, Body: io.NopCloser(bytes.NewReader([]byte(body))), Header: http.Header{}, Request: r}, nil
}

func droppedNamespace(name string) string {
	return fmt.Sprintf(`{"schema_version":1,"namespace":%q,"incarnation":1,"facts_version":1,"tombstoned":true,"tombstoned_at_unix_ms":1764400000000,"collections":[]}`, name)
}

// Review of issue 24: CCS's listing of dropped namespaces is decoded page
// by page, and one entry the contract rejects (here a name no namespace
// can have) used to refuse its whole page: the listing failed, so no
// namespace on that page or on any page after it was ever released. The
// bad entry must fail alone, with an error naming it and where it was
// listed; every other entry of its page and of the following pages is
// still listed, and the bad one never is (it must never lead to a
// release).
func TestReview24_OneBadNamespaceNameStallsEveryNamespaceRelease(t *testing.T) {
	c := New("https://ccs.invalid", time.Second)
	c.http.Transport = pagedCCS{
		"": `{"schema_version":1,"namespaces":[` + droppedNamespace("alpha") + `,` + droppedNamespace("Bad Name!") + `,` + droppedNamespace("gamma") +
			`],"next_after":"gamma"}`,
		"gamma": `{"schema_version":1,"namespaces":[` + droppedNamespace("omega") + `,` + droppedNamespace("zeta") + `]}`,
	}
	got, err := NewCCS(c).TombstonedNamespaces(context.Background())
	var names []string
	for _, n := range got {
		names = append(names, n.Namespace)
	}
	if want := "alpha gamma omega zeta"; strings.Join(names, " ") != want {
		t.Fatalf("listed %v (err %v), want %s: one bad entry must not hide the others", names, err, want)
	}
	if err == nil || !errors.Is(err, contract.ErrInvalid) {
		t.Fatalf("err %v, want the bad entry reported as invalid", err)
	}
	for _, part := range []string{`"Bad Name!"`, "namespaces[1]", `after ""`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %s (the entry and where it was listed)", err, part)
		}
	}
}

// A page that cannot be read ends the listing, but the namespaces of the
// pages before it are still listed (with the error): their releases are
// derived now, the rest at the next pass. An entry not after the page's
// after, or out of order, fails alone like a bad name.
func TestTombstonedNamespacesListedBeforeAnUnreadablePage(t *testing.T) {
	c := New("https://ccs.invalid", time.Second)
	c.http.Transport = pagedCCS{
		"": `{"schema_version":1,"namespaces":[` + droppedNamespace("alpha") + `,` + droppedNamespace("delta") + `,` + droppedNamespace("beta") +
			`],"next_after":"delta"}`,
		"delta": `{"schema_version":1,"namespaces":[` + droppedNamespace("alpha") + `,` + droppedNamespace("kappa") + `],"next_after":"kappa"}`,
		// "kappa": no such page (404)
	}
	got, err := NewCCS(c).TombstonedNamespaces(context.Background())
	var names []string
	for _, n := range got {
		names = append(names, n.Namespace)
	}
	if want := "alpha delta kappa"; strings.Join(names, " ") != want {
		t.Fatalf("listed %v (err %v), want %s", names, err, want)
	}
	var rej *contract.RejectedEntriesError
	if err == nil || !errors.As(err, &rej) || len(rej.Entries) != 2 || !strings.Contains(err.Error(), "no such page") {
		t.Fatalf("err %v, want the unreadable page and the two entries rejected alone (beta out of order, alpha not after delta)", err)
	}
	if rej.Entries[0].Name != "beta" || rej.Entries[1].Name != "alpha" {
		t.Fatalf("rejected %+v, want beta then alpha", rej.Entries)
	}
}

// The collection listing: an entry that is not a name at all (not a JSON
// string) fails alone; every other name is listed (the names are judged
// by reconciliation, which counts and skips a bad one).
func TestCollectionListingEntryThatIsNoStringFailsAlone(t *testing.T) {
	got, err := NewCCS(cannedClient([]byte(`{"collections":["alpha",{"name":"x"},"Bad Name!","gamma"]}`))).Collections(context.Background())
	if strings.Join(got, ",") != "alpha,Bad Name!,gamma" {
		t.Fatalf("listed %q (err %v), want the three strings", got, err)
	}
	var rej *contract.RejectedEntriesError
	if !errors.As(err, &rej) || len(rej.Entries) != 1 || !strings.Contains(err.Error(), "collections[1]") || !errors.Is(err, contract.ErrInvalid) {
		t.Fatalf("err %v, want the one entry collections[1] rejected alone", err)
	}
	if _, err := NewCCS(cannedClient([]byte(`{"collections":"alpha"}`))).Collections(context.Background()); err == nil {
		t.Fatal("a listing that is no list was accepted")
	}
}
