//go:build browser

package report_test

import (
	"bytes"
	"context"
	"fmt"
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
