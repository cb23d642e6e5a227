package dashview

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/searchfabric/bcc/shared/monitoring"
)

// Alarm states.
const (
	StateOK    = "OK"
	StateAlarm = "ALARM"
)

// AlarmState is an alarm evaluated over a run, as CloudWatch evaluates it:
// at the end of every period, ALARM when each of the last
// EvaluationPeriods periods breaches its threshold; a period without data
// does not breach (TreatMissingData notBreaching, as deployed).
type AlarmState struct {
	Alarm monitoring.Alarm
	State string // at the end of the run
	// Fired is when the alarm first went to ALARM during the run (zero:
	// never).
	Fired time.Time
	// Peak is the highest period statistic seen (0 without data).
	Peak    float64
	HasData bool
}

// Evaluate evaluates alarm a over the store's datapoints up to end.
func (s *Store) Evaluate(a monitoring.Alarm, n Names, end time.Time) (AlarmState, error) {
	return evaluateIn(s.All(), a, n, end)
}

func evaluateIn(all []Series, a monitoring.Alarm, n Names, end time.Time) (AlarmState, error) {
	st := AlarmState{Alarm: a, State: StateOK}
	lines, err := queryIn(all, a.Metric, n)
	if err != nil {
		return st, err
	}
	if len(lines) > 1 {
		return st, fmt.Errorf("alarm %s selects %d series; an alarm watches one", a.Name, len(lines))
	}
	if len(lines) == 0 {
		return st, nil
	}
	st.HasData = true
	period := a.Metric.Period.Milliseconds()
	breach := map[int64]bool{}
	for _, p := range lines[0].Points {
		breach[p.T.UnixMilli()/period] = p.V > a.Threshold // monitoring.Comparison
		st.Peak = max(st.Peak, p.V)
	}
	alarmAt := func(b int64) bool {
		for i := int64(0); i < int64(a.EvaluationPeriods); i++ {
			if !breach[b-i] {
				return false
			}
		}
		return true
	}
	// Only a period with data can end a breaching window (a missing one
	// does not breach), so those are the periods to look at.
	for _, b := range slices.Sorted(maps.Keys(breach)) {
		if alarmAt(b) && st.Fired.IsZero() {
			st.Fired = time.UnixMilli((b + 1) * period)
		}
	}
	if alarmAt(end.UnixMilli() / period) {
		st.State = StateAlarm
	}
	return st, nil
}
