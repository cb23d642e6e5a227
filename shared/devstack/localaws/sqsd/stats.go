package sqsd

import (
	"slices"
	"strings"
	"time"
)

// QueueStats are one queue's gauges as CloudWatch's AWS/SQS metrics report
// them. SQS computes those on its side (no request is made for them), so
// the local dashboard reads them here rather than through the API, which
// would add calls the cost meter counts.
type QueueStats struct {
	Name       string
	Visible    int           // ApproximateNumberOfMessagesVisible
	NotVisible int           // ApproximateNumberOfMessagesNotVisible (in flight)
	Delayed    int           // ApproximateNumberOfMessagesDelayed
	OldestAge  time.Duration // ApproximateAgeOfOldestMessage (0 when empty)
}

// Stats returns every queue's gauges, by name.
func (s *Server) Stats() []QueueStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	out := make([]QueueStats, 0, len(s.queues))
	for _, q := range s.queues {
		st := QueueStats{Name: q.name}
		st.Visible, st.NotVisible, st.Delayed = q.counts(now)
		for _, m := range q.messages {
			if age := now.Sub(m.sentAt); age > st.OldestAge {
				st.OldestAge = age
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}
