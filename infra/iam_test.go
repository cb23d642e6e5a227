package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// grant is one flattened Allow/Deny of one action on one resource.
type grant struct{ effect, action, resource, cond string }

func (g grant) String() string {
	s := g.effect + " " + g.action + " " + g.resource
	if g.cond != "" {
		s += " if " + g.cond
	}
	return s
}

func flatten(doc any) []grant {
	var out []grant
	for _, st := range list(doc.(map[string]any)["Statement"]) {
		st := st.(map[string]any)
		cond := ""
		if c, ok := st["Condition"]; ok {
			cond = render(c)
		}
		for _, a := range list(st["Action"]) {
			for _, r := range list(st["Resource"]) {
				out = append(out, grant{st["Effect"].(string), render(a), render(r), cond})
			}
		}
	}
	return out
}

// identityPolicies returns every identity-based policy statement in the
// template, by the logical id of the role it applies to.
func (s *synth) identityPolicies() map[string][]grant {
	out := map[string][]grant{}
	for _, id := range s.ofType("AWS::IAM::Policy") {
		p := props(s.resource[id])
		for _, r := range list(p["Roles"]) {
			role := strings.Trim(render(r), "${}")
			out[role] = append(out[role], flatten(p["PolicyDocument"])...)
		}
	}
	for _, id := range s.ofType("AWS::IAM::Role") {
		for _, pol := range list(props(s.resource[id])["Policies"]) {
			out[id] = append(out[id], flatten(pol.(map[string]any)["PolicyDocument"])...)
		}
	}
	return out
}

func (s *synth) roleGrants(t *testing.T, fn string) []grant {
	return s.identityPolicies()[s.id(t, exportName(fn)+"Role")]
}

// iamMatch reports whether an IAM resource pattern matches arn ('*' is any
// run of characters including '/', '?' is one character).
func iamMatch(pattern, arn string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(arn)
}

func actionMatch(pattern, action string) bool { return iamMatch(pattern, action) }

// bucketArn is how the data bucket's ARN renders in each stack.
func (s *synth) bucketArn(t *testing.T) string {
	if s == imp {
		return "arn:${AWS::Partition}:s3:::" + impBucket
	}
	return getAtt(s.id(t, "DataBucket"), "Arn")
}

func TestGlobsFollowTheContractKeyLayout(t *testing.T) {
	g := Globs()
	want := KeyGlobs{
		Heads:     "collections/*/manifest_committed_head.json",
		Manifests: "collections/*/manifests/*",
		Data:      "collections/*/data/*",
		Control:   "collections/*/control/*",
	}
	for l := 0; l <= contract.MaxLevel; l++ {
		want.Rewrites = append(want.Rewrites, fmt.Sprintf("collections/*/data/l%d/*/*", l))
	}
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("Globs() = %+v\nwant      %+v", g, want)
	}
}

