package emulator

import (
	"strings"
	"testing"
)

// TestTailRemembersTheServingLine: the emulator says where it serves once,
// early; every readiness probe then logs a stack trace of kilobytes. Under
// load several probes run before the line is looked for, and the line must
// still be found (CI failed every emulator suite when only the last 8 KiB
// were kept).
func TestTailRemembersTheServingLine(t *testing.T) {
	var out tail
	out.Write([]byte("Executing: cloud_firestore_emulator start\n[firestore] API endpoint: http://127.0.0.1:20522\n"))
	trace := "[firestore] INFO: Exception when handling request: NOT_FOUND\n" + strings.Repeat("[firestore] \tat com.google.cloud.datastore.emulator.Frame(Frame.java:1)\n", 40)
	for i := 0; i < 20; i++ {
		out.Write([]byte(trace))
	}
	if !out.contains("API endpoint: http://127.0.0.1:20522") {
		t.Fatal("the serving line printed before 20 stack traces is forgotten")
	}
	if out.contains("API endpoint: http://127.0.0.1:20523") {
		t.Fatal("contains found a line never printed")
	}
	if len(out.String()) > tailBytes {
		t.Errorf("the tail holds %d bytes; want at most %d", len(out.String()), tailBytes)
	}
}
