package resources

import (
	"fmt"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/policy"
)

// Function names (also the directory under functions/).
const (
	FnObserver   = "observer"
	FnCompaction = "compaction"
	FnGC         = "gc"
	FnHandoff    = "handoff"
)

// Queue classes.
const (
	QueueCompaction = "compaction"
	QueueGC         = "gc"
	QueueHandoff    = "handoff"
	// QueueReconcile carries reconcile requests to the observer: a
	// scheduled pass fans out one message per collection (through chunks),
	// each reconciled on its own.
	QueueReconcile = "reconcile"
)

// Environment variables that carry configuration into functions.
const (
	EnvBucket            = "BCC_BUCKET"
	EnvTable             = "BCC_TABLE"
	EnvCompactionQueue   = "BCC_COMPACTION_QUEUE_URL"
	EnvGCQueue           = "BCC_GC_QUEUE_URL"
	EnvHandoffQueue      = "BCC_HANDOFF_QUEUE_URL"
	EnvReconcileQueue    = "BCC_RECONCILE_QUEUE_URL"
	EnvPublisherEndpoint = "BCC_PUBLISHER_ENDPOINT"
	EnvCCSEndpoint       = "BCC_CCS_ENDPOINT"
	EnvWatermarkBucket   = "BCC_WATERMARK_BUCKET"
	EnvWatermarkKey      = "BCC_WATERMARK_KEY"
	EnvAWSEndpoint       = "BCC_AWS_ENDPOINT"  // local stacks only; empty on AWS
	EnvPolicy            = "BCC_POLICY"        // optional JSON overriding the default policy
	EnvOwnerAuth         = "BCC_OWNER_AUTH"    // sigv4 (default) or none: how owner requests are authenticated
	EnvOwnerSigning      = "BCC_OWNER_SIGNING" // <service>:<region> signing owner requests to a host that does not say (a custom domain)
	EnvDeployment        = "BCC_DEPLOYMENT"    // the deployment's name: a dimension of every metric
	// EnvHandoffSenders is a JSON object naming, for each function that
	// sends to the handoff queue, its role's unique id (the SenderId SQS
	// stamps on its messages starts with it): the handoff admits each kind
	// of message only from its sender's role.
	EnvHandoffSenders = "BCC_HANDOFF_SENDERS"
)

// Bucket is the data bucket and its head notification.
type Bucket struct {
	Name           string
	NotifyPrefix   string
	NotifySuffix   string
	NotifyFunction string
	// NotifyFailureQueue is the standard queue that receives a head
	// notification whose asynchronous invocation failed every attempt
	// (Lambda's on-failure destination), so no head event is lost silently.
	NotifyFailureQueue string
	// HeadKeyWildcard matches exactly the keys of the layout's head objects
	// (contract.HeadKey of any collection): the key filter of the
	// EventBridge rule in EventBridge mode.
	HeadKeyWildcard string
	// EventRule is the EventBridge rule of EventBridge mode.
	EventRule string
}

// Head event modes: how the observer learns of a new head.
const (
	// HeadEventsNotification: the bucket's own notification configuration
	// invokes the observer (prefix and suffix filter). Default.
	HeadEventsNotification = "notification"
	// HeadEventsEventBridge: the bucket sends its events to EventBridge and
	// a rule with an exact head-key filter invokes the observer. For a
	// bucket whose notification configuration already notifies someone
	// else for overlapping keys (S3 refuses overlapping configurations).
	HeadEventsEventBridge = "eventbridge"
)

// HeadEventPattern is the EventBridge event pattern of EventBridge mode:
// S3 "Object Created" events of bucket whose key is a head key.
func (b Bucket) HeadEventPattern(bucket string) map[string]any {
	return map[string]any{
		"source":      []any{"aws.s3"},
		"detail-type": []any{"Object Created"},
		"detail": map[string]any{
			"bucket": map[string]any{"name": []any{bucket}},
			"object": map[string]any{"key": []any{map[string]any{"wildcard": b.HeadKeyWildcard}}},
		},
	}
}

// Table is the coordinator's DynamoDB table. Everything in it is disposable.
type Table struct {
	Name         string
	PartitionKey string
	SortKey      string
	TTLAttribute string // tidiness only: correctness never relies on TTL
}

