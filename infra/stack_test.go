package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

func m(kv ...any) map[string]any {
	out := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func refM(id string) map[string]any       { return m("Ref", id) }
func getAttM(id, a string) map[string]any { return m("Fn::GetAtt", []any{id, a}) }

// both runs f against both synthesized stacks.
// fixedName is what a name property must be: name with fixedNames,
// absent (generated) otherwise.
func fixedName(s *synth, name string) any {
	if s.cfg.FixedNames {
		return name
	}
	return assertions.Match_Absent()
}

// standinFunctions and standinRules count what a sandbox adds.
func standinFunctions(s *synth) int {
	if s.c.Sandbox == nil {
		return 0
	}
	return len(resources.SandboxDefinition().Functions)
}

func standinRules(s *synth) int {
	if s.c.Sandbox == nil {
		return 0
	}
	return 1 // the watermark schedule
}

func both(t *testing.T, f func(t *testing.T, s *synth)) {
	t.Run("created-bucket", func(t *testing.T) { f(t, def) })
	t.Run("imported-bucket", func(t *testing.T) { f(t, imp) })
}

// all runs f on every synthesized stack: the sandbox (def), the imported
// bucket with fixed names (imp) and next to real owners (own).
func all(t *testing.T, f func(t *testing.T, s *synth)) {
	both(t, f)
	t.Run("owners", func(t *testing.T) { f(t, own) })
}

func TestHeadNotificationTargetsObserverWithSuffixFilter(t *testing.T) {
	s := def
	b := s.c.Definition.Bucket
	observer := s.id(t, exportName(b.NotifyFunction)+"Function")
	check(t, "notification custom resource", func() {
		s.tmpl.ResourceCountIs(jsii.String("Custom::S3BucketNotifications"), jsii.Number(1))
		s.tmpl.HasResourceProperties(jsii.String("Custom::S3BucketNotifications"), m(
			"NotificationConfiguration", assertions.Match_ObjectEquals(&map[string]any{
				"LambdaFunctionConfigurations": []any{m(
					"Events", []any{"s3:ObjectCreated:*"},
					"Filter", m("Key", m("FilterRules", assertions.Match_ArrayEquals(&[]any{
						m("Name", "suffix", "Value", "manifest_committed_head.json"),
						m("Name", "prefix", "Value", "collections/"),
					}))),
					"LambdaFunctionArn", getAttM(observer, "Arn"),
				)},
			}),
		))
	})
	// S3 may invoke the observer, only from this bucket and account.
	check(t, "s3 invoke permission", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), m(
			"Action", "lambda:InvokeFunction",
			"FunctionName", getAttM(observer, "Arn"),
			"Principal", "s3.amazonaws.com",
			"SourceAccount", refM("AWS::AccountId"),
		))
	})
	cr := props(s.resource[s.ofType("Custom::S3BucketNotifications")[0]])
	if render(cr["BucketName"]) != ref(s.id(t, "DataBucket")) {
		t.Fatalf("notification on %v, want the data bucket", cr["BucketName"])
	}
	if n := len(s.ofType("AWS::Events::Rule")); n != 1+standinRules(s) {
		t.Fatalf("%d event rules in notification mode, want only the reconcile schedule (and the sandbox's watermark schedule)", n)
	}
}

