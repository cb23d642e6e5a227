package sqsd

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/awslimit"
)

// Service limits, as documented for Amazon SQS (those the coordinator relies
// on come from package awslimit).
const (
	dedupInterval         = awslimit.SQSDedupInterval
	purgeInterval         = 60 * time.Second
	recreateDelay         = 60 * time.Second
	maxVisibility         = awslimit.SQSMaxVisibilityTimeout
	maxBatchEntries       = awslimit.SQSBatchMaxEntries
	maxPayloadBytes       = awslimit.SQSMaxMessageBytes // message and batch payload ceiling
	maxMessageAttributes  = 10
	maxIDLength           = awslimit.SQSMaxIDLength // MessageGroupId, MessageDeduplicationId
	receiptHandleRawBytes = 48
	sequenceBase          = uint64(18_000_000_000_000_000_000)
)

// message is one stored message. Time fields are absolute instants of the
// queue's clock.
type message struct {
	id          string
	body        string
	md5Body     string
	attrs       map[string]attributeValue
	sysAttrs    map[string]attributeValue
	md5SysAttrs string
	groupID     string
	dedupID     string
	sequence    string
	sentAt      time.Time
	delayUntil  time.Time // not receivable before (DelaySeconds)
	hiddenUntil time.Time // in flight until (visibility timeout)
	receives    int
	firstRecvAt time.Time
	lastRecvAt  time.Time
	handle      string   // most recent receipt handle
	handles     []string // every receipt handle ever issued, for cleanup
	dlqSource   string   // ARN of the queue it was redriven from
}

func (m *message) inFlight(now time.Time) bool { return now.Before(m.hiddenUntil) }
func (m *message) delayed(now time.Time) bool  { return now.Before(m.delayUntil) }
func (m *message) visible(now time.Time) bool  { return !m.inFlight(now) && !m.delayed(now) }

// dedupRecord remembers an accepted deduplication id for the interval.
type dedupRecord struct {
	messageID string
	sequence  string
	expires   time.Time
}

// delivery is a snapshot of a received message, safe to read after the
// queue lock is released.
type delivery struct {
	message
	receiptHandle string
}

// queue is the pure model of one SQS queue. It is not safe for concurrent
// use; the Server serialises access.
type queue struct {
	name      string
	url       string
	arn       string
	fifo      bool
	createdAt time.Time
	updatedAt time.Time
	lastPurge time.Time
	attrs     map[string]string // settable attributes, defaults applied
	redrive   *redrivePolicy
	messages  []*message // in send order (sequence order for FIFO)
	handles   map[string]*message
	dedup     map[string]dedupRecord
	nextSeq   uint64
}

func newQueue(name, url, arn string, attrs map[string]string, now time.Time) *queue {
	return &queue{
		name:      name,
		url:       url,
		arn:       arn,
		fifo:      attrs[attrFifoQueue] == "true",
		createdAt: now,
		updatedAt: now,
		attrs:     attrs,
		handles:   map[string]*message{},
		dedup:     map[string]dedupRecord{},
	}
}

func (q *queue) intAttr(name string) int {
	n, _ := strconv.Atoi(q.attrs[name])
	return n
}

func (q *queue) seconds(name string) time.Duration {
	return time.Duration(q.intAttr(name)) * time.Second
}

// expire drops messages older than the retention period and forgets
// deduplication ids older than the deduplication interval.
func (q *queue) expire(now time.Time) {
	retention := q.seconds(attrMessageRetentionPeriod)
	q.messages = slices.DeleteFunc(q.messages, func(m *message) bool {
		if now.Sub(m.sentAt) < retention {
			return false
		}
		q.forgetHandles(m)
		return true
	})
	for id, rec := range q.dedup {
		if !now.Before(rec.expires) {
			delete(q.dedup, id)
		}
	}
}

func (q *queue) forgetHandles(m *message) {
	for _, h := range m.handles {
		delete(q.handles, h)
	}
}

