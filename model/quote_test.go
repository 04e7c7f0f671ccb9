package model

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuoteClipsLongValues(t *testing.T) {
	if got := Quote("node1"); got != `"node1"` {
		t.Fatalf("short value: %s", got)
	}
	long := strings.Repeat("é", 1000) // 2,000 bytes, 2-byte runes
	got := Quote(long)
	if len(got) > MaxQuotedBytes+32 || !strings.Contains(got, "bytes)") || !utf8.ValidString(got) {
		t.Fatalf("long value quoted as %d bytes: %s", len(got), got)
	}
	err := (&FieldError{Field: "name", Value: strings.Repeat("x", 1<<20), Allowed: "a short name"}).Error()
	if len(err) > 300 || !strings.Contains(err, "invalid name") || !strings.Contains(err, "a short name") {
		t.Fatalf("field error of a 1 MiB value: %d bytes", len(err))
	}
}