// EventBridge mode (-c headEvents=eventbridge, the imp stack: an imported
// bucket): the bucket's EventBridge delivery is switched on through the
// notifications custom resource, which keeps the bucket's other
// notifications (Managed false), and no Lambda notification is added; a
// rule matching exactly the head keys of that bucket invokes the observer,
// with the failure queue as its dead-letter queue.
func TestEventBridgeModeRuleFiltersExactHeadKeys(t *testing.T) {
	s := imp
	b := s.c.Definition.Bucket
	observer := s.id(t, exportName(b.NotifyFunction)+"Function")
	check(t, "bucket sends events to EventBridge, nothing else added", func() {
		s.tmpl.HasResourceProperties(jsii.String("Custom::S3BucketNotifications"), m(
			"BucketName", impBucket, "Managed", false,
			"NotificationConfiguration", assertions.Match_ObjectEquals(&map[string]any{"EventBridgeConfiguration": map[string]any{}}),
		))
	})
	check(t, "head events rule", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), m(
			"Name", b.EventRule,
			"EventPattern", assertions.Match_ObjectEquals(&map[string]any{
				"source": []any{"aws.s3"}, "detail-type": []any{"Object Created"},
				"detail": m("bucket", m("name", []any{impBucket}),
					"object", m("key", []any{m("wildcard", "collections/*/manifest_committed_head.json")})),
			}),
			"Targets", []any{assertions.Match_ObjectLike(&map[string]any{
				"Arn":              getAttM(observer, "Arn"),
				"DeadLetterConfig": m("Arn", getAttM(s.id(t, "ObserverFailuresQueue"), "Arn")),
			})},
		))
	})
	if b.HeadKeyWildcard != "collections/*/manifest_committed_head.json" {
		t.Fatalf("head key wildcard %q does not follow the contract's head key", b.HeadKeyWildcard)
	}
}

func TestQueuesAreFIFOWithFIFODLQs(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		d := s.c.Definition
		check(t, "queue count", func() {
			s.tmpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(float64(2*len(d.Queues)+1)))
			// retained, so never a fixed name (fixedNames or not)
			s.tmpl.HasResource(jsii.String("AWS::SQS::Queue"), m("Properties", m("QueueName", assertions.Match_Absent()), "DeletionPolicy", "Retain"))
		})
		check(t, "observer on-failure destination", func() {
			if r := props(s.resource[s.id(t, "ObserverFailuresQueue")]); r["SqsManagedSseEnabled"] != true || r["QueueName"] != nil {
				t.Errorf("failure queue %v", r)
			}
			s.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), m(
				"FunctionName", refM(s.id(t, exportName(resources.FnObserver)+"Function")), "MaximumRetryAttempts", float64(2),
				"DestinationConfig", m("OnFailure", m("Destination", getAttM(s.id(t, "ObserverFailuresQueue"), "Arn"))),
			))
		})
		for _, q := range d.Queues {
			id := exportName(q.Class)
			dlq := s.id(t, id+"DLQ")
			check(t, q.Class+" queue", func() {
				s.tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), m(
					"QueueName", fixedName(s, q.Name),
					"FifoQueue", true,
					"ContentBasedDeduplication", false,
					"SqsManagedSseEnabled", true,
					"FifoThroughputLimit", "perMessageGroupId",
					"DeduplicationScope", "messageGroup",
					"VisibilityTimeout", q.VisibilityTimeout.Seconds(),
					"MessageRetentionPeriod", q.RetentionPeriod.Seconds(),
					"RedrivePolicy", assertions.Match_ObjectEquals(&map[string]any{
						"deadLetterTargetArn": getAttM(dlq, "Arn"),
						"maxReceiveCount":     float64(q.MaxReceiveCount),
					}),
				))
			})
			check(t, q.Class+" DLQ", func() {
				s.tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), m(
					"QueueName", assertions.Match_Absent(), "FifoQueue", true, "SqsManagedSseEnabled", true,
				))
			})
			if !strings.HasSuffix(q.Name, ".fifo") || !strings.HasSuffix(q.DLQName, ".fifo") || q.MaxReceiveCount < 1 {
				t.Fatalf("%s: names %s/%s, maxReceiveCount %d", q.Class, q.Name, q.DLQName, q.MaxReceiveCount)
			}
			// TLS only, on the queue and on its DLQ.
			for _, qid := range []string{s.id(t, id+"Queue"), dlq} {
				if !hasTLSDeny(s, "AWS::SQS::QueuePolicy", "Queues", ref(qid)) {
					t.Fatalf("queue %s has no TLS-only queue policy", qid)
				}
			}
		}
	})
}