func (q *queue) remove(m *message) {
	q.forgetHandles(m)
	if i := slices.Index(q.messages, m); i >= 0 {
		q.messages = slices.Delete(q.messages, i, i+1)
	}
}

// sendInput is a validated-by-shape send request.
type sendInput struct {
	body     *string
	delay    *int
	attrs    map[string]attributeValue
	sysAttrs map[string]attributeValue
	groupID  *string
	dedupID  *string
}

// sendResult is what SendMessage reports.
type sendResult struct {
	messageID   string
	md5Body     string
	md5Attrs    string
	md5SysAttrs string
	sequence    string
}

// payloadSize is the size SQS counts against MaximumMessageSize: body plus
// each attribute's name, type and value.
func payloadSize(body string, attrs map[string]attributeValue) int {
	n := len(body)
	for name, v := range attrs {
		n += len(name) + len(v.DataType)
		if v.StringValue != nil {
			n += len(*v.StringValue)
		}
		n += len(v.BinaryValue)
	}
	return n
}

// send validates and enqueues a message (or recognises a duplicate).
func (q *queue) send(in sendInput, now time.Time) (sendResult, error) {
	q.expire(now)
	if err := q.validateSend(in); err != nil {
		return sendResult{}, err
	}
	body := *in.body
	res := sendResult{
		md5Body:     md5Hex([]byte(body)),
		md5Attrs:    md5OfAttributes(in.attrs),
		md5SysAttrs: md5OfAttributes(in.sysAttrs),
	}
	m := &message{
		body:        body,
		md5Body:     res.md5Body,
		attrs:       in.attrs,
		sysAttrs:    in.sysAttrs,
		md5SysAttrs: res.md5SysAttrs,
		sentAt:      now,
		delayUntil:  now.Add(q.sendDelay(in.delay)),
	}
	if in.groupID != nil {
		m.groupID = *in.groupID
	}
	var key string
	if q.fifo {
		m.dedupID = q.dedupID(in)
		key = q.dedupKey(m.groupID, m.dedupID)
		if rec, dup := q.dedup[key]; dup {
			res.messageID, res.sequence = rec.messageID, rec.sequence
			return res, nil
		}
		m.sequence = q.nextSequence()
	}
	m.id = newUUID()
	if q.fifo {
		q.dedup[key] = dedupRecord{messageID: m.id, sequence: m.sequence, expires: now.Add(dedupInterval)}
	}
	q.messages = append(q.messages, m)
	res.messageID, res.sequence = m.id, m.sequence
	return res, nil
}

func (q *queue) sendDelay(delay *int) time.Duration {
	if delay != nil {
		return time.Duration(*delay) * time.Second
	}
	return q.seconds(attrDelaySeconds)
}

func (q *queue) nextSequence() string {
	q.nextSeq++
	return fmt.Sprintf("%020d", sequenceBase+q.nextSeq)
}

// dedupID is the explicit id or, with content-based deduplication, the
// SHA-256 of the body.
func (q *queue) dedupID(in sendInput) string {
	if in.dedupID != nil {
		return *in.dedupID
	}
	sum := sha256.Sum256([]byte(*in.body))
	return hex.EncodeToString(sum[:])
}

func (q *queue) dedupKey(groupID, dedupID string) string {
	if q.attrs[attrDeduplicationScope] == "messageGroup" {
		return groupID + "\x00" + dedupID
	}
	return dedupID
}

