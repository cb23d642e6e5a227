package localaws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/truora/minidyn/server"

	"github.com/searchfabric/bcc/shared/devstack/localaws/sqsd"
)

// Defaults of the embedded stack.
const (
	DefaultAddr    = "127.0.0.1:4566"
	Region         = "us-east-1"
	AccountID      = "000000000000"
	ServicePrefix  = "/_bcc/" // stand-in owner services are mounted below this path
	dynamoTarget   = "DynamoDB_20120810."
	sqsTargetPrefx = "AmazonSQS."
)

// Options configure a Stack.
type Options struct {
	Addr   string // listen address; "127.0.0.1:0" picks a free port
	Logger *slog.Logger
	// HoldS3Events keeps S3 notifications for the caller (TakeS3Events)
	// instead of delivering them, so tests can duplicate and reorder them.
	HoldS3Events bool
	// Upstream, when set (e.g. http://localhost:4566 for LocalStack), makes
	// the stack a proxy: S3, DynamoDB and SQS requests go to that endpoint
	// instead of the in-process emulators, while notification configuration,
	// event delivery and event source mappings stay here. The same tests then
	// run against another implementation of the AWS APIs.
	Upstream string
	// Credentials sign the stack's own requests (event delivery, pollers,
	// probes) and those of Clients/InternalClients; default TestCredentials.
	// An upstream that enforces IAM (moto with INITIAL_NO_AUTH_ACTION_COUNT)
	// needs a real identity here.
	Credentials aws.CredentialsProvider
	// OnCall, when set, receives every AWS API request the stack served,
	// with the identity that signed it and the status it was answered with
	// (IAM checks of recorded calls).
	OnCall func(Call)
	// Now, when set, is the clock the embedded S3 stamps LastModified (and
	// bucket creation) from: the environment's clock, so a test clock that
	// moves on keeps S3's stamps within the deployment's clock skew of the
	// functions' clocks, as in AWS (GC ages never-committed outputs by
	// LastModified). Default: the wall clock.
	Now func() time.Time
	// AllowRemote lets the stack listen beyond loopback (Addr 0.0.0.0:port
	// or [::]:port) and answer any Host header: it has no authorization,
	// so anyone who reaches it can read and change everything. Without
	// it a non-loopback Addr is refused. Cross-origin requests are refused
	// either way (loopback.go).
	AllowRemote bool
	// S3Latency delays every S3 request by this long before it is served
	// (SetS3Latency changes it later): real S3 answers after tens of
	// milliseconds, the embedded one after well under one, and a design
	// that issues many small requests looks fine only without the delay.
	S3Latency time.Duration
}

// stackTime is a gofakes3 time source over Options.Now.
type stackTime struct{ now func() time.Time }

func (t stackTime) Now() time.Time                   { return t.now().In(time.FixedZone("GMT", 0)) }
func (t stackTime) Since(at time.Time) time.Duration { return t.now().Sub(at) }

// Stack is a running embedded AWS endpoint.
type Stack struct {
	opts     Options
	log      *slog.Logger
	srv      *http.Server
	ln       net.Listener
	url      string
	s3       http.Handler
	s3b      *replacingBackend // the embedded S3's storage (conditional deletes, s3delete.go)
	ddb      http.Handler
	sqs      http.Handler
	sqsd     *sqsd.Server // the embedded SQS (nil with an upstream)
	notify   *notifier
	events   *eventBus
	mux      *http.ServeMux
	counts   *Counter
	fns      *registry
	mappings []*mapping
	creds    aws.CredentialsProvider
	fnCreds  map[string]aws.CredentialsProvider
	senders  senderBook
	// completeMu serialises conditional CompleteMultipartUploads
	// (completeIfNoneMatch).
	completeMu sync.Mutex
	faults     faults
	stacks     map[string]*cfnStack // CloudFormation stacks (cloudformation.go)
	s3Delay    atomic.Int64         // nanoseconds added before every S3 request
	mu         sync.Mutex
	closed     bool
	wg         sync.WaitGroup
	stop       context.CancelFunc
	ctx        context.Context
}

