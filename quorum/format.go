package quorum

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// checkDataFormat refuses a data dir this build would misread: its newest
// snapshot of a newer snapshot format or feature level, or a log entry
// after it of a command type (or field) this build does not know. Raft
// would otherwise fail to restore with a bare error, or the FSM would stop
// at the first unknown entry, after the member rejoined.
func checkDataFormat(dir string, snaps raft.SnapshotStore, logs raft.LogStore) error {
	refuse := func(what string, err error) error {
		return fmt.Errorf("data dir %s %s %w; this latticed (%s) knows feature level %d: run the newer latticed on it (or restore a backup taken before the upgrade into a fresh data dir)",
			dir, what, err, Build(), FeatureLevel)
	}
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots in %s: %w", dir, err)
	}
	var after uint64
	if len(metas) > 0 {
		meta, rc, err := snaps.Open(metas[0].ID)
		if err != nil {
			return fmt.Errorf("open snapshot %s: %w", metas[0].ID, err)
		}
		line, rerr := bufio.NewReader(rc).ReadBytes('\n')
		_ = rc.Close()
		var rec record
		if rerr == nil && json.Unmarshal(line, &rec) == nil && rec.Kind == "header" {
			if err := checkSnapshotHeader(&rec); errors.Is(err, ErrNewerFormat) {
				return refuse("holds snapshot "+meta.ID, err)
			}
		}
		after = meta.Index
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("read raft log: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("read raft log: %w", err)
	}
	var l raft.Log
	for i := max(first, after+1); i <= last && i > 0; i++ {
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return fmt.Errorf("read raft log entry %d: %w", i, err)
		}
		if l.Type != raft.LogCommand || len(l.Data) == 0 {
			continue
		}
		t := CommandType(l.Data[0])
		if !t.Known() {
			return refuse(fmt.Sprintf("holds log entry %d of command type %d", i, l.Data[0]), ErrNewerFormat)
		}
		if LevelOf(t) == LevelBase {
			continue // nothing of a later level can hide in it
		}
		c, err := Decode(l.Data)
		if err != nil {
			return refuse(fmt.Sprintf("holds log entry %d that this latticed cannot read (%v):", i, err), ErrNewerFormat)
		}
		if need := NeededLevel(c); need > FeatureLevel {
			return refuse(fmt.Sprintf("holds log entry %d (%s) of feature level %d", i, t, need), ErrNewerFormat)
		}
	}
	return nil
}
