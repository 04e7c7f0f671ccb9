package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// TestLatin1ScriptRunsAsBytes: a script with a Latin-1 é (byte 0xE9) in a
// comment and in a command is submitted as script_bytes, stored, sent to
// the agent and written to the script file byte for byte: the job copies
// its own script file and echoes the word, and both have the original
// byte. Get returns the bytes too, and the text form for old clients.
func TestLatin1ScriptRunsAsBytes(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 2)
	copyTo, echoTo := filepath.Join(dir, "script-copy"), filepath.Join(dir, "echo-out")
	script := []byte("#!/bin/sh\n# r\xe9sum\xe9 of the run (Latin-1)\ncp \"$0\" " + copyTo + "\necho caf\xe9 > " + echoTo + "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := d.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		NodesMin: 1, WalltimeSeconds: 60, WorkDir: dir, Hold: true, // held: Get sees it before it runs and ends
		Script:      "#!/bin/sh\n# r\uFFFDsum\uFFFD of the run (Latin-1)\n", // what an old client would send; the bytes win
		ScriptBytes: script,
	}})
	if err != nil {
		t.Fatalf("submit a Latin-1 script: %v", err)
	}
	id := resp.Ids[0]
	d.srv.Quorum().View(func(st *quorum.State) {
		if got := st.Allocation(id).Request.ScriptContent(); got != string(script) {
			t.Fatalf("stored script %q, want %q", got, script)
		}
	})
	a, err := d.allocs.Get(ctx, &latticev1.GetAllocationRequest{Id: resp.DisplayId})
	if err != nil || !bytes.Equal(a.Request.ScriptBytes, script) || a.Request.Script != "#!/bin/sh\n# r?sum? of the run (Latin-1)\ncp \"$0\" "+copyTo+"\necho caf? > "+echoTo+"\n" {
		t.Fatalf("Get: bytes %q text %q (%v)", a.GetRequest().GetScriptBytes(), a.GetRequest().GetScript(), err)
	}
	if _, err := d.allocs.Release(ctx, &latticev1.JobControlRequest{Ids: []string{resp.DisplayId}}); err != nil {
		t.Fatalf("release: %v", err)
	}
	waitFor(t, 20*time.Second, "the job completed", func() bool {
		a, err := d.allocs.Get(ctx, &latticev1.GetAllocationRequest{Id: resp.DisplayId})
		return err == nil && a.State == "COMPLETED"
	})
	copied, err := os.ReadFile(copyTo)
	if err != nil || !bytes.Equal(copied, script) {
		t.Fatalf("the script file the agent wrote: %q (%v), want %q", copied, err, script)
	}
	if !bytes.Contains(copied, []byte{'r', 0xE9, 's'}) {
		t.Fatalf("the byte 0xE9 is not in the script file")
	}
	if out, _ := os.ReadFile(echoTo); !bytes.Equal(out, []byte("caf\xe9\n")) {
		t.Fatalf("the job echoed %q, want caf\\xe9", out)
	}
	// Ended, it keeps no script: neither form (the compact stored form).
	if a, err := d.allocs.Get(ctx, &latticev1.GetAllocationRequest{Id: resp.DisplayId}); err != nil || len(a.Request.ScriptBytes) != 0 || a.Request.Script != "" {
		t.Fatalf("an ended allocation still carries its script: %d bytes, %d chars (%v)", len(a.GetRequest().GetScriptBytes()), len(a.GetRequest().GetScript()), err)
	}
}

// TestLargestLatin1ScriptFits: a script at the size limit made of bytes
// that are not UTF-8 travels twice (text and bytes) and still fits what
// the server accepts and what a client receives back.
func TestLargestLatin1ScriptFits(t *testing.T) {
	d := startDev(t, t.TempDir(), 2)
	line := []byte("# \xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\xe9a\n")
	script := append([]byte("#!/bin/sh\n"), bytes.Repeat(line, (model.MaxScriptBytes-20)/len(line))...)
	script = append(script, "true\n"...)
	text, raw := model.ScriptWire(string(script))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := d.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		NodesMin: 1, WalltimeSeconds: 60, Script: text, ScriptBytes: raw, Hold: true}}) // held: no run writes into the temp dir as it is removed
	if err != nil {
		t.Fatalf("submit a %d-byte Latin-1 script: %v", len(script), err)
	}
	a, err := d.allocs.Get(ctx, &latticev1.GetAllocationRequest{Id: resp.DisplayId})
	if err != nil || !bytes.Equal(a.Request.ScriptBytes, script) {
		t.Fatalf("Get: %d bytes back (%v)", len(a.GetRequest().GetScriptBytes()), err)
	}
}