// Start listens on opts.Addr and serves until Close.
func Start(opts Options) (*Stack, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkListenAddr(opts.Addr, opts.AllowRemote); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("embedded stack: listen on %s: %w", opts.Addr, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Stack{
		opts: opts, log: opts.Logger, ln: ln, url: loopbackURL(ln.Addr()),
		ddb: &removingDynamo{next: server.NewServer()}, mux: http.NewServeMux(), counts: newCounter(),
		fns: newRegistry(), ctx: ctx, stop: stop, creds: opts.Credentials, events: newEventBus(),
	}
	if s.creds == nil {
		s.creds = TestCredentials
	}
	s.s3Delay.Store(int64(opts.S3Latency))
	s3opts := []gofakes3.Option{gofakes3.WithAutoBucket(false), gofakes3.WithTimeSkewLimit(0)}
	var memOpts []s3mem.Option
	if opts.Now != nil {
		ts := stackTime{now: opts.Now}
		s3opts, memOpts = append(s3opts, gofakes3.WithTimeSource(ts)), append(memOpts, s3mem.WithTimeSource(ts))
	}
	s.s3b = newReplacingBackend(memOpts...)
	s.s3 = gofakes3.New(s.s3b, s3opts...).Server()
	s.sqsd = sqsd.New(sqsd.Options{Region: Region, AccountID: AccountID, BaseURL: s.URL})
	s.sqs = s.sqsd
	if opts.Upstream != "" {
		u, err := url.Parse(opts.Upstream)
		if err != nil || u.Host == "" {
			_ = ln.Close()
			stop()
			return nil, fmt.Errorf("embedded stack: upstream %q is not a URL", opts.Upstream)
		}
		proxy := httputil.NewSingleHostReverseProxy(u)
		proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil { // a client that gave up (a long poll at Close) is no upstream failure
				s.log.Warn("upstream request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			w.WriteHeader(http.StatusBadGateway)
		}
		s.s3, s.ddb, s.sqs = proxy, proxy, proxy
		s.sqsd = nil
	}
	s.notify = newNotifier(s)
	s.srv = &http.Server{Handler: LocalOnly{Next: s, AnyHost: opts.AllowRemote}, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("embedded stack stopped", "err", err)
		}
	}()
	return s, nil
}

// SetS3Latency sets the fixed delay added before every S3 request from
// now on (0: none): the latency-injecting mode benchmarks run in.
func (s *Stack) SetS3Latency(d time.Duration) { s.s3Delay.Store(int64(max(d, 0))) }

// delayS3 waits out the injected S3 latency (or until the client gives up).
func (s *Stack) delayS3(r *http.Request) {
	d := time.Duration(s.s3Delay.Load())
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// URL is the endpoint, e.g. http://127.0.0.1:4566.
func (s *Stack) URL() string { return s.url }

// Counter returns the per-operation request counter.
func (s *Stack) Counter() *Counter { return s.counts }

// Mount serves h below ServicePrefix+name+"/" (the stand-in owner services).
func (s *Stack) Mount(name string, h http.Handler) {
	p := ServicePrefix + name + "/"
	s.mux.Handle(p, http.StripPrefix(strings.TrimSuffix(p, "/"), h))
}

// ServiceURL is the base URL of a mounted service.
func (s *Stack) ServiceURL(name string) string { return s.url + ServicePrefix + name }

// ServeHTTP routes one request to the emulated service it addresses.
func (s *Stack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.OnCall != nil && !strings.HasPrefix(r.URL.Path, ServicePrefix) {
		rec := recordCall(r, w)
		s.route(rec, r)
		rec.finish()
		s.opts.OnCall(rec.Call)
		return
	}
	s.route(w, r)
}

func (s *Stack) route(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	count := s.counts.add
	if r.Header.Get(internalHeader) != "" {
		count = func(string, string) {}
	}
	switch {
	case strings.HasPrefix(r.URL.Path, ServicePrefix):
		s.mux.ServeHTTP(w, r)
	case strings.HasPrefix(target, dynamoTarget):
		op := strings.TrimPrefix(target, dynamoTarget)
		count("dynamodb", op)
		s.serve(w, r, "dynamodb", op, s.ddb.ServeHTTP)
	case strings.HasPrefix(target, sqsTargetPrefx):
		op := strings.TrimPrefix(target, sqsTargetPrefx)
		count("sqs", op)
		s.serve(w, r, "sqs", op, func(w http.ResponseWriter, r *http.Request) { s.serveSQS(w, r, op, s.sqs.ServeHTTP) })
	case strings.HasPrefix(target, eventsTargetPrefix): // always ours, also in front of an upstream
		count("events", strings.TrimPrefix(target, eventsTargetPrefix))
		s.serveEvents(w, r)
	case isCloudFormation(r): // always ours, also in front of an upstream
		s.serveCloudFormation(w, r, count)
	default:
		op := s3Operation(r)
		count("s3", op)
		s.delayS3(r)
		if s.opts.Upstream != "" {
			s.resignDecodedQuery(r) // see resign.go
		}
		next := s.notify.serveS3
		if op == "CompleteMultipartUpload" && r.Header.Get("If-None-Match") != "" && s.opts.Upstream == "" {
			next = s.completeIfNoneMatch
		}
		s.serve(w, r, "s3", op, next)
	}
}

// completeIfNoneMatch gives CompleteMultipartUpload the If-None-Match: *
// S3 has (gofakes3 ignores it there): 412 PreconditionFailed, nothing
// completed, when the key exists. Conditional completes are serialised,
// so of two racing ones exactly one wins, as on S3.
func (s *Stack) completeIfNoneMatch(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("If-None-Match") != "*" {
		writeS3Error(w, http.StatusNotImplemented, "NotImplemented", "If-None-Match supports only *", r.URL.Path)
		return
	}
	s.completeMu.Lock()
	defer s.completeMu.Unlock()
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
	if len(parts) == 2 {
		key, _ := url.PathUnescape(parts[1])
		if obj, err := s.s3b.HeadObject(parts[0], key); err == nil && obj != nil {
			writeS3Error(w, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", r.URL.Path)
			return
		}
	}
	s.notify.serveS3(w, r)
}

// serve passes r to next unless an injected fault matches it (the
// stack's uncounted internal requests only when the fault asks for them).
func (s *Stack) serve(w http.ResponseWriter, r *http.Request, service, op string, next func(http.ResponseWriter, *http.Request)) {
	if af := s.faults.take(service, op, r, r.Header.Get(internalHeader) != ""); af != nil {
		s.serveFaulted(w, r, service, op, af, next)
		return
	}
	next(w, r)
}

// Close stops event delivery, pollers and the listener.
func (s *Stack) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	// Give in-flight requests a moment, then cut the rest: a client's long
	// poll or an abandoned request must not hold a test's teardown.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}

// Wait blocks until every delivered S3 event has been handled and every
// mapped queue is empty with nothing in flight, or ctx ends.
func (s *Stack) Wait(ctx context.Context) error {
	for {
		if s.notify.idle() && s.queuesIdle() {
			// settle: a handler may be about to enqueue
			time.Sleep(20 * time.Millisecond)
			if s.notify.idle() && s.queuesIdle() {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("embedded stack did not settle: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func s3Operation(r *http.Request) string {
	q := r.URL.Query()
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
	hasKey := len(parts) == 2 && parts[1] != ""
	switch {
	case q.Has("notification"):
		return r.Method + "BucketNotification"
	case r.Method == http.MethodPost && q.Has("delete"):
		return "DeleteObjects"
	case r.Method == http.MethodPost && q.Has("uploads"):
		return "CreateMultipartUpload"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "CompleteMultipartUpload"
	case r.Method == http.MethodPut && q.Has("partNumber"):
		return "UploadPart"
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		return "AbortMultipartUpload"
	case r.Method == http.MethodGet && !hasKey:
		return "ListObjects"
	case r.Method == http.MethodGet:
		return "GetObject"
	case r.Method == http.MethodHead && hasKey:
		return "HeadObject"
	case r.Method == http.MethodPut && hasKey:
		return "PutObject"
	case r.Method == http.MethodPut:
		return "CreateBucket"
	case r.Method == http.MethodDelete && hasKey:
		return "DeleteObject"
	case r.Method == http.MethodDelete:
		return "DeleteBucket"
	}
	return r.Method
}
