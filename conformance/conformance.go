package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/latticehpc/lattice/model"
)

// FingerprintLen is the length of a fingerprint: 16 hex digits (64 bits).
const FingerprintLen = 16

// Fingerprint is a stable short hash of a node's configuration. Leading and
// trailing spaces of each field are ignored, and kernel parameters are
// compared as a set of whitespace-separated words, so "quiet iommu=pt" and
// "iommu=pt  quiet" give the same fingerprint. Fields are length-prefixed
// before hashing, so no two different inputs collide by concatenation.
func Fingerprint(driverVersion, nicFirmware, biosFirmware, kernelParams string) string {
	params := strings.Fields(kernelParams)
	slices.Sort(params)
	params = slices.Compact(params)
	h := sha256.New()
	for _, f := range []string{
		strings.TrimSpace(driverVersion),
		strings.TrimSpace(nicFirmware),
		strings.TrimSpace(biosFirmware),
		strings.Join(params, " "),
	} {
		var n [4]byte
		l := len(f)
		n[0], n[1], n[2], n[3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		h.Write(n[:])
		h.Write([]byte(f))
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:FingerprintLen/2])
}

// Group is one conformance group: the nodes that share a fingerprint.
type Group struct {
	Fingerprint string
	Nodes       []string // node names in the order given
}

// GroupNodes groups nodes by fingerprint, largest group first; groups of
// equal size are ordered by fingerprint. Nodes without a fingerprint form a
// group of their own (fingerprint "").
func GroupNodes(nodes []*model.Node) []Group {
	idx := make(map[string]int) // fingerprint -> position in out; lookups only
	var out []Group
	for _, n := range nodes {
		i, ok := idx[n.Fingerprint]
		if !ok {
			i = len(out)
			idx[n.Fingerprint] = i
			out = append(out, Group{Fingerprint: n.Fingerprint})
		}
		out[i].Nodes = append(out[i].Nodes, n.Name)
	}
	slices.SortStableFunc(out, func(a, b Group) int {
		if len(a.Nodes) != len(b.Nodes) {
			return len(b.Nodes) - len(a.Nodes)
		}
		return strings.Compare(a.Fingerprint, b.Fingerprint)
	})
	return out
}

// Largest returns the most common fingerprint in fps and how many times it
// occurs; ties go to the smaller fingerprint. It returns "", 0 for no input.
func Largest(fps []string) (string, int) {
	s := slices.Clone(fps)
	slices.Sort(s)
	best, bestN := "", 0
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		if j-i > bestN {
			best, bestN = s[i], j-i
		}
		i = j
	}
	return best, bestN
}

// Conformant reports whether all fingerprints are equal (true for none).
func Conformant(fps []string) bool {
	for _, f := range fps {
		if f != fps[0] {
			return false
		}
	}
	return true
}
