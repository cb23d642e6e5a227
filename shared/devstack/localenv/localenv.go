package localenv

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

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
	Addr string // default 127.0.0.1:0 (a free port); make local uses 127.0.0.1:4566
	// AllowRemote lets Addr be a wildcard address reachable from other
	// machines (localaws.Options.AllowRemote; make local -allow-remote).
	AllowRemote       bool
	Prefix            string // resource name prefix, default "bcc"
	Policy            *policy.Policy
	HoldS3Events      bool
	VisibilityTimeout time.Duration // default 2s (without TimeScale): failed messages return quickly in tests
	// TimeScale > 0 runs the environment as deployed, TimeScale times
	// faster (make local: DefaultTimeScale; scale.go): the scheduled
	// reconciliation every resources ReconcileSchedule / TimeScale, each
	// queue's visibility timeout its deployed one / TimeScale (never below
	// its consumer's timeout), the stand-in
	// watermark advancing every SandboxDefinition WatermarkEvery /
	// TimeScale. 0 (tests): no schedule (they call Reconcile), every
	// visibility timeout VisibilityTimeout, the watermark published once.
	TimeScale  float64
	NoDelivery bool // do not map queues to functions (tests drive them)
	Publisher  publisher.Options
	Workload   workload.Options
	Seed       uint64
	Log        *slog.Logger
	Now        func() time.Time // the functions', the stand-ins' and the embedded S3's clock (LastModified)
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
	// stopSchedule ends the schedules of a TimeScale environment.
	stopSchedule func()
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

// routeGrants admits a function's request to owner only on the routes it
// is granted when deployed (resources.Function PublisherRoutes and
// CCSRoutes: only the handoff records release intents), as API Gateway
// judges execute-api:Invoke; the stack's own and the fixtures' identities
// may call any route.
func (e *Env) routeGrants(def resources.Definition, owner string) func(*http.Request, string) error {
	return func(r *http.Request, accessKey string) error {
		fn, ok := e.FunctionOf(accessKey)
		if !ok {
			return nil
		}
		f, _ := def.Function(fn)
		for _, route := range f.Routes(owner) {
			if route.Matches(r.Method, r.URL.Path) {
				return nil
			}
		}
		return fmt.Errorf("User: %s (the %s function) is not authorized to perform: execute-api:Invoke on resource: %s %s of the %s", accessKey, fn, r.Method, r.URL.Path, owner)
	}
}

// FunctionCredentials is the identity a local environment gives function
// fn when its options name none (access key BCCLOCAL<FN>).
func FunctionCredentials(fn string) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider("BCCLOCAL"+strings.ToUpper(fn), "local-"+fn, "")
}

// FunctionOf names the function whose identity has accessKey ("" and
// false for the stack's own, a stand-in's or a fixture's).
func (e *Env) FunctionOf(accessKey string) (string, bool) {
	for fn, c := range e.fnCreds {
		if v, err := c.Retrieve(context.Background()); err == nil && v.AccessKeyID == accessKey {
			return fn, true
		}
	}
	return "", false
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

// Since returns the whole lines written from byte offset on, and the
// offset after them (a line still being written is left for later).
func (s *SyncBuffer) Since(offset int) ([]byte, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if offset >= len(b) {
		return nil, offset
	}
	end := bytes.LastIndexByte(b[offset:], '\n') + 1
	return bytes.Clone(b[offset : offset+end]), offset + end
}

// Drain returns the contents and empties the buffer (a long benchmark
// tallies metrics as it goes instead of keeping every line); offsets
// Since returned before are void.
func (s *SyncBuffer) Drain() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
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
	if opts.VisibilityTimeout == 0 && opts.TimeScale <= 0 {
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
		Credentials: opts.Credentials, OnCall: opts.OnCall, Now: opts.Now, AllowRemote: opts.AllowRemote})
	if err != nil {
		return nil, err
	}
	if opts.FunctionCredentials == nil {
		// Each function its own identity, as each has its own execution
		// role when deployed: the handoff's sender check and the owners'
		// per-route admission see who really sent or called.
		opts.FunctionCredentials = map[string]aws.CredentialsProvider{}
		for _, f := range resources.Default(opts.Prefix).Functions {
			opts.FunctionCredentials[f.Name] = FunctionCredentials(f.Name)
		}
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
		localaws.ProvisionOptions{VisibilityTimeout: opts.VisibilityTimeout, TimeScale: opts.TimeScale, HeadEvents: opts.HeadEvents})
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
	e.CCS.SetBucket(e.Bucket)   // a release is recorded only once the lifetime is gone from the bucket
	e.Publisher.SetFacts(e.CCS) // re-read at the head CAS of a cutover carrying ccs_facts
	e.Watermark = watermark.New(e.Bucket, def.WatermarkKey)
	e.Workload = workload.New(e.Publisher, e.CCS, e.Bucket, opts.Now, opts.Seed, opts.Workload)
	// The stand-ins admit only SigV4-signed requests of known identities,
	// as a deployed owner API with AWS_IAM authorization does.
	identities := []aws.CredentialsProvider{localaws.TestCredentials, opts.Credentials}
	for _, c := range opts.FunctionCredentials {
		identities = append(identities, c)
	}
	auth := iamauth.Verifier{Service: owners.ServiceAPIGateway, Region: localaws.Region, Secret: iamauth.Keys(identities...), OnVerified: opts.OnOwnerCall}
	pubAuth, ccsAuth := auth, auth
	pubAuth.Authorize, ccsAuth.Authorize = e.routeGrants(def, "publisher"), e.routeGrants(def, "ccs")
	e.Stack.Mount("publisher", pubAuth.Wrap(e.Publisher.Handler()))
	e.Stack.Mount("ccs", ccsAuth.Wrap(e.CCS.Handler()))
	pol := policy.Default()
	if opts.Policy != nil {
		pol = *opts.Policy
	}
	e.Config = app.Config{
		Bucket: def.Bucket.Name, Table: def.Table.Name, QueueURLs: prov.QueueURLs,
		PublisherEndpoint: e.Stack.ServiceURL("publisher"), CCSEndpoint: e.Stack.ServiceURL("ccs"),
		WatermarkBucket: def.Bucket.Name, WatermarkKey: def.WatermarkKey, AWSEndpoint: e.Stack.URL(), Policy: pol,
		OwnerAuth: owners.AuthSigV4, OwnerSigning: owners.ServiceAPIGateway + ":" + localaws.Region, Deployment: def.Prefix,
		HandoffSenders: map[string]string{},
	}
	// The stack stamps each message a function sends with its role's id
	// (localaws.SenderID), as SQS does: the handoff admits each kind only
	// from its sender's role.
	for _, fn := range resources.HandoffSenders {
		if _, ok := opts.FunctionCredentials[fn]; ok {
			e.Config.HandoffSenders[fn] = localaws.RoleID(fn)
		}
	}
	e.Stack.PutStack(e.StackName(), e.stackOutputs())
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
	if err := e.Watermark.Publish(ctx, opts.Now().Add(-time.Minute), opts.Now()); err != nil {
		return err
	}
	if opts.TimeScale > 0 && !opts.NoDelivery {
		e.stopSchedule = e.runSchedules(opts.TimeScale, opts.Now)
	}
	return nil
}

