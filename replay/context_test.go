package replay

import (
	"context"
	"errors"
	"testing"
)

// TestRunContextCancelled: a replay whose context is done stops with the
// context's error (latticectl's Ctrl-C).
func TestRunContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr := loadTrace(t, "hpc2n.swf")
	for _, p := range []string{PolicyEASY, PolicyLattice} {
		if res, err := RunContext(ctx, tr, Config{Policy: p}); !errors.Is(err, context.Canceled) || res != nil {
			t.Errorf("%s: %v, %v; want context.Canceled and no result", p, res, err)
		}
	}
	if _, err := RunContext(context.Background(), tr.First(100), Config{Policy: PolicyEASY}); err != nil {
		t.Errorf("not cancelled: %v", err)
	}
}
