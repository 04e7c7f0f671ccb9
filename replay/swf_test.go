package replay

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// swfLine builds an 18-field SWF line: job, submit, run, alloc, req procs,
// req time, user; the other fields are -1.
func swfLine(job, submit, run, alloc, req, reqTime, user string) string {
	f := []string{job, submit, "-1", run, alloc, "-1", "-1", req, reqTime, "-1", "1", user, "-1", "-1", "-1", "-1", "-1", "-1"}
	return strings.Join(f, " ")
}

func TestReadSWFJobModel(t *testing.T) {
	in := strings.Join([]string{
		"; Version: 2.2",
		"; MaxNodes: 8",
		"; MaxProcs: 16",
		swfLine("1", "0", "100", "4", "-1", "200", "7"),  // size from field 5, estimate 200
		swfLine("2", "5", "552.21", "4", "6", "-1", "7"), // size from field 8, estimate = runtime, decimals
		swfLine("3", "5", "300", "2", "2", "100", "9"),   // estimate below runtime: raised to 300
		swfLine("4", "6", "-1", "2", "2", "100", "9"),    // runtime < 0: dropped
		swfLine("5", "7", "10", "0", "0", "100", "9"),    // size 0: dropped
		swfLine("6", "8", "10", "32", "32", "100", "9"),  // larger than MaxProcs 16: dropped
		swfLine("7", "1", "0", "1", "1", "100", "-1"),    // runtime 0 kept; unknown user
		"",
	}, "\n")
	tr, err := ReadSWF(strings.NewReader(in), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Capacity != 16 {
		t.Errorf("capacity %d, want MaxProcs 16", tr.Capacity)
	}
	if tr.Dropped != 3 || tr.Skipped != 0 {
		t.Errorf("dropped %d skipped %d, want 3 and 0", tr.Dropped, tr.Skipped)
	}
	want := []Job{
		{ID: 1, Submit: 0, Runtime: 100 * time.Second, Estimate: 200 * time.Second, Size: 4, Tenant: "u7"},
		{ID: 7, Submit: time.Second, Runtime: 0, Estimate: 100 * time.Second, Size: 1, Tenant: "unknown"},
		{ID: 2, Submit: 5 * time.Second, Runtime: 552210 * time.Millisecond, Estimate: 552210 * time.Millisecond, Size: 6, Tenant: "u7"},
		{ID: 3, Submit: 5 * time.Second, Runtime: 300 * time.Second, Estimate: 300 * time.Second, Size: 2, Tenant: "u9"},
	}
	if len(tr.Jobs) != len(want) {
		t.Fatalf("got %d jobs, want %d: %+v", len(tr.Jobs), len(want), tr.Jobs)
	}
	for i := range want {
		g, w := tr.Jobs[i], want[i]
		if g.ID != w.ID || g.Submit != w.Submit || g.Runtime != w.Runtime || g.Estimate != w.Estimate || g.Size != w.Size || g.Tenant != w.Tenant {
			t.Errorf("job %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestReadSWFCapacityFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"MaxNodes when no MaxProcs", "; MaxNodes: 12\n", 12},
		{"largest job without headers", "", 5},
		{"MaxProcs -1 ignored", "; MaxProcs: -1\n; MaxNodes: 9\n", 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.header + swfLine("1", "0", "10", "5", "-1", "-1", "1") + "\n" + swfLine("2", "0", "10", "3", "-1", "-1", "1")
			tr, err := ReadSWF(strings.NewReader(in), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Capacity != tc.want {
				t.Errorf("capacity %d, want %d", tr.Capacity, tc.want)
			}
		})
	}
}

func TestReadSWFMalformed(t *testing.T) {
	good := swfLine("1", "0", "10", "1", "1", "10", "1")
	for _, tc := range []struct {
		name, line, msg string
	}{
		{"too few fields", "2 0 -1 10 1", "line 3: 5 fields, want 18"},
		{"too many fields", good + " 7", "line 3: 19 fields, want 18"},
		{"not a number", swfLine("2", "0", "ten", "1", "1", "10", "1"), `line 3: field 4 (run time) is "ten", want a number`},
		{"NaN", swfLine("2", "0", "10", "NaN", "1", "10", "1"), `line 3: field 5 (allocated processors) is "NaN"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := "; MaxProcs: 4\n" + good + "\n" + tc.line + "\n" + good + "\n"
			_, err := ReadSWF(strings.NewReader(in), ReadOptions{})
			var se *SyntaxError
			if !errors.As(err, &se) || se.Line != 3 || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want a SyntaxError at line 3 containing %q", err, tc.msg)
			}
			tr, err := ReadSWF(strings.NewReader(in), ReadOptions{Lenient: true})
			if err != nil {
				t.Fatalf("lenient: %v", err)
			}
			if tr.Skipped != 1 || len(tr.Jobs) != 2 {
				t.Errorf("lenient: skipped %d, %d jobs; want 1 skipped and 2 jobs", tr.Skipped, len(tr.Jobs))
			}
		})
	}
}

func TestReadFileGzip(t *testing.T) {
	in := "; MaxProcs: 4\n" + swfLine("1", "0", "10", "2", "2", "10", "1") + "\n"
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(in))
	zw.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "t.swf.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := ReadFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Name != "t.swf" || tr.Capacity != 4 || len(tr.Jobs) != 1 {
		t.Errorf("got name %q capacity %d jobs %d", tr.Name, tr.Capacity, len(tr.Jobs))
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.swf"), ReadOptions{}); err == nil {
		t.Error("missing file: no error")
	}
}
