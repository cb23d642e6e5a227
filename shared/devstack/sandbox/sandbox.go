package sandbox

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/devstack/standin/ccs"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/devstack/standin/watermark"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// HTTPHandler is a Lambda handler of API Gateway HTTP API proxy events.
type HTTPHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// maxBody bounds a request body (the publisher's cutover is the largest).
const maxBody = 64 << 20

// HTTP serves API Gateway HTTP API proxy events (payload format 2.0) with
// h, the mount prefix taken off the path. A path outside mount is 404.
func HTTP(h http.Handler, mount string) HTTPHandler {
	mount = strings.TrimSuffix(mount, "/")
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		path := ev.RawPath
		if path == "" {
			path = ev.RequestContext.HTTP.Path
		}
		rest, ok := strings.CutPrefix(path, mount)
		if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNotFound, Body: "no such route\n"}, nil
		}
		body := []byte(ev.Body)
		if ev.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(ev.Body)
			if err != nil {
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest, Body: "body is not base64\n"}, nil
			}
			body = b
		}
		if len(body) > maxBody {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusRequestEntityTooLarge}, nil
		}
		u := &url.URL{Path: rest, RawQuery: ev.RawQueryString}
		req, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, u.String(), io.NopCloser(strings.NewReader(string(body))))
		if err != nil {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusBadRequest, Body: err.Error() + "\n"}, nil
		}
		for k, v := range ev.Headers {
			req.Header.Set(k, v)
		}
		req.ContentLength = int64(len(body))
		req.RequestURI = u.RequestURI()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		resp := events.APIGatewayV2HTTPResponse{StatusCode: rec.Code, Body: rec.Body.String(), Headers: map[string]string{}}
		for k, vs := range rec.Header() {
			resp.Headers[k] = strings.Join(vs, ",")
		}
		return resp, nil
	}
}

// env reads the named variables, all required.
func env(getenv func(string) string, names ...string) (map[string]string, error) {
	out := map[string]string{}
	var missing []string
	for _, n := range names {
		if out[n] = getenv(n); out[n] == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("sandbox stand-in: %s not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// Logger is the stand-ins' logger: JSON on stderr, as the coordinator's.
func Logger() *slog.Logger { return slog.New(slog.NewJSONHandler(os.Stderr, nil)) }

// clients are a stand-in function's SDK clients, from its Lambda
// environment as the coordinator's functions build theirs.
func clients(getenv func(string) string) (app.Clients, error) {
	return app.NewClients(app.Config{}, getenv)
}

// Publisher is the stand-in Manifest Publisher's function: the contract's
// POST /cutover and POST /retire on the data bucket (EnvBucket), the CCS
// facts it re-reads at the head CAS from the stand-in CCS's table
// (EnvStandinCCSTable).
func Publisher(ctx context.Context, getenv func(string) string, log *slog.Logger) (HTTPHandler, error) {
	e, err := env(getenv, resources.EnvBucket, resources.EnvStandinCCSTable)
	if err != nil {
		return nil, err
	}
	cl, err := clients(getenv)
	if err != nil {
		return nil, err
	}
	p := publisher.New(awsio.NewBucket(cl.S3, e[resources.EnvBucket]), time.Now, publisher.Options{}, log)
	p.SetFacts(ccs.New(cl.Dynamo, e[resources.EnvStandinCCSTable], time.Now))
	return HTTP(p.Handler(), resources.SandboxDefinition().PublisherPath), nil
}

// CCS is the stand-in Catalog Control Service's function: the contract's
// GET /collections, GET /collections/{c}/facts, GET /namespaces/{n}/facts
// and POST /release-intents on its own table (EnvStandinCCSTable); it reads
// the data bucket (EnvBucket) to see that a lifetime is gone before it
// records its release.
func CCS(ctx context.Context, getenv func(string) string) (HTTPHandler, error) {
	e, err := env(getenv, resources.EnvBucket, resources.EnvStandinCCSTable)
	if err != nil {
		return nil, err
	}
	cl, err := clients(getenv)
	if err != nil {
		return nil, err
	}
	svc := ccs.New(cl.Dynamo, e[resources.EnvStandinCCSTable], time.Now)
	svc.SetBucket(awsio.NewBucket(cl.S3, e[resources.EnvBucket]))
	return HTTP(svc.Handler(), resources.SandboxDefinition().CCSPath), nil
}

// Watermark is the stand-in query plane's scheduled function: each
// invocation publishes global_safe_ts = now - EnvStandinWatermarkLag to
// EnvWatermarkKey in the data bucket.
func Watermark(ctx context.Context, getenv func(string) string) (func(context.Context) error, error) {
	e, err := env(getenv, resources.EnvBucket, resources.EnvWatermarkKey, resources.EnvStandinWatermarkLag)
	if err != nil {
		return nil, err
	}
	lag, err := time.ParseDuration(e[resources.EnvStandinWatermarkLag])
	if err != nil || lag < 0 {
		return nil, fmt.Errorf("sandbox stand-in: %s %q: want a duration >= 0", resources.EnvStandinWatermarkLag, e[resources.EnvStandinWatermarkLag])
	}
	cl, err := clients(getenv)
	if err != nil {
		return nil, err
	}
	wm := watermark.New(awsio.NewBucket(cl.S3, e[resources.EnvBucket]), e[resources.EnvWatermarkKey])
	return func(ctx context.Context) error {
		now := time.Now()
		return wm.Publish(ctx, now.Add(-lag), now)
	}, nil
}