func TestRolesGrantExactlyWhatEachFunctionUses(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		B := s.bucketArn(t)
		wm := B + "/query-plane/global_safe_ts.json"
		if s == imp {
			wm = "arn:${AWS::Partition}:s3:::" + impWMBucket + "/" + impWMKey
		}
		table := getAtt(s.id(t, "CoordinatorTable"), "Arn")
		queue := func(class string) string { return getAtt(s.id(t, exportName(class)+"Queue"), "Arn") }
		var rewrites []string
		for l := 0; l <= contract.MaxLevel; l++ {
			rewrites = append(rewrites, fmt.Sprintf("%s/collections/*/data/l%d/*/*", B, l))
		}
		heads, manifests, data := B+"/collections/*/manifest_committed_head.json", B+"/collections/*/manifests/*", B+"/collections/*/data/*"
		itemOps := []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
		consume := []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}

		for _, f := range s.c.Definition.Functions {
			want := map[string]bool{}
			allow := func(actions []string, res ...string) {
				for _, a := range actions {
					for _, r := range res {
						want[grant{"Allow", a, r, ""}.String()] = true
					}
				}
			}
			allow([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, getAtt(s.id(t, exportName(f.Name)+"Logs"), "Arn"))
			if s == imp { // tracing and VPC placement: actions AWS allows only on "*"
				allow([]string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, "*")
				allow([]string{"ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
					"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"}, "*")
			}
			if s == imp { // signed owner calls: exactly the routes each function calls (derived, or the <api>/<stage>/* ARN given in context, narrowed)
				for _, r := range f.CCSRoutes {
					allow([]string{"execute-api:Invoke"}, strings.TrimSuffix(impCCSArn, "/*")+"/"+r.Method+"*"+r.Path)
				}
				// of the publisher's routes, each function only the one it calls
				if f.Name == resources.FnHandoff {
					allow([]string{"execute-api:Invoke"}, "arn:${AWS::Partition}:execute-api:eu-west-1:${AWS::AccountId}:a1b2c3d4e5/prod/POST/v1/cutover")
				}
				if f.Name == resources.FnGC {
					allow([]string{"execute-api:Invoke"}, "arn:${AWS::Partition}:execute-api:eu-west-1:${AWS::AccountId}:a1b2c3d4e5/prod/POST/v1/retire")
				}
			}
			if s == def { // the sandbox's stand-in API: per route, as for an API Gateway owner
				api := "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:" + ref(s.id(t, "StandinApi")) + "/$default/"
				for _, r := range f.CCSRoutes { // each function only the CCS routes it calls
					allow([]string{"execute-api:Invoke"}, api+r.Method+"/ccs"+r.Path)
				}
				for _, r := range f.PublisherRoutes {
					allow([]string{"execute-api:Invoke"}, api+r.Method+"/publisher"+r.Path)
				}
			}
			// no function writes an operator record (issue 25 item 4)
			for _, a := range []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} {
				want[grant{"Deny", a, table, `{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":["` + resources.OperatorKeyPrefix + `*"]}}`}.String()] = true
			}
			// nor takes the data bucket's undo away (issue 25 item 3)
			for _, a := range UndoRemovals {
				for _, r := range []string{B, B + "/*"} {
					want[grant{"Deny", a, r, ""}.String()] = true
				}
			}
			switch f.Name {
			case resources.FnObserver:
				allow([]string{"s3:GetObject"}, heads, manifests)
				allow([]string{"s3:ListBucket"}, B)
				// the on-failure destination (CDK's grant for a Lambda destination queue)
				allow([]string{"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}, getAtt(s.id(t, "ObserverFailuresQueue"), "Arn"))
				allow(itemOps, table)
				allow([]string{"sqs:SendMessage"}, queue(resources.QueueCompaction), queue(resources.QueueGC))
				// the reconcile fan-out: it sends to and consumes its own queue
				allow([]string{"sqs:SendMessage"}, queue(resources.QueueReconcile))
				allow(consume, queue(resources.QueueReconcile))
				// a namespace release reconciliation finds owed goes to the handoff
				allow([]string{"sqs:SendMessage"}, queue(resources.QueueHandoff))
			case resources.FnCompaction:
				allow([]string{"s3:GetObject"}, heads, manifests, data)
				allow([]string{"s3:PutObject", "s3:AbortMultipartUpload"}, rewrites...)
				for _, r := range rewrites { // ... only where no object is (If-None-Match, enforced by S3)
					want[grant{"Deny", "s3:PutObject", r, `{"Bool":{"s3:ObjectCreationOperation":"true"},"Null":{"s3:if-none-match":"true"}}`}.String()] = true
				}
				allow([]string{"s3:ListBucket"}, B)
				allow(itemOps, table)
				allow([]string{"sqs:SendMessage"}, queue(resources.QueueHandoff))
				allow([]string{"sqs:SendMessage"}, queue(resources.QueueCompaction)) // deferrals re-sent (awsio.Deferrals)
				allow(consume, queue(resources.QueueCompaction))
			case resources.FnGC:
				allow([]string{"s3:GetObject"}, heads, manifests, data, wm)
				allow([]string{"s3:DeleteObject"}, data, manifests, B+"/collections/*/control/*")
				allow([]string{"s3:ListBucket"}, B)
				allow(itemOps, table)
				allow([]string{"sqs:SendMessage"}, queue(resources.QueueHandoff))
				allow([]string{"sqs:SendMessage"}, queue(resources.QueueGC)) // deferrals re-sent (awsio.Deferrals)
				allow(consume, queue(resources.QueueGC))
			case resources.FnHandoff:
				allow([]string{"s3:GetObject"}, heads, manifests)
				allow([]string{"s3:ListBucket"}, B)
				allow(consume, queue(resources.QueueHandoff))
			default:
				t.Fatalf("no expectation for function %s", f.Name)
			}
			got := map[string]bool{}
			for _, g := range s.roleGrants(t, f.Name) {
				got[g.String()] = true
			}
			var missing, extra []string
			for g := range want {
				if !got[g] {
					missing = append(missing, g)
				}
			}
			for g := range got {
				if !want[g] {
					extra = append(extra, g)
				}
			}
			sort.Strings(missing)
			sort.Strings(extra)
			if len(missing)+len(extra) > 0 {
				t.Errorf("%s role:\n missing %s\n extra   %s", f.Name, strings.Join(missing, "\n         "), strings.Join(extra, "\n         "))
			}
		}
	})
}

