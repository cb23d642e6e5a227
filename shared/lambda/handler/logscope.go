package handler

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/searchfabric/bcc/shared/contract"
)

// Log scope: on a deployed function every log line carries the
// invocation's request id and the collection and task of the record being
// handled (Logs Insights discovers them as fields of Lambda's JSON log
// format), whichever code logs it: the use cases log through the logger
// they were built with, without the invocation's context. Lambda runs one
// invocation at a time per execution environment, and a batch's records
// one after another (Batch.walk), so one current scope per process is
// exactly the scope of every line it writes. The embedded stack runs
// invocations concurrently in one process and so uses no scoped handler
// (ScopedHandler is Boot's, on Lambda only): there the lines carry what
// their code gives them.

// Log keys of the scope.
const (
	LogRequestID  = "request_id"
	LogCollection = "collection"
	LogTask       = "task"
)

// Scope is what the current invocation's lines carry.
type Scope struct{ RequestID, Collection, Task string }

// ScopedHandler adds the current Scope to every record (as LogRequestID,
// LogCollection and LogTask, empty when unknown), except a key the record
// or the logger already has.
type ScopedHandler struct {
	inner slog.Handler
	cur   *atomic.Pointer[Scope]
	has   map[string]bool // keys the logger's With attributes carry
}

// NewScopedHandler wraps inner.
func NewScopedHandler(inner slog.Handler) *ScopedHandler {
	h := &ScopedHandler{inner: inner, cur: &atomic.Pointer[Scope]{}, has: map[string]bool{}}
	h.cur.Store(&Scope{})
	return h
}

// Enabled is inner's.
func (h *ScopedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle adds the scope and hands the record on.
func (h *ScopedHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := h.cur.Load()
	present := map[string]bool{}
	r.Attrs(func(a slog.Attr) bool {
		present[a.Key] = true
		return true
	})
	for _, a := range []slog.Attr{slog.String(LogRequestID, sc.RequestID), slog.String(LogCollection, sc.Collection), slog.String(LogTask, sc.Task)} {
		if !present[a.Key] && !h.has[a.Key] {
			r.AddAttrs(a)
		}
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs keeps the scope.
func (h *ScopedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := map[string]bool{}
	for k := range h.has {
		has[k] = true
	}
	for _, a := range attrs {
		has[a.Key] = true
	}
	return &ScopedHandler{inner: h.inner.WithAttrs(attrs), cur: h.cur, has: has}
}

// WithGroup keeps the scope (its keys then land in the group).
func (h *ScopedHandler) WithGroup(name string) slog.Handler {
	return &ScopedHandler{inner: h.inner.WithGroup(name), cur: h.cur, has: h.has}
}

// Scope is the current scope.
func (h *ScopedHandler) Scope() Scope { return *h.cur.Load() }

// setScope changes the scope of log's handler when it is scoped (a no-op
// otherwise) and returns the change back.
func setScope(log *slog.Logger, f func(*Scope)) (undo func()) {
	h, ok := log.Handler().(*ScopedHandler)
	if !ok {
		return func() {}
	}
	old := h.cur.Load()
	next := *old
	f(&next)
	h.cur.Store(&next)
	return func() { h.cur.Store(old) }
}

// scopeInvocation starts an invocation's scope: its request id, no record.
func scopeInvocation(ctx context.Context, log *slog.Logger) (end func()) {
	id := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		id = lc.AwsRequestID
	}
	return setScope(log, func(s *Scope) { *s = Scope{RequestID: id} })
}

// scopeCollection scopes the lines of one collection's work (a head key).
func scopeCollection(log *slog.Logger, collection string) (end func()) {
	return setScope(log, func(s *Scope) { s.Collection, s.Task = collection, "" })
}

// scopeRecord scopes the lines of one SQS record: its collection (the
// FIFO message group, or the body's) and task (the body's task_id, else
// the deduplication id, the message's identity). The body is only peeked
// at, leniently: the handler decodes it strictly and rejects it if bad.
func scopeRecord(log *slog.Logger, r events.SQSMessage) (end func()) {
	if _, ok := log.Handler().(*ScopedHandler); !ok {
		return func() {}
	}
	var peek struct {
		TaskID     string `json:"task_id"`
		Collection string `json:"collection"`
	}
	_ = json.Unmarshal([]byte(r.Body), &peek)
	collection, task := groupOf(r), peek.TaskID
	if collection == "" || !contract.ValidCollection(collection) {
		collection = peek.Collection
	}
	if task == "" {
		task = r.Attributes["MessageDeduplicationId"]
	}
	return setScope(log, func(s *Scope) { s.Collection, s.Task = collection, task })
}
