package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSavedTokenPathAndRoundTrip(t *testing.T) {
	dir := t.TempDir()
	envs := map[string]map[string]string{
		"xdg":  {"XDG_CONFIG_HOME": dir, "HOME": "/nonexistent"},
		"home": {"HOME": dir},
	}
	want := map[string]string{"xdg": filepath.Join(dir, "lattice", "token"), "home": filepath.Join(dir, ".config", "lattice", "token")}
	for name, env := range envs {
		t.Run(name, func(t *testing.T) {
			getenv := func(k string) string { return env[k] }
			p, err := TokenPath(getenv)
			if err != nil || p != want[name] {
				t.Fatalf("TokenPath = %q, %v; want %q", p, err, want[name])
			}
			if tok, err := ReadSavedToken(getenv); err != nil || tok != "" {
				t.Fatalf("no saved token yet: got %q, %v", tok, err)
			}
			if _, err := SaveToken(getenv, "lat_abc"); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("saved token mode %v, %v; want 0600", fi.Mode(), err)
			}
			if tok, err := ReadSavedToken(getenv); err != nil || tok != "lat_abc" {
				t.Fatalf("ReadSavedToken = %q, %v", tok, err)
			}
		})
	}
	if _, err := TokenPath(func(string) string { return "" }); err == nil {
		t.Fatal("TokenPath without HOME or XDG_CONFIG_HOME should fail (tests stay hermetic)")
	}
}

// TestSavedTokenIsSentWhenNoneGiven: without --token or LATTICE_TOKEN the
// token `latticed dev` saved is sent; either of them wins over it.
func TestSavedTokenIsSentWhenNoneGiven(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	env["XDG_CONFIG_HOME"] = t.TempDir()
	if _, err := SaveToken(func(k string) string { return env[k] }, "lat_saved"); err != nil {
		t.Fatal(err)
	}
	mustCode(t, run(t, env, "status"), 0)
	mustCode(t, run(t, env, "status", "--token", "lat_flag"), 0)
	env["LATTICE_TOKEN"] = "lat_env"
	mustCode(t, run(t, env, "status"), 0)
	if _, _, auth := f.snapshot(); !reflect.DeepEqual(auth, []string{"Bearer lat_saved", "Bearer lat_flag", "Bearer lat_env"}) {
		t.Errorf("authorization %q", auth)
	}
}
