package localaws

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// notificationConfiguration is what the stack honours of a bucket's
// NotificationConfiguration (see s3config.go for what it refuses).
type notificationConfiguration struct {
	Functions   []lambdaNotification
	EventBridge bool // every event also goes to the EventBridge rules
}

type lambdaNotification struct {
	ID       string   `xml:"Id,omitempty"`
	Function string   `xml:"CloudFunction"`
	Events   []string `xml:"Event"`
	Rules    []struct {
		Name  string `xml:"Name"`
		Value string `xml:"Value"`
	} `xml:"Filter>S3Key>FilterRule"`
}

func (n lambdaNotification) matches(eventName, key string) bool {
	ok := false
	for _, e := range n.Events {
		if e == "s3:"+eventName || (strings.HasSuffix(e, ":*") && strings.HasPrefix("s3:"+eventName, strings.TrimSuffix(e, "*"))) {
			ok = true
		}
	}
	if !ok {
		return false
	}
	for _, r := range n.Rules {
		switch strings.ToLower(r.Name) {
		case "prefix":
			if !strings.HasPrefix(key, r.Value) {
				return false
			}
		case "suffix":
			if !strings.HasSuffix(key, r.Value) {
				return false
			}
		}
	}
	return true
}

// HeldEvent is an S3 notification held for the caller (Options.HoldS3Events).
type HeldEvent struct {
	Function string
	Payload  []byte
}

type notifier struct {
	s            *Stack
	mu           sync.Mutex
	configs      map[string]notificationConfiguration // by bucket
	raw          map[string][]byte
	seq          uint64
	inflight     int
	held         []HeldEvent
	failed       []HeldEvent
	failureQueue string // on-failure destination of exhausted async invocations
}

func newNotifier(s *Stack) *notifier {
	return &notifier{s: s, configs: map[string]notificationConfiguration{}, raw: map[string][]byte{}}
}

func (n *notifier) idle() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.inflight == 0
}

func splitPath(p string) (bucket, key string) {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)
	if len(parts) == 2 {
		return parts[0], parts[1]
	}
	return parts[0], ""
}

// serveS3 forwards to gofakes3, keeping notification configurations itself,
// correcting If-Match on a missing key to 404, serving conditional deletes
// (gofakes3 ignores If-Match on DeleteObject: s3delete.go), and emitting
// object-created events for successful writes.
func (n *notifier) serveS3(w http.ResponseWriter, r *http.Request) {
	bucket, key := splitPath(r.URL.Path)
	q := r.URL.Query()
	if q.Has("notification") && key == "" {
		n.serveNotificationConfig(w, r, bucket)
		return
	}
	if n.s.opts.Upstream == "" && conditionalDelete(r, key) {
		n.serveConditionalDelete(w, r, bucket, key)
		return
	}
	eventName := createdEventName(r, key)
	if eventName == "" {
		n.s.s3.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	n.s.s3.ServeHTTP(rec, r)
	if rec.Code == http.StatusPreconditionFailed && r.Header.Get("If-Match") != "" && !n.exists(bucket, key) {
		writeS3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.", key)
		return
	}
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	if rec.Code == http.StatusOK {
		n.emit(bucket, key, eventName, strings.Trim(rec.Header().Get("ETag"), `"`))
	}
}

func createdEventName(r *http.Request, key string) string {
	if key == "" {
		return ""
	}
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPut && q.Has("partNumber"):
		return ""
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		return "ObjectCreated:Copy"
	case r.Method == http.MethodPut:
		return "ObjectCreated:Put"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "ObjectCreated:CompleteMultipartUpload"
	}
	return ""
}

func (n *notifier) exists(bucket, key string) bool {
	ok, _ := n.headObject(bucket, key)
	return ok
}

func (n *notifier) size(bucket, key string) int64 {
	_, size := n.headObject(bucket, key)
	return size
}

