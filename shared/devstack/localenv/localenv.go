package localenv

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/standin/ccs"
	"github.com/searchfabric/bcc/shared/devstack/standin/iamauth"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/devstack/standin/watermark"
	"github.com/searchfabric/bcc/shared/devstack/standin/workload"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// Options configure a local environment.
type Options struct {
	Addr              string // default 127.0.0.1:0 (a free port); make local uses 127.0.0.1:4566
	Prefix            string // resource name prefix, default "bcc"
	Policy            *policy.Policy
	HoldS3Events      bool
	VisibilityTimeout time.Duration // default 2s: failed messages return quickly locally
	NoDelivery        bool          // do not map queues to functions (tests drive them)
	Publisher         publisher.Options
	Workload          workload.Options
	Seed              uint64
	Log               *slog.Logger
	Now               func() time.Time // the functions', the stand-ins' and the embedded S3's clock (LastModified)
	// Upstream sends every S3, DynamoDB and SQS call to another endpoint
	// (LocalStack) instead of the in-process emulators; default: the
	// environment variable BCC_E2E_ENDPOINT. Resources then get a unique
	// prefix, since they outlive the environment there.
	Upstream string
	// Credentials sign the stack's own requests, the stand-ins' and the
	// fixtures' (Env.Clients); default localaws.TestCredentials. An
	// upstream that enforces IAM needs an identity allowed everything here.
	Credentials aws.CredentialsProvider
	// FunctionCredentials gives functions their own identities, as their
	// execution roles do on Lambda: the function's handler signs with them,
	// and so do the event source mapping and the on-failure destination
	// acting for it. A function without an entry signs with Credentials.
	FunctionCredentials map[string]aws.CredentialsProvider
	// HeadEvents is how head events reach the observer:
	// resources.HeadEventsNotification (default) or HeadEventsEventBridge.
	HeadEvents string
	// OnOwnerCall learns of every request a stand-in owner admitted, with
	// the access key that signed it.
	OnOwnerCall func(r *http.Request, accessKey string)
	// OnCall receives every AWS API request the stack served (see
	// localaws.Call), e.g. to judge the functions' calls against their
	// deployed policies.
	OnCall func(localaws.Call)
}

// EnvUpstream names the variable that points local environments (and so
// the end-to-end tests) at LocalStack: make e2e-localstack sets it.
const EnvUpstream = "BCC_E2E_ENDPOINT"

// Env is a running local product.
type Env struct {
	Stack     *localaws.Stack
	Prov      localaws.Provisioned
	Config    app.Config
	Clients   app.Clients   // counted: every call shows in Stack.Counter(); signed with Options.Credentials
	Bucket    *awsio.Bucket // uncounted (fixtures and stand-ins)
	Lineage   *lineage.Reader
	Publisher *publisher.Publisher
	CCS       *ccs.Service
	Watermark *watermark.Publisher
	Workload  *workload.Generator
	Metrics   *SyncBuffer // EMF lines written by functions
	Now       func() time.Time
	Log       *slog.Logger
	fnCreds   map[string]aws.CredentialsProvider
}

// FunctionClients are the clients function fn uses: counted, and signed
// with its own identity (Options.FunctionCredentials) when it has one. A
// test that plays a function's part (wiring its use case by hand) uses
// these, so its calls are judged as that function's.
func (e *Env) FunctionClients(fn string) app.Clients {
	creds, ok := e.fnCreds[fn]
	if !ok {
		return e.Clients
	}
	cfg := e.Stack.Config()
	cfg.Credentials = creds
	return app.ClientsFrom(cfg, true)
}

// SyncBuffer is a goroutine-safe buffer.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns the contents.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start brings everything up.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	if opts.Upstream == "" {
		opts.Upstream = os.Getenv(EnvUpstream)
	}
	if opts.Prefix == "" && opts.Upstream != "" {
		opts.Prefix = fmt.Sprintf("e2e%08x", rand.Uint32())
	}
	if opts.Prefix == "" {
		opts.Prefix = "bcc"
	}
	if opts.VisibilityTimeout == 0 {
		opts.VisibilityTimeout = 2 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Workload.RecordsPerCommit == 0 {
		opts.Workload = workload.Options{RecordsPerCommit: 50, KeySpace: 400, DeleteFraction: 0.1, PayloadBytes: 64}
	}
	stack, err := localaws.Start(localaws.Options{Addr: opts.Addr, Logger: opts.Log, HoldS3Events: opts.HoldS3Events, Upstream: opts.Upstream,
		Credentials: opts.Credentials, OnCall: opts.OnCall, Now: opts.Now})
	if err != nil {
		return nil, err
	}
	e := &Env{Stack: stack, Metrics: &SyncBuffer{}, Now: opts.Now, Log: opts.Log, fnCreds: opts.FunctionCredentials}
	if err := e.init(ctx, opts); err != nil {
		_ = stack.Close()
		return nil, err
	}
	return e, nil
}

