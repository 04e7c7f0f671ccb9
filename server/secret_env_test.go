package server

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// LATTICE_TOKEN and the variables a site names are found in no log entry,
// snapshot, backup or job environment (what the assignment carried).
func TestSecretsStayOutOfTheLog(t *testing.T) {
	dir := t.TempDir()
	d := startDevWith(t, dir, 2, []string{"hpc-batch"}, func(c *Config) { c.NeverStoreEnv = []string{"*_PASSWORD"} })
	const token, password = "lat_i25tokenvalue", "i25hunter2value"
	env := []string{"LATTICE_TOKEN=" + token, "SECRET_DB_PASSWORD=" + password, "KEEP_ME=i25visible"}
	ran := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"env"}, Env: env})
	d.waitState(t, ran, model.StateCompleted)
	out := d.logs(t, ran, false)
	if !strings.Contains(out, "KEEP_ME=i25visible") || strings.Contains(out, token) || strings.Contains(out, password) {
		t.Fatalf("the job's environment: want KEEP_ME and neither secret:\n%s", out)
	}
	// A held job keeps its environment in the state (and so in snapshots).
	d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"env"}, Env: env, Hold: true})
	if err := d.srv.q.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	stream, err := latticev1.NewAdminServiceClient(d.conn).Backup(context.Background(), &latticev1.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var backup []byte
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		backup = append(backup, c.Data...)
	}
	if !bytes.Contains(backup, []byte("i25visible")) {
		t.Fatal("the backup lacks the held job's environment: the test looks in the wrong place")
	}
	if bytes.Contains(backup, []byte(token)) || bytes.Contains(backup, []byte(password)) {
		t.Fatal("a secret is in the backup")
	}
	d.stop()
	found := 0
	err = filepath.WalkDir(filepath.Join(dir, "quorum"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("i25visible")) {
			found++
		}
		if bytes.Contains(b, []byte(token)) || bytes.Contains(b, []byte(password)) {
			t.Errorf("a secret is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no file of the quorum's data dir holds the environment: the test looks in the wrong place")
	}
}

func TestNeverStoreEnvPatternsAreChecked(t *testing.T) {
	if err := checkNeverStoreEnv([]string{"GOOD", "*_PASSWORD", "[bad"}); err == nil || !strings.Contains(err.Error(), "never-store-env") {
		t.Fatalf("a malformed pattern: %v", err)
	}
}