func TestVisibilityAtLeastSixTimesConsumerTimeout(t *testing.T) {
	s := def
	for _, q := range s.c.Definition.Queues {
		qp := props(s.resource[s.id(t, exportName(q.Class)+"Queue")])
		fp := props(s.resource[s.id(t, exportName(q.Consumer)+"Function")])
		vis, timeout := qp["VisibilityTimeout"].(float64), fp["Timeout"].(float64)
		if vis < 6*timeout {
			t.Errorf("%s: visibility %vs < 6 x %s timeout %vs", q.Class, vis, q.Consumer, timeout)
		}
	}
}

func TestEventSourceMappingsReportBatchItemFailures(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		d := s.c.Definition
		check(t, "mapping count", func() {
			s.tmpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(float64(len(d.Queues))))
		})
		for _, q := range d.Queues {
			check(t, q.Class+" mapping", func() {
				s.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), m(
					"EventSourceArn", getAttM(s.id(t, exportName(q.Class)+"Queue"), "Arn"),
					"FunctionName", refM(s.id(t, exportName(q.Consumer)+"Function")),
					"BatchSize", float64(q.BatchSize),
					"FunctionResponseTypes", []any{"ReportBatchItemFailures"},
					"ScalingConfig", m("MaximumConcurrency", float64(q.MaxConcurrency)),
					"Enabled", true,
				))
			})
		}
	})
}

func TestFunctionsRunBootstrapOnAL2023Arm64(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		d := s.c.Definition
		// ours plus CDK's deploy-time BucketNotificationsHandler
		check(t, "function count", func() {
			s.tmpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(float64(len(d.Functions)+1+standinFunctions(s))))
		})
		for _, f := range d.Functions {
			id := s.id(t, exportName(f.Name)+"Function")
			check(t, f.Name, func() {
				s.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), m(
					"FunctionName", fixedName(s, FunctionName(d.Prefix, f.Name)),
					"Runtime", "provided.al2023",
					"Architectures", []any{"arm64"},
					"Handler", "bootstrap",
					"MemorySize", float64(f.MemoryMB),
					"Timeout", f.Timeout.Seconds(),
					"Role", getAttM(s.id(t, exportName(f.Name)+"Role"), "Arn"),
					"LoggingConfig", m("LogGroup", refM(s.id(t, exportName(f.Name)+"Logs"))),
				))
				s.tmpl.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), m(
					"LogGroupName", fixedName(s, "/aws/lambda/"+FunctionName(d.Prefix, f.Name)),
					"RetentionInDays", float64(30),
				))
			})
			// The zipped asset really holds an executable bootstrap.
			md := s.resource[id]["Metadata"].(map[string]any)
			asset := filepath.Join(s.outdir, md["aws:asset:path"].(string), "bootstrap")
			if st, err := os.Stat(asset); err != nil || st.Mode().Perm()&0o111 == 0 {
				t.Errorf("%s: asset %s: %v (mode %v)", f.Name, asset, err, st)
			}
		}
	})
}

