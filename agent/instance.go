package agent

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// instanceFile keeps the agent's instance id in its data dir, so that an
// agent restarted on the same data dir is the same agent to the leader
// (AgentHello.instance): it replaces its old stream at once, where a
// stranger claiming the same nodes is refused.
const instanceFile = "instance-id"

// loadInstance reads the instance id from dir, minting (and saving) a
// random one the first time; without a dir the id lives as long as the
// process.
func loadInstance(dir string) (string, error) {
	mint := func() string {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
		return hex.EncodeToString(b[:])
	}
	if dir == "" {
		return mint(), nil
	}
	path := filepath.Join(dir, instanceFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); len(id) == 32 {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("instance id %s: %w", path, err)
	}
	id := mint()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return id, nil
}
