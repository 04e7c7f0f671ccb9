package quorum

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// Backups are snapshot streams (see snapshot.go) taken from the leader:
// checksummed, verifiable offline, and restorable into a fresh cluster.
//
// Restore procedure (docs/ARCHITECTURE.md has it for operators):
//  1. stop every member and move their data dirs aside;
//  2. `latticectl quorum restore FILE --data-dir DIR` on the first member's
//     host: it verifies the backup and stages it in DIR/restore/;
//  3. start that member with --bootstrap: once leader it installs the staged
//     backup through Raft's restore (a new snapshot past every index);
//  4. start the other members with --join; they receive it as a snapshot.

const pendingRestore = "pending.snapshot"

// VerifyBackupFile checks a backup's checksum, structure and invariants.
func VerifyBackupFile(path string) (Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	return VerifySnapshot(f)
}

// PrepareRestore verifies a backup and stages it in dataDir for the member
// that will bootstrap there. dataDir must not hold Raft state.
func PrepareRestore(backupPath, dataDir string) (Summary, error) {
	sum, err := VerifyBackupFile(backupPath)
	if err != nil {
		return Summary{}, fmt.Errorf("backup %s: %w", backupPath, err)
	}
	if st, err := os.Stat(filepath.Join(dataDir, "raft", "raft.db")); err == nil && st.Size() > 0 {
		return Summary{}, fmt.Errorf("data dir %s already holds Raft state; restore into an empty data dir (move the old one aside)", dataDir)
	}
	dir := filepath.Join(dataDir, "restore")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Summary{}, err
	}
	in, err := os.Open(backupPath)
	if err != nil {
		return Summary{}, err
	}
	defer in.Close()
	tmp := filepath.Join(dir, pendingRestore+".tmp")
	out, err := os.Create(tmp)
	if err != nil {
		return Summary{}, err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return Summary{}, err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return Summary{}, err
	}
	if err := out.Close(); err != nil {
		return Summary{}, err
	}
	return sum, os.Rename(tmp, filepath.Join(dir, pendingRestore))
}

// ApplyPendingRestore installs a staged backup through Raft's restore. Only
// the leader can do it; it returns false when nothing is staged.
func (q *Quorum) ApplyPendingRestore() (bool, error) {
	path := filepath.Join(q.cfg.DataDir, "restore", pendingRestore)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: st.Size()}
	if err := q.raft.Restore(meta, f, 5*60*1e9); err != nil {
		return false, fmt.Errorf("restore %s: %w", path, q.mapErr(err))
	}
	applied := filepath.Join(q.cfg.DataDir, "restore", fmt.Sprintf("applied-at-index-%d.snapshot", q.raft.LastIndex()))
	if err := os.Rename(path, applied); err != nil {
		return true, fmt.Errorf("restored, but could not move %s aside: %w", path, err)
	}
	q.log.Info("backup restored", "file", applied)
	return true, nil
}