func TestRolesTrustOnlyLambdaAndHaveNoManagedPolicies(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		for _, f := range s.c.Definition.Functions {
			p := props(s.resource[s.id(t, exportName(f.Name)+"Role")])
			trust := render(p["AssumeRolePolicyDocument"])
			if trust != `{"Statement":[{"Action":"sts:AssumeRole","Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"}}],"Version":"2012-10-17"}` {
				t.Errorf("%s trust policy %s", f.Name, trust)
			}
			if p["ManagedPolicyArns"] != nil || p["Policies"] != nil {
				t.Errorf("%s role has managed %v / inline %v policies", f.Name, p["ManagedPolicyArns"], p["Policies"])
			}
		}
	})
}

// sampleKeys are real keys of the layout, made by the contract: rewrites
// are the outputs of real rewrite tasks (compaction and lifecycle
// transition) at every level, 0 included.
func sampleKeys() (heads, manifests, data, rewrites, appends []string) {
	for _, c := range []string{"orders", "a", "data", "manifests", "l1"} {
		heads = append(heads, contract.HeadKey(c))
		manifests = append(manifests, contract.ManifestKey(c, 1, 7, "sha256:ab12"), contract.PartKey(c, 1, 7, "sha256:cd34"))
		appends = append(appends, contract.AppendSegmentKey(c, 1, 7, 0), contract.AppendSegmentKey(c, 1, 1234567, 12))
		for l := 0; l <= contract.MaxLevel; l++ {
			for _, task := range rewriteTasks(c) {
				rewrites = append(rewrites, contract.RewriteOutputKey(c, l, task.TaskID, 3))
			}
		}
	}
	data = append(append([]string{}, appends...), rewrites...)
	return
}

// rewriteTasks is one real task of every kind that writes objects.
func rewriteTasks(c string) []contract.Task {
	var out []contract.Task
	for _, k := range []contract.TaskKind{contract.KindCompaction, contract.KindLifecycleTransition, contract.KindGC,
		contract.KindRetentionReclaim, contract.KindTombstoneCleanup, contract.KindOrphanReclaim} {
		if k.Rewrites() {
			out = append(out, contract.NewSweepTask(k, c, 7, "sha256:ab12", 3, 1_700_000_000_000))
		}
	}
	return out
}

// keyKind is one kind of object key a function acts on, with real keys.
type keyKind struct {
	fn, action, kind string
	keys             []string
}