// headObject asks the S3 behind the stack whether bucket/key exists and how
// large it is. In front of an upstream it is a real, signed SDK call: an
// unsigned request or one whose Host names another server would be refused
// (IAM enforcement) or misread (an unknown Host is a virtual-hosted bucket
// name to moto).
func (n *notifier) headObject(bucket, key string) (bool, int64) {
	if n.s.opts.Upstream != "" {
		out, err := n.s.internalClients().S3.HeadObject(context.WithoutCancel(n.s.ctx), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return false, 0
		}
		return true, aws.ToInt64(out.ContentLength)
	}
	req := httptest.NewRequest(http.MethodHead, (&url.URL{Path: "/" + bucket + "/" + key}).RequestURI(), nil) // escaped: keys may hold spaces
	rec := httptest.NewRecorder()
	n.s.s3.ServeHTTP(rec, req)
	sz, _ := strconv.ParseInt(rec.Header().Get("Content-Length"), 10, 64)
	return rec.Code == http.StatusOK, sz
}

func (n *notifier) serveNotificationConfig(w http.ResponseWriter, r *http.Request, bucket string) {
	if !n.bucketExists(bucket) {
		writeS3Error(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist", bucket)
		return
	}
	switch r.Method {
	case http.MethodGet:
		n.mu.Lock()
		body := n.raw[bucket]
		n.mu.Unlock()
		if body == nil {
			body = []byte(`<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></NotificationConfiguration>`)
		}
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write(body)
	case http.MethodPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeS3Error(w, http.StatusBadRequest, "MalformedXML", err.Error(), bucket)
			return
		}
		cfg, cerr := parseNotificationConfiguration(body)
		if cerr != nil {
			writeS3Error(w, cerr.status, cerr.code, cerr.message, bucket)
			return
		}
		n.mu.Lock()
		n.configs[bucket] = cfg
		n.raw[bucket] = body
		n.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	default:
		writeS3Error(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "method not allowed", bucket)
	}
}

