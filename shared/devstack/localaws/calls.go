package localaws

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Call is one AWS API request the stack served, described the way an IAM
// evaluation needs it: who signed it, which operation on which resources,
// and what the service answered.
type Call struct {
	AccessKey string // from the SigV4 Authorization header; "" when unsigned
	Service   string // "s3", "dynamodb", "sqs" or "events"
	Operation string // the API operation, e.g. GetObject, PutItem, SendMessageBatch

	Bucket string   // S3: the bucket
	Key    string   // S3: the object key ("" for bucket operations)
	Keys   []string // S3 DeleteObjects: every key of the batch
	// VersionIDs are the versions an S3 read or delete names: GetObject's,
	// HeadObject's or DeleteObject's versionId, or DeleteObjects' per key (parallel to Keys, "" for a key
	// named without one). A delete naming a version removes that version
	// for good (s3:DeleteObjectVersion); one without adds a delete marker.
	VersionIDs []string
	CopySource string // S3 CopyObject: "bucket/key" read
	// IfNoneMatch is an S3 request's If-None-Match header ("" without):
	// what the s3:if-none-match condition key judges.
	IfNoneMatch string

	Tables []string // DynamoDB: every table the request names
	// KeyAttrs are, for a single-item DynamoDB request, the string
	// attributes of its Key (GetItem, UpdateItem, DeleteItem) or Item
	// (PutItem): the partition key among them is what
	// dynamodb:LeadingKeys conditions judge.
	KeyAttrs map[string]string
	Index    string // DynamoDB Query/Scan: the index, if any

	QueueURL  string // SQS: the queue the request names
	QueueName string // SQS CreateQueue/GetQueueUrl: the name

	// Truncated: the request's body did not arrive whole (the caller hung
	// up while sending it, e.g. its context was cancelled at shutdown).
	// AWS neither authorizes nor runs such a request.
	Truncated bool

	Status    int    // HTTP status the service answered
	ErrorCode string // the error code of a 4xx/5xx answer, e.g. AccessDenied
}

var (
	credentialRE = regexp.MustCompile(`Credential=([^/,\s]+)/`)
	xmlCodeRE    = regexp.MustCompile(`<Code>([^<]+)</Code>`) // S3's <Error><Code>, and <ErrorResponse><Error><Code> of query-protocol errors
)

// recording captures the response of one call.
type recording struct {
	Call
	w      http.ResponseWriter
	status int
	head   bytes.Buffer // first bytes of an error body
}

func (r *recording) Header() http.Header { return r.w.Header() }

// WriteHeader forwards the first status only: an emulated service that
// writes a second status (gofakes3 does on some error paths) would otherwise
// make net/http log "superfluous WriteHeader" into every test's output.
func (r *recording) WriteHeader(code int) {
	if r.status != 0 {
		return
	}
	r.status = code
	r.w.WriteHeader(code)
}

func (r *recording) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.status >= 300 && r.head.Len() < 4096 {
		r.head.Write(b[:min(len(b), 4096-r.head.Len())])
	}
	return r.w.Write(b)
}

// Flush lets streamed responses through.
func (r *recording) Flush() {
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

// recordCall decodes what r asks for (restoring its body) and returns the
// writer that captures the answer.
func recordCall(r *http.Request, w http.ResponseWriter) *recording {
	rec := &recording{w: w}
	c := &rec.Call
	if m := credentialRE.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		c.AccessKey = m[1]
	}
	target := r.Header.Get("X-Amz-Target")
	switch {
	case strings.HasPrefix(target, dynamoTarget):
		c.Service, c.Operation = "dynamodb", strings.TrimPrefix(target, dynamoTarget)
		decodeDynamo(c, peekBody(r, c))
	case strings.HasPrefix(target, eventsTargetPrefix):
		c.Service, c.Operation = "events", strings.TrimPrefix(target, eventsTargetPrefix)
	case isCloudFormation(r):
		c.Service = "cloudformation"
		c.Operation = formAction(peekBody(r, c))
	case strings.HasPrefix(target, sqsTargetPrefx):
		c.Service, c.Operation = "sqs", strings.TrimPrefix(target, sqsTargetPrefx)
		var in struct{ QueueUrl, QueueName string }
		_ = json.Unmarshal(peekBody(r, c), &in)
		c.QueueURL, c.QueueName = in.QueueUrl, in.QueueName
	default:
		c.Service = "s3"
		decodeS3(c, r)
	}
	return rec
}

func (r *recording) finish() {
	r.Status = r.status
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	if r.Status < 300 {
		return
	}
	body := r.head.Bytes()
	if m := xmlCodeRE.FindSubmatch(body); m != nil {
		r.ErrorCode = string(m[1])
		return
	}
	var j struct {
		Type string `json:"__type"`
		Code string `json:"code"`
	}
	if json.Unmarshal(body, &j) == nil {
		code := j.Type
		if code == "" {
			code = j.Code
		}
		r.ErrorCode = code[strings.LastIndexAny(code, "#.")+1:]
	}
}

