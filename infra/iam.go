package main

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// KeyGlobs are the IAM object-key patterns of the bucket layout, derived
// from shared/contract's key functions (never typed in by hand): each
// function is called with placeholder values, and every placeholder becomes
// '*'. In IAM, '*' matches any characters including '/'.
type KeyGlobs struct {
	Heads     string   // collections/*/manifest_committed_head.json
	Manifests string   // collections/*/manifests/*   (roots and parts)
	Data      string   // collections/*/data/*        (every level)
	Control   string   // collections/*/control/*     (CCS control artifacts a dropped incarnation's cleanup deletes)
	Rewrites  []string // collections/*/data/l<L>/*/* for L = 0..MaxLevel: outputs of rewrite tasks (compaction, lifecycle transition), below a task id
}

// Placeholders the globs are derived with; each stands for one run-time
// value of the key layout and becomes '*'.
const (
	globCollection = "xcollectionx"
	globTask       = "xtaskx"
)

// Globs derives the key patterns from the contract's key layout.
func Globs() KeyGlobs {
	const c, task = globCollection, globTask
	glob := func(key string) string {
		return strings.NewReplacer(c, "*", task, "*").Replace(key)
	}
	g := KeyGlobs{
		Heads:     glob(contract.HeadKey(c)),
		Manifests: glob(contract.ManifestsPrefix(c)) + "*",
		Data:      glob(contract.DataPrefix(c)) + "*",
		Control:   glob(contract.ControlPrefix(c)) + "*",
	}
	// A rewrite task writes below its own task id at the level of its
	// outputs: compaction at 1..MaxLevel, a lifecycle transition at the
	// level of the objects it moves, level 0 included. The '/' after the
	// task id keeps level-0 appends (data/l0/<version>-<n>.seg, no further
	// '/') out of the pattern.
	for l := 0; l <= contract.MaxLevel; l++ {
		g.Rewrites = append(g.Rewrites, glob(contract.RewritePrefix(c, l, task))+"*")
	}
	return g
}

// tableItemOps are the DynamoDB single-item actions the functions use on the
// coordinator table (shared/adapters/awsio: leases and the observed state are
// conditional GetItem/PutItem/UpdateItem; the observer's Revert of an
// advance that could not be enqueued uses DeleteItem or PutItem). No Query,
// Scan, batch or table-level action: nothing needs them.
var tableItemOps = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}

