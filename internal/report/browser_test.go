//go:build browser

package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

// The page is rendered by a real browser: Debian's chromium, headless.
// Without chromium the test is skipped, except under CI=true, where a
// skipped browser test would hide a broken page.

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found (CI=true: the browser test must run); apt-get install chromium")
	}
	t.Skip("chromium not found; apt-get install chromium to run the browser test")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

func writePage(t *testing.T) (string, []report.Incident, report.Summary) {
	t.Helper()
	incs := report.Group(readFixture(t, "night.jsonl"))
	sum := report.Summarize(incs)
	var b bytes.Buffer
	if err := report.WriteHTML(&b, incs, sum, "night of 2026-11-20"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, incs, sum
}

func TestBrowserRendersOneTimelineRowPerIncidentAndTheSummary(t *testing.T) {
	bin := chromium(t)
	page, incs, _ := writePage(t)
	dom := string(runChromium(t, bin, "--dump-dom", "file://"+page))

	if got := strings.Count(dom, `<g class="timeline-row"`); got != len(incs) || got != 6 {
		t.Errorf("DOM has %d timeline rows, want 6 (one per incident)", got)
	}
	if got := strings.Count(dom, `<tr class="incident"`); got != 6 {
		t.Errorf("DOM has %d incident table rows, want 6", got)
	}
	// 5 + 2 + 3 + 3 + 0 + 0 bars (zero-length phases are not drawn; E and
	// A2 have one detect bar each): see wantNight.
	if got := strings.Count(dom, `class="bar"`); got != 5+2+3+3+1+1 {
		t.Errorf("DOM has %d phase bars, want 15", got)
	}
	for id, want := range map[string]string{
		"incidents":  "6",
		"ttr-median": "2s",
		"ttr-p95":    "40m30s",
		"downtime":   "1h36m",
		"chip-hours": "29.25",
		"resumed":    "2 of 6",
	} {
		re := regexp.MustCompile(fmt.Sprintf(`<dd id="%s">([^<]*)</dd>`, id))
		m := re.FindStringSubmatch(dom)
		if m == nil || m[1] != want {
			t.Errorf("summary figure %s = %v, want %q", id, m, want)
		}
	}
	if !strings.Contains(dom, "by outcome: recovered by itself 2, abandoned 1, recreated 1, reset 1, skipped: not opted in 1") {
		t.Errorf("DOM lacks the outcome breakdown")
	}
}

func TestBrowserScreenshotShowsTheColouredBars(t *testing.T) {
	bin := chromium(t)
	page, _, _ := writePage(t)
	shot := filepath.Join(t.TempDir(), "shot.png")
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1200,900", "--hide-scrollbars", "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	colours := map[[3]uint8]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}]++
		}
	}
	if len(colours) < 16 {
		t.Errorf("screenshot has %d distinct colours: blank?", len(colours))
	}
	// The long bars' colours cover more than the legend's 14×10 swatch
	// does: the timeline spans 3 hours over 780 px, so C's 30-minute wait
	// is ~130×16 px, A's 8-minute create and B's 7-minute resume ~35×16 px
	// each, C's 10-minute reset ~43×16 px.
	for _, phase := range []string{report.PhaseWait, report.PhaseCreate, report.PhaseReset, report.PhaseResume} {
		var c [3]uint8
		if _, err := fmt.Sscanf(report.PhaseColors[phase], "#%02x%02x%02x", &c[0], &c[1], &c[2]); err != nil {
			t.Fatal(err)
		}
		if n := colours[c]; n < 400 {
			t.Errorf("phase %s's colour %s covers %d pixels of the screenshot, want its bars (>= 400)", phase, report.PhaseColors[phase], n)
		}
	}
}

// The browser will not make a window narrower than 500 px, so each width
// is an iframe of that width in a harness page: the report is the
// iframe's srcdoc, which makes it same-origin with the harness, and the
// script at the end of the report (fitScript) measures it while it loads
// and writes what it found into the harness's <pre id="fit-WIDTH"> (the
// iframe's name), which --dump-dom then shows. So the results are there
// once the harness has loaded, with no waiting.

// fitScript reports the window's width, whether the incidents table scrolls
// inside its own box, and every problem seen: a page wider than its window,
// a cell whose text is cut off or runs out of the cell, a table box wider
// than the window, or one that does not scroll when its table is wider.
const fitScript = `<script>
(function () {
  var problems = [];
  var doc = document.documentElement, vw = doc.clientWidth;
  if (doc.scrollWidth > vw) problems.push("the page is " + doc.scrollWidth + " px wide in a " + vw + " px window");
  var box = document.getElementById("incidents-scroll"), table = document.getElementById("incidents-table");
  var cells = table ? table.querySelectorAll("th, td") : [];
  if (!box || !table) problems.push("no incidents table in its scroll box");
  else {
    var b = box.getBoundingClientRect();
    if (b.right > vw + 0.5) problems.push("the table's box ends at " + b.right + " px, past the window's " + vw);
    var ox = getComputedStyle(box).overflowX;
    if (box.scrollWidth > box.clientWidth && ox !== "auto" && ox !== "scroll") problems.push("the table is wider than its box, which does not scroll (overflow-x " + ox + ")");
    for (var i = 0; i < cells.length; i++) {
      var c = cells[i], r = c.getBoundingClientRect(), st = getComputedStyle(c);
      var name = (c.tagName === "TH" ? "header" : "row " + c.parentNode.rowIndex) + ", column " + (c.cellIndex + 1) + " " + JSON.stringify(c.textContent);
      if (c.scrollWidth > c.clientWidth + 1 || c.scrollHeight > c.clientHeight + 1) problems.push(name + ": content " + c.scrollWidth + "x" + c.scrollHeight + " px in a " + c.clientWidth + "x" + c.clientHeight + " px cell");
      var range = document.createRange();
      range.selectNodeContents(c);
      var t = range.getBoundingClientRect();
      if (t.width > 0 && (t.left < r.left - 0.5 || t.right > r.right + 0.5 || t.top < r.top - 0.5 || t.bottom > r.bottom + 0.5)) problems.push(name + ": text runs out of the cell");
      if (r.right > b.left + box.scrollWidth + 0.5) problems.push(name + ": past the end of the table's scroll area");
      if (st.overflowX === "hidden" || st.overflowX === "clip" || st.textOverflow === "ellipsis") problems.push(name + ": cut by overflow " + st.overflowX + ", text-overflow " + st.textOverflow);
    }
  }
  var out = parent.document.getElementById("fit-" + window.name);
  out.textContent = JSON.stringify({ window: vw, cells: cells.length, tableWidth: table ? table.offsetWidth : 0,
    scrolls: box ? box.scrollWidth > box.clientWidth : false, problems: problems });
})();
</script>
`

