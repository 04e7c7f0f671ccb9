package replay

import (
	"strings"
	"testing"
)

// FuzzReadSWF: any input either reads as a trace or fails with an error;
// it never panics.
func FuzzReadSWF(f *testing.F) {
	f.Add("; MaxNodes: 4\n1 0 10 100 2 -1 -1 2 200 -1 1 1 1 -1 1 -1 -1 -1\n")
	f.Add("1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	f.Add("; MaxProcs: -5\n1 1e308 -1 NaN 2\n")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ReadSWF(strings.NewReader(s), ReadOptions{})
	})
}
