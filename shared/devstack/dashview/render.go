package dashview

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/searchfabric/bcc/shared/monitoring"
)

// WidgetView is one widget as drawn from a run.
type WidgetView struct {
	Widget monitoring.Widget
	Lines  []Line
	// Points counts the datapoints of every line; Own those of the
	// coordinator's own metrics (EMF and SEARCH queries), HasOwn whether
	// the widget has any.
	Points int
	Own    int
	HasOwn bool
	// Missing lists the widget's series queries that matched no series.
	Missing []monitoring.Metric
	SVG     []byte
}

// HasData reports whether any series of the widget has a datapoint: of
// the coordinator's own series when it has any (the AWS-side gauges have
// zero-valued datapoints whatever the run did).
func (w WidgetView) HasData() bool {
	if w.HasOwn {
		return w.Own > 0
	}
	return w.Points > 0
}

// View is the dashboard drawn from a run.
type View struct {
	Dashboard monitoring.Dashboard
	Widgets   []WidgetView // in the dashboard's order, row by row
	Alarms    []AlarmState // in the model's order
	From, To  time.Time    // the run's datapoints
}

// Draw evaluates every widget and alarm of d over the store (alarms at
// time end).
func Draw(d monitoring.Dashboard, s *Store, n Names, end time.Time) (View, error) {
	v := View{Dashboard: d}
	v.From, v.To = s.Span()
	all := s.All()
	for _, a := range d.Alarms {
		st, err := evaluateIn(all, a, n, end)
		if err != nil {
			return v, err
		}
		v.Alarms = append(v.Alarms, st)
	}
	for i, w := range d.Widgets() {
		wv := WidgetView{Widget: w}
		if w.Kind == monitoring.AlarmStatus {
			wv.Points = len(v.Alarms) // the alarms are its data
			v.Widgets = append(v.Widgets, wv)
			continue
		}
		for _, m := range w.Metrics {
			ls, err := queryIn(all, m, n)
			if err != nil {
				return v, fmt.Errorf("widget %q: %w", w.Title, err)
			}
			if len(ls) == 0 {
				wv.Missing = append(wv.Missing, m)
			}
			own := m.Source == monitoring.FromEMF || m.IsSearch()
			wv.HasOwn = wv.HasOwn || own
			for _, l := range ls {
				wv.Points += len(l.Points)
				if own {
					wv.Own += len(l.Points)
				}
			}
			wv.Lines = append(wv.Lines, ls...)
		}
		svg, err := plotLines(wv.Lines, v.From, v.To)
		if err != nil {
			return v, fmt.Errorf("widget %d %q: %w", i, w.Title, err)
		}
		wv.SVG = svg
		v.Widgets = append(v.Widgets, wv)
	}
	return v, nil
}

// Problems are what a run that exercises the product must not show: a
// widget with no data that does not say why a local run may leave it
// empty, and an alarm in ALARM (or that fired) that the run should not
// trip (mayFire(name) false).
func (v View) Problems(mayFire func(alarmName string) bool) []string {
	var out []string
	for _, w := range v.Widgets {
		switch {
		case !w.HasData() && w.Widget.LocalGap == "":
			out = append(out, fmt.Sprintf("widget %q has no data: none of its %d queries matches a series the run emitted", w.Widget.Title, len(w.Widget.Metrics)))
		}
	}
	for _, a := range v.Alarms {
		if !a.HasData && a.Alarm.LocalGap == "" {
			out = append(out, fmt.Sprintf("alarm %s has no data: its query matches no series the run emitted", a.Alarm.Name))
		}
		if mayFire(a.Alarm.Name) {
			continue
		}
		if a.State != StateOK || !a.Fired.IsZero() {
			out = append(out, fmt.Sprintf("alarm %s is %s (fired at %s, peak %g, threshold %g)", a.Alarm.Name, a.State, a.Fired.Format(time.RFC3339), a.Peak, a.Alarm.Threshold))
		}
	}
	return out
}

// colors are the series colors, in order (plotutil's dark palette).
func seriesColor(i int) color.Color { return plotutil.DarkColors[i%len(plotutil.DarkColors)] }

