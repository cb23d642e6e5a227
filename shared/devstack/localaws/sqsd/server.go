package sqsd

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	defaultRegion    = "us-east-1"
	defaultAccountID = "000000000000"
	maxRequestBytes  = 8 << 20
	pollInterval     = 25 * time.Millisecond
	maxWaitSeconds   = 20
	maxListResults   = 1000
)

// Options configures a Server.
type Options struct {
	Region    string           // default "us-east-1"
	AccountID string           // default "000000000000"
	BaseURL   func() string    // e.g. "http://127.0.0.1:4566"; QueueUrl = BaseURL()+"/"+AccountID+"/"+name
	Now       func() time.Time // clock; default time.Now
}

// Server is an in-process Amazon SQS endpoint speaking the AWS JSON 1.0
// protocol. It is safe for concurrent use.
type Server struct {
	opts Options

	mu      sync.Mutex
	queues  map[string]*queue    // by name
	deleted map[string]time.Time // name -> deletion time, for QueueDeletedRecently
	wake    chan struct{}        // closed (and replaced) when messages may have become receivable
}

// New returns a Server with no queues.
func New(opts Options) *Server {
	if opts.Region == "" {
		opts.Region = defaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = defaultAccountID
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BaseURL == nil {
		opts.BaseURL = func() string { return "http://localhost:4566" }
	}
	return &Server{
		opts:    opts,
		queues:  map[string]*queue{},
		deleted: map[string]time.Time{},
		wake:    make(chan struct{}),
	}
}

// Handles reports whether r is an SQS JSON-protocol request.
func (s *Server) Handles(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get(headerTarget), targetPrefix)
}

// ServeHTTP handles one AWS JSON 1.0 request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := newUUID()
	if r.Method != http.MethodPost {
		writeError(w, requestID, errMethodNotAllowed(r.Method))
		return
	}
	target := r.Header.Get(headerTarget)
	op, ok := strings.CutPrefix(target, targetPrefix)
	if !ok {
		writeError(w, requestID, errUnknownOperation(target))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		writeError(w, requestID, errSerialization(err))
		return
	}
	out, err := s.dispatch(r.Context(), op, body)
	if err != nil {
		writeError(w, requestID, err)
		return
	}
	writeResult(w, requestID, out)
}

// call decodes the operation input and runs fn on it.
func call[T any](body []byte, fn func(*T) (any, error)) (any, error) {
	in, err := decodeInput[T](body)
	if err != nil {
		return nil, err
	}
	return fn(in)
}

func (s *Server) dispatch(ctx context.Context, op string, body []byte) (any, error) {
	switch op {
	case "CreateQueue":
		return call(body, s.createQueue)
	case "GetQueueUrl":
		return call(body, s.getQueueURL)
	case "ListQueues":
		return call(body, s.listQueues)
	case "DeleteQueue":
		return call(body, s.deleteQueue)
	case "GetQueueAttributes":
		return call(body, s.getQueueAttributes)
	case "SetQueueAttributes":
		return call(body, s.setQueueAttributes)
	case "PurgeQueue":
		return call(body, s.purgeQueue)
	case "SendMessage":
		return call(body, s.sendMessage)
	case "SendMessageBatch":
		return call(body, s.sendMessageBatch)
	case "ReceiveMessage":
		return call(body, func(in *receiveMessageInput) (any, error) { return s.receiveMessage(ctx, in) })
	case "DeleteMessage":
		return call(body, s.deleteMessage)
	case "DeleteMessageBatch":
		return call(body, s.deleteMessageBatch)
	case "ChangeMessageVisibility":
		return call(body, s.changeMessageVisibility)
	case "ChangeMessageVisibilityBatch":
		return call(body, s.changeMessageVisibilityBatch)
	case "AddPermission", "RemovePermission", "TagQueue", "UntagQueue", "ListQueueTags",
		"ListDeadLetterSourceQueues", "StartMessageMoveTask", "CancelMessageMoveTask", "ListMessageMoveTasks":
		return nil, newError("UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation",
			"%s is not supported by the local SQS server.", op)
	default:
		return nil, errUnknownOperation(targetPrefix + op)
	}
}

// notify wakes long-polling receivers. Callers hold s.mu.
func (s *Server) notify() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Server) queueURL(name string) string {
	return strings.TrimRight(s.opts.BaseURL(), "/") + "/" + s.opts.AccountID + "/" + name
}

