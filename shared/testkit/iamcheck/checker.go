package iamcheck

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
)

// Request is one authorization AWS makes for a call: an action on a resource.
type Request struct {
	Action   string
	Resource string
	// LeadingKey is the partition key value of a single-item DynamoDB
	// request (dynamodb:LeadingKeys), when known.
	LeadingKey string
	// Keys are the request's other condition key values (an absent key:
	// not in the map): s3:if-none-match, s3:ObjectCreationOperation.
	Keys map[string][]string
}

func (r Request) String() string { return r.Action + " on " + r.Resource }

var accountRE = regexp.MustCompile(`^[0-9]{12}$`)

// PartitionKey is the partition key attribute of the coordinator's table
// (resources.Table.PartitionKey), what dynamodb:LeadingKeys names.
const PartitionKey = "pk"

// Requests returns the authorizations AWS makes for c, as the service
// authorization reference defines them for the operations the product uses.
// An operation it does not know is an error: it cannot be judged, so it
// must not pass silently.
func Requests(c localaws.Call, partition, region, account string) ([]Request, error) {
	switch c.Service {
	case "s3":
		bucket := fmt.Sprintf("arn:%s:s3:::%s", partition, c.Bucket)
		object := bucket + "/" + c.Key
		one := func(action, res string) []Request { return []Request{{Action: action, Resource: res}} }
		switch c.Operation {
		case "GetObject", "HeadObject":
			if len(c.VersionIDs) == 1 && c.VersionIDs[0] != "" {
				// A read of a named version (a previous one: the undo) is
				// its own action.
				return one("s3:GetObjectVersion", object), nil
			}
			if c.Status == 404 {
				// S3 answers a read of a missing key with 404 only to a
				// caller allowed s3:ListBucket on the bucket, 403 to anyone
				// else; the code relies on the 404 (a trimmed parent, a
				// missing object), so that answer needs both.
				return []Request{{Action: "s3:GetObject", Resource: object}, {Action: "s3:ListBucket", Resource: bucket}}, nil
			}
			return one("s3:GetObject", object), nil
		case "PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "CopyObject":
			// s3:ObjectCreationOperation is true for the calls that make an
			// object visible (PutObject, CopyObject, CompleteMultipartUpload),
			// false for CreateMultipartUpload and UploadPart.
			keys := map[string][]string{"s3:ObjectCreationOperation": {"false"}}
			if c.Operation == "PutObject" || c.Operation == "CompleteMultipartUpload" || c.Operation == "CopyObject" {
				keys["s3:ObjectCreationOperation"] = []string{"true"}
			}
			if c.IfNoneMatch != "" {
				keys["s3:if-none-match"] = []string{c.IfNoneMatch}
			}
			put := Request{Action: "s3:PutObject", Resource: object, Keys: keys}
			if c.Operation == "CopyObject" {
				return []Request{put, {Action: "s3:GetObject", Resource: fmt.Sprintf("arn:%s:s3:::%s", partition, c.CopySource)}}, nil
			}
			return []Request{put}, nil
		case "AbortMultipartUpload":
			return one("s3:AbortMultipartUpload", object), nil
		case "ListParts":
			return one("s3:ListMultipartUploadParts", object), nil
		case "DeleteObject":
			if len(c.VersionIDs) == 1 && c.VersionIDs[0] != "" {
				return one("s3:DeleteObjectVersion", object), nil
			}
			return one("s3:DeleteObject", object), nil
		case "DeleteObjects":
			var out []Request
			for i, k := range c.Keys {
				action := "s3:DeleteObject"
				if i < len(c.VersionIDs) && c.VersionIDs[i] != "" {
					action = "s3:DeleteObjectVersion"
				}
				out = append(out, Request{Action: action, Resource: bucket + "/" + k})
			}
			return out, nil
		case "PutBucketVersioning", "PutBucketPolicy", "DeleteBucketPolicy":
			return one("s3:"+c.Operation, bucket), nil
		case "PutBucketLifecycleConfiguration":
			return one("s3:PutLifecycleConfiguration", bucket), nil
		case "PutObjectLockConfiguration":
			return one("s3:PutBucketObjectLockConfiguration", bucket), nil
		case "ListObjectVersions":
			return one("s3:ListBucketVersions", bucket), nil
		case "ListObjects", "ListObjectsV2", "HeadBucket":
			return one("s3:ListBucket", bucket), nil
		case "ListBuckets":
			return one("s3:ListAllMyBuckets", "*"), nil
		case "GetBucketNotificationConfiguration":
			return one("s3:GetBucketNotification", bucket), nil
		case "PutBucketNotificationConfiguration":
			return one("s3:PutBucketNotification", bucket), nil
		case "CreateBucket", "DeleteBucket", "GetBucketVersioning":
			return one("s3:"+c.Operation, bucket), nil
		}
	case "dynamodb":
		switch c.Operation {
		case "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
			"DescribeTable", "CreateTable", "DeleteTable", "UpdateTimeToLive":
			if len(c.Tables) == 0 {
				return nil, fmt.Errorf("dynamodb %s names no table", c.Operation)
			}
			var out []Request
			for _, t := range c.Tables {
				res := fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", partition, region, account, t)
				if c.Index != "" {
					res += "/index/" + c.Index
				}
				out = append(out, Request{Action: "dynamodb:" + c.Operation, Resource: res, LeadingKey: c.KeyAttrs[PartitionKey]})
			}
			return out, nil
		}
	case "sqs":
		name, acct := c.QueueName, account
		if c.QueueURL != "" {
			parts := strings.Split(strings.TrimRight(c.QueueURL, "/"), "/")
			name = parts[len(parts)-1]
			if len(parts) >= 2 && accountRE.MatchString(parts[len(parts)-2]) {
				acct = parts[len(parts)-2]
			}
		}
		if name == "" {
			if c.Operation == "ListQueues" {
				return []Request{{Action: "sqs:ListQueues", Resource: "*"}}, nil
			}
			return nil, fmt.Errorf("sqs %s names no queue", c.Operation)
		}
		action := strings.TrimSuffix(c.Operation, "Batch") // SendMessageBatch is authorized as SendMessage, etc.
		return []Request{{Action: "sqs:" + action, Resource: fmt.Sprintf("arn:%s:sqs:%s:%s:%s", partition, region, acct, name)}}, nil
	}
	return nil, fmt.Errorf("%s %s: this checker does not know how AWS authorizes it", c.Service, c.Operation)
}

