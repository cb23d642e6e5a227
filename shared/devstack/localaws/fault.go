package localaws

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// FaultMode is how the stack answers a request a Fault matched.
type FaultMode int

// Fault modes.
const (
	// ApplyThenFail serves the request (the write takes effect, S3
	// notifications included) and then answers HTTP 500 instead of the
	// service's answer: the client cannot tell that it was applied and the
	// SDK's retryer sends the identical request again.
	ApplyThenFail FaultMode = iota
	// ApplyThenReset serves the request and then drops the connection
	// without an answer (a connection reset: the SDK retries it too).
	ApplyThenReset
	// FailBeforeApply answers HTTP 500 without serving the request.
	FailBeforeApply
)

func (m FaultMode) String() string {
	return [...]string{"apply-then-fail", "apply-then-reset", "fail-before-apply"}[m]
}

// Fault tells the stack to perturb matching requests: the next Times
// requests of Service ("s3", "dynamodb" or "sqs") and Operation (as the
// Counter names it: "UpdateItem", "PutItem", "PutObject",
// "SendMessageBatch", ...) for which Match (optional) holds.
type Fault struct {
	Service   string
	Operation string
	// Match sees the request (headers, path) and its body; nil matches
	// every request of the operation.
	Match func(r *http.Request, body []byte) bool
	Times int // how many matching requests suffer the fault; 0 means 1
	Mode  FaultMode
	// Internal: strike the uncounted clients too (the stand-in owners and
	// fixtures use them, e.g. the stand-in publisher's head CAS); by
	// default only the product's own requests are struck.
	Internal bool
}

// faults is the list of armed faults of a stack.
type faults struct {
	mu    sync.Mutex
	armed []*armedFault
}

type armedFault struct {
	Fault
	left int
	hits int
}

// FaultHandle reports how often an injected fault struck and disarms it.
type FaultHandle struct {
	f  *faults
	af *armedFault
}

// Hits is how many requests the fault has struck so far.
func (h FaultHandle) Hits() int {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.af.hits
}

// Remove disarms the fault (idempotent).
func (h FaultHandle) Remove() {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.af.left = 0
}

// InjectFault arms f. The fault is offered to tests only: nothing in the
// product can reach it.
func (s *Stack) InjectFault(f Fault) FaultHandle {
	if f.Times <= 0 {
		f.Times = 1
	}
	af := &armedFault{Fault: f, left: f.Times}
	s.faults.mu.Lock()
	s.faults.armed = append(s.faults.armed, af)
	s.faults.mu.Unlock()
	return FaultHandle{f: &s.faults, af: af}
}

// take returns the armed fault matching this request (consuming one of its
// strikes), or nil. The request body is read and restored for Match.
func (f *faults) take(service, op string, r *http.Request, internal bool) *armedFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	var body []byte
	read := false
	for _, af := range f.armed {
		if af.left <= 0 || af.Service != service || af.Operation != op || internal && !af.Internal {
			continue
		}
		if af.Match != nil {
			if !read {
				body, _ = io.ReadAll(r.Body)
				_ = r.Body.Close()
				r.Body = io.NopCloser(bytes.NewReader(body))
				read = true
			}
			if !af.Match(r, body) {
				continue
			}
		}
		af.left--
		af.hits++
		return af
	}
	return nil
}

// serveFaulted serves r under af: next serves the request for real.
func (s *Stack) serveFaulted(w http.ResponseWriter, r *http.Request, service, op string, af *armedFault, next func(http.ResponseWriter, *http.Request)) {
	if af.Mode != FailBeforeApply {
		rec := httptest.NewRecorder()
		next(rec, r)
		s.log.Debug("injected fault after the request was applied", "service", service, "operation", op, "mode", af.Mode.String(), "status", rec.Code)
	}
	if af.Mode == ApplyThenReset {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		// Not hijackable (a recorded call): answer 500 instead.
	}
	writeInjectedError(w, service, op)
}

// writeInjectedError answers a retryable internal error in the service's
// own error format.
func writeInjectedError(w http.ResponseWriter, service, op string) {
	msg := fmt.Sprintf("injected fault on %s %s", service, op)
	switch service {
	case "dynamodb":
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":%q}`, msg)
	case "sqs":
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Query-Error", "InternalError;Receiver")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, `{"__type":"com.amazonaws.sqs#InternalError","message":%q}`, msg)
	default:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>%s</Message></Error>`,
			strings.ReplaceAll(msg, "<", "&lt;"))
	}
}
