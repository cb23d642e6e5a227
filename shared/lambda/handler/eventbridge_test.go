package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/contract/strictjson"
	"github.com/searchfabric/bcc/shared/lambda/handler"
)

// The EventBridge path keeps the notification path's promise: the key
// observed is exactly the key AWS sent. The example event is observed under
// its key; a detail.object carrying a duplicate or a case variant of "key"
// is refused before anything is read, whichever of the two comes last.
func TestEventBridgeHeadEventIsDecodedStrictly(t *testing.T) {
	h, q := observerFixture(t)
	raw := eventFile(t, "eventbridge-head-created.json")
	resp, err := h.Handle(context.Background(), json.RawMessage(raw))
	if err != nil || len(resp.Results) != 1 || resp.Results[0].Key != contract.HeadKey("orders") {
		t.Fatalf("example event: %+v, %v", resp, err)
	}
	if len(q.tasks) == 0 {
		t.Fatal("the example event enqueued nothing")
	}
	head := `"key": "collections/orders/manifest_committed_head.json"`
	for name, member := range map[string]string{
		"case variant after": head + `, "Key": "collections/other/manifest_committed_head.json"`,
		"case variant first": `"Key": "collections/other/manifest_committed_head.json", ` + head,
		"duplicate":          head + `, "key": "collections/other/manifest_committed_head.json"`,
	} {
		t.Run(name, func(t *testing.T) {
			h, q := observerFixture(t)
			bad := strings.Replace(string(raw), head, member, 1)
			resp, err := h.Handle(context.Background(), json.RawMessage(bad))
			if !errors.Is(err, handler.ErrUnrecognisedEvent) || len(resp.Results) != 0 || len(q.tasks) != 0 {
				t.Fatalf("got %+v, %v; want refused with nothing observed", resp, err)
			}
			var ne *strictjson.NameError
			if !errors.As(err, &ne) || !strings.Contains(ne.Path, "detail") {
				t.Fatalf("error %v does not say where (want the member's path under detail)", err)
			}
		})
	}
}
