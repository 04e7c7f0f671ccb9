package quorum

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/latticehpc/lattice/model"
)

func TestBackupVerifyDetectsCorruption(t *testing.T) {
	f := newFixture(t)
	id := f.submit("batch", 2)
	f.assign("batch", id, "b0", "b1")
	f.submit("ml", 1)
	var buf bytes.Buffer
	if err := f.s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	sum, err := VerifySnapshot(bytes.NewReader(good))
	if err != nil || sum.Allocations != 2 || sum.Nodes != 6 || sum.VClusters != 2 {
		t.Fatalf("verify good backup: %+v %v", sum, err)
	}
	cases := map[string][]byte{
		"flipped byte": func() []byte { b := bytes.Clone(good); b[len(b)/2] ^= 0x20; return b }(),
		"truncated":    good[:len(good)-40],
		"no checksum":  good[:bytes.LastIndex(good[:len(good)-1], []byte("\n"))+1],
		"empty":        nil,
		"appended":     append(bytes.Clone(good), []byte(`{"kind":"node"}`+"\n")...),
	}
	for name, data := range cases {
		if _, err := VerifySnapshot(bytes.NewReader(data)); err == nil || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: verify = %v, want ErrCorrupt", name, err)
		}
	}
	// A restored state equals the original, byte for byte.
	s2, err := ReadSnapshot(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := s2.WriteSnapshot(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(good, again.Bytes()) {
		t.Fatal("snapshot → restore → snapshot changed the bytes")
	}
	if a := s2.Allocation(id); a == nil || a.State != model.StateStaging || s2.Node("b0").Allocation != id {
		t.Fatal("restored state lost the assignment")
	}
}

func TestPrepareRestore(t *testing.T) {
	f := newFixture(t)
	f.submit("batch", 1)
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.lattice")
	out, _ := os.Create(backup)
	if err := f.s.WriteSnapshot(out); err != nil {
		t.Fatal(err)
	}
	out.Close()
	data := filepath.Join(dir, "member")
	if _, err := PrepareRestore(backup, data); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, "restore", pendingRestore)); err != nil {
		t.Fatal("backup not staged")
	}
	// A data dir that already holds Raft state is refused.
	os.MkdirAll(filepath.Join(dir, "used", "raft"), 0o755)
	os.WriteFile(filepath.Join(dir, "used", "raft", "raft.db"), []byte("x"), 0o644)
	if _, err := PrepareRestore(backup, filepath.Join(dir, "used")); err == nil {
		t.Fatal("restore into a used data dir was accepted")
	}
	// A corrupt backup is refused.
	b, _ := os.ReadFile(backup)
	b[10] ^= 1
	os.WriteFile(backup, b, 0o644)
	if _, err := PrepareRestore(backup, filepath.Join(dir, "other")); err == nil {
		t.Fatal("corrupt backup staged")
	}
}
