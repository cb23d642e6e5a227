package main

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// Issue 25 item 1: the handoff queue admits SendMessage only from the
// roles that send to it (observer, compaction, GC), denying every other
// principal whatever its own policy grants.
func TestHandoffQueueAdmitsOnlyItsSendersRoles(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		queue := ref(s.id(t, exportName(resources.QueueHandoff)+"Queue"))
		var want []string
		for _, fn := range resources.HandoffSenders {
			want = append(want, getAtt(s.id(t, exportName(fn)+"Role"), "Arn"))
		}
		sort.Strings(want)
		found := false
		for _, id := range s.ofType("AWS::SQS::QueuePolicy") {
			p := props(s.resource[id])
			if len(list(p["Queues"])) != 1 || render(list(p["Queues"])[0]) != queue {
				continue
			}
			for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if st["Effect"] != "Deny" || render(st["Action"]) != "sqs:SendMessage" {
					continue
				}
				cond, _ := st["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)
				var got []string
				for _, a := range list(cond["aws:PrincipalArn"]) {
					got = append(got, render(a))
				}
				sort.Strings(got)
				if render(st["Principal"]) != `{"AWS":"*"}` || strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("handoff queue deny: principal %s, except %v; want everyone except %v", render(st["Principal"]), got, want)
				}
				found = true
			}
		}
		if !found {
			t.Fatal("the handoff queue's policy denies SendMessage to no one: any principal allowed by its own policy may forge completions")
		}
	})
}

// The handoff knows each sender's role id (BCC_HANDOFF_SENDERS), the
// prefix of the SenderId SQS stamps on that role's messages.
func TestHandoffKnowsItsSendersRoleIDs(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		env := props(s.resource[s.id(t, exportName(resources.FnHandoff)+"Function")])["Environment"].(map[string]any)["Variables"].(map[string]any)
		var got map[string]string
		if err := json.Unmarshal([]byte(render(env[resources.EnvHandoffSenders])), &got); err != nil {
			t.Fatalf("%s = %s: %v", resources.EnvHandoffSenders, render(env[resources.EnvHandoffSenders]), err)
		}
		for _, fn := range resources.HandoffSenders {
			if want := getAtt(s.id(t, exportName(fn)+"Role"), "RoleId"); got[fn] != want {
				t.Errorf("%s of %s = %q, want %q", resources.EnvHandoffSenders, fn, got[fn], want)
			}
		}
		if len(got) != len(resources.HandoffSenders) {
			t.Errorf("%s names %v, want exactly %v", resources.EnvHandoffSenders, got, resources.HandoffSenders)
		}
	})
}

// Issue 25 item 4: no role may record a release intent (POST
// /release-intents, CCS's one write route) but the handoff's; every
// CCS-calling role may read facts. Judged on the synthesized policies (a
// CCS named by an <api>/<stage>/* invoke ARN in context, narrowed per
// route) and on the grants for an API Gateway CCS URL (derived routes),
// with and without a base path.
func TestOnlyTheHandoffMayRecordReleaseIntents(t *testing.T) {
	const api = "arn:aws:execute-api:eu-west-1:111122223333:ccsapi0001/prod/"
	write, read := api+"POST/v1/release-intents", api+"GET/v1/collections/orders/facts"
	for _, f := range imp.c.Definition.Functions {
		may := func(arn string) bool {
			for _, g := range imp.roleGrants(t, f.Name) {
				if g.effect == "Allow" && actionMatch(g.action, "execute-api:Invoke") && iamMatch(g.resource, arn) {
					return true
				}
			}
			return false
		}
		if got, want := may(write), f.Name == resources.FnHandoff; got != want {
			t.Errorf("%s may record release intents: %v, want %v", f.Name, got, want)
		}
		if !may(read) {
			t.Errorf("%s may not read CCS facts", f.Name)
		}
	}
	for _, url := range []string{"https://abcde12345.execute-api.eu-west-1.amazonaws.com/prod/v1", "https://abcde12345.execute-api.eu-west-1.amazonaws.com"} {
		owners, err := resolveOwners(Config{CCSEndpoint: url, OwnerAuth: resources.OwnerAuthSigV4}, "aws", "111122223333")
		if err != nil {
			t.Fatal(err)
		}
		grants := ownerGrants(imp.c.Definition, owners)
		for _, f := range imp.c.Definition.Functions {
			var res []string
			for _, g := range grants[f.Name] {
				res = append(res, g.resources...)
			}
			posts := false
			for _, r := range res {
				posts = posts || strings.Contains(r, "/POST/")
			}
			if posts != (f.Name == resources.FnHandoff) || len(res) != len(f.CCSRoutes) {
				t.Errorf("%s: %s grants %v; want its %d CCS routes, POST only for the handoff", url, f.Name, res, len(f.CCSRoutes))
			}
		}
	}
}