// addPolicies grants each function's role exactly what that function uses.
// The SQS event source mappings add the consume permissions on the consumer's
// own queue (see addEventSources). Nothing grants s3:PutObject or
// s3:DeleteObject on a head key: only the Manifest Publisher writes and
// retires heads.
func (c *Coordinator) addPolicies(cfg Config) {
	g := Globs()
	objects := func(globs ...string) []*string {
		var out []*string
		for _, p := range globs {
			out = append(out, c.Bucket.ArnForObjects(jsii.String(p)))
		}
		return out
	}
	stmt := func(sid string, actions []string, res []*string) awsiam.PolicyStatement {
		return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(sid), Actions: jsii.Strings(actions...), Resources: &res,
		})
	}
	// listBucket grants s3:ListBucket on the data bucket, with no prefix
	// condition, for a written reason: S3 answers a GET of a missing key with
	// 404 only to principals that may list the bucket (403 otherwise), and
	// the lineage walk must tell "this parent was trimmed by GC" (404: stop)
	// from "access denied" (fail closed); a delete answered 404 counts as
	// done. A prefix condition would not help: a GET carries no s3:prefix.
	// Listing reveals key names only, never contents. GC also lists
	// collections/<c>/data/ to propose never-committed outputs (never to
	// decide what is live).
	listBucket := func(sid string) awsiam.PolicyStatement {
		return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(sid), Actions: jsii.Strings("s3:ListBucket"), Resources: jsii.Strings(*c.Bucket.BucketArn()),
		})
	}
	table := []*string{c.Table.TableArn()}
	queueArn := func(class string) *string { return c.Queues[class].QueueArn() }
	add := func(fn string, s ...awsiam.PolicyStatement) {
		for _, st := range s {
			c.Roles[fn].AddToPrincipalPolicy(st)
		}
	}
	// Operator records (a lineage confirmation lifts GC's head-regression
	// refusal) live under their own partition keys; no function role may
	// write one, whatever else it may do in the table.
	// Nor may any remove the undo (the data bucket's previous versions,
	// kept for the bucket's undo window): no version deletes, no change of
	// versioning, lifecycle, policy or object lock, on the data bucket
	// whether created or imported.
	for _, f := range c.Definition.Functions {
		add(f.Name, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("NoOperatorRecords"), Effect: awsiam.Effect_DENY,
			Actions: jsii.Strings(operatorRecordWrites...), Resources: &table,
			Conditions: &map[string]any{"ForAnyValue:StringLike": map[string]any{"dynamodb:LeadingKeys": []string{resources.OperatorKeyPrefix + "*"}}},
		}), awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("NoUndoRemoval"), Effect: awsiam.Effect_DENY,
			Actions: jsii.Strings(UndoRemovals...), Resources: jsii.Strings(*c.Bucket.BucketArn(), *c.Bucket.ArnForObjects(jsii.String("*"))),
		}))
	}

	// observer: re-reads heads and opens manifests; never writes or deletes
	// objects; keeps debt in the table; enqueues compaction and GC tasks.
	// It lists too (see listBucket): a dropped incarnation's cleanup deletes
	// its head, and reconciliation must read that as "no head" (404), not
	// as access denied (found by make e2e-iam on the drop/re-create tests).
	add(resources.FnObserver,
		stmt("ReadHeadsAndManifests", []string{"s3:GetObject"}, objects(g.Heads, g.Manifests)),
		listBucket("ListForNotFound"),
		stmt("CoordinatorState", tableItemOps, table),
		stmt("EnqueueTasks", []string{"sqs:SendMessage"}, []*string{queueArn(resources.QueueCompaction), queueArn(resources.QueueGC)}),
		stmt("FanOutReconcile", []string{"sqs:SendMessage"}, []*string{queueArn(resources.QueueReconcile)}),
		// A namespace release reconciliation finds owed goes to the handoff,
		// the one function whose role may record release intents; the
		// handoff admits only that message kind from this role.
		stmt("RequestNamespaceReleases", []string{"sqs:SendMessage"}, []*string{queueArn(resources.QueueHandoff)}),
	)

	// compaction: reads the head (staleness check before expensive work),
	// the pinned manifests and their data; writes only rewrite outputs below
	// a task id (compaction at levels 1..MaxLevel, a lifecycle transition at
	// its objects' level, 0 included; never a level-0 append, a manifest or a
	// head); hands the result to the handoff queue.
	add(resources.FnCompaction,
		stmt("ReadHeadsManifestsData", []string{"s3:GetObject"}, objects(g.Heads, g.Manifests, g.Data)),
		// PutObject also covers the multipart calls of a streamed output;
		// aborting a failed stream is its own action.
		stmt("WriteRewriteOutputs", []string{"s3:PutObject", "s3:AbortMultipartUpload"}, objects(g.Rewrites...)),
		// ... only where no object is: S3 itself refuses a PutObject or
		// CompleteMultipartUpload (s3:ObjectCreationOperation) without
		// If-None-Match, so whoever holds this role (not only our code,
		// which always sends it) cannot overwrite a committed output.
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("OutputsOnlyWhereNoneIs"), Effect: awsiam.Effect_DENY,
			Actions: jsii.Strings("s3:PutObject"), Resources: ptrs(objects(g.Rewrites...)),
			Conditions: &map[string]any{
				"Null": map[string]any{"s3:if-none-match": "true"},
				"Bool": map[string]any{"s3:ObjectCreationOperation": "true"},
			},
		}),
		listBucket("ListForNotFound"),
		stmt("CoordinatorState", tableItemOps, table),
		stmt("HandOff", []string{"sqs:SendMessage"}, []*string{queueArn(resources.QueueHandoff)}),
		// A task deferred at its last receives is re-sent as a fresh copy
		// (awsio.Deferrals), so deferrals never send it to the DLQ.
		stmt("DeferTasks", []string{"sqs:SendMessage"}, []*string{queueArn(resources.QueueCompaction)}),
	)

	// gc: re-checks the delete predicate at execution time (head, retained
	// manifests, object metadata, the query plane's watermark); deletes only
	// data and manifest keys (S3 ARNs cannot exclude a suffix, and by the key
	// layout neither pattern matches collections/<c>/manifest_committed_head.json:
	// a collection name has no '/'), and the control artifacts CCS names for
	// a dropped incarnation; never a head: a dropped incarnation's head is
	// retired by the Manifest Publisher on GC's request (POST /retire, the
	// one publisher route its role may invoke, see addOwnerGrants); lists
	// the bucket (see listBucket) and proposes never-committed outputs of
	// crashed tasks from collections/<c>/data/ (never the truth of what to
	// delete).
	wmBucket, wmKey := c.watermark(cfg)
	add(resources.FnGC,
		stmt("ReadHeadsManifestsData", []string{"s3:GetObject"}, objects(g.Heads, g.Manifests, g.Data)),
		stmt("ReadWatermark", []string{"s3:GetObject"}, []*string{wmBucket.ArnForObjects(jsii.String(wmKey))}),
		stmt("DeleteDataAndManifests", []string{"s3:DeleteObject"}, objects(g.Data, g.Manifests)),
		// Control artifacts (collections/<c>/control/*): the seed's
		// tombstone dependency graph lists "stale schema/control artifact
		// cleanup" as cleanup debt the coordinator clears before it hands
		// completion to CCS's release workflow, next to manifest/object
		// cleanup; what CCS owns is the tombstone state and the release
		// intents, which stay CCS's. So GC deletes them itself, but only
		// the keys CCS names in the dropped incarnation's facts
		// (control_artifacts, validated to lie under this prefix of that
		// collection), never by listing, after the same drop gates, and
		// only under this prefix.
		stmt("DeleteDroppedControlArtifacts", []string{"s3:DeleteObject"}, objects(g.Control)),
		listBucket("ListForNotFoundAndOrphanCandidates"),
		stmt("CoordinatorState", tableItemOps, table),
		stmt("HandOff", []string{"sqs:SendMessage"}, []*string{queueArn(resources.QueueHandoff)}),
		stmt("DeferTasks", []string{"sqs:SendMessage"}, []*string{queueArn(resources.QueueGC)}),
	)

	// handoff: reads heads and manifests to decide an ambiguous outcome from
	// the head; talks to the publisher and CCS over HTTP (no AWS grant). It
	// deletes nothing (only a guard-disabled test path of shared/core/handoff
	// would) and keeps no coordinator state: no table grant (the e2e runs
	// under the deployed policies record no handoff table call).
	add(resources.FnHandoff,
		stmt("ReadHeadsAndManifests", []string{"s3:GetObject"}, objects(g.Heads, g.Manifests)),
		listBucket("ListForNotFound"),
	)
}

