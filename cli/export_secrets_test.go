package cli

import (
	"slices"
	"strings"
	"testing"
)

// latticectl never exports its own credentials, whatever --export says.
func TestExportNeverCarriesOwnCredentials(t *testing.T) {
	environ := []string{"LATTICE_TOKEN=lat_x", "LATTICE_CACERT=/etc/ca.pem", "LATTICE_CERT=/c.pem", "LATTICE_KEY=/k.pem",
		"LATTICE_MUNGE_SOCKET=/run/munge.socket", "HOME=/home/u", "PATH=/bin"}
	for _, export := range []string{"", "ALL", "ALL,LATTICE_TOKEN", "LATTICE_TOKEN,HOME", "ALL,LATTICE_TOKEN=other"} {
		env, err := parseExport(export, environ)
		if err != nil {
			t.Fatalf("--export %q: %v", export, err)
		}
		for _, e := range env {
			if k, _, _ := strings.Cut(e, "="); ownCredentials[k] {
				t.Errorf("--export %q passes %s", export, e)
			}
		}
		if !slices.Contains(env, "HOME=/home/u") {
			t.Errorf("--export %q lost HOME: %v", export, env)
		}
	}
}
