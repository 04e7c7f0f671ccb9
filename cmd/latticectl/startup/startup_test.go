package startup

import (
	"os"
	"runtime"
	"testing"
)

func TestOneProcessor(t *testing.T) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set in the environment: the package leaves it alone")
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS = %d after the package's init, want 1", n)
	}
}