// writtenKeyKinds lists every kind of key each function writes or deletes,
// made by the same contract functions the code uses. A new kind of write
// belongs here; TestEveryKeyKindEachFunctionWritesIsAllowed then checks
// the deployed policy allows it.
func writtenKeyKinds() []keyKind {
	var kinds []keyKind
	for _, c := range []string{"orders", "l0", "data"} {
		for _, task := range rewriteTasks(c) {
			for l := 0; l <= contract.MaxLevel; l++ {
				if task.Kind == contract.KindCompaction && l == 0 {
					continue // compaction writes levels >= 1; a transition writes at its objects' level
				}
				out := []string{contract.RewriteOutputKey(c, l, task.TaskID, 0), contract.RewriteOutputKey(c, l, task.TaskID, 17)}
				kind := fmt.Sprintf("%s output at level %d", task.Kind, l)
				// a single PutObject, or a multipart upload (s3:PutObject) aborted on failure
				kinds = append(kinds, keyKind{resources.FnCompaction, "s3:PutObject", kind, out},
					keyKind{resources.FnCompaction, "s3:AbortMultipartUpload", kind, out},
					keyKind{resources.FnGC, "s3:DeleteObject", kind, out})
			}
		}
		kinds = append(kinds,
			keyKind{resources.FnGC, "s3:DeleteObject", "level-0 append segment", []string{contract.AppendSegmentKey(c, 1, 7, 0), contract.AppendSegmentKey(c, 1, 99, 3)}},
			keyKind{resources.FnGC, "s3:DeleteObject", "manifest root", []string{contract.ManifestKey(c, 1, 7, "sha256:ab12cd34ab12cd34ab12")}},
			keyKind{resources.FnGC, "s3:DeleteObject", "manifest part", []string{contract.PartKey(c, 1, 7, "sha256:cd34")}},
		)
	}
	return kinds
}

func TestEveryKeyKindEachFunctionWritesIsAllowed(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		B := s.bucketArn(t)
		for _, k := range writtenKeyKinds() {
			for _, key := range k.keys {
				allowed := false
				for _, g := range s.roleGrants(t, k.fn) {
					if g.effect == "Allow" && actionMatch(g.action, k.action) && iamMatch(g.resource, B+"/"+key) {
						allowed = true
					}
				}
				if !allowed {
					t.Errorf("%s may not %s its %s %s", k.fn, k.action, k.kind, key)
				}
			}
		}
	})
}

// No role can write or delete a head: only the Manifest Publisher moves
// one, and a dropped incarnation's head is retired by the publisher on GC's
// request (POST /retire). GC may invoke that publisher route and no other;
// the handoff only POST /cutover.
func TestNoRoleCanWriteOrDeleteHeads(t *testing.T) {
	heads, _, _, _, _ := sampleKeys()
	both(t, func(t *testing.T, s *synth) {
		B := s.bucketArn(t)
		for role, grants := range s.identityPolicies() {
			if s.c.Sandbox != nil && role == s.id(t, "StandinPublisherRole") {
				continue // the sandbox's stand-in Manifest Publisher: the owner of heads
			}
			for _, g := range grants {
				if g.effect != "Allow" {
					continue
				}
				for _, act := range []string{"s3:PutObject", "s3:DeleteObject", "s3:PutObjectAcl", "s3:RestoreObject", "s3:PutObjectRetention", "s3:PutObjectLegalHold"} {
					if !actionMatch(g.action, act) {
						continue
					}
					for _, h := range heads {
						if iamMatch(g.resource, B+"/"+h) {
							t.Errorf("role %s may %s head %s through %s", role, act, h, g)
						}
					}
				}
			}
		}
		if s != imp {
			return // no owner endpoints in the default synthesis
		}
		routes := map[string][]string{}
		for _, f := range s.c.Definition.Functions {
			for _, g := range s.roleGrants(t, f.Name) {
				if g.action == "execute-api:Invoke" && strings.Contains(g.resource, "a1b2c3d4e5/") {
					routes[f.Name] = append(routes[f.Name], g.resource[strings.Index(g.resource, "/prod/"):])
				}
			}
		}
		want := map[string][]string{resources.FnGC: {"/prod/POST/v1/retire"}, resources.FnHandoff: {"/prod/POST/v1/cutover"}}
		if fmt.Sprint(routes) != fmt.Sprint(want) {
			t.Errorf("publisher routes per function %v, want %v", routes, want)
		}
	})
}