// longIncident adds an incident whose node name, accelerator type and
// outcome are longer than any in night.jsonl (a skip reason of 40
// characters before its colon, the longest outcome the report makes).
const longIncident = `{"timestamp":"2026-11-20T03:20:00Z","insertId":"long-1","eventTime":"2026-11-20T03:19:58Z","action":"skip","node":"projects/acme-ml/locations/us-central2-b/nodes/llm-v5p-2048-pretraining-run-with-a-long-name","zone":"us-central2-b","cause":"maintenance","acceleratorType":"v5litepod-256-with-an-unusually-long-type","reason":"the node's service account is not one the function may use: x"}
`

// TestBrowserIncidentsTableFitsAt1280And390: at a laptop's 1280 px and a
// phone's 390 px, the page is never wider than the window and no cell of
// the incidents table is cut off: at 1280 the table fits as it is (long
// names wrap inside their cells), at 390 it scrolls inside its own box.
func TestBrowserIncidentsTableFitsAt1280And390(t *testing.T) {
	bin := chromium(t)
	recs := readFixture(t, "night.jsonl")
	extra, err := report.ReadAll([]byte(longIncident))
	if err != nil {
		t.Fatal(err)
	}
	moved, err := report.ReadAll([]byte(zoneMoved))
	if err != nil {
		t.Fatal(err)
	}
	// Compute Engine instance incidents (their outcomes) and a node a
	// zones: fallback moved (a note in its outcome cell) must fit too.
	recs = append(append(append(recs, extra...), readFixture(t, "instances.jsonl")...), moved...)
	incs := report.Group(recs)
	if len(incs) != 13 {
		t.Fatalf("%d incidents, want night.jsonl's 6, the long one, instances.jsonl's 4 and zoneMoved's 2", len(incs))
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, incs, report.Summarize(incs), "night of 2026-11-20"); err != nil {
		t.Fatal(err)
	}
	page := html.EscapeString(strings.Replace(b.String(), "</body>", fitScript+"</body>", 1))
	widths := []struct {
		width   int
		scrolls bool
	}{
		{1280, false},
		{390, true},
	}
	var harness strings.Builder
	harness.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\">\n")
	for _, w := range widths {
		fmt.Fprintf(&harness, "<pre id=\"fit-%d\"></pre>\n", w.width)
	}
	for _, w := range widths {
		// Tall enough that the page never scrolls down: its width is all
		// the report's.
		fmt.Fprintf(&harness, "<iframe name=\"%d\" width=\"%d\" height=\"6000\" style=\"border:0;display:block\" srcdoc=\"%s\"></iframe>\n", w.width, w.width, page)
	}
	harness.WriteString("</body></html>\n")
	path := filepath.Join(t.TempDir(), "harness.html")
	if err := os.WriteFile(path, []byte(harness.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(runChromium(t, bin, "--dump-dom", "--hide-scrollbars", "--window-size=1400,900", "file://"+path))

	for _, w := range widths {
		t.Run(fmt.Sprintf("%dpx", w.width), func(t *testing.T) {
			m := regexp.MustCompile(fmt.Sprintf(`<pre id="fit-%d">([^<]*)</pre>`, w.width)).FindStringSubmatch(dom)
			if m == nil || m[1] == "" {
				t.Fatalf("the measuring script wrote nothing for %d px:\n%s", w.width, clipText(dom, 2000))
			}
			var got struct {
				Window     int
				Cells      int
				TableWidth int
				Scrolls    bool
				Problems   []string
			}
			if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &got); err != nil {
				t.Fatalf("measurements %q: %v", m[1], err)
			}
			t.Logf("%d px: table %d px wide, scrolls inside its box: %v", got.Window, got.TableWidth, got.Scrolls)
			if got.Window != w.width {
				t.Fatalf("the report's window is %d px wide, want %d", got.Window, w.width)
			}
			if want := 12 * (1 + len(incs)); got.Cells != want {
				t.Errorf("%d cells measured, want %d (12 columns, a header and %d rows)", got.Cells, want, len(incs))
			}
			for _, p := range got.Problems {
				t.Errorf("at %d px: %s", w.width, p)
			}
			if got.Scrolls != w.scrolls {
				t.Errorf("at %d px the table scrolls inside its box: %v, want %v", w.width, got.Scrolls, w.scrolls)
			}
		})
	}
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