// Issue 25 item 4: lineage confirmations (operator records, the ones GC
// trusts to lift a head-regression refusal) are out of every function
// role's reach: each role is explicitly denied every item write whose
// partition key starts with resources.OperatorKeyPrefix; the stack's
// operator-records managed policy, attached to no role, is what allows
// them (to the operators an administrator gives it).
func TestNoRoleButTheOperatorsWritesLineageConfirmations(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		table := getAtt(s.id(t, "CoordinatorTable"), "Arn")
		opKey := resources.OperatorKeyPrefix + "COLL#orders"
		for role, grants := range s.identityPolicies() {
			for _, write := range []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} {
				allowed, denied := false, false
				for _, g := range grants {
					if !actionMatch(g.action, write) || !iamMatch(g.resource, table) {
						continue
					}
					switch {
					case g.effect == "Deny" && strings.Contains(g.cond, "ForAnyValue:StringLike") && strings.Contains(g.cond, resources.OperatorKeyPrefix+"*"):
						denied = iamMatch(resources.OperatorKeyPrefix+"*", opKey)
					case g.effect == "Allow" && g.cond == "":
						allowed = true
					}
				}
				if allowed && !denied {
					t.Errorf("role %s may %s an operator record", role, write)
				}
			}
		}
		pols := s.ofType("AWS::IAM::ManagedPolicy")
		found := false
		for _, id := range pols {
			p := props(s.resource[id])
			if !strings.HasPrefix(id, "OperatorRecordsPolicy") {
				continue
			}
			found = true
			if len(list(p["Roles"]))+len(list(p["Users"]))+len(list(p["Groups"])) != 0 {
				t.Errorf("the operator-records policy is attached to %v", p)
			}
			writes := false
			for _, g := range flatten(p["PolicyDocument"]) {
				if g.effect == "Allow" && g.action == "dynamodb:PutItem" && g.resource == table && strings.Contains(g.cond, "ForAllValues:StringLike") && strings.Contains(g.cond, resources.OperatorKeyPrefix+"*") {
					writes = true
				}
			}
			if !writes {
				t.Errorf("the operator-records policy does not allow writing operator records: %v", flatten(p["PolicyDocument"]))
			}
		}
		if !found {
			t.Errorf("no %s-operator-records managed policy (have %v)", s.c.Definition.Prefix, pols)
		}
	})
}

// Issue 25 item 3: the data bucket the stack creates is versioned: a
// delete (GC's or anyone's who was wrong) leaves the previous version
// restorable for the undo window (default: GC's horizons plus
// IncidentMarginDays; context noncurrentVersionDays), after which it is
// expired, with expired delete markers cleaned. No function role may take
// the undo away (delete a version, change versioning, lifecycle, policy or
// object lock), on a created or an imported bucket.
func TestDataBucketKeepsAnUndoWindowNoRoleCanRemove(t *testing.T) {
	pol := policy.Default()
	if got, want := NoncurrentVersionDays(pol), 1+IncidentMarginDays; got != want {
		t.Fatalf("default undo window %d days, want %d (token lifetime %s + retention window %s, a day at least, + %d)", got, want,
			pol.GC.TokenLifetime.D(), pol.GC.RetentionWindow.D(), IncidentMarginDays)
	}
	rules := func(s *synth) (versioning string, days any, markers any) {
		p := props(s.resource[s.id(t, "DataBucket")])
		versioning = render(p["VersioningConfiguration"])
		for _, r := range list(p["LifecycleConfiguration"].(map[string]any)["Rules"]) {
			r := r.(map[string]any)
			if r["NoncurrentVersionExpiration"] != nil && r["Status"] == "Enabled" {
				days, markers = r["NoncurrentVersionExpiration"].(map[string]any)["NoncurrentDays"], r["ExpiredObjectDeleteMarker"]
			}
		}
		return
	}
	if v, days, markers := rules(def); v != `{"Status":"Enabled"}` || days != float64(NoncurrentVersionDays(pol)) || markers != true {
		t.Errorf("data bucket: versioning %s, noncurrent versions expire after %v days, expired delete markers removed %v; want Enabled, %d, true",
			v, days, markers, NoncurrentVersionDays(pol))
	}
	for in, want := range map[any]int{"30": 30, float64(45): 45, "0": -1, "x": -1, float64(1.5): -1} {
		cfg, err := configFrom(func(k string) any {
			if k == CtxNoncurrentVersionDays {
				return in
			}
			return nil
		})
		if want < 0 != (err != nil) || want > 0 && cfg.NoncurrentVersionDays != want {
			t.Errorf("%s=%v: %d, %v", CtxNoncurrentVersionDays, in, cfg.NoncurrentVersionDays, err)
		}
	}
	both(t, func(t *testing.T, s *synth) {
		bucket := s.bucketArn(t)
		fnRoles := map[string]string{}
		for _, f := range s.c.Definition.Functions {
			fnRoles[s.id(t, exportName(f.Name)+"Role")] = f.Name
		}
		for role, grants := range s.identityPolicies() {
			for _, action := range UndoRemovals {
				for _, res := range []string{bucket, bucket + "/collections/orders/data/l1/t/0.seg"} {
					allowed, denied := false, false
					for _, g := range grants {
						if !actionMatch(g.action, action) || !iamMatch(g.resource, res) || g.cond != "" {
							continue
						}
						denied = denied || g.effect == "Deny"
						allowed = allowed || g.effect == "Allow"
					}
					if allowed && !denied {
						t.Errorf("role %s may %s on %s", role, action, res)
					}
					if fn, ok := fnRoles[role]; ok && !denied {
						t.Errorf("%s's role is not explicitly denied %s on %s", fn, action, res)
					}
				}
			}
		}
	})
}