// GC deletes data and manifest keys and the control artifacts CCS names
// (collections/<c>/control/), nothing else: never a head.
func TestGCDeletesOnlyDataAndManifestKeys(t *testing.T) {
	heads, manifests, data, _, _ := sampleKeys()
	both(t, func(t *testing.T, s *synth) {
		B := s.bucketArn(t)
		may := func(key string) bool {
			for _, g := range s.roleGrants(t, resources.FnGC) {
				if g.effect == "Allow" && actionMatch(g.action, "s3:DeleteObject") && iamMatch(g.resource, B+"/"+key) {
					return true
				}
			}
			return false
		}
		for _, k := range append(append(manifests, data...), "collections/orders/control/schema.json", "collections/orders/control/i2-schema.json") {
			if !may(k) {
				t.Errorf("gc cannot delete %s", k)
			}
		}
		for _, k := range append([]string{s.c.Definition.WatermarkKey, "collections/orders/other.json", "outside/x.seg"}, heads...) {
			if may(k) {
				t.Errorf("gc may delete %s", k)
			}
		}
		for _, f := range s.c.Definition.Functions {
			if f.Name == resources.FnGC {
				continue
			}
			for _, g := range s.roleGrants(t, f.Name) {
				if actionMatch(g.action, "s3:DeleteObject") {
					t.Errorf("%s may delete objects: %s", f.Name, g)
				}
			}
		}
	})
}

func TestOnlyCompactionWritesAndOnlyRewriteOutputs(t *testing.T) {
	heads, manifests, _, rewrites, appends := sampleKeys()
	both(t, func(t *testing.T, s *synth) {
		B := s.bucketArn(t)
		may := func(fn, key string) bool {
			for _, g := range s.roleGrants(t, fn) {
				if g.effect == "Allow" && actionMatch(g.action, "s3:PutObject") && iamMatch(g.resource, B+"/"+key) {
					return true
				}
			}
			return false
		}
		for _, k := range rewrites {
			if !may(resources.FnCompaction, k) {
				t.Errorf("compaction cannot write its output %s", k)
			}
		}
		for _, f := range s.c.Definition.Functions {
			for _, k := range append(append(append([]string{}, heads...), manifests...), appends...) {
				if may(f.Name, k) {
					t.Errorf("%s may write %s", f.Name, k)
				}
			}
			if f.Name == resources.FnCompaction {
				continue
			}
			for _, g := range s.roleGrants(t, f.Name) {
				if g.effect == "Allow" && strings.HasPrefix(g.action, "s3:") && g.action != "s3:GetObject" && g.action != "s3:DeleteObject" && g.action != "s3:ListBucket" {
					t.Errorf("%s has %s", f.Name, g)
				}
			}
		}
		// The observer reads (and lists, so a deleted head reads as 404);
		// it never writes or deletes an object.
		for _, g := range s.roleGrants(t, resources.FnObserver) {
			if g.effect == "Allow" && strings.HasPrefix(g.action, "s3:") && g.action != "s3:GetObject" && g.action != "s3:ListBucket" {
				t.Errorf("observer has %s", g)
			}
		}
	})
}

func TestNoWildcardActions(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		for role, grants := range s.identityPolicies() {
			for _, g := range grants {
				if strings.ContainsAny(g.action, "*?") {
					t.Errorf("role %s has a wildcard action: %s", role, g)
				}
			}
		}
	})
}
