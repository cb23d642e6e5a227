package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/searchfabric/bcc/shared/devstack/dashview"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/monitoring"
)

// DashboardFigures say what the local rendering of the deployed dashboard
// showed (out/dashboard.html): how many widgets have data from this run,
// which alarms are in ALARM, and what a run that exercises the product
// must not show (dashview.View.Problems).
type DashboardFigures struct {
	Path            string   `json:"path,omitempty"`
	Widgets         int      `json:"widgets"`
	WidgetsWithData int      `json:"widgets_with_data"`
	Alarms          int      `json:"alarms"`
	AlarmsFiring    []string `json:"alarms_firing"`
	Problems        []string `json:"problems"`
}

// dashboard collects the run's metrics as CloudWatch would: the functions'
// EMF lines at the end, and what AWS computes on its side (invocations,
// queue gauges) as the run goes.
type dashboard struct {
	env   *localenv.Env
	store *dashview.Store
	rec   *dashview.Recorder
	names dashview.Names
	stop  context.CancelFunc
	done  chan struct{}
}

func startDashboard(env *localenv.Env, now func() time.Time, store *dashview.Store) *dashboard {
	if store == nil {
		store = dashview.NewStore()
	}
	d := &dashboard{env: env, store: store, names: dashview.NamesOf(env.Prov.Def), done: make(chan struct{})}
	d.rec = dashview.NewRecorder(d.store, d.names, now)
	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	go func() {
		defer close(d.done)
		d.rec.SampleQueues(ctx, env.Stack, time.Second)
	}()
	return d
}

// mayFire names the alarms a demo run may trip: none. The demo injects no
// fault, so every alarm must stay OK.
func mayFire(string) bool { return false }

// finish draws the dashboard from everything the run emitted, writes it to
// path (unless empty) and returns its figures.
func (d *dashboard) finish(path string, end time.Time) (DashboardFigures, error) {
	d.stop()
	<-d.done
	var fig DashboardFigures
	if err := d.store.AddEMF([]byte(d.env.Metrics.String())); err != nil {
		return fig, err
	}
	model := monitoring.Build(d.env.Prov.Def, d.env.Prov.Def.FunctionName)
	view, err := dashview.Draw(model, d.store, d.names, end)
	if err != nil {
		return fig, err
	}
	fig.Widgets, fig.Alarms = len(view.Widgets), len(view.Alarms)
	for _, w := range view.Widgets {
		if w.HasData() {
			fig.WidgetsWithData++
		}
	}
	fig.AlarmsFiring = []string{}
	for _, a := range view.Alarms {
		if a.State == dashview.StateAlarm {
			fig.AlarmsFiring = append(fig.AlarmsFiring, a.Alarm.Name)
		}
	}
	fig.Problems = append([]string{}, view.Problems(mayFire)...)
	if path == "" {
		return fig, nil
	}
	page, err := view.HTML(0)
	if err != nil {
		return fig, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fig, err
	}
	if err := os.WriteFile(path, page, 0o644); err != nil {
		return fig, fmt.Errorf("write dashboard: %w", err)
	}
	fig.Path = path
	return fig, nil
}