// plotLines draws lines as an SVG time series over [from, to].
func plotLines(lines []Line, from, to time.Time) ([]byte, error) {
	p := plot.New()
	p.X.Tick.Marker = plot.TimeTicks{Format: "15:04:05"}
	p.X.Min, p.X.Max = float64(from.Unix()), float64(to.Unix())
	if p.X.Max <= p.X.Min {
		p.X.Max = p.X.Min + 60
	}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	for i, l := range lines {
		pts := make(plotter.XYs, len(l.Points))
		for j, d := range l.Points {
			pts[j].X, pts[j].Y = float64(d.T.Unix()), d.V
			p.Y.Max = max(p.Y.Max, d.V)
		}
		line, scatter, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		c := seriesColor(i)
		line.Color, scatter.Color = c, c
		scatter.Shape = draw.CircleGlyph{}
		scatter.Radius = vg.Points(2)
		p.Add(line, scatter)
	}
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	var buf bytes.Buffer
	w, err := p.WriterTo(5*vg.Inch, 2.6*vg.Inch, "svg")
	if err != nil {
		return nil, err
	}
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// HTML renders the view as one self-contained page (no network: images
// are inline data URIs, no scripts but an optional refresh).
func (v View) HTML(refresh time.Duration) ([]byte, error) {
	type legend struct {
		Label string
		Color template.CSS
	}
	type widget struct {
		Title, Gap, Empty string
		Img               template.URL
		Legend            []legend
		Alarms            []AlarmState
		Span              int
	}
	var ws []widget
	for _, w := range v.Widgets {
		x := widget{Title: w.Widget.Title, Gap: w.Widget.LocalGap, Span: max(w.Widget.Width/8, 1)}
		if w.Widget.Kind == monitoring.AlarmStatus {
			x.Alarms = v.Alarms
			ws = append(ws, x)
			continue
		}
		if !w.HasData() {
			x.Empty = "No data"
		}
		x.Img = template.URL("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(w.SVG))
		for i, l := range w.Lines {
			r, g, b, _ := seriesColor(i).RGBA()
			x.Legend = append(x.Legend, legend{Label: l.Label, Color: template.CSS(fmt.Sprintf("rgb(%d,%d,%d)", r>>8, g>>8, b>>8))})
		}
		ws = append(ws, x)
	}
	firing := 0
	for _, a := range v.Alarms {
		if a.State == StateAlarm {
			firing++
		}
	}
	var buf bytes.Buffer
	err := page.Execute(&buf, map[string]any{
		"Name": v.Dashboard.Name, "From": v.From.UTC().Format(time.RFC3339), "To": v.To.UTC().Format(time.RFC3339),
		"Widgets": ws, "Alarms": len(v.Alarms), "Firing": firing, "Refresh": int(refresh.Seconds()),
	})
	return buf.Bytes(), err
}

var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>{{.Name}} (local)</title>
<style>
body{font-family:sans-serif;margin:16px;background:#f4f5f7;color:#16191f}
h1{font-size:20px;margin:0 0 4px} .meta{color:#545b64;font-size:13px;margin-bottom:12px}
.grid{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:12px}
.widget{background:#fff;border:1px solid #d5dbdb;border-radius:4px;padding:8px}
.widget h2{font-size:14px;margin:0 0 6px} .widget img{width:100%;height:auto}
.gap{font-size:12px;color:#8d6605;margin:0 0 4px} .empty{font-size:13px;color:#687078}
.legend{font-size:11px;display:flex;flex-wrap:wrap;gap:4px 10px;margin-top:4px}
.sw{display:inline-block;width:10px;height:10px;margin-right:3px;vertical-align:middle}
table{border-collapse:collapse;font-size:12px;width:100%} td{padding:2px 4px;border-bottom:1px solid #eaeded}
.OK{color:#1d8102;font-weight:bold} .ALARM{color:#d13212;font-weight:bold}
</style></head><body>
<h1>{{.Name}} <small>(local run)</small></h1>
<div class="meta">datapoints from {{.From}} to {{.To}} (the functions' clock); {{.Alarms}} alarms, {{.Firing}} in ALARM</div>
<div class="grid">
{{range .Widgets}}<div class="widget" data-title="{{.Title}}">
<h2>{{.Title}}</h2>
{{if .Gap}}<p class="gap">No local data expected: {{.Gap}}</p>{{end}}
{{if .Alarms}}<table>{{range .Alarms}}<tr><td>{{.Alarm.Name}}</td><td class="{{.State}}">{{.State}}</td></tr>{{end}}</table>
{{else}}{{if .Empty}}<p class="empty">{{.Empty}}</p>{{end}}<img alt="{{.Title}}" src="{{.Img}}">
<div class="legend">{{range .Legend}}<span><span class="sw" style="background:{{.Color}}"></span>{{.Label}}</span>{{end}}</div>{{end}}
</div>
{{end}}</div>
</body></html>
`))
