package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The saved token: `latticed dev` writes an admin token for the local user
// to TokenPath (0600), and latticectl sends it when neither --token nor
// LATTICE_TOKEN is given.

// TokenPath is where the saved token lives: $XDG_CONFIG_HOME/lattice/token,
// else ~/.config/lattice/token.
func TokenPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "lattice", "token"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "lattice", "token"), nil
	}
	return "", errors.New("no config directory for the saved token: set HOME or XDG_CONFIG_HOME")
}

// ReadSavedToken returns the saved token, or "" when there is none.
func ReadSavedToken(getenv func(string) string) (string, error) {
	p, err := TokenPath(getenv)
	if err != nil {
		return "", nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("saved token %s: %w", p, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// SaveToken writes the token to TokenPath, readable by its owner only.
func SaveToken(getenv func(string) string, token string) (string, error) {
	p, err := TokenPath(getenv)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("save token: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save token: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("save token: %w", err)
	}
	return p, nil
}

// token is --token, LATTICE_TOKEN, or the saved token.
func (r *runner) token(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if r.Getenv == nil {
		return "", nil
	}
	return ReadSavedToken(r.Getenv)
}