func (s *Server) queueARN(name string) string {
	return "arn:aws:sqs:" + s.opts.Region + ":" + s.opts.AccountID + ":" + name
}

// lookup resolves a QueueUrl by its last path segment, whatever its host.
// Callers hold s.mu.
func (s *Server) lookup(queueURL *string) (*queue, error) {
	if queueURL == nil || *queueURL == "" {
		return nil, errMissingParameter("QueueUrl")
	}
	p := *queueURL
	if u, err := url.Parse(p); err == nil {
		p = u.Path
	}
	q, ok := s.queues[path.Base(strings.TrimRight(p, "/"))]
	if !ok {
		return nil, errQueueDoesNotExist()
	}
	return q, nil
}

// lookupARN finds a queue of this region and account by ARN. Callers hold s.mu.
func (s *Server) lookupARN(arn string) *queue {
	prefix := "arn:aws:sqs:" + s.opts.Region + ":" + s.opts.AccountID + ":"
	name, ok := strings.CutPrefix(arn, prefix)
	if !ok {
		return nil
	}
	return s.queues[name]
}

// resolveRedrive checks the dead-letter target of a normalized RedrivePolicy
// value. Callers hold s.mu.
func (s *Server) resolveRedrive(value string, fifo bool) (*redrivePolicy, error) {
	if value == "" {
		return nil, nil
	}
	rp, err := parseRedrivePolicy(value)
	if err != nil {
		return nil, err
	}
	dlq := s.lookupARN(rp.deadLetterTargetArn)
	if dlq == nil {
		return nil, errInvalidParameterValue("Value %s for parameter RedrivePolicy is invalid. Reason: Dead letter target does not exist.", value)
	}
	if dlq.fifo != fifo {
		return nil, errInvalidParameterValue("Value %s for parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be same type of queue as the source..", value)
	}
	return rp, nil
}

func (s *Server) createQueue(in *createQueueInput) (any, error) {
	name := deref(in.QueueName)
	if name == "" {
		return nil, errMissingParameter("QueueName")
	}
	fifo := strings.EqualFold(in.Attributes[attrFifoQueue], "true")
	if err := validateQueueName(name, fifo); err != nil {
		return nil, err
	}
	given, err := normalizeQueueAttributes(in.Attributes, fifo, true)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	if existing, ok := s.queues[name]; ok {
		return s.existingQueue(existing, given)
	}
	if at, ok := s.deleted[name]; ok && now.Sub(at) < recreateDelay {
		return nil, errQueueDeletedRecently()
	}
	rp, err := s.resolveRedrive(given[attrRedrivePolicy], fifo)
	if err != nil {
		return nil, err
	}
	attrs := defaultAttributes(fifo)
	maps.Copy(attrs, given)
	applyEncryption(attrs, given)
	if rp == nil {
		delete(attrs, attrRedrivePolicy)
	}
	q := newQueue(name, s.queueURL(name), s.queueARN(name), attrs, now)
	q.redrive = rp
	s.queues[name] = q
	delete(s.deleted, name)
	return queueURLOutput{QueueUrl: q.url}, nil
}

// existingQueue makes CreateQueue idempotent: every given attribute must
// equal the existing queue's value.
func (s *Server) existingQueue(q *queue, given map[string]string) (any, error) {
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if q.attrs[name] != given[name] {
			return nil, errQueueNameExists(name)
		}
	}
	return queueURLOutput{QueueUrl: s.queueURL(q.name)}, nil
}

func (s *Server) getQueueURL(in *getQueueURLInput) (any, error) {
	name := deref(in.QueueName)
	if name == "" {
		return nil, errMissingParameter("QueueName")
	}
	if owner := deref(in.QueueOwnerAWSAccountId); owner != "" && owner != s.opts.AccountID {
		return nil, errQueueDoesNotExist()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queues[name]; !ok {
		return nil, errQueueDoesNotExist()
	}
	return queueURLOutput{QueueUrl: s.queueURL(name)}, nil
}

func (s *Server) listQueues(in *listQueuesInput) (any, error) {
	limit := maxListResults
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > maxListResults {
			return nil, errInvalidParameterValue("Value %d for parameter MaxResults is invalid. Reason: MaxResults must be an integer between 1 and 1000.", *in.MaxResults)
		}
		limit = *in.MaxResults
	}
	after, err := decodeNextToken(in.NextToken)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.queues))
	s.mu.Unlock()
	var out listQueuesOutput
	for _, name := range names {
		if !strings.HasPrefix(name, in.QueueNamePrefix) || name <= after {
			continue
		}
		if len(out.QueueUrls) == limit {
			if in.MaxResults != nil {
				out.NextToken = base64.RawURLEncoding.EncodeToString([]byte(path.Base(out.QueueUrls[limit-1])))
			}
			break
		}
		out.QueueUrls = append(out.QueueUrls, s.queueURL(name))
	}
	return out, nil
}

