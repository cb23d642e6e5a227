package sandbox

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/resources"
)

func request(method, path, query, body string, b64 bool) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{RawPath: path, RawQueryString: query, Body: body, IsBase64Encoded: b64,
		Headers: map[string]string{"content-type": "application/json"}}
	ev.RequestContext.HTTP.Method = method
	return ev
}

// The adapter hands the stand-in the contract's path below its mount, the
// method, query, headers and (base64-decoded) body, and returns its status,
// headers and body.
func TestHTTPServesTheContractPathBelowTheMount(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /cutover", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", r.URL.Query().Get("q")+"|"+r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /collections/{c}/facts", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.PathValue("c")) })
	h := HTTP(mux, "/publisher")
	ctx := context.Background()

	resp, err := h(ctx, request("POST", "/publisher/cutover", "q=1", `{"a":1}`, false))
	if err != nil || resp.StatusCode != http.StatusAccepted || resp.Body != `{"a":1}` || resp.Headers["X-Got"] != "1|application/json" {
		t.Fatalf("cutover: %+v %v", resp, err)
	}
	resp, _ = h(ctx, request("POST", "/publisher/cutover", "", base64.StdEncoding.EncodeToString([]byte(`{"b":2}`)), true))
	if resp.Body != `{"b":2}` {
		t.Fatalf("base64 body: %+v", resp)
	}
	resp, _ = h(ctx, request("GET", "/publisher/collections/c1/facts", "", "", false))
	if resp.StatusCode != http.StatusOK || resp.Body != "c1" {
		t.Fatalf("path value: %+v", resp)
	}
	for _, p := range []string{"/cutover", "/ccs/cutover", "/publishercutover"} {
		if resp, _ := h(ctx, request("POST", p, "", "", false)); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s outside the mount: %d, want 404", p, resp.StatusCode)
		}
	}
	if resp, _ := h(ctx, request("GET", "/publisher/cutover", "", "", false)); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("wrong method: %d", resp.StatusCode)
	}
}

func TestStandinsRefuseAMissingEnvironment(t *testing.T) {
	none := func(string) string { return "" }
	if _, err := Publisher(context.Background(), none, Logger()); err == nil {
		t.Error("publisher started without BCC_BUCKET")
	}
	if _, err := CCS(context.Background(), none); err == nil {
		t.Error("ccs started without its table")
	}
	if _, err := Watermark(context.Background(), func(k string) string {
		return map[string]string{"BCC_BUCKET": "b", "BCC_WATERMARK_KEY": "k", "BCC_STANDIN_WATERMARK_LAG": "soon"}[k]
	}); err == nil {
		t.Error("watermark started with a bad lag")
	}
}

// The real stand-ins behind the adapter, on the embedded stack's S3 and
// DynamoDB: what a sandbox stack's functions answer API Gateway.
func TestStandinsAnswerThroughTheAdapter(t *testing.T) {
	ctx := context.Background()
	env, err := localenv.Start(ctx, localenv.Options{NoDelivery: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if _, err := env.CCS.Create(ctx, "c1", "", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	sd := resources.SandboxDefinition()
	ccsFn := HTTP(env.CCS.Handler(), sd.CCSPath)
	resp, err := ccsFn(ctx, request("GET", sd.CCSPath+"/collections/c1/facts", "", "", false))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("facts: %+v %v", resp, err)
	}
	f, err := contract.DecodeCollectionFacts("facts", []byte(resp.Body))
	if err != nil || f.Collection != "c1" {
		t.Fatalf("facts %+v %v", f, err)
	}
	if resp, _ := ccsFn(ctx, request("GET", sd.CCSPath+"/collections", "", "", false)); !strings.Contains(resp.Body, `"c1"`) {
		t.Fatalf("catalog: %+v", resp)
	}
	pubFn := HTTP(env.Publisher.Handler(), sd.PublisherPath)
	if resp, _ := pubFn(ctx, request("POST", sd.PublisherPath+"/cutover", "", `{"not":"a cutover"}`, false)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a malformed cutover: %+v, want 400", resp)
	}
}
