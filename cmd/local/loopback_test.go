package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// Issue 25 item 5: make local listens on loopback unless asked
// (-allow-remote), and its dashboard, too, answers only a loopback Host
// and no other page's Origin (DNS rebinding, a page in the browser).
func TestMakeLocalStaysOnLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var banner bytes.Buffer
	if _, err := start(ctx, []string{"-addr", "0.0.0.0:0", "-dashboard", ""}, &banner, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("-addr 0.0.0.0:0 without -allow-remote: %v", err)
	}
	env, err := start(ctx, []string{"-addr", "127.0.0.1:0", "-dashboard", ""}, &banner, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if _, err := serveDashboard(ctx, env, "0.0.0.0:0", slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a dashboard on 0.0.0.0 was served")
	}
	url, err := serveDashboard(ctx, env, "127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"the developer's browser", nil, http.StatusOK},
		{"rebinding Host", map[string]string{"Host": "evil.example:4580"}, http.StatusForbidden},
		{"another page", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for k, v := range tc.hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}