func decodeNextToken(token *string) (string, error) {
	if token == nil || *token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(*token)
	if err != nil {
		return "", errInvalidParameterValue("Invalid NextToken value.")
	}
	return string(b), nil
}

func (s *Server) deleteQueue(in *queueURLInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	delete(s.queues, q.name)
	s.deleted[q.name] = s.opts.Now()
	s.notify()
	return emptyOutput{}, nil
}

func (s *Server) getQueueAttributes(in *getQueueAttributesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	all := s.queueAttributes(q)
	known := settableAttributes()
	out := map[string]string{}
	for _, name := range in.AttributeNames {
		if name == attrAll {
			maps.Copy(out, all)
			continue
		}
		if _, ok := known[name]; !ok && !slices.Contains(readOnlyAttributes(), name) {
			return nil, errInvalidAttributeName(name)
		}
		if v, ok := all[name]; ok {
			out[name] = v
		}
	}
	return attributesOutput{Attributes: out}, nil
}

// queueAttributes is every attribute GetQueueAttributes(All) returns.
func (s *Server) queueAttributes(q *queue) map[string]string {
	now := s.opts.Now()
	visible, inFlight, delayed := q.counts(now)
	out := maps.Clone(q.attrs)
	out[attrApproximateNumberOfMessages] = strconv.Itoa(visible)
	out[attrApproximateNotVisible] = strconv.Itoa(inFlight)
	out[attrApproximateDelayed] = strconv.Itoa(delayed)
	out[attrCreatedTimestamp] = strconv.FormatInt(q.createdAt.Unix(), 10)
	out[attrLastModifiedTimestamp] = strconv.FormatInt(q.updatedAt.Unix(), 10)
	out[attrQueueArn] = q.arn
	return out
}

func (s *Server) setQueueAttributes(in *setQueueAttributesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if len(in.Attributes) == 0 {
		return nil, errMissingParameter("Attribute.Name")
	}
	given, err := normalizeQueueAttributes(in.Attributes, q.fifo, false)
	if err != nil {
		return nil, err
	}
	if v, ok := given[attrRedrivePolicy]; ok {
		rp, err := s.resolveRedrive(v, q.fifo)
		if err != nil {
			return nil, err
		}
		q.redrive = rp
	}
	for name, v := range given {
		if v == "" && (name == attrRedrivePolicy || name == attrPolicy || name == attrRedriveAllowPolicy || name == attrKmsMasterKeyID) {
			delete(q.attrs, name)
			continue
		}
		q.attrs[name] = v
	}
	applyEncryption(q.attrs, given)
	q.updatedAt = s.opts.Now()
	s.notify()
	return emptyOutput{}, nil
}

func (s *Server) purgeQueue(in *queueURLInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return emptyOutput{}, q.purge(s.opts.Now())
}

func toSendInput(in *sendMessageInput) sendInput {
	return sendInput{
		body:     in.MessageBody,
		delay:    in.DelaySeconds,
		attrs:    in.MessageAttributes,
		sysAttrs: in.MessageSystemAttributes,
		groupID:  in.MessageGroupId,
		dedupID:  in.MessageDeduplicationId,
	}
}

func toSendOutput(r sendResult) sendMessageOutput {
	return sendMessageOutput{
		MessageId:                    r.messageID,
		MD5OfMessageBody:             r.md5Body,
		MD5OfMessageAttributes:       r.md5Attrs,
		MD5OfMessageSystemAttributes: r.md5SysAttrs,
		SequenceNumber:               r.sequence,
	}
}

func (s *Server) sendMessage(in *sendMessageInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	res, err := q.send(toSendInput(in), s.opts.Now())
	if err != nil {
		return nil, err
	}
	s.notify()
	return toSendOutput(res), nil
}

