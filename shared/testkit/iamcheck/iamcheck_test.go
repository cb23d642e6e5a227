package iamcheck

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/resources"
)

func TestEvaluate(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"Statement":[
		{"Sid":"Read","Effect":"Allow","Action":"s3:GetObject","Resource":["arn:aws:s3:::b/collections/*/manifests/*","arn:aws:s3:::b/x?"]},
		{"Effect":"Allow","Action":["SQS:SendMessage"],"Resource":"arn:aws:sqs:us-east-1:1:q.fifo"},
		{"Effect":"Deny","Action":"s3:*","Resource":"arn:aws:s3:::b/secret/*"},
		{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::b/secret/*"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		action, resource string
		want             Decision
	}{
		{"s3:GetObject", "arn:aws:s3:::b/collections/c/manifests/p/1.json", Allowed}, // '*' spans '/'
		{"s3:GetObject", "arn:aws:s3:::b/xy", Allowed},
		{"s3:GetObject", "arn:aws:s3:::b/xyz", ImplicitDeny}, // '?' is one character
		{"s3:PutObject", "arn:aws:s3:::b/collections/c/manifests/1.json", ImplicitDeny},
		{"sqs:sendmessage", "arn:aws:sqs:us-east-1:1:q.fifo", Allowed}, // actions compare case-insensitively
		{"sqs:SendMessage", "arn:aws:sqs:us-east-1:1:Q.fifo", ImplicitDeny},
		{"s3:GetObject", "arn:aws:s3:::b/secret/k", ExplicitDeny}, // Deny wins over Allow
	} {
		if got, _ := p.Evaluate(tc.action, tc.resource); got != tc.want {
			t.Errorf("%s on %s: %s, want %s", tc.action, tc.resource, got, tc.want)
		}
	}
}

func TestParseRefusesWhatItCannotJudge(t *testing.T) {
	for _, doc := range []string{
		`{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":"true"}}}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"dynamodb:GetItem","Resource":"*","Condition":{"StringEquals":{"dynamodb:LeadingKeys":"x"}}}]}`,
		`{"Statement":[{"Effect":"Allow","NotAction":"s3:GetObject","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","NotResource":"*"}]}`,
	} {
		if _, err := ParsePolicy([]byte(doc)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", doc, err)
		}
	}
}

func TestRequestsAreHowAWSAuthorizesTheCall(t *testing.T) {
	for _, tc := range []struct {
		call localaws.Call
		want string
	}{
		{localaws.Call{Service: "s3", Operation: "HeadObject", Bucket: "b", Key: "k", Status: 200}, "s3:GetObject on arn:aws:s3:::b/k"},
		{localaws.Call{Service: "s3", Operation: "GetObject", Bucket: "b", Key: "k", Status: 404}, "s3:GetObject on arn:aws:s3:::b/k|s3:ListBucket on arn:aws:s3:::b"},
		{localaws.Call{Service: "s3", Operation: "UploadPart", Bucket: "b", Key: "k"}, "s3:PutObject on arn:aws:s3:::b/k"},
		{localaws.Call{Service: "s3", Operation: "DeleteObjects", Bucket: "b", Keys: []string{"a", "c/d"}}, "s3:DeleteObject on arn:aws:s3:::b/a|s3:DeleteObject on arn:aws:s3:::b/c/d"},
		{localaws.Call{Service: "s3", Operation: "ListObjectsV2", Bucket: "b"}, "s3:ListBucket on arn:aws:s3:::b"},
		{localaws.Call{Service: "s3", Operation: "GetObject", Bucket: "b", Key: "k", VersionIDs: []string{"v1"}, Status: 200}, "s3:GetObjectVersion on arn:aws:s3:::b/k"},
		// A delete naming a version removes it for good: its own action.
		{localaws.Call{Service: "s3", Operation: "DeleteObject", Bucket: "b", Key: "k", VersionIDs: []string{"v1"}}, "s3:DeleteObjectVersion on arn:aws:s3:::b/k"},
		{localaws.Call{Service: "s3", Operation: "DeleteObjects", Bucket: "b", Keys: []string{"a", "c"}, VersionIDs: []string{"", "v2"}}, "s3:DeleteObject on arn:aws:s3:::b/a|s3:DeleteObjectVersion on arn:aws:s3:::b/c"},
		{localaws.Call{Service: "s3", Operation: "PutBucketVersioning", Bucket: "b"}, "s3:PutBucketVersioning on arn:aws:s3:::b"},
		{localaws.Call{Service: "s3", Operation: "PutBucketLifecycleConfiguration", Bucket: "b"}, "s3:PutLifecycleConfiguration on arn:aws:s3:::b"},
		{localaws.Call{Service: "s3", Operation: "PutObjectLockConfiguration", Bucket: "b"}, "s3:PutBucketObjectLockConfiguration on arn:aws:s3:::b"},
		{localaws.Call{Service: "s3", Operation: "DeleteBucketPolicy", Bucket: "b"}, "s3:DeleteBucketPolicy on arn:aws:s3:::b"},
		{localaws.Call{Service: "dynamodb", Operation: "UpdateItem", Tables: []string{"t"}}, "dynamodb:UpdateItem on arn:aws:dynamodb:r:123456789012:table/t"},
		{localaws.Call{Service: "sqs", Operation: "SendMessageBatch", QueueURL: "http://h/000000000000/q.fifo"}, "sqs:SendMessage on arn:aws:sqs:r:000000000000:q.fifo"},
		{localaws.Call{Service: "sqs", Operation: "DeleteMessageBatch", QueueURL: "http://h/q"}, "sqs:DeleteMessage on arn:aws:sqs:r:123456789012:q"},
	} {
		reqs, err := Requests(tc.call, "aws", "r", "123456789012")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range reqs {
			got = append(got, r.String())
		}
		if strings.Join(got, "|") != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.call.Service, tc.call.Operation, got, tc.want)
		}
	}
	if _, err := Requests(localaws.Call{Service: "dynamodb", Operation: "TransactWriteItems", Tables: []string{"t"}}, "aws", "r", "1"); err == nil {
		t.Error("an operation the checker does not know passed")
	}
}

// A template synthesized for one prefix is bound to an environment of
// another: names map through resources.Default, intrinsics resolve, and a
// name the environment does not provision is an error.
func TestFunctionPoliciesFromATemplate(t *testing.T) {
	from := resources.Default("bcc")
	tmpl := `{"Resources":{
	 "Bucket1":{"Type":"AWS::S3::Bucket","Metadata":{"aws:cdk:path":"bcc-coordinator/DataBucket/Resource"}},
	 "Table1":{"Type":"AWS::DynamoDB::Table","Properties":{"TableName":"` + from.Table.Name + `"}},
	 "Queue1":{"Type":"AWS::SQS::Queue","Properties":{"QueueName":"` + from.Queues[0].Name + `"}},
	 "Role1":{"Type":"AWS::IAM::Role","Properties":{}},
	 "Pol1":{"Type":"AWS::IAM::Policy","Properties":{"Roles":[{"Ref":"Role1"}],"PolicyDocument":{"Statement":[
	   {"Sid":"Read","Effect":"Allow","Action":"s3:GetObject","Resource":{"Fn::Join":["",[{"Fn::GetAtt":["Bucket1","Arn"]},"/collections/*"]]}},
	   {"Effect":"Allow","Action":["dynamodb:GetItem"],"Resource":{"Fn::GetAtt":["Table1","Arn"]}},
	   {"Effect":"Allow","Action":"sqs:SendMessage","Resource":[{"Fn::Sub":"${Queue1.Arn}"},{"Fn::Sub":"arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:literal"}]}]}}}
	}}`
	for _, f := range from.Functions {
		tmpl = strings.Replace(tmpl, `"Role1":`, `"Fn`+f.Name+`":{"Type":"AWS::Lambda::Function","Properties":{"FunctionName":"`+from.FunctionName(f.Name)+`","Role":{"Fn::GetAtt":["Role1","Arn"]}}},"Role1":`, 1)
	}
	// The same template as CDK synthesizes it with generated names: no
	// name properties, the definition's name as metadata.
	generated := regexp.MustCompile(`"Properties":\{"(TableName|QueueName|FunctionName)":"([^"]+)",?`).
		ReplaceAllString(tmpl, `"Metadata":{"`+resources.MetadataName+`":"$2"},"Properties":{`)
	t.Run("fixed names", func(t *testing.T) { checkTemplateBinding(t, from, tmpl) })
	t.Run("generated names", func(t *testing.T) { checkTemplateBinding(t, from, generated) })
}

func checkTemplateBinding(t *testing.T, from resources.Definition, tmpl string) {
	path := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(path, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	tp, err := LoadTemplate(path)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := tp.Prefix(); err != nil || p != "bcc" {
		t.Fatalf("prefix %q %v", p, err)
	}
	to := resources.Default("e2e1")
	pols, err := tp.FunctionPolicies(Binding{From: from, To: to, Region: "us-east-1", Account: "000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	got := string(pols[resources.FnObserver].Document())
	for _, want := range []string{
		`"arn:aws:s3:::` + to.Bucket.Name + `/collections/*"`,
		`"arn:aws:dynamodb:us-east-1:000000000000:table/` + to.Table.Name + `"`,
		`"arn:aws:sqs:us-east-1:000000000000:` + to.Queues[0].Name + `"`,
		`"arn:aws:sqs:us-east-1:000000000000:literal"`, // a literal names something outside the stack: kept
	} {
		if !strings.Contains(got, want) {
			t.Errorf("resolved policy %s lacks %s", got, want)
		}
	}
	bad := strings.Replace(tmpl, `"`+from.Table.Name+`"`, `"somebody-elses"`, 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	tp, _ = LoadTemplate(path)
	if _, err := tp.FunctionPolicies(Binding{From: from, To: to, Region: "us-east-1", Account: "0"}); err == nil || !strings.Contains(err.Error(), "somebody-elses") {
		t.Fatalf("unmapped name: %v", err)
	}
}

func TestCheckerJudgesOnlyKnownIdentities(t *testing.T) {
	pol, _ := ParsePolicy([]byte(`{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`))
	c := NewChecker("r", "1", map[string]Policy{"gc": pol})
	c.Bind("AKGC", "gc")
	c.Record(localaws.Call{AccessKey: "AKGC", Service: "s3", Operation: "GetObject", Bucket: "b", Key: "k", Status: 200})
	c.Record(localaws.Call{AccessKey: "ADMIN", Service: "s3", Operation: "DeleteObject", Bucket: "b", Key: "k"})
	c.Record(localaws.Call{AccessKey: "AKGC", Service: "s3", Operation: "DeleteObject", Bucket: "b", Key: "k", Status: 403, ErrorCode: "AccessDenied"})
	// A request whose body never arrived whole (the caller hung up) is
	// neither authorized nor run by AWS: nothing to judge.
	c.Record(localaws.Call{AccessKey: "AKGC", Service: "dynamodb", Operation: "UpdateItem", Truncated: true})
	v := c.Violations()
	if len(v) != 2 || !strings.Contains(v[0], "backend refused s3 DeleteObject (HTTP 403 AccessDenied) on b/k") ||
		!strings.Contains(v[1], "s3:DeleteObject on arn:aws:s3:::b/k is implicitly denied") {
		t.Fatalf("violations %q", v)
	}
	needed := Needed(c.Judged())
	if len(needed["gc"][0]) != 1 {
		t.Fatalf("needed %v", needed)
	}
}

// A Deny statement allows nothing; what proves it is a recorded request it
// refused, so Needed lists those under it (and the refused request under
// no Allow that matched it too).
func TestNeededCountsWhatADenyRefused(t *testing.T) {
	pol, err := ParsePolicy([]byte(`{"Statement":[
		{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::b/*"},
		{"Effect":"Deny","Action":"s3:DeleteObjectVersion","Resource":"arn:aws:s3:::b/*"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := NewChecker("r", "1", map[string]Policy{"gc": pol})
	c.Bind("AKGC", "gc")
	c.Record(localaws.Call{AccessKey: "AKGC", Service: "s3", Operation: "DeleteObject", Bucket: "b", Key: "k", VersionIDs: []string{"v1"}, Status: 204})
	needed := Needed(c.Judged())
	if len(needed["gc"][1]) != 1 || needed["gc"][1][0].Action != "s3:DeleteObjectVersion" || len(needed["gc"][0]) != 0 {
		t.Fatalf("needed %v", needed)
	}
	if v := c.Violations(); len(v) != 1 || !strings.Contains(v[0], "explicitly denied") {
		t.Fatalf("violations %q", v)
	}
}

// dynamodb:LeadingKeys conditions are judged by the request's partition
// key (the Key or Item attribute pk the call carried): the function roles'
// Deny on operator records applies to those keys only, and an operator's
// ForAllValues allow to those only.
func TestLeadingKeysConditions(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"Statement":[
		{"Effect":"Allow","Action":["dynamodb:PutItem","dynamodb:GetItem"],"Resource":"arn:aws:dynamodb:r:1:table/t"},
		{"Effect":"Deny","Action":"dynamodb:PutItem","Resource":"arn:aws:dynamodb:r:1:table/t","Condition":{"ForAnyValue:StringLike":{"dynamodb:LeadingKeys":["OPERATOR#*"]}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	op, err := ParsePolicy([]byte(`{"Statement":[
		{"Effect":"Allow","Action":"dynamodb:PutItem","Resource":"arn:aws:dynamodb:r:1:table/t","Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["OPERATOR#*"]}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	call := func(pk string) Request {
		reqs, err := Requests(localaws.Call{Service: "dynamodb", Operation: "PutItem", Tables: []string{"t"}, KeyAttrs: map[string]string{"pk": pk, "sk": "LINEAGE"}}, "aws", "r", "1")
		if err != nil || len(reqs) != 1 {
			t.Fatal(reqs, err)
		}
		return reqs[0]
	}
	for _, tc := range []struct {
		pol  Policy
		pk   string
		want Decision
	}{
		{p, "COLL#c1", Allowed}, {p, "OPERATOR#COLL#c1", ExplicitDeny},
		{op, "OPERATOR#COLL#c1", Allowed}, {op, "COLL#c1", ImplicitDeny},
	} {
		if got, _ := tc.pol.EvaluateRequest(call(tc.pk)); got != tc.want {
			t.Errorf("PutItem pk %s: %s, want %s", tc.pk, got, tc.want)
		}
	}
}

// s3:if-none-match (Null) and s3:ObjectCreationOperation (Bool), as the
// compaction role's OutputsOnlyWhereNoneIs uses them: an object-creating
// PutObject or CompleteMultipartUpload without If-None-Match is denied;
// with it, and CreateMultipartUpload / UploadPart (which create nothing),
// are allowed.
func TestIfNoneMatchConditions(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"Statement":[
		{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/out/*"},
		{"Effect":"Deny","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/out/*","Condition":{"Null":{"s3:if-none-match":"true"},"Bool":{"s3:ObjectCreationOperation":"true"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op, inm string
		want    Decision
	}{
		{"PutObject", "", ExplicitDeny}, {"PutObject", "*", Allowed},
		{"CompleteMultipartUpload", "", ExplicitDeny}, {"CompleteMultipartUpload", "*", Allowed},
		{"CreateMultipartUpload", "", Allowed}, {"UploadPart", "", Allowed}, {"CopyObject", "", ExplicitDeny},
	} {
		reqs, err := Requests(localaws.Call{Service: "s3", Operation: tc.op, Bucket: "b", Key: "out/k", CopySource: "b/in", IfNoneMatch: tc.inm}, "aws", "r", "1")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := p.EvaluateRequest(reqs[0]); got != tc.want {
			t.Errorf("%s If-None-Match %q: %s, want %s", tc.op, tc.inm, got, tc.want)
		}
	}
	if _, err := ParsePolicy([]byte(`{"Statement":[{"Effect":"Deny","Action":"s3:PutObject","Resource":"*","Condition":{"StringLike":{"s3:if-none-match":"*"}}}]}`)); err == nil {
		t.Fatal("an operator the evaluator does not judge for the key was accepted")
	}
}
