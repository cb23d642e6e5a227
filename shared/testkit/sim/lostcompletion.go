package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// Lost completions: in the quiescent phase of lostCompletions worlds the
// first cleanup completion of each dropped incarnation dead-letters (fault
// completion-dead-lettered: CCS unreachable for every one of its
// receives), after the cleanup closed its cursor ("done"). Nothing but
// reconciliation's derivation from CCS's facts asks for the release again
// (guard release_reask). Invariant release-liveness: such an incarnation
// is released within releaseBound reconciliations of the loss.

// lostCompletions reports whether seed's world dead-letters cleanup
// completions in its quiescent phase (every third seed).
func lostCompletions(seed uint64) bool { return seed%3 == 2 }

// loseCompletions dead-letters, among the handoff messages just received,
// the first cleanup completion of each dropped incarnation (quiescent
// rounds 0 to 4, so that the rest of the phase leaves room for the
// release). It returns the messages left to the consumer and how many it
// dead-lettered.
func (w *World) loseCompletions(msgs []sqstypes.Message) ([]sqstypes.Message, int) {
	if !w.quiet || !lostCompletions(w.cfg.Seed) || w.round > 4 {
		return msgs, 0
	}
	out := make([]sqstypes.Message, 0, len(msgs))
	lost := 0
	for _, m := range msgs {
		c, err := contract.DecodeCompletion("sim", []byte(aws.ToString(m.Body)))
		key := fmt.Sprintf("%s/%d", c.Collection, c.Inc())
		if err != nil || c.Kind != contract.KindTombstoneCleanup || w.lost[key] || !w.sqs.DeadLetter(w.urls[resources.QueueHandoff], aws.ToString(m.MessageId)) {
			out = append(out, m)
			continue
		}
		w.lost[key], w.lostWait[key] = true, 0
		lost++
		w.count("completion-dead-lettered")
		w.logf("  the cleanup completion of %s dead-letters (CCS unreachable for its receives)", key)
	}
	return out, lost
}

// checkReleaseLiveness is invariant release-liveness for dropped
// incarnations whose completion was lost, after each reconciliation of
// the quiescent phase.
func (w *World) checkReleaseLiveness() {
	for _, key := range sortedKeys(w.lostWait) {
		i := strings.LastIndex(key, "/")
		c := key[:i]
		inc, _ := strconv.ParseUint(key[i+1:], 10, 64)
		f := w.ccs.facts[c]
		if !f.Tombstoned || f.Inc() != inc || f.ReleaseIntentRecorded {
			delete(w.lostWait, key)
			continue
		}
		w.lostWait[key]++
		if w.lostWait[key] > releaseBound {
			w.violate("release-liveness", "dropped %s incarnation %d, its cleanup completion dead-lettered, is not released after %d reconciliations (bound %d): CCS still holds the tombstone unreleased",
				c, inc, w.lostWait[key], releaseBound)
			return
		}
	}
}