func (q *queue) validateSend(in sendInput) error {
	if in.body == nil || *in.body == "" {
		return errMissingParameter("MessageBody")
	}
	if !validMessageText(*in.body) {
		return errInvalidMessageContents()
	}
	if err := validateMessageAttributes(in.attrs); err != nil {
		return err
	}
	if err := validateSystemAttributes(in.sysAttrs); err != nil {
		return err
	}
	if max := q.intAttr(attrMaximumMessageSize); payloadSize(*in.body, in.attrs) > max {
		return errInvalidParameterValue("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", max)
	}
	if in.delay != nil && (*in.delay < 0 || *in.delay > 900) {
		return errInvalidParameterValue("Value %d for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.", *in.delay)
	}
	if q.fifo {
		return q.validateFIFOSend(in)
	}
	if in.dedupID != nil {
		return errParamNotForQueueType("MessageDeduplicationId", *in.dedupID)
	}
	if in.groupID != nil {
		return validateMessageID("MessageGroupId", *in.groupID)
	}
	return nil
}

func (q *queue) validateFIFOSend(in sendInput) error {
	if in.delay != nil && *in.delay != 0 {
		return errParamNotForQueueType("DelaySeconds", strconv.Itoa(*in.delay))
	}
	if in.groupID == nil {
		return errMissingParameter("MessageGroupId")
	}
	if err := validateMessageID("MessageGroupId", *in.groupID); err != nil {
		return err
	}
	if in.dedupID == nil {
		if q.attrs[attrContentBasedDeduplication] != "true" {
			return errInvalidParameterValue("The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly")
		}
		return nil
	}
	return validateMessageID("MessageDeduplicationId", *in.dedupID)
}

// validateMessageID checks MessageGroupId / MessageDeduplicationId: 1-128
// alphanumeric or punctuation characters.
func validateMessageID(param, v string) error {
	if v == "" || len(v) > maxIDLength {
		return errInvalidParameterValue("Value %s for parameter %s is invalid. Reason: %s can only include alphanumeric and punctuation characters. 1 to 128 in length.", v, param, param)
	}
	for _, r := range v {
		if r < '!' || r > '~' {
			return errInvalidParameterValue("Value %s for parameter %s is invalid. Reason: %s can only include alphanumeric and punctuation characters. 1 to 128 in length.", v, param, param)
		}
	}
	return nil
}

// receiveInput carries the validated ReceiveMessage parameters.
type receiveInput struct {
	max        int
	visibility *time.Duration
}

// redriveFunc moves m to the dead-letter queue; false when it cannot.
type redriveFunc func(m *message) bool

// receive hands out up to in.max visible messages, making them in flight.
// Messages whose receive count already reached the redrive policy's
// maxReceiveCount are moved to the dead-letter queue instead.
func (q *queue) receive(in receiveInput, now time.Time, redrive redriveFunc) []delivery {
	q.expire(now)
	visibility := q.seconds(attrVisibilityTimeout)
	if in.visibility != nil {
		visibility = *in.visibility
	}
	blocked := q.blockedGroups(now)
	var out []delivery
	for _, m := range slices.Clone(q.messages) {
		if len(out) == in.max {
			break
		}
		if q.fifo && blocked[m.groupID] {
			continue
		}
		if !m.visible(now) {
			if q.fifo {
				blocked[m.groupID] = true // later messages of the group must wait
			}
			continue
		}
		if q.shouldRedrive(m) && redrive != nil && redrive(m) {
			q.remove(m)
			continue
		}
		out = append(out, q.deliver(m, now, visibility))
	}
	return out
}

// blockedGroups are the FIFO message groups with a message in flight.
func (q *queue) blockedGroups(now time.Time) map[string]bool {
	blocked := map[string]bool{}
	if !q.fifo {
		return blocked
	}
	for _, m := range q.messages {
		if m.inFlight(now) {
			blocked[m.groupID] = true
		}
	}
	return blocked
}

func (q *queue) shouldRedrive(m *message) bool {
	return q.redrive != nil && m.receives >= q.redrive.maxReceiveCount
}

