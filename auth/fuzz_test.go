package auth

import (
	"strings"
	"testing"
)

// FuzzParseTokens: a tokens file never panics the parser, and whatever it
// accepts is a valid identity.
func FuzzParseTokens(f *testing.F) {
	var r [32]byte
	tok := NewToken(r)
	f.Add(Entry(tok, Identity{User: "alice", Role: RoleUser, Tenants: []string{"physics"}, MaxPriority: 7}))
	f.Add(Entry(tok, Identity{User: "rack1", Role: RoleAgent, Nodes: []string{"node0*"}, MaxPriority: -1}))
	f.Add("# comment\n\n" + HashToken("x") + " user=a role=admin")
	f.Add(HashToken("x") + " user=a role=agent nodes=[")
	f.Add(CertEntry("alice", Identity{User: "alice", Role: RoleUser, Tenants: []string{"physics"}, MaxPriority: -1}))
	f.Add("cn:rack1 user=rack1 role=agent nodes=node*")
	f.Fuzz(func(t *testing.T, file string) {
		toks, err := ParseTokens(strings.NewReader(file))
		if err != nil {
			return
		}
		for _, id := range toks.byHash {
			if err := id.Validate(); err != nil {
				t.Fatalf("accepted an invalid identity %+v: %v", id, err)
			}
		}
	})
}
