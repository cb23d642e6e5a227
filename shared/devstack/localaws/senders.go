package localaws

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// SQS stamps every message with its sender (the SenderId attribute: the
// principal id of the identity that signed SendMessage; for an assumed
// role "<role id>:<session name>", and Lambda's session name is the
// function's name). Neither backend does that as SQS does: the embedded
// queue answers the account id, moto one constant for every message. So
// the stack, in front of either, records who signed each sent message and
// answers that as SenderId on receive, for the identities it knows (the
// functions', SetFunctionCredentials); any other message keeps the
// backend's value. The handoff's sender check relies on it
// (shared/lambda/handler: Senders).

// RoleID is the principal id the stack gives function fn's role, as IAM
// gives a role a unique id (AROA...).
func RoleID(fn string) string { return "AROALOCAL" + strings.ToUpper(fn) }

// SenderID is the SenderId of a message function fn sent: its role's id
// and a session name (the function).
func SenderID(fn string) string { return RoleID(fn) + ":" + fn }

// senderBook remembers the sender of every message sent through the stack.
type senderBook struct {
	// sending is held (shared) by every send until its message ids are
	// recorded; a receive takes it exclusively once after its answer, so
	// every message it got from a send still in flight is recorded first
	// (a message is visible before its send's answer is back).
	sending sync.RWMutex
	mu      sync.Mutex
	keys    map[string]string // access key -> SenderId
	by      map[string]string // message id -> SenderId
}

func (b *senderBook) learn(accessKey, senderID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keys == nil {
		b.keys, b.by = map[string]string{}, map[string]string{}
	}
	b.keys[accessKey] = senderID
}

// barrier returns once every send in flight has recorded its messages.
func (b *senderBook) barrier() {
	b.sending.Lock()
	defer b.sending.Unlock()
}

// sender is the SenderId of requests signed with accessKey ("" unknown).
func (b *senderBook) sender(accessKey string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.keys[accessKey]
}

// serveSQS passes an SQS request to next, recording the sender of sent
// messages and answering it on receive.
func (s *Stack) serveSQS(w http.ResponseWriter, r *http.Request, op string, next func(http.ResponseWriter, *http.Request)) {
	switch op {
	case "SendMessage", "SendMessageBatch":
		m := credentialRE.FindStringSubmatch(r.Header.Get("Authorization"))
		if m == nil {
			next(w, r)
			return
		}
		sender := s.senders.sender(m[1])
		if sender == "" {
			next(w, r)
			return
		}
		s.senders.sending.RLock()
		defer s.senders.sending.RUnlock()
		bw := &bufferedWriter{h: http.Header{}}
		next(bw, r)
		if bw.status == 0 || bw.status == http.StatusOK {
			var out struct {
				MessageId  string
				Successful []struct{ MessageId string }
			}
			if json.Unmarshal(bw.body.Bytes(), &out) == nil {
				s.senders.mu.Lock()
				if out.MessageId != "" {
					s.senders.by[out.MessageId] = sender
				}
				for _, e := range out.Successful {
					s.senders.by[e.MessageId] = sender
				}
				s.senders.mu.Unlock()
			}
		}
		bw.flush(w)
	case "ReceiveMessage":
		bw := &bufferedWriter{h: http.Header{}}
		next(bw, r)
		s.senders.barrier()
		if bw.status == 0 || bw.status == http.StatusOK {
			bw.body = *bytes.NewBuffer(s.senders.stamp(bw.body.Bytes()))
			bw.h.Set("Content-Length", strconv.Itoa(bw.body.Len()))
		}
		bw.flush(w)
	default:
		next(w, r)
	}
}

// stamp sets the SenderId attribute of every received message whose sender
// it knows (only where the attribute was asked for and answered).
func (b *senderBook) stamp(body []byte) []byte {
	var out map[string]json.RawMessage
	if json.Unmarshal(body, &out) != nil {
		return body
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(out["Messages"], &msgs) != nil || len(msgs) == 0 {
		return body
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	changed := false
	for _, m := range msgs {
		var id string
		var attrs map[string]string
		if json.Unmarshal(m["MessageId"], &id) != nil || json.Unmarshal(m["Attributes"], &attrs) != nil {
			continue
		}
		sender, ok := b.by[id]
		if _, asked := attrs["SenderId"]; !ok || !asked {
			continue
		}
		attrs["SenderId"] = sender
		m["Attributes"], _ = json.Marshal(attrs)
		changed = true
	}
	if !changed {
		return body
	}
	out["Messages"], _ = json.Marshal(msgs)
	stamped, err := json.Marshal(out)
	if err != nil {
		return body
	}
	return stamped
}

// bufferedWriter holds a response until it is rewritten.
type bufferedWriter struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.h }
func (b *bufferedWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *bufferedWriter) flush(w http.ResponseWriter) {
	for k, v := range b.h {
		w.Header()[k] = v
	}
	if b.status != 0 {
		w.WriteHeader(b.status)
	}
	_, _ = w.Write(b.body.Bytes())
}