func TestFunctionEnvironmentIsExactlyTheDefinedVariables(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		d := s.c.Definition
		bucket, wmBucket, wmKey := impBucket, impWMBucket, impWMKey
		publisher, ccs, policy, signing := impPublisher, impCCS, impPolicy, impSigning
		if s == def {
			bucket = ref(s.id(t, "DataBucket"))
			wmBucket, wmKey = bucket, d.WatermarkKey
			api := s.id(t, "StandinApi")
			publisher, ccs, policy, signing = getAtt(api, "ApiEndpoint")+"/publisher", getAtt(api, "ApiEndpoint")+"/ccs", "", ""
		}
		want := map[string]string{
			resources.EnvBucket:            bucket,
			resources.EnvTable:             ref(s.id(t, "CoordinatorTable")),
			resources.EnvCompactionQueue:   ref(s.id(t, "CompactionQueue")),
			resources.EnvGCQueue:           ref(s.id(t, "GcQueue")),
			resources.EnvHandoffQueue:      ref(s.id(t, "HandoffQueue")),
			resources.EnvReconcileQueue:    ref(s.id(t, "ReconcileQueue")),
			resources.EnvPublisherEndpoint: publisher,
			resources.EnvCCSEndpoint:       ccs,
			resources.EnvWatermarkBucket:   wmBucket,
			resources.EnvWatermarkKey:      wmKey,
			resources.EnvPolicy:            policy,
			resources.EnvOwnerAuth:         resources.OwnerAuthSigV4,
			resources.EnvOwnerSigning:      signing,
			resources.EnvDeployment:        d.Prefix,
			resources.EnvHandoffSenders: fmt.Sprintf(`{"observer":"%s","compaction":"%s","gc":"%s"}`,
				getAtt(s.id(t, "ObserverRole"), "RoleId"), getAtt(s.id(t, "CompactionRole"), "RoleId"), getAtt(s.id(t, "GcRole"), "RoleId")),
		}
		for _, f := range d.Functions {
			env := props(s.resource[s.id(t, exportName(f.Name)+"Function")])["Environment"].(map[string]any)["Variables"].(map[string]any)
			got := map[string]string{}
			for k, v := range env {
				got[k] = render(v)
			}
			exp := map[string]string{}
			for _, k := range f.Env {
				exp[k] = want[k]
			}
			if fmt.Sprint(got) != fmt.Sprint(exp) {
				t.Errorf("%s environment\n got %v\nwant %v", f.Name, got, exp)
			}
		}
	})
}

func TestReconcileSchedule(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		d := s.c.Definition
		observer := s.id(t, exportName(d.Bucket.NotifyFunction)+"Function")
		check(t, "schedule rule", func() {
			rules := 1 + standinRules(s)
			if s.cfg.HeadEvents == resources.HeadEventsEventBridge {
				rules++ // the head events rule
			}
			s.tmpl.ResourceCountIs(jsii.String("AWS::Events::Rule"), jsii.Number(float64(rules)))
			s.tmpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), m(
				"ScheduleExpression", fmt.Sprintf("rate(%d minutes)", int(d.ReconcileSchedule.Minutes())),
				"State", "ENABLED",
				"Targets", []any{assertions.Match_ObjectLike(&map[string]any{"Arn": getAttM(observer, "Arn")})},
			))
			s.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), m(
				"FunctionName", getAttM(observer, "Arn"), "Principal", "events.amazonaws.com",
			))
		})
	})
}

func TestTableOnDemandPITRTTLEncrypted(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		tb := s.c.Definition.Table
		check(t, "table", func() {
			s.tmpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(float64(1+standinFunctions(s)/3)))
			s.tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), m(
				"TableName", fixedName(s, tb.Name),
				"BillingMode", "PAY_PER_REQUEST",
				"KeySchema", []any{m("AttributeName", tb.PartitionKey, "KeyType", "HASH"), m("AttributeName", tb.SortKey, "KeyType", "RANGE")},
				"PointInTimeRecoverySpecification", m("PointInTimeRecoveryEnabled", true),
				"TimeToLiveSpecification", m("AttributeName", tb.TTLAttribute, "Enabled", true),
				// SSEEnabled false = encrypted at rest with an AWS owned key (chosen explicitly).
				"SSESpecification", m("SSEEnabled", false),
			))
		})
	})
}

