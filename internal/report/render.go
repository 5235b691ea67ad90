package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Dur prints a duration compactly for people: 0s, 45s, 12m30s, 1h02m, 2d03h.
func Dur(d time.Duration) string {
	// In whole seconds first: -d overflows for the smallest Duration.
	s, sign := int64(d.Round(time.Second)/time.Second), ""
	if s < 0 {
		s, sign = -s, "-"
	}
	switch {
	case s < 60:
		return fmt.Sprintf("%s%ds", sign, s)
	case s < 3600:
		if s%60 == 0 {
			return fmt.Sprintf("%s%dm", sign, s/60)
		}
		return fmt.Sprintf("%s%dm%02ds", sign, s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%s%dh%02dm", sign, s/3600, (s%3600)/60)
	}
	return fmt.Sprintf("%s%dd%02dh", sign, s/86400, (s%86400)/3600)
}

// ShortNode is the node's id: the last part of its resource name.
func ShortNode(node string) string {
	if i := strings.LastIndexByte(node, '/'); i >= 0 {
		return node[i+1:]
	}
	return node
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func offset(start, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + Dur(t.Sub(start))
}

func chipHours(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

const textTime = "2006-01-02 15:04:05"

// WriteText prints the incidents and the summary as aligned tables that fit
// 120 columns.
func WriteText(w io.Writer, incs []Incident, s Summary) error {
	if len(incs) == 0 {
		_, err := fmt.Fprintln(w, "No incidents: no records about a node.")
		return err
	}
	fmt.Fprintf(w, "Incidents: %d, from %s to %s UTC\n\n", s.Incidents, s.From.UTC().Format(textTime), s.To.UTC().Format(textTime))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tTPU\tCHIPS\tCAUSE\tSTART (UTC)\tOUTCOME")
	for _, in := range incs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clip(ShortNode(in.Node), 28), dash(in.AcceleratorType), chipsText(in.Chips),
			dash(in.Cause), in.Start.UTC().Format(textTime), clip(in.Outcome, 34))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTimeline (time after the first event) and cost:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tDETECTED\tCLAIMED\tDELETED\tCREATED\tREADY\tRESUMED\tDOWNTIME\tLOST\tCHIP-HOURS")
	for _, in := range incs {
		lost := "-"
		if in.LostProgressKnown {
			lost = Dur(in.LostProgress)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clip(ShortNode(in.Node), 28),
			offset(in.Start, in.Detected), offset(in.Start, in.Claimed), offset(in.Start, in.Deleted),
			offset(in.Start, in.Created), offset(in.Start, in.Recovered), offset(in.Start, in.Resumed),
			Dur(in.Downtime), lost, chipHours(in.ChipHoursLost()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, in := range incs {
		if in.ZoneMovedTo != "" {
			fmt.Fprintf(w, "%s was created in another zone (autoheal-stockout zones:): now %s\n", ShortNode(in.Node), in.ZoneMovedTo)
		}
	}
	for _, l := range SummaryLines(s) {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// SummaryLines is the summary as text lines (the first one empty).
func SummaryLines(s Summary) []string {
	lines := []string{"", "Summary:"}
	lines = append(lines, wrapCounts("  by cause:         ", s.ByCause)...)
	lines = append(lines, wrapCounts("  by outcome:       ", s.ByOutcome)...)
	if s.Recovered > 0 {
		lines = append(lines, fmt.Sprintf("  time to recover:  median %s, p95 %s (%d incidents READY again)", Dur(s.RecoverMedian), Dur(s.RecoverP95), s.Recovered))
	} else {
		lines = append(lines, "  time to recover:  - (no node seen READY again)")
	}
	lost := "-"
	if s.LostProgressKnown > 0 {
		lost = fmt.Sprintf("%s (%d incidents reported a checkpoint)", Dur(s.LostProgress), s.LostProgressKnown)
	}
	lines = append(lines,
		fmt.Sprintf("  downtime:         %s in total; %s chip-hours lost", Dur(s.Downtime), chipHours(s.ChipHoursLost)),
		fmt.Sprintf("  training resumed: %d of %d incidents; progress lost %s", s.Resumed, s.Incidents, lost),
	)
	if s.CapacityWaits > 0 {
		// Only when some recovery waited: a night without stockouts reads
		// as before.
		lines = append(lines, fmt.Sprintf("  capacity waits:   %s in total, part of the downtime (%d incidents refused for a stockout)", Dur(s.CapacityWait), s.CapacityWaits))
	}
	return lines
}

// wrapCounts prints counts after label, wrapped to 120 columns under it.
func wrapCounts(label string, cs []Count) []string {
	indent := strings.Repeat(" ", len(label))
	var lines []string
	cur := label
	for i, c := range cs {
		item := fmt.Sprintf("%s %d", c.Key, c.N)
		if i < len(cs)-1 {
			item += ","
		}
		if cur != label && cur != indent && len([]rune(cur))+1+len([]rune(item)) > 120 {
			lines = append(lines, strings.TrimRight(cur, " "))
			cur = indent
		}
		if cur != label && cur != indent {
			cur += " "
		}
		cur += item
	}
	return append(lines, cur)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func chipsText(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// JSONPhase is a phase in the JSON output.
type JSONPhase struct {
	Phase string    `json:"phase"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// JSONIncident is one incident in the JSON output (--format json).
type JSONIncident struct {
	Node                string      `json:"node"`
	Zone                string      `json:"zone"`
	AcceleratorType     string      `json:"acceleratorType"`
	Chips               int         `json:"chips"`
	Cause               string      `json:"cause"`
	Start               time.Time   `json:"start"`
	Detected            time.Time   `json:"detected"`
	Recovered           *time.Time  `json:"recovered"`
	Resumed             *time.Time  `json:"resumed"`
	Outcome             string      `json:"outcome"`
	Reason              string      `json:"reason"`
	DowntimeSeconds     float64     `json:"downtimeSeconds"`
	LostProgressSeconds *float64    `json:"lostProgressSeconds"`
	ChipHoursLost       float64     `json:"chipHoursLost"`
	Phases              []JSONPhase `json:"phases"`
	// CapacityWaitSeconds is the time waiting for capacity (stockouts),
	// also a phase "capacity"; Job the job the records name. Omitted when
	// zero.
	CapacityWaitSeconds float64 `json:"capacityWaitSeconds,omitempty"`
	Job                 string  `json:"job,omitempty"`
	// ZoneMovedTo is where a zones: fallback moved the node; omitted
	// when it stayed.
	ZoneMovedTo string `json:"zoneMovedTo,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// JSONOf is an incident's JSON form.
func JSONOf(in Incident) JSONIncident {
	j := JSONIncident{
		Node: in.Node, Zone: in.Zone, AcceleratorType: in.AcceleratorType, Chips: in.Chips, Cause: in.Cause,
		Start: in.Start.UTC(), Detected: in.Detected.UTC(), Recovered: timePtr(in.Recovered), Resumed: timePtr(in.Resumed),
		Outcome: in.Outcome, Reason: in.Reason, DowntimeSeconds: round3(in.Downtime.Seconds()),
		ChipHoursLost: round3(in.ChipHoursLost()), Phases: []JSONPhase{},
		CapacityWaitSeconds: round3(in.CapacityWait.Seconds()), Job: in.Job, ZoneMovedTo: in.ZoneMovedTo,
	}
	if in.LostProgressKnown {
		s := round3(in.LostProgress.Seconds())
		j.LostProgressSeconds = &s
	}
	for _, p := range in.Phases {
		j.Phases = append(j.Phases, JSONPhase{p.Phase, p.Start.UTC(), p.End.UTC()})
	}
	return j
}

// WriteJSON prints one JSON object per incident, one a line.
func WriteJSON(w io.Writer, incs []Incident) error {
	enc := json.NewEncoder(w)
	for _, in := range incs {
		if err := enc.Encode(JSONOf(in)); err != nil {
			return err
		}
	}
	return nil
}

// CSVHeader is the header row of --format csv.
var CSVHeader = []string{"node", "zone", "acceleratorType", "chips", "cause", "start", "detected", "claimed", "deleted", "created",
	"recovered", "resumed", "outcome", "downtimeSeconds", "lostProgressSeconds", "chipHoursLost", "zoneMovedTo"}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func csvFloat(x float64) string { return strconv.FormatFloat(round3(x), 'f', -1, 64) }

// csvText is a text cell made safe to open in a spreadsheet, per OWASP's
// CSV-injection guidance: a cell starting with = + - @, a tab, a carriage
// return or a NUL is taken for a formula (or, for the control characters, can
// hide one) by Excel, LibreOffice and Google Sheets, so it gets a leading
// single quote, which they show as text and do not evaluate. Records are
// written by anyone who can write log entries, so every text cell (node,
// zone, acceleratorType, cause, outcome, zoneMovedTo) goes through here. A plain number
// ("-3", "+5", "1.5e3") is not a formula and stays as it is, and so does a
// lone "-", the placeholder for "none". The csv package quotes the cell when
// it holds a quote, a comma or a line break.
func csvText(s string) string {
	if s == "" || s == "-" || plainNumber.MatchString(s) {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r', 0:
		return "'" + s
	}
	return s
}

// plainNumber is a decimal number as a spreadsheet reads one.
var plainNumber = regexp.MustCompile(`^[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// WriteCSV prints a header and one row per incident. Text cells are
// neutralised (csvText); the number and time cells are written by this code
// from numbers and times, so they are always plain numbers and RFC 3339
// times.
func WriteCSV(w io.Writer, incs []Incident) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	for _, in := range incs {
		lost := ""
		if in.LostProgressKnown {
			lost = csvFloat(in.LostProgress.Seconds())
		}
		row := []string{csvText(in.Node), csvText(in.Zone), csvText(in.AcceleratorType), strconv.Itoa(in.Chips), csvText(in.Cause),
			csvTime(in.Start), csvTime(in.Detected), csvTime(in.Claimed), csvTime(in.Deleted), csvTime(in.Created),
			csvTime(in.Recovered), csvTime(in.Resumed), csvText(in.Outcome), csvFloat(in.Downtime.Seconds()), lost,
			csvFloat(in.ChipHoursLost()), csvText(in.ZoneMovedTo)}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