func (n *notifier) bucketExists(bucket string) bool {
	if n.s.opts.Upstream != "" {
		_, err := n.s.internalClients().S3.HeadBucket(context.WithoutCancel(n.s.ctx), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
		return err == nil
	}
	req := httptest.NewRequest(http.MethodHead, "/"+bucket, nil)
	rec := httptest.NewRecorder()
	n.s.s3.ServeHTTP(rec, req)
	return rec.Code == http.StatusOK
}

func (n *notifier) emit(bucket, key, eventName, etag string) {
	n.mu.Lock()
	cfg, ok := n.configs[bucket]
	n.seq++
	seq := n.seq
	n.mu.Unlock()
	if !ok {
		return
	}
	size := n.size(bucket, key)
	for _, f := range cfg.Functions {
		if !f.matches(eventName, key) {
			continue
		}
		payload, err := json.Marshal(s3Event(bucket, key, eventName, etag, size, seq, f.ID))
		if err != nil {
			n.s.log.Error("encode s3 event", "err", err)
			continue
		}
		name := f.Function[strings.LastIndex(f.Function, ":")+1:]
		n.deliver(HeldEvent{Function: name, Payload: payload})
	}
	if cfg.EventBridge {
		n.s.publish(s3EventBridgeEvent(bucket, key, eventName, etag, size, seq))
	}
}

func s3Event(bucket, key, eventName, etag string, size int64, seq uint64, configID string) events.S3Event {
	return events.S3Event{Records: []events.S3EventRecord{{
		EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: Region,
		EventTime: time.Now().UTC(), EventName: eventName,
		PrincipalID:       events.S3UserIdentity{PrincipalID: "AWS:LOCAL"},
		RequestParameters: events.S3RequestParameters{SourceIPAddress: "127.0.0.1"},
		ResponseElements:  map[string]string{"x-amz-request-id": fmt.Sprintf("%016X", seq), "x-amz-id-2": "local"},
		S3: events.S3Entity{
			SchemaVersion: "1.0", ConfigurationID: configID,
			Bucket: events.S3Bucket{Name: bucket, OwnerIdentity: events.S3UserIdentity{PrincipalID: "LOCAL"}, Arn: "arn:aws:s3:::" + bucket},
			Object: events.S3Object{Key: url.QueryEscape(key), Size: size, ETag: etag, Sequencer: fmt.Sprintf("%018X", seq)},
		},
	}}}
}

// deliver invokes the function asynchronously, retrying twice on error as
// Lambda does for asynchronous invocations.
func (n *notifier) deliver(ev HeldEvent) {
	n.mu.Lock()
	if n.s.opts.HoldS3Events {
		n.held = append(n.held, ev)
		n.mu.Unlock()
		return
	}
	n.inflight++
	n.mu.Unlock()
	n.s.wg.Add(1)
	go func() {
		defer n.s.wg.Done()
		defer func() { n.mu.Lock(); n.inflight--; n.mu.Unlock() }()
		var lastErr error
		for attempt := 0; attempt < 3; attempt++ {
			if attempt > 0 {
				select {
				case <-n.s.ctx.Done():
					return
				case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
				}
			}
			_, err := n.s.Invoke(n.s.ctx, ev.Function, ev.Payload)
			if err == nil {
				return
			}
			lastErr = err
			n.s.log.Warn("async invoke failed", "function", ev.Function, "attempt", attempt+1, "err", err)
		}
		n.mu.Lock()
		n.failed = append(n.failed, ev)
		dest := n.failureQueue
		n.mu.Unlock()
		if dest != "" {
			n.sendToDestination(dest, ev, lastErr)
		}
	}()
}

// SetAsyncFailureQueue makes exhausted asynchronous invocations go to the
// queue at url as Lambda on-failure destination records.
func (s *Stack) SetAsyncFailureQueue(url string) {
	s.notify.mu.Lock()
	s.notify.failureQueue = url
	s.notify.mu.Unlock()
}

// sendToDestination writes Lambda's on-failure destination record.
func (n *notifier) sendToDestination(url string, ev HeldEvent, invokeErr error) {
	msg := ""
	if invokeErr != nil {
		msg = invokeErr.Error()
	}
	record := map[string]any{
		"version": "1.0", "timestamp": time.Now().UTC().Format(time.RFC3339Nano),
		"requestContext": map[string]any{"requestId": fmt.Sprintf("local-%d", time.Now().UnixNano()), "functionArn": FunctionARN(ev.Function) + ":$LATEST",
			"condition": "RetriesExhausted", "approximateInvokeCount": 3},
		"requestPayload":  json.RawMessage(ev.Payload),
		"responseContext": map[string]any{"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
		"responsePayload": map[string]any{"errorMessage": msg, "errorType": "error"},
	}
	body, err := json.Marshal(record)
	if err != nil {
		return
	}
	client := n.s.serviceClients(ev.Function).SQS
	if _, err := client.SendMessage(context.WithoutCancel(n.s.ctx), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(body))}); err != nil {
		n.s.log.Error("on-failure destination send failed", "queue", url, "err", err)
	}
}

// TakeS3Events returns and clears the held S3 notifications.
func (s *Stack) TakeS3Events() []HeldEvent {
	s.notify.mu.Lock()
	defer s.notify.mu.Unlock()
	out := s.notify.held
	s.notify.held = nil
	return out
}

// FailedS3Deliveries returns notifications whose three invocations all failed.
func (s *Stack) FailedS3Deliveries() []HeldEvent {
	s.notify.mu.Lock()
	defer s.notify.mu.Unlock()
	return append([]HeldEvent(nil), s.notify.failed...)
}

// DeliverS3Event invokes the event's function synchronously (for tests that
// replay, duplicate or reorder held events).
func (s *Stack) DeliverS3Event(ctx context.Context, ev HeldEvent) error {
	_, err := s.Invoke(ctx, ev.Function, ev.Payload)
	return err
}

func writeS3Error(w http.ResponseWriter, status int, code, msg, resource string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>local</RequestId></Error>`,
		code, xmlEscape(msg), xmlEscape(resource))
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