// validateBatch applies the request-level batch rules shared by all batch
// operations.
func validateBatch(ids []string, entryType string) error {
	switch {
	case len(ids) == 0:
		return errEmptyBatch(entryType)
	case len(ids) > maxBatchEntries:
		return errTooManyEntries(len(ids))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || len(id) > 80 || strings.IndexFunc(id, notNameRune) >= 0 {
			return errInvalidBatchEntryID()
		}
		if seen[id] {
			return errBatchIDsNotDistinct(id)
		}
		seen[id] = true
	}
	return nil
}

func entryIDs[E any](entries []E, id func(E) string) []string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = id(e)
	}
	return ids
}

func failedEntry(id string, err error) batchErrorEntry {
	var ae *apiError
	if !errors.As(err, &ae) {
		return batchErrorEntry{Id: id, Code: "InternalError", Message: err.Error()}
	}
	return batchErrorEntry{Id: id, Code: ae.queryCode, Message: ae.message, SenderFault: ae.status < http.StatusInternalServerError}
}

func (s *Server) sendMessageBatch(in *sendMessageBatchInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ids := entryIDs(in.Entries, func(e sendBatchEntry) string { return e.Id })
	if err := validateBatch(ids, "SendMessageBatchRequestEntry"); err != nil {
		return nil, err
	}
	total := 0
	for _, e := range in.Entries {
		total += payloadSize(deref(e.MessageBody), e.MessageAttributes)
	}
	if total > maxPayloadBytes {
		return nil, errBatchTooLong(total)
	}
	out := sendMessageBatchOutput{Successful: []sendBatchResultEntry{}, Failed: []batchErrorEntry{}}
	now := s.opts.Now()
	for _, e := range in.Entries {
		res, err := q.send(toSendInput(&e.sendMessageInput), now)
		if err != nil {
			out.Failed = append(out.Failed, failedEntry(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, sendBatchResultEntry{Id: e.Id, sendMessageOutput: toSendOutput(res)})
	}
	s.notify()
	return out, nil
}

// receiveRequest is a validated ReceiveMessage request.
type receiveRequest struct {
	receiveInput
	wait             time.Duration
	systemNames      []string
	messageAttrNames []string
}

func (s *Server) parseReceive(q *queue, in *receiveMessageInput) (receiveRequest, error) {
	req := receiveRequest{
		receiveInput:     receiveInput{max: 1},
		wait:             q.seconds(attrReceiveMessageWaitTime),
		systemNames:      append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...),
		messageAttrNames: in.MessageAttributeNames,
	}
	if n := in.MaxNumberOfMessages; n != nil {
		if *n < 1 || *n > maxBatchEntries {
			return req, errInvalidParameterValue("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", *n)
		}
		req.max = *n
	}
	if v := in.VisibilityTimeout; v != nil {
		if *v < 0 || *v > int(maxVisibility/time.Second) {
			return req, errInvalidParameterValue("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *v)
		}
		d := time.Duration(*v) * time.Second
		req.visibility = &d
	}
	if w := in.WaitTimeSeconds; w != nil {
		if *w < 0 || *w > maxWaitSeconds {
			return req, errInvalidParameterValue("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *w)
		}
		req.wait = time.Duration(*w) * time.Second
	}
	return req, nil
}

// receiveMessage long-polls: it returns as soon as at least one message is
// delivered, when the wait time elapses, or when the request is cancelled.
func (s *Server) receiveMessage(ctx context.Context, in *receiveMessageInput) (any, error) {
	s.mu.Lock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	req, err := s.parseReceive(q, in)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(req.wait)
	defer deadline.Stop()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		out, wake, err := s.tryReceive(in.QueueUrl, req)
		if err != nil || len(out.Messages) > 0 || req.wait == 0 {
			return out, err
		}
		select {
		case <-ctx.Done():
			return receiveMessageOutput{}, nil
		case <-deadline.C:
			return receiveMessageOutput{}, nil
		case <-wake:
		case <-ticker.C:
		}
	}
}

// tryReceive makes one receive attempt and returns the channel that signals
// the next state change.
func (s *Server) tryReceive(queueURL *string, req receiveRequest) (receiveMessageOutput, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(queueURL)
	if err != nil {
		return receiveMessageOutput{}, nil, err
	}
	now := s.opts.Now()
	moved := false
	redrive := func(m *message) bool {
		dlq := s.lookupARN(q.redrive.deadLetterTargetArn)
		if dlq == nil || dlq.fifo != q.fifo {
			return false
		}
		dlq.accept(m, q.arn, now)
		moved = true
		return true
	}
	deliveries := q.receive(req.receiveInput, now, redrive)
	if moved {
		s.notify()
	}
	var out receiveMessageOutput
	for _, d := range deliveries {
		out.Messages = append(out.Messages, s.renderMessage(q, d, req))
	}
	return out, s.wake, nil
}

func (s *Server) renderMessage(q *queue, d delivery, req receiveRequest) messageOutput {
	attrs := selectMessageAttributes(d.attrs, req.messageAttrNames)
	return messageOutput{
		MessageId:              d.id,
		ReceiptHandle:          d.receiptHandle,
		MD5OfBody:              d.md5Body,
		Body:                   d.body,
		Attributes:             s.systemAttributes(q, d, req.systemNames),
		MD5OfMessageAttributes: md5OfAttributes(attrs),
		MessageAttributes:      attrs,
	}
}

// systemAttributes renders the requested message system attributes.
func (s *Server) systemAttributes(q *queue, d delivery, names []string) map[string]string {
	if len(names) == 0 {
		return nil
	}
	avail := map[string]string{
		"SenderId":                         s.opts.AccountID,
		"SentTimestamp":                    millis(d.sentAt),
		"ApproximateReceiveCount":          strconv.Itoa(d.receives),
		"ApproximateFirstReceiveTimestamp": millis(d.firstRecvAt),
	}
	if d.groupID != "" {
		avail["MessageGroupId"] = d.groupID
	}
	if q.fifo {
		avail["MessageDeduplicationId"] = d.dedupID
		avail["SequenceNumber"] = d.sequence
	}
	if tr, ok := d.sysAttrs["AWSTraceHeader"]; ok {
		avail["AWSTraceHeader"] = deref(tr.StringValue)
	}
	if d.dlqSource != "" {
		avail["DeadLetterQueueSourceArn"] = d.dlqSource
	}
	out := map[string]string{}
	for _, n := range names {
		if n == attrAll {
			return avail
		}
		if v, ok := avail[n]; ok {
			out[n] = v
		}
	}
	return out
}

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func (s *Server) deleteMessage(in *deleteMessageInput) (any, error) {
	if in.ReceiptHandle == nil {
		return nil, errMissingParameter("ReceiptHandle")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return emptyOutput{}, q.deleteMessage(*in.ReceiptHandle)
}

func (s *Server) deleteMessageBatch(in *deleteMessageBatchInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ids := entryIDs(in.Entries, func(e deleteBatchEntry) string { return e.Id })
	if err := validateBatch(ids, "DeleteMessageBatchRequestEntry"); err != nil {
		return nil, err
	}
	out := batchOutput{Successful: []idEntry{}, Failed: []batchErrorEntry{}}
	for _, e := range in.Entries {
		if err := q.deleteMessage(e.ReceiptHandle); err != nil {
			out.Failed = append(out.Failed, failedEntry(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, idEntry{Id: e.Id})
	}
	return out, nil
}

func (s *Server) changeMessageVisibility(in *changeVisibilityInput) (any, error) {
	switch {
	case in.ReceiptHandle == nil:
		return nil, errMissingParameter("ReceiptHandle")
	case in.VisibilityTimeout == nil:
		return nil, errMissingParameter("VisibilityTimeout")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := q.changeVisibility(*in.ReceiptHandle, *in.VisibilityTimeout, s.opts.Now()); err != nil {
		return nil, err
	}
	s.notify()
	return emptyOutput{}, nil
}

func (s *Server) changeMessageVisibilityBatch(in *changeVisibilityBatchInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	ids := entryIDs(in.Entries, func(e changeVisibilityBatchEntry) string { return e.Id })
	if err := validateBatch(ids, "ChangeMessageVisibilityBatchRequestEntry"); err != nil {
		return nil, err
	}
	out := batchOutput{Successful: []idEntry{}, Failed: []batchErrorEntry{}}
	now := s.opts.Now()
	for _, e := range in.Entries {
		var err error = errMissingParameter("VisibilityTimeout")
		if e.VisibilityTimeout != nil {
			err = q.changeVisibility(e.ReceiptHandle, *e.VisibilityTimeout, now)
		}
		if err != nil {
			out.Failed = append(out.Failed, failedEntry(e.Id, err))
			continue
		}
		out.Successful = append(out.Successful, idEntry{Id: e.Id})
	}
	s.notify()
	return out, nil
}