func TestDataBucketEncryptedTLSOnlyPrivateLogged(t *testing.T) {
	s := def
	d := s.c.Definition
	bucket, logs := s.id(t, "DataBucket"), s.id(t, "AccessLogBucket")
	check(t, "data bucket", func() {
		s.tmpl.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(2))
		s.tmpl.HasResource(jsii.String("AWS::S3::Bucket"), m(
			"DeletionPolicy", "Retain",
			"Properties", assertions.Match_ObjectLike(&map[string]any{
				"BucketName": assertions.Match_Absent(),
				"BucketEncryption": m("ServerSideEncryptionConfiguration", []any{
					m("ServerSideEncryptionByDefault", m("SSEAlgorithm", "AES256")),
				}),
				"PublicAccessBlockConfiguration": m("BlockPublicAcls", true, "BlockPublicPolicy", true, "IgnorePublicAcls", true, "RestrictPublicBuckets", true),
				"LoggingConfiguration":           m("DestinationBucketName", refM(logs), "LogFilePrefix", d.Bucket.Name+"/"),
				"OwnershipControls":              m("Rules", []any{m("ObjectOwnership", "BucketOwnerEnforced")}),
				"LifecycleConfiguration": m("Rules", []any{m("Id", "abort-incomplete-multipart-uploads",
					"AbortIncompleteMultipartUpload", m("DaysAfterInitiation", 1), "Status", "Enabled"),
					m("Id", "expire-noncurrent-versions", "NoncurrentVersionExpiration", m("NoncurrentDays", NoncurrentVersionDays(policy.Default())),
						"ExpiredObjectDeleteMarker", true, "Status", "Enabled")}),
				"VersioningConfiguration": m("Status", "Enabled"),
			}),
		))
	})
	check(t, "access log bucket", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), m(
			"BucketEncryption", m("ServerSideEncryptionConfiguration", []any{
				m("ServerSideEncryptionByDefault", m("SSEAlgorithm", "AES256")),
			}),
			"PublicAccessBlockConfiguration", m("BlockPublicAcls", true, "BlockPublicPolicy", true, "IgnorePublicAcls", true, "RestrictPublicBuckets", true),
		))
	})
	for _, b := range []string{bucket, logs} {
		if !hasTLSDeny(s, "AWS::S3::BucketPolicy", "Bucket", ref(b)) {
			t.Errorf("bucket %s has no TLS-only bucket policy", b)
		}
	}
	// The imported bucket is not created (its owner keeps its policies).
	check(t, "imported", func() { imp.tmpl.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(0)) })
}

// hasTLSDeny reports whether a resource policy of typ attached (through
// property attach) to target denies every request without TLS, on the target
// itself and (for buckets) its objects.
func hasTLSDeny(s *synth, typ, attach, target string) bool {
	for _, id := range s.ofType(typ) {
		p := props(s.resource[id])
		attached := false
		for _, a := range list(p[attach]) {
			if render(a) == target {
				attached = true
			}
		}
		if !attached {
			continue
		}
		for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			cond := render(st["Condition"])
			if st["Effect"] != "Deny" || cond != `{"Bool":{"aws:SecureTransport":"false"}}` || render(st["Principal"]) != `{"AWS":"*"}` {
				continue
			}
			var acts, res []string
			for _, a := range list(st["Action"]) {
				acts = append(acts, render(a))
			}
			for _, r := range list(st["Resource"]) {
				res = append(res, render(r))
			}
			allActs := strings.Join(acts, ",") == "s3:*" || strings.Join(acts, ",") == "sqs:*"
			if !allActs {
				continue
			}
			if typ == "AWS::S3::BucketPolicy" {
				arn := getAtt(strings.Trim(target, "${}"), "Arn")
				if strings.Join(res, ",") == arn+","+arn+"/*" {
					return true
				}
				continue
			}
			return true
		}
	}
	return false
}

// TestRetainedResourcesHaveNoFixedName: a resource the stack keeps after
// `make destroy` must not carry a fixed name, or the next deploy fails on
// the name the retained one still holds (and a global S3 name collides
// with other accounts' buckets on the very first deploy).
func TestRetainedResourcesHaveNoFixedName(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		retained := 0
		for id, r := range s.resource {
			if r["DeletionPolicy"] != "Retain" && r["UpdateReplacePolicy"] != "Retain" {
				continue
			}
			retained++
			for k, v := range props(r) {
				if _, literal := v.(string); literal && strings.HasSuffix(k, "Name") {
					t.Errorf("retained %s %s has a fixed %s %q: a redeploy after destroy would collide with it", r["Type"], id, k, v)
				}
			}
		}
		if s == def && retained == 0 {
			t.Fatal("no retained resource found: the data bucket should be retained")
		}
	})
}