// Queue is one FIFO task queue, its DLQ and its consumer's event source mapping.
type Queue struct {
	Class             string
	Name              string // ends in .fifo
	DLQName           string // ends in .fifo
	Consumer          string // function name
	MaxReceiveCount   int
	VisibilityTimeout time.Duration
	RetentionPeriod   time.Duration
	BatchSize         int
	MaxConcurrency    int
	BatchWindow       time.Duration
	// HighThroughput is SQS FIFO high-throughput mode: deduplication scope
	// and throughput limit per message group (the collection) instead of
	// per queue. Deduplication ids are task identities, which embed the
	// collection, so per-group deduplication absorbs exactly what per-queue
	// deduplication would.
	HighThroughput bool
}

// Function is one Lambda function.
type Function struct {
	Name        string
	Description string
	Timeout     time.Duration
	MemoryMB    int
	Env         []string // names of the Env* variables it reads
	// PublisherRoutes are the Manifest Publisher routes it calls (its Env
	// names the publisher endpoint): the deployment grants it exactly
	// these. The handoff submits cutovers, GC retires dropped heads.
	PublisherRoutes []contract.Route
	// CCSRoutes are the CCS routes it calls (its Env names the CCS
	// endpoint): the deployment grants it exactly these. Only the handoff
	// calls the write route (release intents); the others read facts.
	CCSRoutes []contract.Route
}

// Routes returns the routes of owner ("publisher" or "ccs") f calls.
func (f Function) Routes(owner string) []contract.Route {
	if owner == "publisher" {
		return f.PublisherRoutes
	}
	return f.CCSRoutes
}

// Definition is the whole product's resource set.
type Definition struct {
	Prefix            string
	Bucket            Bucket
	Table             Table
	CCSTable          Table // the CCS stand-in's own table (not coordinator state)
	Queues            []Queue
	Functions         []Function
	WatermarkKey      string
	ReconcileSchedule time.Duration
}

// Default returns the definition for resources named with prefix (e.g.
// "bcc") under the default policy.
func Default(prefix string) Definition { return For(prefix, policy.Default()) }

// For returns the definition for resources named with prefix whose
// function timeouts (and the queue visibility timeouts derived from them)
// are the policy's: the CDK app deploys For(prefix, the policy it passes
// to the functions in BCC_POLICY).
func For(prefix string, p policy.Policy) Definition {
	t := p.Functions
	fns := []Function{
		{Name: FnObserver, Description: "re-reads committed heads, updates debt, enqueues fenced tasks", Timeout: t.ObserverTimeout.D(), MemoryMB: 256,
			Env:       []string{EnvBucket, EnvTable, EnvCompactionQueue, EnvGCQueue, EnvReconcileQueue, EnvHandoffQueue, EnvCCSEndpoint, EnvPolicy, EnvOwnerAuth, EnvOwnerSigning, EnvDeployment},
			CCSRoutes: []contract.Route{contract.CCSCollections, contract.CCSFacts, contract.CCSNamespaceFacts, contract.CCSTombstonedNamespaces}},
		{Name: FnCompaction, Description: "leases and runs version-fenced compaction", Timeout: t.CompactionTimeout.D(), MemoryMB: 1024,
			Env:       []string{EnvBucket, EnvTable, EnvCompactionQueue, EnvHandoffQueue, EnvCCSEndpoint, EnvPolicy, EnvOwnerAuth, EnvOwnerSigning, EnvDeployment},
			CCSRoutes: []contract.Route{contract.CCSFacts}},
		{Name: FnGC, Description: "re-checks the delete predicate and deletes in paced batches", Timeout: t.GCTimeout.D(), MemoryMB: 512,
			Env:             []string{EnvBucket, EnvTable, EnvGCQueue, EnvHandoffQueue, EnvPublisherEndpoint, EnvCCSEndpoint, EnvWatermarkBucket, EnvWatermarkKey, EnvPolicy, EnvOwnerAuth, EnvOwnerSigning, EnvDeployment},
			PublisherRoutes: []contract.Route{contract.PublisherRetire}, CCSRoutes: []contract.Route{contract.CCSFacts}},
		{Name: FnHandoff, Description: "hands results to the publisher and release intents to CCS", Timeout: t.HandoffTimeout.D(), MemoryMB: 256,
			Env:             []string{EnvBucket, EnvTable, EnvPublisherEndpoint, EnvCCSEndpoint, EnvPolicy, EnvOwnerAuth, EnvOwnerSigning, EnvDeployment, EnvHandoffSenders},
			PublisherRoutes: []contract.Route{contract.PublisherCutover},
			CCSRoutes:       []contract.Route{contract.CCSFacts, contract.CCSNamespaceFacts, contract.CCSReleaseIntents}},
	}
	timeout := map[string]time.Duration{}
	for _, f := range fns {
		timeout[f.Name] = f.Timeout
	}
	queue := func(class, consumer string, batch int) Queue {
		return Queue{
			Class: class, Name: fmt.Sprintf("%s-%s.fifo", prefix, class), DLQName: fmt.Sprintf("%s-%s-dlq.fifo", prefix, class),
			Consumer: consumer, MaxReceiveCount: 5, VisibilityTimeout: policy.VisibilityTimeout(timeout[consumer]),
			RetentionPeriod: 4 * 24 * time.Hour, BatchSize: batch, MaxConcurrency: 10, HighThroughput: true,
		}
	}
	return Definition{
		Prefix: prefix,
		Bucket: Bucket{Name: prefix + "-data", NotifyPrefix: contract.CollectionsPrefix, NotifySuffix: contract.HeadSuffix, NotifyFunction: FnObserver,
			NotifyFailureQueue: prefix + "-observer-failures", HeadKeyWildcard: headKeyWildcard(), EventRule: prefix + "-head-events"},
		Table:    Table{Name: prefix + "-coordinator", PartitionKey: "pk", SortKey: "sk", TTLAttribute: "expires_at"},
		CCSTable: Table{Name: prefix + "-standin-ccs", PartitionKey: "pk", SortKey: "sk"},
		Queues: []Queue{
			queue(QueueCompaction, FnCompaction, 1),
			queue(QueueGC, FnGC, 1),
			queue(QueueHandoff, FnHandoff, awslimit.SQSBatchMaxEntries), // a FIFO event source takes at most 10 per batch
			// Reconciliation: one message per collection, ten per batch
			// (each collection's reconcile is a handful of calls), failed
			// per message group.
			queue(QueueReconcile, FnObserver, awslimit.SQSBatchMaxEntries),
		},
		Functions:         fns,
		WatermarkKey:      "query-plane/global_safe_ts.json",
		ReconcileSchedule: 5 * time.Minute,
	}
}

