package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// PhaseColors are the timeline's bar colours, by phase.
var PhaseColors = map[string]string{
	PhaseDetect: "#8d99ae",
	PhaseWait:   "#f4a261",
	PhaseDelete: "#e63946",
	PhaseCreate: "#457b9d",
	// Waiting for capacity is nobody's step: its own colour, apart from
	// the recovery's.
	PhaseCapacity: "#6d597a",
	PhaseReset:    "#9b5de5",
	PhaseBoot:     "#2a9d8f",
	PhaseRecover:  "#80b918",
	PhaseResume:   "#ffb703",
}

// Geometry of the timeline.
const (
	svgLabel  = 300 // width of the node labels
	svgWidth  = 1100
	svgRow    = 28
	svgTop    = 30 // axis labels
	svgBar    = 16
	svgMinBar = 3 // a short phase is still visible
)

type htmlBar struct {
	X, Y, W, H float64
	Color      string
	Title      string
	Phase      string
}

type htmlRow struct {
	Node, Label, Outcome string
	Y, TextY             float64
	Bars                 []htmlBar
	MarkX                float64 // a marker at the first event
	OutcomeX             float64
	OutcomeAnchor        string
}

// tickStep is a round step giving at most 8 ticks over span.
func tickStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{
		time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
		10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	} {
		if span/s <= 8 {
			return s
		}
	}
	days := span/(8*24*time.Hour) + 1
	if days > time.Duration(math.MaxInt64)/(24*time.Hour) {
		return math.MaxInt64
	}
	return 24 * time.Hour * days
}

type htmlTick struct {
	X     float64
	Label string
}

type htmlPage struct {
	Title     string
	Summary   Summary
	Incidents []Incident
	Rows      []htmlRow
	Ticks     []htmlTick
	Height    float64
	Width     int
	LabelW    int
	Legend    []htmlLegend
	Omitted   int
}

// MaxHTMLIncidents is how many incidents the page draws.
const MaxHTMLIncidents = 500

type htmlLegend struct{ Phase, Color string }

