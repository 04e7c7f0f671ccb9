package cli

import (
	"strings"
	"testing"
)

// TestSubmitScriptEncodingAndSize: a script with Latin-1 bytes is accepted
// and sent byte for byte (script_bytes; the text field carries '?' for
// older servers), CRLF scripts and scripts over the limit are refused
// before anything is sent, naming why.
func TestSubmitScriptEncodingAndSize(t *testing.T) {
	f := newFakeServer(t)
	const latin1Text = "#!/bin/sh\n# r\xe9sum\xe9 of the run\necho ok\n"
	latin1 := writeScript(t, latin1Text)
	mustCode(t, run(t, servers(f.addr), "submit", latin1), 0)
	if len(f.submits) != 1 || !strings.Contains(f.submits[0].Request.Script, "# r?sum? of the run\necho ok") ||
		string(f.submits[0].Request.ScriptBytes) != latin1Text {
		t.Fatalf("submits %d, script %q, bytes %q", len(f.submits), f.submits[0].GetRequest().GetScript(), f.submits[0].GetRequest().GetScriptBytes())
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
	if len(f.submits) != 1 {
		t.Fatalf("refused scripts were sent: %d submits", len(f.submits))
	}
	// Like sbatch, bytes outside comments are the script's own business.
	inCommand := writeScript(t, "#!/bin/sh\necho caf\xe9\n")
	mustCode(t, run(t, servers(f.addr), "submit", inCommand), 0)
	if len(f.submits) != 2 || string(f.submits[1].Request.ScriptBytes) != "#!/bin/sh\necho caf\xe9\n" {
		t.Fatalf("a Latin-1 command line was not sent as bytes: %d submits", len(f.submits))
	}
}

// TestTLSFlagErrors: unreadable or incomplete TLS files are usage errors
// naming the flag, before anything is sent.
func TestTLSFlagErrors(t *testing.T) {
	f := newFakeServer(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cacert", "/nonexistent/ca.crt", "status"}, "invalid cacert"},
		{[]string{"--cacert", writeScript(t, "not a certificate"), "status"}, "no PEM certificate"},
		{[]string{"--cert", "/nonexistent/a.crt", "status"}, "--cert and --key"},
	} {
		r := run(t, servers(f.addr), tc.args...)
		mustCode(t, r, 2)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, r.stderr, tc.want)
		}
	}
}
