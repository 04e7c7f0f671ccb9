package conformance

import (
	"reflect"
	"testing"

	"github.com/latticehpc/lattice/model"
)

func TestFingerprint(t *testing.T) {
	base := Fingerprint("550.54", "28.39", "2.1.4", "quiet iommu=pt")
	if len(base) != FingerprintLen {
		t.Fatalf("len(%q) = %d, want %d", base, len(base), FingerprintLen)
	}
	// Golden value: the fingerprint must never change between releases,
	// or every node would change group on upgrade.
	if want := "bd174201709316e2"; base != want {
		t.Fatalf("Fingerprint changed: %q, want %q", base, want)
	}
	same := []struct{ name, d, n, b, k string }{
		{"spaces around fields", " 550.54 ", "28.39\n", "\t2.1.4", "quiet iommu=pt"},
		{"kernel params reordered", "550.54", "28.39", "2.1.4", "iommu=pt   quiet"},
		{"kernel params repeated", "550.54", "28.39", "2.1.4", "quiet iommu=pt quiet"},
	}
	for _, tt := range same {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fingerprint(tt.d, tt.n, tt.b, tt.k); got != base {
				t.Errorf("Fingerprint = %q, want %q", got, base)
			}
		})
	}
	differ := []struct{ name, d, n, b, k string }{
		{"driver", "550.55", "28.39", "2.1.4", "quiet iommu=pt"},
		{"nic", "550.54", "28.40", "2.1.4", "quiet iommu=pt"},
		{"bios", "550.54", "28.39", "2.1.5", "quiet iommu=pt"},
		{"kernel", "550.54", "28.39", "2.1.4", "quiet"},
		{"shifted between fields", "550.5", "428.39", "2.1.4", "quiet iommu=pt"},
	}
	for _, tt := range differ {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fingerprint(tt.d, tt.n, tt.b, tt.k); got == base {
				t.Errorf("Fingerprint = %q, same as base", got)
			}
		})
	}
	if Fingerprint("a", "", "", "") == Fingerprint("", "a", "", "") {
		t.Error("field boundaries are not part of the hash")
	}
}

func TestGroupNodes(t *testing.T) {
	nodes := []*model.Node{
		{Name: "n1", Fingerprint: "bb"},
		{Name: "n2", Fingerprint: "aa"},
		{Name: "n3", Fingerprint: "bb"},
		{Name: "n4"},
		{Name: "n5", Fingerprint: "cc"},
		{Name: "n6", Fingerprint: "cc"},
	}
	got := GroupNodes(nodes)
	want := []Group{
		{Fingerprint: "bb", Nodes: []string{"n1", "n3"}},
		{Fingerprint: "cc", Nodes: []string{"n5", "n6"}},
		{Fingerprint: "", Nodes: []string{"n4"}},
		{Fingerprint: "aa", Nodes: []string{"n2"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GroupNodes = %+v, want %+v", got, want)
	}
	if got := GroupNodes(nil); len(got) != 0 {
		t.Errorf("GroupNodes(nil) = %v, want empty", got)
	}
}

func TestLargestAndConformant(t *testing.T) {
	tests := []struct {
		name       string
		fps        []string
		want       string
		wantN      int
		conformant bool
	}{
		{"none", nil, "", 0, true},
		{"one", []string{"x"}, "x", 1, true},
		{"all same", []string{"x", "x", "x"}, "x", 3, true},
		{"majority", []string{"y", "x", "y"}, "y", 2, false},
		{"tie goes to smaller", []string{"y", "x", "y", "x"}, "x", 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp, n := Largest(tt.fps)
			if fp != tt.want || n != tt.wantN {
				t.Errorf("Largest(%v) = %q,%d, want %q,%d", tt.fps, fp, n, tt.want, tt.wantN)
			}
			if got := Conformant(tt.fps); got != tt.conformant {
				t.Errorf("Conformant(%v) = %v, want %v", tt.fps, got, tt.conformant)
			}
		})
	}
}
