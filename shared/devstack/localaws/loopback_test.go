package localaws_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
)

// Issue 25 item 5: the embedded stack (make local) answers without
// authorization, so a web page in the developer's browser must not reach
// it: a cross-origin request (a preflight for PUT or DELETE, a form POST)
// is refused, a Host naming anything but loopback (DNS rebinding) is
// refused, no answer carries a CORS header, and it listens beyond loopback
// only when asked.
func TestLocalStackRefusesWebPagesAndForeignHosts(t *testing.T) {
	s, c, p := startStack(t, false)
	ctx := context.Background()
	bucket := p.Def.Bucket.Name
	if _, err := c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatal(err)
	}
	send := func(method, path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
	}{
		{"preflight of a DELETE", http.MethodOptions, "/" + bucket + "/k", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "DELETE"}},
		{"cross-origin PUT", http.MethodPut, "/" + bucket + "/k", map[string]string{"Origin": "https://evil.example"}},
		{"cross-origin DELETE", http.MethodDelete, "/" + bucket + "/k", map[string]string{"Origin": "null"}},
		{"cross-origin owner call", http.MethodPost, "/_bcc/ccs/release-intents", map[string]string{"Origin": "http://localhost:3000"}},
		{"rebinding Host", http.MethodDelete, "/" + bucket + "/k", map[string]string{"Host": "evil.example:4566"}},
		{"rebinding Host, GET", http.MethodGet, "/" + bucket + "/k", map[string]string{"Host": "127.0.0.1.evil.example"}},
	} {
		resp := send(tc.method, tc.path, tc.hdr)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tc.name, resp.StatusCode)
		}
		for k := range resp.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s: answered with %s: %s", tc.name, k, resp.Header.Get(k))
			}
		}
	}
	got, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("the object after the refused requests: %v", err)
	}
	_ = got.Body.Close()
	// A local client's request is served, without CORS headers.
	resp := send(http.MethodGet, "/"+bucket+"/k", map[string]string{"Host": strings.Replace(strings.TrimPrefix(s.URL(), "http://"), "127.0.0.1", "localhost", 1)})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("local GET: %d", resp.StatusCode)
	}
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("local GET answered with %s: %s", k, resp.Header.Get(k))
		}
	}

	for _, tc := range []struct {
		addr   string
		remote bool
		want   string // error substring, "" = starts
	}{
		{"0.0.0.0:0", false, "is not a loopback address"},
		{":0", false, "is not a loopback address"},
		{"192.0.2.7:0", true, "listen on every interface"},
		{"0.0.0.0:0", true, ""},
		{"localhost:0", false, ""},
	} {
		st, err := localaws.Start(localaws.Options{Addr: tc.addr, AllowRemote: tc.remote})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s (remote %v): %v", tc.addr, tc.remote, err)
		case tc.want == "":
			if !strings.HasPrefix(st.URL(), "http://127.0.0.1:") {
				t.Errorf("%s: the stack's URL %s, want it over loopback", tc.addr, st.URL())
			}
			_ = st.Close()
		case err == nil || !strings.Contains(err.Error(), tc.want):
			if st != nil {
				_ = st.Close()
			}
			t.Errorf("%s (remote %v): %v, want %q", tc.addr, tc.remote, err, tc.want)
		}
	}
}