func TestStackOutputs(t *testing.T) {
	all(t, func(t *testing.T, s *synth) {
		outs, _ := s.json["Outputs"].(map[string]any)
		value := func(name string) string {
			t.Helper()
			o, ok := outs[name].(map[string]any)
			if !ok {
				t.Fatalf("no output %s (have %v)", name, sortedKeys(outs))
			}
			return render(o["Value"])
		}
		bucket := impBucket
		if s != imp {
			bucket = ref(s.id(t, "DataBucket"))
		}
		want := map[string]string{
			resources.OutDeployment: s.cfg.Prefix,
			OutDataBucketName:       bucket,
			OutTableName:            ref(s.id(t, "CoordinatorTable")),
			OutObserverFailuresURL:  ref(s.id(t, "ObserverFailuresQueue")),
			OutDashboardName:        ref(s.id(t, "Dashboard")),
			resources.OutOwnerAuth:  resources.OwnerAuthSigV4,
		}
		for _, q := range s.c.Definition.Queues {
			want[resources.OutQueueURL(q.Class)] = ref(s.id(t, exportName(q.Class)+"Queue"))
			want[resources.OutDLQURL(q.Class)] = ref(s.id(t, exportName(q.Class)+"DLQ"))
		}
		for _, f := range s.c.Definition.Functions {
			want[resources.OutFunctionName(f.Name)] = ref(s.id(t, exportName(f.Name)+"Function"))
		}
		ccs := s.cfg.CCSEndpoint
		if s == def {
			api := s.id(t, "StandinApi")
			ccs = getAtt(api, "ApiEndpoint") + "/ccs"
			want[resources.OutPublisherEndpoint] = getAtt(api, "ApiEndpoint") + "/publisher"
			want[resources.OutSandbox] = "true"
		} else {
			want[resources.OutPublisherEndpoint] = s.cfg.PublisherEndpoint
		}
		want[resources.OutCCSEndpoint] = ccs
		for name, v := range want {
			if got := value(name); got != v {
				t.Errorf("output %s = %s, want %s", name, got, v)
			}
		}
		// The reconcile queue and its DLQ are outputs like every class.
		for _, k := range []string{"ReconcileQueueUrl", "ReconcileDlqUrl", "GcQueueUrl", "CompactionDlqUrl"} {
			value(k)
		}
		if u := value(OutDashboardURL); !strings.Contains(u, "#dashboards:name="+ref(s.id(t, "Dashboard"))) {
			t.Errorf("dashboard URL %s", u)
		}
		// A ready bcc command line: through the stack's outputs, also with
		// fixed names (whose retained queues keep generated names).
		stackCmd := "make bcc && bin/bcc --stack " + s.cfg.StackName + " --region ${AWS::Region} status"
		if got := value(OutBccStackCommand); got != stackCmd {
			t.Errorf("bcc --stack command %q, want %q", got, stackCmd)
		}
		cmd := value(OutBccCommand)
		if cmd != stackCmd {
			t.Errorf("bcc command %q, want %q (bcc finds every queue in the outputs)", cmd, stackCmd)
		}
		_, hasTopic := outs[OutAlarmTopicArn]
		if hasTopic != (s == imp) {
			t.Errorf("alarm topic output present=%v, want %v", hasTopic, s == imp)
		}
		keys := s.c.Definition.OutputKeys()
		for name, o := range outs {
			if _, exported := o.(map[string]any)["Export"]; exported {
				t.Errorf("output %s is exported: nothing else may come to depend on it", name)
			}
			if !slices.Contains(keys, name) {
				t.Errorf("output %s is not one of resources' output keys (Definition.OutputKeys): bcc --stack would not know it", name)
			}
		}
	})
}

