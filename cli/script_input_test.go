package cli

import (
	"strings"
	"testing"
)

// TestSubmitScriptEncodingAndSize: a Latin-1 comment is accepted (its bytes
// travel as U+FFFD; the shell ignores comments), CRLF scripts and scripts
// over the limit are refused before anything is sent, naming why.
func TestSubmitScriptEncodingAndSize(t *testing.T) {
	f := newFakeServer(t)
	latin1 := writeScript(t, "#!/bin/sh\n# r\xe9sum\xe9 of the run\necho ok\n")
	mustCode(t, run(t, servers(f.addr), "submit", latin1), 0)
	if len(f.submits) != 1 || !strings.Contains(f.submits[0].Request.Script, "# r\uFFFDsum\uFFFD of the run\necho ok") {
		t.Fatalf("submits %d, script %q", len(f.submits), f.submits[0].GetRequest().GetScript())
	}
	crlf := writeScript(t, "#!/bin/sh\r\necho ok\r\n")
	r := run(t, servers(f.addr), "submit", crlf)
	mustCode(t, r, 2)
	if !strings.Contains(r.stderr, "DOS line breaks (CRLF)") || !strings.Contains(r.stderr, "dos2unix") {
		t.Errorf("stderr %q", r.stderr)
	}
	big := writeScript(t, "#!/bin/sh\n"+strings.Repeat("# padding\n", 1<<20))
	r = run(t, servers(f.addr), "submit", big)
	mustCode(t, r, 2)
	if !strings.Contains(r.stderr, "at most 1048576 bytes") || len(r.stderr) > 400 {
		t.Errorf("stderr %q", r.stderr)
	}
	bad := writeScript(t, "#!/bin/sh\necho caf\xe9\n")
	r = run(t, servers(f.addr), "submit", bad)
	mustCode(t, r, 2)
	if !strings.Contains(r.stderr, "not UTF-8 on line 2") {
		t.Errorf("stderr %q", r.stderr)
	}
	if len(f.submits) != 1 {
		t.Fatalf("refused scripts were sent: %d submits", len(f.submits))
	}
}
