package demo

// Adversarial review of issue 31: fails on main at 7686bd0.

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/devstack/dashview"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/monitoring"
	"github.com/searchfabric/bcc/shared/resources"
)

// The widget check ("every widget has data") counts the zero-valued
// AWS-side gauges the recorder publishes for every queue each second and
// for every invocation (Throttles 0). A widget that mixes those with the
// coordinator's own series therefore has data whatever its coordinator
// queries select: every one of them can be broken (here: Deployment
// renamed, as the test's own mutation does for one SEARCH widget) and the
// check still passes. "Age of the oldest due item per class" is the
// signal OldestDueAgeMs / TaskWaitMs by Kind, not the queue age.
func TestZeroGaugesMaskBrokenCoordinatorQueries(t *testing.T) {
	var out bytes.Buffer
	store := dashview.NewStore()
	if _, err := Run(context.Background(), Options{Collections: 3, Commits: 6, Parallel: 2, Seed: 7, Out: &out, DashboardStore: store, Hot: time.Second}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	def := resources.Default("bcc")
	model := monitoring.Build(def, def.FunctionName)
	names := dashview.NamesOf(def)
	_, end := store.Span()
	coordinator := func(m monitoring.Metric) bool {
		return m.Source == monitoring.FromEMF || m.Source == monitoring.FromSearch || m.Source == monitoring.FromSearchKind
	}
	mutated := model
	mutated.Rows = nil
	for _, row := range model.Rows {
		var r []monitoring.Widget
		for _, w := range row {
			w.Metrics = cloneMetrics(w.Metrics)
			for j := range w.Metrics {
				if coordinator(w.Metrics[j]) {
					w.Metrics[j].Dims = renamed(w.Metrics[j].Dims, metrics.DimDeployment, "DeploymentName")
				}
			}
			r = append(r, w)
		}
		mutated.Rows = append(mutated.Rows, r)
	}
	mv, err := dashview.Draw(mutated, store, names, end)
	if err != nil {
		t.Fatal(err)
	}
	problems := strings.Join(mv.Problems(mayFire), "\n")
	var masked []string
	for _, w := range mv.Widgets {
		n := 0
		for _, m := range w.Widget.Metrics {
			if coordinator(m) {
				n++
			}
		}
		if n > 0 && w.Widget.LocalGap == "" && !strings.Contains(problems, "widget \""+w.Widget.Title+"\"") {
			masked = append(masked, w.Widget.Title)
		}
	}
	if len(masked) > 0 {
		t.Fatalf("with every coordinator query renamed (Deployment), these widgets still pass the check on AWS gauges alone:\n  %s", strings.Join(masked, "\n  "))
	}
}