func TestMissingAlarmDestinationWarns(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		n := len(*s.ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("no alarm destination: the stack's [0-9]+ alarms.*"))))
		if want := map[bool]int{true: 1, false: 0}[s == def]; n != want {
			t.Errorf("%d warnings about a missing alarm destination, want %d", n, want)
		}
		if s.c.AlarmCount < 5 {
			t.Errorf("AlarmCount %d", s.c.AlarmCount)
		}
	})
}

// The functions' timeouts, and the queues' visibility timeouts derived from
// them, are the ones of the policy the functions get in BCC_POLICY.
func TestDeployedTimeoutsComeFromThePolicy(t *testing.T) {
	pol, err := policy.Parse([]byte(impPolicy))
	if err != nil {
		t.Fatal(err)
	}
	s := imp
	fp := props(s.resource[s.id(t, exportName(resources.FnCompaction)+"Function")])
	qp := props(s.resource[s.id(t, exportName(resources.QueueCompaction)+"Queue")])
	if got, want := fp["Timeout"].(float64), pol.Functions.CompactionTimeout.D().Seconds(); got != want || want == policy.Default().Functions.CompactionTimeout.D().Seconds() {
		t.Fatalf("compaction timeout %vs, want the policy's %vs (not the default)", got, want)
	}
	if got, want := qp["VisibilityTimeout"].(float64), policy.VisibilityTimeout(pol.Functions.CompactionTimeout.D()).Seconds(); got != want {
		t.Fatalf("compaction queue visibility %vs, want %vs", got, want)
	}
}

// A policy that does not validate stops the synthesis, naming the field.
func TestInvalidPolicyFailsSynthesis(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	var err error
	check(t, "constructor", func() {
		_, err = NewCoordinatorStack(app, "bad-policy", &CoordinatorStackProps{Config: Config{AssetDir: t.TempDir(),
			Policy: `{"functions":{"compaction_timeout_ms":"20m"}}`}})
	})
	if err == nil || !strings.Contains(err.Error(), "functions.compaction_timeout_ms") {
		t.Fatalf("err = %v, want a policy error naming functions.compaction_timeout_ms", err)
	}
}

