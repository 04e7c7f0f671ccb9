package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlagAndConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("id: [broken\n"), 0o644)
	wrongType := filepath.Join(dir, "wrong.yaml")
	os.WriteFile(wrongType, []byte("id: s1\nbootstrap: sometimes\n"), 0o644)
	tlsConfig := filepath.Join(dir, "tls.yaml")
	os.WriteFile(tlsConfig, []byte("id: s1\ntls-cert: /nonexistent/s1.crt\ntls-key: /nonexistent/s1.key\n"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"server", "--data-dir", dir}, "invalid id"},
		{[]string{"server", "--id", "s1"}, "invalid data-dir"},
		{[]string{"server", "--config", filepath.Join(dir, "missing.yaml")}, "invalid config"},
		{[]string{"server", "--config", bad}, "config"},
		{[]string{"server", "--config", wrongType, "--data-dir", dir}, "bootstrap"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--bootstrap", "--join", "127.0.0.1:1"}, "bootstrap"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--vclusters", "bad name"}, "vcluster"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--power-budget-kw", "-3"}, "power-budget-kw"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--http", "0.0.0.0:0"}, "http"}, // auth off: loopback only
		{[]string{"dev", "--nodes", "0"}, "nodes"},
		{[]string{"dev", "--groups", "99", "--nodes", "8"}, "groups"},
		{[]string{"dev", "--vclusters", "a:3,b:x"}, "vclusters"},
		{[]string{"dev", "--node-watts", "400:100"}, "node-watts"},
		{[]string{"dev", "--max-array-size", "0"}, "max-array-size"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--max-dag-stages", "1000000"}, "max-dag-stages"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--max-starts-per-cycle", "-1"}, "max-starts-per-cycle"},
		{[]string{"dev", "--max-starts-per-cycle", "1000001"}, "max-starts-per-cycle"},
		{[]string{"agent"}, "server"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--simulate", "-1"}, "simulate"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--node-watts", "x"}, "node-watts"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--fingerprint-check", "-1s"}, "fingerprint-check"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--machine-root", filepath.Join(dir, "nope")}, "machine-root"},
		{[]string{"--log-level", "loud", "dev"}, "log-level"},
		{[]string{"server", "--no-such-flag"}, "no-such-flag"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--tls-cert", "a.crt"}, "tls-ca"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--tls-ca", filepath.Join(dir, "none.pem"), "--tls-cert", "a", "--tls-key", "b"}, "cannot read"},
		{[]string{"server", "--id", "s1", "--data-dir", dir, "--tls-ca", bad, "--tls-cert", "a", "--tls-key", "b"}, "no PEM certificate"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--tls-cert", "a.crt"}, "tls-ca"},
		{[]string{"server", "--config", tlsConfig, "--data-dir", dir}, "tls-ca"}, // the config file's keys are read
		{[]string{"ca", "init"}, "dir"},
		{[]string{"ca", "init", "--dir", dir, "--members", "bad name"}, "members"},
		{[]string{"agent", "--server", "127.0.0.1:1", "--virtual-runs"}, "virtual-runs"},
		{[]string{"bench", "scale", "--sizes", "1:x"}, "sizes"},
		{[]string{"bench", "scale", "--runtimes", "-5"}, "runtimes"},
		{[]string{"bench", "scale", "--borrow", "2"}, "borrow"},
		{[]string{"bench", "scale", "--agents", "0"}, "agents"},
		{[]string{"bench", "scale", "--rate", "0"}, "rate"},
		{[]string{"bench", "throughput", "--jobs", "0"}, "jobs"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := app().Run(append([]string{"latticed"}, tc.args...))
			if err == nil {
				t.Fatal("accepted")
			}
			if code := exitCode(err); code != 2 {
				t.Fatalf("exit code %d (%v), want 2", code, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}
