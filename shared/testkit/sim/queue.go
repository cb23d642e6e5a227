package sim

import (
	"slices"
	"time"
)

// Queue is an in-memory SQS FIFO queue with the semantics the coordinator
// relies on: MessageGroupId ordering, a group blocked while its first
// message is in flight, a deduplication window (five minutes on the
// simulated clock), visibility timeouts with redelivery and receive counts,
// and redrive to a DLQ once a message was received maxReceive times.
// Delivery is at least once: the simulator may duplicate messages.
type Queue struct {
	Name       string
	Visibility time.Duration
	MaxReceive int
	msgs       []*Message // send order across all groups
	DLQ        []*Message
	dedup      map[string]int64 // dedup id -> window end (ms)
	seq        int
}

// Message is one queued message.
type Message struct {
	ID       int
	Group    string
	DedupID  string
	Body     []byte
	Receives int
	// invisible until this time (ms); a message received and not deleted
	// stays invisible (in flight) until then.
	InvisibleUntil int64
	Receipt        int
}

// DedupWindow is SQS FIFO's deduplication interval.
const DedupWindow = 5 * time.Minute

func newQueue(name string, vis time.Duration, maxReceive int) *Queue {
	return &Queue{Name: name, Visibility: vis, MaxReceive: maxReceive, dedup: map[string]int64{}}
}

// Send enqueues body unless dedupID was sent within the window (then it is
// accepted and dropped, as SQS does). An empty dedupID never collapses.
func (q *Queue) Send(nowMs int64, group, dedupID string, body []byte) bool {
	if dedupID != "" {
		if end, ok := q.dedup[dedupID]; ok && end > nowMs {
			return false
		}
		q.dedup[dedupID] = nowMs + DedupWindow.Milliseconds()
	}
	q.seq++
	q.msgs = append(q.msgs, &Message{ID: q.seq, Group: group, DedupID: dedupID, Body: slices.Clone(body)})
	return true
}

// Duplicate re-sends a copy of the i-th message (at-least-once delivery).
func (q *Queue) Duplicate(i int) *Message {
	m := q.msgs[i]
	q.seq++
	c := &Message{ID: q.seq, Group: m.Group, DedupID: m.DedupID, Body: slices.Clone(m.Body)}
	q.msgs = append(q.msgs, c)
	return c
}

// Len is the number of messages (visible or in flight), DLQ excluded.
func (q *Queue) Len() int { return len(q.msgs) }

// receivableGroups returns the groups whose first message is visible now,
// in first-message order.
func (q *Queue) receivableGroups(nowMs int64) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range q.msgs {
		if seen[m.Group] {
			continue
		}
		seen[m.Group] = true
		if m.InvisibleUntil <= nowMs {
			out = append(out, m.Group)
		}
	}
	return out
}

// Receivable reports whether some message can be received now.
func (q *Queue) Receivable(nowMs int64) bool { return len(q.receivableGroups(nowMs)) > 0 }

// NextVisible is the earliest time an in-flight message becomes visible (0: none in flight).
func (q *Queue) NextVisible(nowMs int64) int64 {
	var t int64
	for _, m := range q.msgs {
		if m.InvisibleUntil > nowMs && (t == 0 || m.InvisibleUntil < t) {
			t = m.InvisibleUntil
		}
	}
	return t
}

// Receive takes the first message of the pick-th receivable group (pick is
// reduced modulo their number), moving messages that exhausted their
// receives to the DLQ first. It returns a copy carrying the receipt.
func (q *Queue) Receive(nowMs int64, pick int) (Message, bool) {
	for {
		groups := q.receivableGroups(nowMs)
		if len(groups) == 0 {
			return Message{}, false
		}
		g := groups[pick%len(groups)]
		i := slices.IndexFunc(q.msgs, func(m *Message) bool { return m.Group == g })
		m := q.msgs[i]
		if m.Receives >= q.MaxReceive {
			q.DLQ = append(q.DLQ, m)
			q.msgs = slices.Delete(q.msgs, i, i+1)
			continue
		}
		m.Receives++
		m.Receipt++
		m.InvisibleUntil = nowMs + q.Visibility.Milliseconds()
		return *m, true
	}
}

// Delete removes a received message if receipt is its latest receipt (a
// stale receipt — the message was received again after its visibility
// timeout — leaves it in place).
func (q *Queue) Delete(id, receipt int) bool {
	i := slices.IndexFunc(q.msgs, func(m *Message) bool { return m.ID == id })
	if i < 0 || q.msgs[i].Receipt != receipt {
		return false
	}
	q.msgs = slices.Delete(q.msgs, i, i+1)
	return true
}