// Signed owner calls need a grant to invoke the owner: derived exactly from
// an API Gateway URL (one ARN per contract route), or given in context. An
// endpoint that does not name its API or function is a synthesis error,
// never a wildcard grant; ownerAuth=none grants nothing.
func TestOwnerEndpointsNeedAKnownInvokeTarget(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  map[string]any
		want string // error substring; "" = no error
	}{
		{"custom domain without ARN", map[string]any{CtxCCSEndpoint: "https://ccs.example.com"}, "context ccsInvokeArn: cannot tell which API"},
		{"function URL without ARN", map[string]any{CtxPublisherEndpoint: "https://abcdefghij.lambda-url.eu-west-1.on.aws/"}, "is a Lambda function URL, which does not name its function"},
		{"function URL with ARN", map[string]any{CtxPublisherEndpoint: "https://abcdefghij.lambda-url.eu-west-1.on.aws/",
			CtxPublisherInvokeArn: "arn:aws:lambda:eu-west-1:111122223333:function:publisher"}, ""},
		{"not an ARN", map[string]any{CtxCCSEndpoint: "https://ccs.example.com", CtxCCSInvokeArn: "ccs"}, "is not an ARN"},
		{"no auth", map[string]any{CtxCCSEndpoint: "https://ccs.example.com", CtxOwnerAuth: resources.OwnerAuthNone}, ""},
		{"bad auth", map[string]any{CtxOwnerAuth: "basic"}, `ownerAuth "basic"`},
		{"bad signing", map[string]any{CtxOwnerSigning: "s3:eu-west-1"}, "ownerSigning"},
		// Issue 25 item 2: owners over https only (their answers open GC's
		// gates), also with ownerAuth none, also to a loopback address.
		{"plain http", map[string]any{CtxCCSEndpoint: "http://ccs.example.com", CtxCCSInvokeArn: "arn:aws:execute-api:us-east-1:111122223333:a1/prod/*"}, `context ccsEndpoint: owner endpoint "http://ccs.example.com": want https://`},
		{"plain http, no auth", map[string]any{CtxPublisherEndpoint: "http://p1b2c3d4e5.execute-api.us-east-1.amazonaws.com/prod", CtxOwnerAuth: resources.OwnerAuthNone}, "want https://"},
		{"plain http to loopback", map[string]any{CtxCCSEndpoint: "http://127.0.0.1:4566/_bcc/ccs", CtxOwnerAuth: resources.OwnerAuthNone}, "want https://"},
		{"not a base URL", map[string]any{CtxCCSEndpoint: "https://ccs.example.com/prod?stage=x", CtxOwnerAuth: resources.OwnerAuthNone}, "is not a base URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, err := cdkJSONContext()
			if err != nil {
				t.Fatal(err)
			}
			ctx[CtxPublisherEndpoint], ctx[CtxCCSEndpoint] = ownPublisher, ownCCS // the other owner valid
			for k, v := range tc.ctx {
				ctx[k] = v
			}
			app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
			cfg, err := ConfigFromContext(app)
			if err != nil {
				t.Fatal(err)
			}
			cfg.AssetDir = def.cfg.AssetDir
			c, err := NewCoordinatorStack(app, "owners", &CoordinatorStackProps{Config: cfg})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.ctx[CtxOwnerAuth] == resources.OwnerAuthNone && len(c.Owners) != 0 {
					t.Fatalf("ownerAuth none granted %v", c.Owners)
				}
				warned := false
				for _, m := range *assertions.Annotations_FromStack(c.Stack).FindWarning(jsii.String("*"), assertions.Match_AnyValue()) {
					warned = warned || strings.Contains(fmt.Sprint(m.Entry.Data), "owner requests are not signed")
				}
				if warned != (tc.ctx[CtxOwnerAuth] == resources.OwnerAuthNone) {
					t.Fatalf("ownerAuth %v: unsigned-owner warning %v", tc.ctx[CtxOwnerAuth], warned)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// Options: X-Ray tracing and VPC placement (subnets and security groups
// from context) in imp; neither by default.
func TestTracingAndVPCPlacement(t *testing.T) {
	for _, f := range def.c.Definition.Functions {
		p := props(def.resource[def.id(t, exportName(f.Name)+"Function")])
		if p["TracingConfig"] != nil && render(p["TracingConfig"]) != `{"Mode":"PassThrough"}` || p["VpcConfig"] != nil {
			t.Errorf("default %s: tracing %v, VPC %v", f.Name, p["TracingConfig"], p["VpcConfig"])
		}
		p = props(imp.resource[imp.id(t, exportName(f.Name)+"Function")])
		if render(p["TracingConfig"]) != `{"Mode":"Active"}` {
			t.Errorf("imp %s tracing %v", f.Name, p["TracingConfig"])
		}
		vpc, _ := p["VpcConfig"].(map[string]any)
		if render(vpc["SubnetIds"]) != `["`+strings.Join(impSubnets, `","`)+`"]` || render(vpc["SecurityGroupIds"]) != `["`+impSG+`"]` {
			t.Errorf("imp %s VPC config %v", f.Name, render(vpc))
		}
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{CtxVpcID: "vpc-1"}})
	if _, err := ConfigFromContext(app); err != nil {
		t.Fatal(err)
	}
	cfg, _ := ConfigFromContext(app)
	if err := validate(def.c.Definition, cfg); err == nil || !strings.Contains(err.Error(), "VPC placement needs") {
		t.Fatalf("vpcId without subnets: %v", err)
	}
}