func ptrs(s []*string) *[]*string { return &s }

// UndoRemovals are the S3 actions that would take away the data bucket's
// undo (a previous version of a deleted or overwritten object): denied to
// every function role.
var UndoRemovals = []string{"s3:DeleteObjectVersion", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration",
	"s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutBucketObjectLockConfiguration", "s3:DeleteBucket"}

// operatorRecordWrites are the DynamoDB actions that can write an item
// (every one, granted or not): denied to the function roles on operator
// records.
var operatorRecordWrites = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}

// addOperatorRecordsPolicy creates the operator-records managed policy
// (named <prefix>-operator-records with fixed names, its ARN the
// OperatorRecordsPolicyArn output), which an account administrator attaches to the operators' principals
// (it is attached to nothing here): read and write the operator records
// (lineage confirmations, bcc confirm-lineage) and forget the observed
// state a confirmation supersedes, and nothing else.
func (c *Coordinator) addOperatorRecordsPolicy() {
	table := c.Table.TableArn()
	c.OperatorRecords = awsiam.NewManagedPolicy(c.Stack, jsii.String("OperatorRecordsPolicy"), &awsiam.ManagedPolicyProps{
		ManagedPolicyName: c.physicalName(c.Definition.Prefix + "-operator-records"),
		Description:       jsii.String("operators of " + c.Definition.Prefix + ": record lineage confirmations (bcc confirm-lineage); no function role may"),
		Statements: &[]awsiam.PolicyStatement{
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String("OperatorRecords"), Actions: jsii.Strings("dynamodb:GetItem", "dynamodb:PutItem"), Resources: jsii.Strings(*table),
				Conditions: &map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []string{resources.OperatorKeyPrefix + "*"}}},
			}),
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String("ForgetSupersededObservedState"), Actions: jsii.Strings("dynamodb:DeleteItem"), Resources: jsii.Strings(*table),
				Conditions: &map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []string{resources.CollectionKeyPrefix + "*"}}},
			}),
		},
	})
}

// addHandoffQueuePolicy lets only the roles that send to the handoff
// queue send to it (resources.HandoffSenders: the observer's namespace
// release requests, compaction's rewrites, GC's cleanups): a Deny of
// sqs:SendMessage to every other principal, whatever its own policy
// grants (an administrator, another stack's role). The handoff further
// admits each kind of message only from its own sender's role
// (BCC_HANDOFF_SENDERS, checked against the SenderId SQS stamps). The
// queue's DLQ is therefore not redriven into it: a completion lost there
// is derived again by reconciliation (rule 17).
func (c *Coordinator) addHandoffQueuePolicy() {
	var senders []*string
	for _, fn := range resources.HandoffSenders {
		senders = append(senders, c.Roles[fn].RoleArn())
	}
	q := c.Queues[resources.QueueHandoff]
	q.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyExecutorRolesSend"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  jsii.Strings(*q.QueueArn()),
		Conditions: &map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": senders}},
	}))
}

// handoffSendersEnv is BCC_HANDOFF_SENDERS: each sender's role unique id
// (the prefix of the SenderId SQS stamps on its messages).
func (c *Coordinator) handoffSendersEnv() (*string, error) {
	parts := make([]string, 0, len(resources.HandoffSenders))
	for _, fn := range resources.HandoffSenders {
		role, ok := c.Roles[fn]
		if !ok {
			return nil, fmt.Errorf("%s: the %s role must exist before the handoff's environment", resources.EnvHandoffSenders, fn)
		}
		parts = append(parts, fmt.Sprintf("%q:%q", fn, *role.RoleId()))
	}
	return jsii.String("{" + strings.Join(parts, ",") + "}"), nil
}

// checkPoliciesCover guards against a function added to the definition
// without a least-privilege policy here.
func checkPoliciesCover(def resources.Definition) error {
	known := map[string]bool{resources.FnObserver: true, resources.FnCompaction: true, resources.FnGC: true, resources.FnHandoff: true}
	for _, f := range def.Functions {
		if !known[f.Name] {
			return fmt.Errorf("function %s has no least-privilege policy in infra/iam.go", f.Name)
		}
	}
	return nil
}
