package handler

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/handoff"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// Handoff handles completion batches from the handoff FIFO queue.
type Handoff struct {
	batch   Batch
	senders Senders
	uc      *handoff.Handoff
	metrics *metrics.Recorder
	out     io.Writer
	now     func() time.Time
	log     *slog.Logger
}

// NewHandoff returns the handoff handler.
func NewHandoff(uc *handoff.Handoff, m *metrics.Recorder, out io.Writer, now func() time.Time, log *slog.Logger) *Handoff {
	return &Handoff{uc: uc, metrics: m, out: out, now: now, log: log, batch: DefaultBatch()}
}

// WithBatch returns h walking its batches with b.
func (h *Handoff) WithBatch(b Batch) *Handoff {
	c := *h
	c.batch = b
	return &c
}

// Senders are, by function (resources.HandoffSenders), the unique ids of
// the roles that send to the handoff queue. SQS stamps every message with
// its sender (attribute SenderId: "<role id>:<session>" for a role), which
// no sender can choose: the handoff admits a rewrite completion only from
// compaction's role, any other completion only from GC's, a namespace
// release request only from the observer's (resources.HandoffSenderOf).
// The queue's policy admits only those roles; this check keeps a holder of
// one of them from sending another's kind. nil: no check (a handler a test
// wires by hand); empty: nothing is admitted (fail closed).
type Senders map[string]string

// admits says whether senderID is function fn's role.
func (s Senders) admits(fn, senderID string) bool {
	id := s[fn]
	return id != "" && (senderID == id || strings.HasPrefix(senderID, id+":"))
}

// WithSenders returns h checking each message's sender against s.
func (h *Handoff) WithSenders(s Senders) *Handoff {
	c := *h
	c.senders = s
	if c.senders == nil {
		c.senders = Senders{}
	}
	return &c
}

// sender refuses message m (with its decoded body) when its SenderId is not
// the role that sends its kind: counted (ForgedCompletions, Check sender),
// logged, never retried. It returns whether m was refused.
func (h *Handoff) sender(m events.SQSMessage, msg contract.HandoffMessage) bool {
	if h.senders == nil || !h.batch.Guards.HandoffSender {
		return false
	}
	var kind contract.TaskKind
	what := "namespace release request"
	if msg.Completion != nil {
		kind, what = msg.Completion.Kind, string(msg.Completion.Kind)+" completion of task "+msg.Completion.TaskID
	}
	want := resources.HandoffSenderOf(kind)
	got := m.Attributes["SenderId"]
	if h.senders.admits(want, got) {
		return false
	}
	h.metrics.AddDim("ForgedCompletions", "Check", handoff.CheckSender, 1)
	h.log.Error("handoff message refused: not sent by the role that sends its kind", "message_id", m.MessageId, "what", what,
		"sender", got, "want", want+" ("+h.senders[want]+")")
	return true
}

// Handle hands each completion off in order and reports partial batch
// failures: a completion whose owner call fails (a CCS or publisher
// outage for its collection) holds back only its own message group.
func (h *Handoff) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer scopeInvocation(ctx, h.log)()
	defer flushMetrics(h.metrics, h.out, h.now, h.log)
	return h.batch.walk(ctx, ev, h.log, h.metrics, func(m events.SQSMessage) error {
		msg, err := contract.DecodeHandoffMessage(m.MessageId, []byte(m.Body))
		if err != nil {
			h.metrics.Add("MalformedMessages", 1)
			h.log.Error("malformed handoff message; left for the DLQ", "message_id", m.MessageId, "err", err)
			return err
		}
		if h.sender(m, msg) {
			return nil
		}
		if r := msg.NamespaceRelease; r != nil {
			res, err := h.uc.ReleaseNamespace(ctx, *r)
			if err != nil {
				h.metrics.Add("HandoffFailures", 1)
				h.log.Error("namespace release failed; will retry", "namespace", r.Namespace, "err", err)
				return err
			}
			h.log.Info("namespace release handled", "namespace", r.Namespace, "outcome", string(res.Outcome), "reason", res.Reason)
			return nil
		}
		c := *msg.Completion
		res, err := h.uc.Process(ctx, c)
		if err != nil {
			h.metrics.Add("HandoffFailures", 1)
			h.log.Error("handoff failed; will retry", "task", c.TaskID, "collection", c.Collection, "err", err)
			return err
		}
		h.log.Info("completion handed off", "task", c.TaskID, "collection", c.Collection, "outcome", string(res.Outcome), "reason", res.Reason, "version", res.Version)
		return nil
	}), nil
}