// Judgement is one recorded request of a function, judged.
type Judgement struct {
	Function  string
	Call      localaws.Call
	Request   Request
	Decision  Decision
	AllowedBy []int // statement indexes of the function's policy
	// DeniedBy is the Deny statement that refused an explicitly denied
	// request (-1 otherwise).
	DeniedBy int
}

// Checker judges the recorded calls of the functions it knows.
type Checker struct {
	partition, region, account string

	mu         sync.Mutex
	identities map[string]string // access key id -> function
	policies   map[string]Policy // function -> policy
	judged     []Judgement
	problems   []string
}

// NewChecker judges calls against policies (by function).
func NewChecker(region, account string, policies map[string]Policy) *Checker {
	return &Checker{partition: "aws", region: region, account: account, identities: map[string]string{}, policies: policies}
}

// Bind says that calls signed with accessKey are function fn's.
func (c *Checker) Bind(accessKey, fn string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.identities[accessKey] = fn
}

// Policy returns fn's policy.
func (c *Checker) Policy(fn string) Policy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.policies[fn]
}

// Record judges one call (localaws.Options.OnCall).
func (c *Checker) Record(call localaws.Call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn, ok := c.identities[call.AccessKey]
	if !ok {
		return // not a function's call: fixtures, stand-in owners, the stack itself
	}
	if call.Truncated {
		return // the caller hung up mid-request: AWS never authorizes a request it did not receive
	}
	if call.Status == 403 || strings.HasPrefix(call.ErrorCode, "AccessDenied") {
		c.problems = append(c.problems, fmt.Sprintf("function %s: the backend refused %s %s (HTTP %d %s)%s",
			fn, call.Service, call.Operation, call.Status, call.ErrorCode, describe(call)))
	}
	reqs, err := Requests(call, c.partition, c.region, c.account)
	if err != nil {
		c.problems = append(c.problems, fmt.Sprintf("function %s: %v", fn, err))
		return
	}
	pol := c.policies[fn]
	for _, r := range reqs {
		d, by := pol.EvaluateRequest(r)
		j := Judgement{Function: fn, Call: call, Request: r, Decision: d, AllowedBy: by, DeniedBy: -1}
		if d == ExplicitDeny {
			j.AllowedBy, j.DeniedBy = nil, by[0]
		}
		c.judged = append(c.judged, j)
		if d != Allowed {
			c.problems = append(c.problems, fmt.Sprintf("function %s: %s is %s by its deployed policy (%s %s)",
				fn, r, d, call.Service, call.Operation))
		}
	}
}

func describe(call localaws.Call) string {
	switch {
	case call.Key != "":
		return " on " + call.Bucket + "/" + call.Key
	case call.Bucket != "":
		return " on bucket " + call.Bucket
	case len(call.Tables) > 0:
		return " on table " + strings.Join(call.Tables, ",")
	case call.QueueURL != "":
		return " on " + call.QueueURL
	}
	return ""
}

// Violations returns every denial and every call that could not be judged,
// in the order they happened.
func (c *Checker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.problems...)
}

// Judged returns every judged request.
func (c *Checker) Judged() []Judgement {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Judgement(nil), c.judged...)
}

// Needed maps, per function and statement index, the distinct requests
// that only that statement allows: removing the statement denies them. A
// Deny statement allows nothing: its entries are the requests it refused,
// the proof that it refuses what it says (a test attempted the act).
func Needed(judged []Judgement) map[string]map[int][]Request {
	out := map[string]map[int][]Request{}
	seen := map[string]bool{}
	for _, j := range judged {
		var i int
		switch {
		case j.Decision == Allowed && len(j.AllowedBy) == 1:
			i = j.AllowedBy[0]
		case j.Decision == ExplicitDeny && j.DeniedBy >= 0:
			i = j.DeniedBy
		default:
			continue
		}
		k := fmt.Sprint(j.Function, i, j.Request)
		if seen[k] {
			continue
		}
		seen[k] = true
		if out[j.Function] == nil {
			out[j.Function] = map[int][]Request{}
		}
		out[j.Function][i] = append(out[j.Function][i], j.Request)
	}
	for _, m := range out {
		for i := range m {
			sort.Slice(m[i], func(a, b int) bool { return m[i][a].String() < m[i][b].String() })
		}
	}
	return out
}
