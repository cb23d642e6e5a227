package contract_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// A retirement names exactly the head it removes: every fence field is
// required, the id is the identity of the fields, and nothing else is read.
func TestRetireRequestDecodesStrictly(t *testing.T) {
	sum := contract.Checksum([]byte("root v9"))
	req := contract.NewRetireRequest(contract.Head{Collection: "orders", Version: 9, ManifestChecksum: sum})
	if req.Incarnation != 1 {
		t.Fatalf("first lifetime written as %d, want 1 (always present)", req.Incarnation)
	}
	good, _ := contract.Encode(req)
	if got, err := contract.DecodeRetireRequest("POST /retire", good); err != nil || got != req {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for name, body := range map[string]string{
		"unknown field":     strings.Replace(string(good), `"collection"`, `"force":true,"collection"`, 1),
		"case variant":      strings.Replace(string(good), `"head_version"`, `"Head_Version"`, 1),
		"no incarnation":    strings.Replace(string(good), `"incarnation":1`, `"incarnation":0`, 1),
		"no head version":   strings.Replace(string(good), `"head_version":9`, `"head_version":0`, 1),
		"another version":   strings.Replace(string(good), `"head_version":9`, `"head_version":10`, 1),
		"another life":      strings.Replace(string(good), `"incarnation":1`, `"incarnation":2`, 1),
		"no checksum":       strings.Replace(string(good), sum, "", 1),
		"bad collection":    strings.Replace(string(good), `"orders"`, `"../orders"`, 1),
		"duplicate member":  strings.Replace(string(good), `"collection":"orders"`, `"collection":"orders","collection":"carts"`, 1),
		"trailing document": string(good) + `{}`,
	} {
		if _, err := contract.DecodeRetireRequest("POST /retire", []byte(body)); err == nil {
			t.Errorf("%s: accepted %s", name, body)
		} else if !strings.Contains(err.Error(), "POST /retire") {
			t.Errorf("%s: %v does not say where", name, err)
		}
	}
}

func TestRetireAnswerDecodesStrictly(t *testing.T) {
	for _, body := range []string{
		`{"schema_version":1,"request_id":"retire-x","status":"deleted"}`,
		`{"schema_version":1,"request_id":"retire-x","status":"conflict"}`,
		`{"schema_version":1,"request_id":"","status":"accepted"}`,
		`{"schema_version":1,"request_id":"retire-x","status":"accepted","retired":true}`,
	} {
		var de *contract.DecodeError
		if _, err := contract.DecodeRetireAnswer("retire answer", []byte(body)); err == nil {
			t.Errorf("accepted %s", body)
		} else if !errors.As(err, &de) {
			t.Errorf("%s: %v is not a DecodeError", body, err)
		}
	}
	if a, err := contract.DecodeRetireAnswer("retire answer", []byte(`{"schema_version":1,"request_id":"retire-x","status":"accepted"}`)); err != nil || a.Status != contract.RetireAccepted {
		t.Fatalf("%+v %v", a, err)
	}
}