// peekBody reads r's body and puts it back for the handler; a body that
// did not arrive whole marks c Truncated.
func peekBody(r *http.Request, c *Call) []byte {
	if r.Body == nil {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		c.Truncated = true
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

func decodeDynamo(c *Call, body []byte) {
	var in struct {
		TableName     string
		IndexName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
		Key, Item     map[string]map[string]json.RawMessage
	}
	_ = json.Unmarshal(body, &in)
	for _, attrs := range []map[string]map[string]json.RawMessage{in.Key, in.Item} {
		for name, v := range attrs {
			var s string
			if raw, ok := v["S"]; ok && json.Unmarshal(raw, &s) == nil {
				if c.KeyAttrs == nil {
					c.KeyAttrs = map[string]string{}
				}
				c.KeyAttrs[name] = s
			}
		}
	}
	if in.TableName != "" {
		c.Tables = append(c.Tables, in.TableName)
	}
	for t := range in.RequestItems {
		c.Tables = append(c.Tables, t)
	}
	for _, it := range in.TransactItems {
		for _, op := range it {
			c.Tables = append(c.Tables, op.TableName)
		}
	}
	c.Index = in.IndexName
}

// decodeS3 classifies a path-style S3 request (the only style the product's
// clients use against a local endpoint).
func decodeS3(c *Call, r *http.Request) {
	c.Bucket, c.Key = splitPath(r.URL.Path)
	c.IfNoneMatch = r.Header.Get("If-None-Match")
	if k, err := url.PathUnescape(c.Key); err == nil {
		c.Key = k
	}
	q := r.URL.Query()
	hasKey := c.Key != ""
	switch {
	case q.Has("notification"):
		c.Operation = map[string]string{http.MethodGet: "GetBucketNotificationConfiguration", http.MethodPut: "PutBucketNotificationConfiguration"}[r.Method]
	case r.Method == http.MethodPost && q.Has("delete"):
		c.Operation = "DeleteObjects"
		var in struct {
			Objects []struct{ Key, VersionId string } `xml:"Object"`
		}
		_ = xml.Unmarshal(peekBody(r, c), &in)
		for _, o := range in.Objects {
			c.Keys = append(c.Keys, o.Key)
			c.VersionIDs = append(c.VersionIDs, o.VersionId)
		}
	case !hasKey && q.Has("versioning") && r.Method == http.MethodPut:
		c.Operation = "PutBucketVersioning"
	case !hasKey && q.Has("lifecycle") && r.Method == http.MethodPut:
		c.Operation = "PutBucketLifecycleConfiguration"
	case !hasKey && q.Has("policy") && r.Method == http.MethodPut:
		c.Operation = "PutBucketPolicy"
	case !hasKey && q.Has("policy") && r.Method == http.MethodDelete:
		c.Operation = "DeleteBucketPolicy"
	case !hasKey && q.Has("object-lock") && r.Method == http.MethodPut:
		c.Operation = "PutObjectLockConfiguration"
	case !hasKey && q.Has("versions") && r.Method == http.MethodGet:
		c.Operation = "ListObjectVersions"
	case r.Method == http.MethodPost && q.Has("uploads"):
		c.Operation = "CreateMultipartUpload"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		c.Operation = "CompleteMultipartUpload"
	case r.Method == http.MethodPut && q.Has("partNumber"):
		c.Operation = "UploadPart"
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		c.Operation = "AbortMultipartUpload"
	case r.Method == http.MethodGet && q.Has("uploadId"):
		c.Operation = "ListParts"
	case r.Method == http.MethodPut && hasKey && r.Header.Get("X-Amz-Copy-Source") != "":
		c.Operation = "CopyObject"
		src, _ := url.PathUnescape(r.Header.Get("X-Amz-Copy-Source"))
		c.CopySource = strings.TrimPrefix(src, "/")
	case r.Method == http.MethodPut && hasKey:
		c.Operation = "PutObject"
	case r.Method == http.MethodGet && hasKey:
		c.Operation = "GetObject"
		if v := q.Get("versionId"); v != "" {
			c.VersionIDs = []string{v}
		}
	case r.Method == http.MethodHead && hasKey:
		c.Operation = "HeadObject"
		if v := q.Get("versionId"); v != "" {
			c.VersionIDs = []string{v}
		}
	case r.Method == http.MethodDelete && hasKey:
		c.Operation = "DeleteObject"
		if v := q.Get("versionId"); v != "" {
			c.VersionIDs = []string{v}
		}
	case r.Method == http.MethodGet && c.Bucket == "":
		c.Operation = "ListBuckets"
	case r.Method == http.MethodGet && q.Get("list-type") == "2":
		c.Operation = "ListObjectsV2"
	case r.Method == http.MethodGet && q.Has("versioning"):
		c.Operation = "GetBucketVersioning"
	case r.Method == http.MethodGet:
		c.Operation = "ListObjects"
	case r.Method == http.MethodHead:
		c.Operation = "HeadBucket"
	case r.Method == http.MethodPut:
		c.Operation = "CreateBucket"
	case r.Method == http.MethodDelete:
		c.Operation = "DeleteBucket"
	default:
		c.Operation = r.Method
	}
}

// formAction is the Action of an awsquery form body.
func formAction(body []byte) string {
	v, _ := url.ParseQuery(string(body))
	return v.Get("Action")
}