// WriteHTML writes one self-contained page (inline CSS and SVG, no script,
// no network): the summary, a timeline with one row per incident where each
// phase is a coloured bar, and the incidents table.
//
// The page fits any window from a phone's 390 px up: the timeline and the
// incidents table each scroll sideways inside their own box when wider
// than the window (the node column stays in view), long names and
// outcomes wrap inside their cells, and nothing is cut off
// (TestBrowserIncidentsTableFitsAt1280And390 measures it in a browser).
//
// A page stays readable: with more than MaxHTMLIncidents incidents, the
// timeline and table show the MaxHTMLIncidents that lost the most
// chip-hours (in time order) and say how many were left out; the summary
// covers all.
func WriteHTML(w io.Writer, incs []Incident, s Summary, title string) error {
	shown, omitted := incs, 0
	if len(incs) > MaxHTMLIncidents {
		shown = append([]Incident(nil), incs...)
		sort.SliceStable(shown, func(i, j int) bool { return shown[i].ChipHoursLost() > shown[j].ChipHoursLost() })
		shown, omitted = shown[:MaxHTMLIncidents], len(incs)-MaxHTMLIncidents
		sort.SliceStable(shown, func(i, j int) bool { return shown[i].Start.Before(shown[j].Start) })
	}
	incs = shown
	p := htmlPage{Title: title, Summary: s, Incidents: incs, Omitted: omitted, Width: svgWidth, LabelW: svgLabel}
	for _, ph := range PhaseOrder {
		p.Legend = append(p.Legend, htmlLegend{ph, PhaseColors[ph]})
	}
	from, to := s.From, s.To
	for _, in := range incs {
		for _, ph := range in.Phases {
			if ph.End.After(to) {
				to = ph.End
			}
		}
	}
	span := to.Sub(from)
	if span <= 0 {
		span = time.Second
	}
	plot := float64(svgWidth - svgLabel - 40)
	x := func(t time.Time) float64 { return svgLabel + plot*float64(t.Sub(from))/float64(span) }
	step := tickStep(span)
	layout := "15:04"
	if step < time.Minute {
		layout = "15:04:05"
	}
	// At most a dozen ticks, whatever the times (a step that overflowed
	// would otherwise never reach to).
	for t, i := from.Truncate(step), 0; !t.After(to) && i < 12; t, i = t.Add(step), i+1 {
		if t.Before(from) {
			continue
		}
		p.Ticks = append(p.Ticks, htmlTick{X: x(t), Label: t.UTC().Format(layout)})
	}
	for i, in := range incs {
		y := float64(svgTop + i*svgRow)
		row := htmlRow{Node: in.Node, Label: clip(ShortNode(in.Node), 34), Outcome: in.Outcome, Y: y, TextY: y + svgBar - 3, MarkX: x(in.Start)}
		for _, ph := range in.Phases {
			bx, bw := x(ph.Start), x(ph.End)-x(ph.Start)
			if bw < svgMinBar {
				bw = svgMinBar
			}
			row.Bars = append(row.Bars, htmlBar{X: bx, Y: y, W: bw, H: svgBar, Color: PhaseColors[ph.Phase], Phase: ph.Phase,
				Title: fmt.Sprintf("%s %s: %s to %s (%s)", ShortNode(in.Node), ph.Phase, ph.Start.UTC().Format("15:04:05"), ph.End.UTC().Format("15:04:05"), Dur(ph.End.Sub(ph.Start)))})
		}
		// The outcome, after the bars or, near the right edge, before them.
		end, begin := row.MarkX, row.MarkX
		for _, b := range row.Bars {
			end = max(end, b.X+b.W)
		}
		row.OutcomeX, row.OutcomeAnchor = end+6, "start"
		if end > svgWidth-220 {
			row.OutcomeX, row.OutcomeAnchor = begin-6, "end"
		}
		p.Rows = append(p.Rows, row)
	}
	p.Height = float64(svgTop + len(incs)*svgRow + 10)
	return pageTemplate.Execute(w, p)
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"short": ShortNode,
	// zoneOf is the zone of a full node name (…/locations/Z/nodes/N).
	"zoneOf": zoneOfName,
	"dur":    Dur,
	"at":     func(t time.Time) string { return dash(timeText(t)) },
	"off":    offset,
	"ch":     func(in Incident) string { return chipHours(in.ChipHoursLost()) },
	"chips":  chipsText,
	"lost": func(in Incident) string {
		if !in.LostProgressKnown {
			return "-"
		}
		return Dur(in.LostProgress)
	},
	"f": func(x float64) string { return fmt.Sprintf("%.1f", x) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #1d2433; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 24px 0 8px; }
.sub { color: #5c6370; margin: 0 0 16px; }
.figures { display: flex; flex-wrap: wrap; gap: 12px; margin: 0; }
.figures div { border: 1px solid #d8dde6; border-radius: 6px; padding: 8px 14px; min-width: 130px; background: #f7f9fc; }
.figures dt { color: #5c6370; font-size: 12px; }
.figures dd { margin: 0; font-size: 20px; font-weight: 600; }
ul.breakdown { margin: 8px 0; padding-left: 18px; color: #333; }
svg text { font: 12px system-ui, sans-serif; fill: #1d2433; }
svg .axis { stroke: #d8dde6; }
svg text.outcome { fill: #5c6370; font-size: 11px; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 14px; height: 10px; margin-right: 4px; vertical-align: middle; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #e5e8ee; padding: 4px 10px; text-align: left; vertical-align: top; white-space: nowrap; background: #fff; }
th { background: #f0f3f8; white-space: normal; vertical-align: bottom; }
.moved { color: #5c6370; font-size: 12px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.text { white-space: normal; overflow-wrap: break-word; min-width: 5em; max-width: 24em; }
th:first-child, td:first-child { position: sticky; left: 0; z-index: 1; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="sub">{{.Summary.Incidents}} incidents, first event {{at .Summary.From}}, last record {{at .Summary.To}} (UTC)</p>
<dl class="figures" id="summary">
<div><dt>incidents</dt><dd id="incidents">{{.Summary.Incidents}}</dd></div>
<div><dt>time to recover, median</dt><dd id="ttr-median">{{if .Summary.Recovered}}{{dur .Summary.RecoverMedian}}{{else}}-{{end}}</dd></div>
<div><dt>time to recover, p95</dt><dd id="ttr-p95">{{if .Summary.Recovered}}{{dur .Summary.RecoverP95}}{{else}}-{{end}}</dd></div>
<div><dt>downtime, total</dt><dd id="downtime">{{dur .Summary.Downtime}}</dd></div>
<div><dt>chip-hours lost</dt><dd id="chip-hours">{{printf "%.2f" .Summary.ChipHoursLost}}</dd></div>
<div><dt>training resumed</dt><dd id="resumed">{{.Summary.Resumed}} of {{.Summary.Incidents}}</dd></div>
</dl>
<ul class="breakdown">
<li id="by-cause">by cause: {{range $i, $c := .Summary.ByCause}}{{if $i}}, {{end}}{{$c.Key}} {{$c.N}}{{end}}</li>
<li id="by-outcome">by outcome: {{range $i, $c := .Summary.ByOutcome}}{{if $i}}, {{end}}{{$c.Key}} {{$c.N}}{{end}}</li>
</ul>
<h2>Timeline</h2>
{{if .Omitted}}<p class="sub" id="omitted">{{.Omitted}} incidents with the least chip-hours lost are not drawn; the summary counts them.</p>{{end}}
<p class="legend">{{range .Legend}}<span><i style="background:{{.Color}}"></i>{{.Phase}}</span>{{end}}</p>
<div class="scroll" id="timeline-scroll">
<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{f .Height}}" viewBox="0 0 {{.Width}} {{f .Height}}" role="img" aria-label="one row per incident, one bar per phase">
{{range .Ticks}}<line class="axis" x1="{{f .X}}" y1="18" x2="{{f .X}}" y2="{{f $.Height}}"/><text x="{{f .X}}" y="12" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Rows}}<g class="timeline-row" data-node="{{.Node}}" data-outcome="{{.Outcome}}">
<text x="4" y="{{f .TextY}}">{{.Label}}</text>
<rect x="{{f .MarkX}}" y="{{f .Y}}" width="2" height="16" fill="#1d2433"><title>first event</title></rect>
{{range .Bars}}<rect class="bar" data-phase="{{.Phase}}" x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}" fill="{{.Color}}" rx="2"><title>{{.Title}}</title></rect>
{{end}}<text class="outcome" x="{{f .OutcomeX}}" y="{{f .TextY}}" text-anchor="{{.OutcomeAnchor}}">{{.Outcome}}</text>
</g>
{{end}}</svg>
</div>
<h2>Incidents</h2>
<div class="scroll" id="incidents-scroll">
<table id="incidents-table">
<thead><tr><th>node</th><th>TPU</th><th>chips</th><th>cause</th><th>first event (UTC)</th><th>detected</th><th>READY</th><th>resumed</th><th>downtime</th><th>progress lost</th><th>chip-hours</th><th>outcome</th></tr></thead>
<tbody>
{{range .Incidents}}<tr class="incident"><td class="text" title="{{.Node}}">{{short .Node}}</td><td class="text">{{.AcceleratorType}}</td><td class="num">{{chips .Chips}}</td><td class="text">{{.Cause}}</td><td>{{at .Start}}</td><td class="num">{{off .Start .Detected}}</td><td class="num">{{off .Start .Recovered}}</td><td class="num">{{off .Start .Resumed}}</td><td class="num">{{dur .Downtime}}</td><td class="num">{{lost .}}</td><td class="num">{{ch .}}</td><td class="text">{{.Outcome}}{{with .ZoneMovedTo}}<br><span class="moved" title="{{.}}">created in {{zoneOf .}}</span>{{end}}</td></tr>
{{end}}</tbody>
</table>
</div>
</body>
</html>
`))

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(textTime)
}

// zoneOfName is the zone of a full node or instance name
// (projects/P/locations/Z/nodes/N, projects/P/zones/Z/instances/I); the
// name itself when it has none.
func zoneOfName(name string) string {
	seg := strings.Split(name, "/")
	for i := 0; i+1 < len(seg); i++ {
		if seg[i] == "locations" || seg[i] == "zones" {
			return seg[i+1]
		}
	}
	return name
}
