package quorum

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/latticehpc/lattice/model"
)

func openSingle(t *testing.T, dir string) (*Quorum, error) {
	t.Helper()
	q, err := Open(Config{ID: "m1", DataDir: dir, InMemTransport: true, Bootstrap: true, RaftLogLevel: "off", NoSync: true}, NewFSM())
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for !q.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return q, nil
}

// A member refuses to start on a data dir holding what a newer latticed
// wrote — a log entry of a type it does not know, a snapshot of a later
// feature level — with a message naming the data dir and what to do.
func TestRefusesADataDirOfANewerFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m1")
	q, err := openSingle(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Propose(context.Background(), &SetVCluster{Header: Header{Time: t0}, VCluster: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := q.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// It opens again: nothing newer in it.
	if q, err = openSingle(t, dir); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	_ = q.Shutdown()

	// A newer latticed appended an entry of a type this one does not know.
	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft", "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	last, _ := store.LastIndex()
	if err := store.StoreLog(&raft.Log{Index: last + 1, Term: 1, Type: raft.LogCommand, Data: []byte{250, '{', '}'}}); err != nil {
		t.Fatal(err)
	}
	_ = store.Close()
	_, err = openSingle(t, dir)
	if !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("open = %v, want ErrNewerFormat", err)
	}
	for _, want := range []string{dir, "command type 250", "newer latticed", "feature level 1", "run the newer latticed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

func TestRefusesASnapshotOfALaterLevel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m1")
	snaps, err := raft.NewFileSnapshotStore(dir, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := NewState()
	s.level = FeatureLevel + 1
	sink, err := snaps.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.image().write(sink); err != nil {
		t.Fatal(err)
	}
	_ = sink.Close()
	_, err = Open(Config{ID: "m1", DataDir: dir, InMemTransport: true, RaftLogLevel: "off", NoSync: true}, NewFSM())
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "feature level 2") {
		t.Fatalf("open = %v, want a refusal naming feature level 2", err)
	}
	// The same state at this build's level is read.
	s.level = FeatureLevel
	var buf strings.Builder
	_ = s.image().write(&buf)
	if _, err := ReadSnapshot(strings.NewReader(buf.String())); err != nil {
		t.Fatal(err)
	}
}
