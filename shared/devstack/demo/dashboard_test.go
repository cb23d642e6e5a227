package demo

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/searchfabric/bcc/shared/devstack/dashview"
	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/monitoring"
	"github.com/searchfabric/bcc/shared/resources"
)

// TestDemoDashboard draws the deployed dashboard (the monitoring model the
// CDK app renders) from a demo run's metrics.
func TestDemoDashboard(t *testing.T) {
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "dashboard.html")
	store := dashview.NewStore()
	sum, err := Run(context.Background(), Options{Collections: 3, Commits: 6, Parallel: 2, Seed: 7, Out: &out, DashboardPath: path,
		DashboardStore: store, Hot: time.Second})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	def := resources.Default("bcc") // the demo's (localenv's default prefix)
	model := monitoring.Build(def, def.FunctionName)
	names := dashview.NamesOf(def)
	_, end := store.Span()

	// Every widget has data from the run, or says why a run that injects
	// no fault may leave it empty; no alarm fired.
	t.Run("every widget has data and every alarm is OK", func(t *testing.T) {
		d := sum.Dashboard
		t.Logf("%d of %d widgets with data; alarms firing %v", d.WidgetsWithData, d.Widgets, d.AlarmsFiring)
		for _, p := range d.Problems {
			t.Error(p)
		}
		if d.Widgets != len(model.Widgets()) || d.Alarms != len(model.Alarms) || d.Alarms == 0 {
			t.Fatalf("drew %d widgets and %d alarms; the model has %d and %d", d.Widgets, d.Alarms, len(model.Widgets()), len(model.Alarms))
		}
		if !strings.Contains(out.String(), "written to "+path) {
			t.Fatalf("the demo does not print the page's path:\n%s", out.String())
		}
	})

	// A query that selects a dimension the functions never emit shows "No
	// data" in CloudWatch: renaming one dimension of one query of a widget
	// that has data empties it, and the check names it.
	t.Run("a renamed dimension empties its widget", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			mutate func(*monitoring.Metric) bool
		}{
			{"Deployment of a SEARCH", func(m *monitoring.Metric) bool {
				if m.Source != monitoring.FromSearch {
					return false
				}
				m.Dims = renamed(m.Dims, metrics.DimDeployment, "DeploymentName")
				return true
			}},
			{"Function of an EMF metric", func(m *monitoring.Metric) bool {
				if m.Source != monitoring.FromEMF {
					return false
				}
				m.Dims = renamed(m.Dims, metrics.DimFunction, "Fn")
				return true
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				view, err := dashview.Draw(model, store, names, end)
				if err != nil {
					t.Fatal(err)
				}
				// The first widget with data all of whose queries are of
				// this kind: mutate every query of it.
				target := -1
				for i, w := range view.Widgets {
					if !w.HasData() || w.Widget.Kind != monitoring.Graph {
						continue
					}
					all := true
					for _, m := range w.Widget.Metrics {
						c := m
						all = all && tc.mutate(&c)
					}
					if all {
						target = i
						break
					}
				}
				if target < 0 {
					t.Fatalf("no widget with data is made of %s queries", tc.name)
				}
				mutated := model
				mutated.Rows = nil
				i := 0
				for _, row := range model.Rows {
					var r []monitoring.Widget
					for _, w := range row {
						if i == target {
							w.Metrics = cloneMetrics(w.Metrics)
							for j := range w.Metrics {
								tc.mutate(&w.Metrics[j])
							}
						}
						r = append(r, w)
						i++
					}
					mutated.Rows = append(mutated.Rows, r)
				}
				mv, err := dashview.Draw(mutated, store, names, end)
				if err != nil {
					t.Fatal(err)
				}
				title := view.Widgets[target].Widget.Title
				problems := strings.Join(mv.Problems(mayFire), "\n")
				if !strings.Contains(problems, fmt.Sprintf("widget %q has no data", title)) {
					t.Fatalf("widget %q with %s renamed still passes: %s", title, tc.name, problems)
				}
			})
		}
	})

	// The page renders in a real browser: every widget is drawn, every
	// image decodes, and nothing is logged as an error.
	t.Run("renders in headless Chromium", func(t *testing.T) {
		browser := chromium()
		if browser == "" {
			t.Skip("no chromium on PATH (Debian package chromium; .ci/run installs it): the page is not loaded in a browser")
		}
		renderInChromium(t, browser, path, len(model.Widgets()))
	})
}

func renamed(dims map[string]string, from, to string) map[string]string {
	out := maps.Clone(dims)
	if v, ok := out[from]; ok {
		delete(out, from)
		out[to] = v
	}
	return out
}

func cloneMetrics(ms []monitoring.Metric) []monitoring.Metric {
	out := make([]monitoring.Metric, len(ms))
	for i, m := range ms {
		m.Dims = maps.Clone(m.Dims)
		m.Schema = append([]string(nil), m.Schema...)
		out[i] = m
	}
	return out
}

// chromium is the browser binary to drive (BCC_CHROMIUM, or Debian's).
func chromium() string {
	if b := os.Getenv("BCC_CHROMIUM"); b != "" {
		return b
	}
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	return ""
}

// renderInChromium loads the page from disk in headless Chromium (no
// network: the page is self-contained) and checks that it shows every
// widget with a decoded image or its alarm table, and that the browser
// logged no error or exception.
func renderInChromium(t *testing.T, browser, page string, widgets int) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var errs []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			errs = append(errs, "exception: "+e.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				errs = append(errs, "console error")
			}
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	abs, err := filepath.Abs(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+abs), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	drawn, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.widget').length`))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	decoded, err := chromedp.Run(ctx, chromedp.Evaluate[int](
		`Promise.all([...document.images].map(i => i.decode().then(() => i.naturalWidth > 0, () => false))).then(r => r.filter(Boolean).length)`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	tables, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.widget table').length`))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	screenshot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if drawn != widgets || decoded+tables != widgets || len(errs) > 0 {
		t.Fatalf("chromium drew %d widgets (want %d), %d images decoded, %d alarm tables; errors %v", drawn, widgets, decoded, tables, errs)
	}
	if dir := os.Getenv("BCC_DASHBOARD_SCREENSHOT"); dir != "" {
		if err := os.WriteFile(dir, screenshot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("chromium: %d widgets, %d images decoded, screenshot %d bytes", drawn, decoded, len(screenshot))
}