func (q *queue) deliver(m *message, now time.Time, visibility time.Duration) delivery {
	m.receives++
	if m.receives == 1 {
		m.firstRecvAt = now
	}
	m.lastRecvAt = now
	m.hiddenUntil = now.Add(visibility)
	m.handle = newReceiptHandle()
	m.handles = append(m.handles, m.handle)
	q.handles[m.handle] = m
	return delivery{message: *m, receiptHandle: m.handle}
}

// accept enqueues a message redriven from another queue, keeping its id,
// body, attributes, group and original send time.
func (q *queue) accept(src *message, sourceARN string, now time.Time) {
	m := &message{
		id:          src.id,
		body:        src.body,
		md5Body:     src.md5Body,
		attrs:       src.attrs,
		sysAttrs:    src.sysAttrs,
		md5SysAttrs: src.md5SysAttrs,
		groupID:     src.groupID,
		dedupID:     src.dedupID,
		sentAt:      src.sentAt,
		dlqSource:   sourceARN,
	}
	if q.fifo {
		m.sequence = q.nextSequence()
	}
	q.messages = append(q.messages, m)
}

// lookupHandle resolves a receipt handle. Malformed handles are an error;
// well-formed but unknown ones (message already deleted) yield nil.
func (q *queue) lookupHandle(handle string) (*message, error) {
	if !wellFormedHandle(handle) {
		return nil, errReceiptHandleIsInvalid(handle, "The receipt handle is malformed.")
	}
	return q.handles[handle], nil
}

// deleteMessage deletes the message the handle was issued for if it is the
// message's most recent handle. A stale handle (the message was received
// again since) succeeds without deleting, as the SQS documentation allows.
func (q *queue) deleteMessage(handle string) error {
	m, err := q.lookupHandle(handle)
	if err != nil || m == nil {
		return err
	}
	if m.handle == handle {
		q.remove(m)
	}
	return nil
}

// changeVisibility resets the visibility timeout of an in-flight message,
// counted from now.
func (q *queue) changeVisibility(handle string, timeout int, now time.Time) error {
	if timeout < 0 || timeout > int(maxVisibility/time.Second) {
		return errInvalidParameterValue("Value %d for parameter VisibilityTimeout is invalid. Reason: VisibilityTimeout must be an integer between 0 and 43200.", timeout)
	}
	m, err := q.lookupHandle(handle)
	if err != nil {
		return err
	}
	if m == nil || m.handle != handle {
		return errReceiptHandleIsInvalid(handle, "The receipt handle has expired.")
	}
	if !m.inFlight(now) {
		return errMessageNotInflight()
	}
	until := now.Add(time.Duration(timeout) * time.Second)
	if until.Sub(m.lastRecvAt) > maxVisibility {
		return errInvalidParameterValue("Value %d for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]", timeout)
	}
	m.hiddenUntil = until
	return nil
}

// purge deletes every message; allowed once per 60 seconds.
func (q *queue) purge(now time.Time) error {
	if !q.lastPurge.IsZero() && now.Sub(q.lastPurge) < purgeInterval {
		return errPurgeInProgress(q.arn)
	}
	q.lastPurge = now
	q.messages = nil
	q.handles = map[string]*message{}
	return nil
}

// counts returns (visible, in flight, delayed).
func (q *queue) counts(now time.Time) (visible, inFlight, delayed int) {
	q.expire(now)
	for _, m := range q.messages {
		switch {
		case m.inFlight(now):
			inFlight++
		case m.delayed(now):
			delayed++
		default:
			visible++
		}
	}
	return visible, inFlight, delayed
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func newReceiptHandle() string {
	b := make([]byte, receiptHandleRawBytes)
	_, _ = rand.Read(b)
	return "AQEB" + base64.RawURLEncoding.EncodeToString(b)
}

func wellFormedHandle(h string) bool {
	raw, ok := strings.CutPrefix(h, "AQEB")
	if !ok {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	return err == nil && len(b) == receiptHandleRawBytes
}

// validMessageText reports whether s only has characters SQS accepts:
// #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
func validMessageText(s string) bool {
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}