// StackName is the name the local deployment answers DescribeStacks for:
// a deployed stack's default name (infra: <prefix>-coordinator).
func (e *Env) StackName() string { return e.Prov.Def.Prefix + "-coordinator" }

// BccCommand is the ready operator command line for the local deployment
// (the stack output BccStackCommand).
func (e *Env) BccCommand() string {
	return fmt.Sprintf("bcc --stack %s --endpoint-url %s", e.StackName(), e.Stack.URL())
}

// stackOutputs are the outputs a deployed stack has (resources.Out*), for
// this deployment.
func (e *Env) stackOutputs() []localaws.StackOutput {
	def := e.Prov.Def
	outs := []localaws.StackOutput{
		{Key: resources.OutDeployment, Value: def.Prefix, Description: "deployment name (a dimension of every metric)"},
		{Key: resources.OutDataBucketName, Value: def.Bucket.Name, Description: "data bucket (heads, manifests, data objects)"},
		{Key: resources.OutTableName, Value: def.Table.Name, Description: "coordinator table (disposable: leases, observed state, debt)"},
		{Key: resources.OutCCSEndpoint, Value: e.Config.CCSEndpoint, Description: "CCS endpoint (the stand-in)"},
		{Key: resources.OutPublisherEndpoint, Value: e.Config.PublisherEndpoint, Description: "Manifest Publisher endpoint (the stand-in)"},
		{Key: resources.OutWatermarkBucket, Value: e.Config.WatermarkBucket, Description: "bucket of the query plane's watermark"},
		{Key: resources.OutWatermarkKey, Value: e.Config.WatermarkKey, Description: "key of the query plane's watermark"},
		{Key: resources.OutOwnerAuth, Value: e.Config.OwnerAuth, Description: "how owner requests are authenticated"},
		{Key: resources.OutOwnerSigning, Value: e.Config.OwnerSigning, Description: "what owner requests are signed for"},
		{Key: resources.OutObserverFailuresURL, Value: e.Prov.FailureQueueURL, Description: "head notifications and scheduled reconciliations whose observer invocations all failed"},
		{Key: resources.OutBccCommand, Value: fmt.Sprintf("bcc --prefix %s --ccs %s --endpoint-url %s status", def.Prefix, e.Config.CCSEndpoint, e.Stack.URL()),
			Description: "the operator CLI for this deployment (make bcc builds it)"},
		{Key: resources.OutBccStackCommand, Value: e.BccCommand() + " status", Description: "the operator CLI through this stack's outputs"},
	}
	if opts := e.Config.Env()[resources.EnvPolicy]; opts != "" {
		// The functions' policy, as a deployed stack publishes the one its
		// deploy passed: bcc judges leases by it.
		outs = append(outs, localaws.StackOutput{Key: resources.OutPolicy, Value: opts, Description: "the BCC_POLICY the functions run with"})
	}
	for _, q := range def.Queues {
		outs = append(outs, localaws.StackOutput{Key: resources.OutQueueURL(q.Class), Value: e.Prov.QueueURLs[q.Class], Description: q.Class + " task queue (FIFO)"},
			localaws.StackOutput{Key: resources.OutDLQURL(q.Class), Value: e.Prov.DLQURLs[q.Class], Description: q.Class + " dead-letter queue (FIFO)"})
	}
	return outs
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
func (e *Env) Close() error {
	if e.stopSchedule != nil {
		e.stopSchedule()
	}
	return e.Stack.Close()
}

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