// Issue 25: no single role can publish, release and wipe. On the stacks
// next to real owners (API Gateway URLs: grants derived per route; a
// custom domain's invoke ARN from context, narrowed per route), every role
// of the template is judged on its identity policies: who may submit a
// cutover (or write a head: no one), who may record a release intent, who
// may delete collection data or its versions. Only the handoff publishes
// and releases, only GC deletes data, no one deletes versions, and so no
// role holds all three (nor a worker two).
func TestNoRoleCanPublishReleaseAndWipe(t *testing.T) {
	partition, account := ref("AWS::Partition"), ref("AWS::AccountId")
	for _, tc := range []struct {
		name            string
		s               *synth
		cutover, intent string
	}{
		{"owners", own, "arn:" + partition + ":execute-api:us-east-1:" + account + ":p1b2c3d4e5/prod/POST/cutover",
			"arn:" + partition + ":execute-api:us-east-1:" + account + ":c1b2c3d4e5/prod/POST/release-intents"},
		{"imported-bucket", imp, "arn:" + partition + ":execute-api:eu-west-1:" + account + ":a1b2c3d4e5/prod/POST/v1/cutover",
			"arn:aws:execute-api:eu-west-1:111122223333:ccsapi0001/prod/POST/v1/release-intents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			bucket := s.bucketArn(t)
			data, head := bucket+"/collections/orders/data/l1/t-1/0.seg", bucket+"/collections/orders/manifest_committed_head.json"
			may := func(grants []grant, action, res string) bool {
				allowed := false
				for _, g := range grants {
					if !actionMatch(g.action, action) || !iamMatch(g.resource, res) {
						continue
					}
					if g.effect == "Deny" && g.cond == "" {
						return false
					}
					allowed = allowed || g.effect == "Allow" && g.cond == ""
				}
				return allowed
			}
			byRole := map[string]string{}
			for _, f := range s.c.Definition.Functions {
				byRole[s.id(t, exportName(f.Name)+"Role")] = f.Name
			}
			publishers, releasers, wipers := map[string]bool{}, map[string]bool{}, map[string]bool{}
			for role, grants := range s.identityPolicies() {
				name := role
				if fn, ok := byRole[role]; ok {
					name = fn
				}
				publish := may(grants, "execute-api:Invoke", tc.cutover) || may(grants, "s3:PutObject", head) || may(grants, "s3:DeleteObject", head)
				release := may(grants, "execute-api:Invoke", tc.intent)
				wipe := may(grants, "s3:DeleteObject", data) || may(grants, "s3:DeleteObjectVersion", data)
				publishers[name], releasers[name], wipers[name] = publish, release, wipe
				if publish && release && wipe {
					t.Errorf("role %s may publish, release and wipe", name)
				}
				if may(grants, "s3:DeleteObjectVersion", data) || may(grants, "s3:PutObject", head) || may(grants, "s3:DeleteObject", head) {
					t.Errorf("role %s may delete a version or write or delete a head", name)
				}
			}
			for name := range publishers {
				if publishers[name] != (name == resources.FnHandoff) || releasers[name] != (name == resources.FnHandoff) || wipers[name] != (name == resources.FnGC) {
					t.Errorf("%s: publishes %v, releases %v, wipes %v; want only the handoff to publish and release, only GC to wipe",
						name, publishers[name], releasers[name], wipers[name])
				}
			}
		})
	}
}

// Issue 25 item 4 (rewrite outputs never overwritten): not only our code
// sends If-None-Match: the compaction role is denied, on every rewrite
// output key, an object-creating PutObject (PutObject,
// CompleteMultipartUpload; s3:ObjectCreationOperation) without it, so a
// holder of the role cannot overwrite a committed output in place. The
// multipart calls that create nothing stay allowed.
func TestCompactionRoleWritesOutputsOnlyWhereNoneIs(t *testing.T) {
	both(t, func(t *testing.T, s *synth) {
		bucket := s.bucketArn(t)
		grants := s.roleGrants(t, resources.FnCompaction)
		for _, glob := range Globs().Rewrites {
			key := strings.ReplaceAll(glob, "*", "x")
			allowed, enforced := false, false
			for _, g := range grants {
				if !actionMatch(g.action, "s3:PutObject") || !iamMatch(g.resource, bucket+"/"+key) {
					continue
				}
				switch {
				case g.effect == "Allow" && g.cond == "":
					allowed = true
				case g.effect == "Deny" && strings.Contains(g.cond, `"Null":{"s3:if-none-match":"true"}`) && strings.Contains(g.cond, `"Bool":{"s3:ObjectCreationOperation":"true"}`):
					enforced = true
				}
			}
			if !allowed || !enforced {
				t.Errorf("%s: compaction may write %v, If-None-Match enforced by IAM %v", key, allowed, enforced)
			}
		}
	})
}