func (e *Env) init(ctx context.Context, opts Options) error {
	def := resources.Default(opts.Prefix)
	e.Clients = app.ClientsFrom(e.Stack.Config(), true)
	prov, err := localaws.Provision(ctx, localaws.Clients{S3: e.Clients.S3, Dynamo: e.Clients.Dynamo, SQS: e.Clients.SQS, Events: e.Stack.Clients().Events}, def,
		localaws.ProvisionOptions{VisibilityTimeout: opts.VisibilityTimeout, HeadEvents: opts.HeadEvents})
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	e.Prov = prov
	// Stand-ins and fixtures use uncounted clients: the stack's counter then
	// shows only the product's own AWS calls.
	internal := e.Stack.InternalClients()
	e.Bucket = awsio.NewBucket(internal.S3, def.Bucket.Name)
	e.Lineage = lineage.New(e.Bucket, 1024)
	e.Publisher = publisher.New(e.Bucket, opts.Now, opts.Publisher, opts.Log)
	e.CCS = ccs.New(internal.Dynamo, def.CCSTable.Name, opts.Now)
	e.Publisher.SetFacts(e.CCS) // re-read at the head CAS of a cutover carrying ccs_facts
	e.Watermark = watermark.New(e.Bucket, def.WatermarkKey)
	e.Workload = workload.New(e.Publisher, e.CCS, e.Bucket, opts.Now, opts.Seed, opts.Workload)
	// The stand-ins admit only SigV4-signed requests of known identities,
	// as a deployed owner API with AWS_IAM authorization does.
	identities := []aws.CredentialsProvider{localaws.TestCredentials, opts.Credentials}
	for _, c := range opts.FunctionCredentials {
		identities = append(identities, c)
	}
	auth := &iamauth.Verifier{Service: owners.ServiceAPIGateway, Region: localaws.Region, Secret: iamauth.Keys(identities...), OnVerified: opts.OnOwnerCall}
	e.Stack.Mount("publisher", auth.Wrap(e.Publisher.Handler()))
	e.Stack.Mount("ccs", auth.Wrap(e.CCS.Handler()))
	pol := policy.Default()
	if opts.Policy != nil {
		pol = *opts.Policy
	}
	e.Config = app.Config{
		Bucket: def.Bucket.Name, Table: def.Table.Name, QueueURLs: prov.QueueURLs,
		PublisherEndpoint: e.Stack.ServiceURL("publisher"), CCSEndpoint: e.Stack.ServiceURL("ccs"),
		WatermarkBucket: def.Bucket.Name, WatermarkKey: def.WatermarkKey, AWSEndpoint: e.Stack.URL(), Policy: pol,
		OwnerAuth: owners.AuthSigV4, OwnerSigning: owners.ServiceAPIGateway + ":" + localaws.Region, Deployment: def.Prefix,
	}
	// Functions see exactly the configuration a deployed function would:
	// rendered to its environment and parsed back.
	env := e.Config.Env()
	cfg, err := app.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		return err
	}
	rt := app.Runtime{Now: opts.Now, Out: e.Metrics, Log: opts.Log}
	for name, creds := range opts.FunctionCredentials {
		e.Stack.SetFunctionCredentials(name, creds)
	}
	for name, h := range HandlersFor(cfg, e.FunctionClients, rt) {
		fn, _ := def.Function(name)
		e.Stack.RegisterFunction(name, h, fn.Timeout)
	}
	if !opts.NoDelivery {
		e.Stack.MapQueues(prov)
	}
	return e.Watermark.Publish(ctx, opts.Now().Add(-time.Minute), opts.Now())
}

// Handlers returns every function's handler, wired as on Lambda.
func Handlers(cfg app.Config, cl app.Clients, rt app.Runtime) map[string]any {
	return HandlersFor(cfg, func(string) app.Clients { return cl }, rt)
}

// HandlersFor is Handlers with each function's own clients.
func HandlersFor(cfg app.Config, cl func(fn string) app.Clients, rt app.Runtime) map[string]any {
	return map[string]any{
		resources.FnObserver:   app.ObserverHandler(cfg, cl(resources.FnObserver), rt).Handle,
		resources.FnCompaction: app.CompactionHandler(cfg, cl(resources.FnCompaction), rt).Handle,
		resources.FnHandoff:    app.HandoffHandler(cfg, cl(resources.FnHandoff), rt).Handle,
		resources.FnGC:         app.GCHandler(cfg, cl(resources.FnGC), rt).Handle,
	}
}

// Close stops the stack.
func (e *Env) Close() error { return e.Stack.Close() }

// Settle waits until every notification was handled and every queue drained.
func (e *Env) Settle(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return e.Stack.Wait(ctx)
}

// Reconcile runs one scheduled reconciliation pass to its end, for
// environments without delivery: the scheduled event (the observer fans
// the catalog out to the reconcile queue), then every reconcile request,
// delivered to the observer as the queue's event source mapping would.
// Requests that fail return after their visibility timeout and are not
// waited for. It returns the observer's responses, the scheduled one first.
func (e *Env) Reconcile(ctx context.Context) ([][]byte, error) {
	out, err := e.Stack.Invoke(ctx, resources.FnObserver, []byte(`{"source":"aws.events","detail-type":"Scheduled Event"}`))
	if err != nil {
		return [][]byte{out}, fmt.Errorf("scheduled reconciliation: %w", err)
	}
	resps := [][]byte{out}
	q, _ := e.Prov.Def.Queue(resources.QueueReconcile)
	for {
		resp, ok, err := e.Stack.DeliverBatch(ctx, e.Prov.QueueURLs[resources.QueueReconcile], resources.FnObserver, q.BatchSize)
		if !ok {
			return resps, err
		}
		resps = append(resps, resp)
		if err != nil {
			return resps, fmt.Errorf("reconcile batch: %w", err)
		}
	}
}

// Reset empties the buffer.
func (s *SyncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}