// headKeyWildcard is contract.HeadKey with '*' for the collection.
func headKeyWildcard() string {
	const placeholder = "xcollectionx"
	return strings.Replace(contract.HeadKey(placeholder), placeholder, "*", 1)
}

// Queue returns the queue of a class.
func (d Definition) Queue(class string) (Queue, bool) {
	for _, q := range d.Queues {
		if q.Class == class {
			return q, true
		}
	}
	return Queue{}, false
}

// FunctionName is the deployed name of function fn: <prefix>-<fn>.
func (d Definition) FunctionName(fn string) string { return d.Prefix + "-" + fn }

// Function returns the function with name.
func (d Definition) Function(name string) (Function, bool) {
	for _, f := range d.Functions {
		if f.Name == name {
			return f, true
		}
	}
	return Function{}, false
}

// OperatorKeyPrefix starts the partition key of every operator record in
// the coordinator's table (an operator's lineage confirmation, which GC
// trusts to lift a head-regression refusal): every function role is
// denied writing items whose partition key starts with it
// (dynamodb:LeadingKeys), so only an operator's own credentials (or the
// stack's operator-records policy) can record one.
const OperatorKeyPrefix = "OPERATOR#"

// CollectionKeyPrefix starts the partition key of a collection lifetime's
// coordinator items (its observed state, the lineage GC remembers): "COLL#<name>".
const CollectionKeyPrefix = "COLL#"

// HandoffSenders are the functions that send to the handoff queue: the
// observer (namespace release requests), compaction (rewrites) and GC
// (cleanups).
var HandoffSenders = []string{FnObserver, FnCompaction, FnGC}

// HandoffSenderOf names the one function whose role may send a handoff
// message of a completion of kind (rewrites compaction, the rest GC), or
// of a namespace release request (kind "": the observer).
func HandoffSenderOf(kind contract.TaskKind) string {
	switch {
	case kind == "":
		return FnObserver
	case kind.Rewrites():
		return FnCompaction
	}
	return FnGC
}

// QueueForKind routes a task kind to its queue class.
func QueueForKind(k contract.TaskKind) string {
	if k.Rewrites() {
		return QueueCompaction
	}
	return QueueGC
}
