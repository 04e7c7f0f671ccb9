package cli

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkMungeEncode is what MUNGE adds to a latticectl call: one
// `munge -n` (LATTICE_MUNGE_SOCKET names a running munged), against a
// process start that does nothing (/bin/true).
func BenchmarkMungeEncode(b *testing.B) {
	sock := os.Getenv("LATTICE_MUNGE_SOCKET")
	if sock == "" {
		b.Skip("set LATTICE_MUNGE_SOCKET to a running munged's socket")
	}
	b.Run("munge-n", func(b *testing.B) {
		for range b.N {
			if _, err := mungeEncode(context.Background(), sock); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bin-true", func(b *testing.B) {
		for range b.N {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
