package quorum

import (
	"bytes"
	"strings"
	"testing"

	"github.com/latticehpc/lattice/model"
)

func (f *fixture) rejected(c Command, want string) {
	f.t.Helper()
	r := f.apply(c)
	if r.Rejection == nil || !strings.Contains(r.Rejection.Message, want) {
		f.t.Fatalf("%s: got %+v, want a rejection containing %q", c.Type(), r.Rejection, want)
	}
}

func TestUsersAndAssociations(t *testing.T) {
	f := newFixture(t)
	f.ok(&SetTenant{Tenant: model.Tenant{Name: "physics"}})
	f.ok(&SetTenant{Tenant: model.Tenant{Name: "bio"}})
	alice := User{Name: "alice", UID: 1001, Tenants: []string{"physics", "bio"}, Role: "user", MaxPriority: -1}
	f.ok(&SetUser{User: alice, Create: true})
	if u := f.s.User("alice"); u == nil || u.DefaultTenant != "physics" || !u.Created.Equal(f.now) {
		t.Fatalf("alice = %+v, want default tenant physics (the first) and created now", u)
	}
	f.rejected(&SetUser{User: alice, Create: true}, "exists")
	f.rejected(&SetUser{User: User{Name: "bob", UID: 1001, Tenants: []string{"bio"}, Role: "user"}, Create: true}, "uid 1001 is user alice")
	f.rejected(&SetUser{User: User{Name: "bob", UID: 1002, Tenants: []string{"chem"}, Role: "user"}, Create: true}, `unknown tenant "chem"`)
	f.rejected(&SetUser{User: User{Name: "bob", UID: 1002, Tenants: []string{"bio"}, DefaultTenant: "physics", Role: "user"}, Create: true}, "default-tenant")
	f.rejected(&SetUser{User: User{Name: "bob", UID: 1002, Tenants: []string{"bio"}, Role: "boss"}, Create: true}, "role")
	f.rejected(&SetUser{User: User{Name: "carol", UID: 1003, Tenants: []string{"bio"}, Role: "user"}}, "does not exist")
	f.ok(&SetUser{User: User{Name: "bob", UID: 1002, Tenants: []string{"bio"}, Role: "tenant-admin", MaxPriority: -1}, Create: true})
	if u := f.s.UserByUID(1002); u == nil || u.Name != "bob" {
		t.Fatalf("UserByUID(1002) = %+v", u)
	}

	// A tenant with work, or that is someone's default, stays.
	id := f.submitReq(model.Request{VCluster: "batch", Tenant: "bio", Command: []string{"true"}, NodesMin: 1, Walltime: 3600e9})
	f.rejected(&DeleteTenant{Name: "bio"}, "1 allocation(s) pending or running")
	f.ok(&Cancel{IDs: []uint64{id}})
	f.rejected(&DeleteTenant{Name: "bio"}, "default tenant of user(s) bob")
	f.ok(&DeleteUser{Name: "bob"})
	f.ok(&DeleteTenant{Name: "bio"})
	if f.s.Tenant("bio") != nil || strings.Join(f.s.User("alice").Tenants, ",") != "physics" {
		t.Fatalf("after delete: tenant %v, alice's tenants %v", f.s.Tenant("bio"), f.s.User("alice").Tenants)
	}
	f.rejected(&DeleteTenant{Name: "bio"}, "does not exist")
	f.rejected(&DeleteUser{Name: "bob"}, "does not exist")

	// Users and tokens survive a snapshot.
	f.ok(&PutTokens{Tokens: []Token{{ID: "abcdef012345", Hash: "sha256:abcdef012345" + strings.Repeat("0", 52), User: "svc", Role: "admin", MaxPriority: -1}}})
	var buf bytes.Buffer
	if err := f.s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	s2, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(s2.Users()) != 1 || s2.User("alice").UID != 1001 || len(s2.Tokens()) != 1 || s2.Tokens()[0].User != "svc" {
		t.Fatalf("restored users %v tokens %v", s2.Users(), s2.Tokens())
	}
}

func TestTokensPutAndRevoke(t *testing.T) {
	f := newFixture(t)
	hash := func(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }
	tok := Token{ID: "aaaaaaaaaaaa", Hash: hash('a'), User: "rack1", Role: "agent", Nodes: []string{"b*"}, MaxPriority: -1}
	f.ok(&PutTokens{Tokens: []Token{tok}})
	f.rejected(&PutTokens{Tokens: []Token{tok}}, "exists already")
	f.rejected(&PutTokens{Tokens: []Token{{ID: "bbbb", Hash: hash('b'), User: "x", Role: "agent", MaxPriority: -1}}}, "nodes")
	f.rejected(&PutTokens{Tokens: []Token{{ID: "cccc", Hash: hash('b'), User: "x", Role: "admin", MaxPriority: -1}}}, "id")
	got := f.s.TokenByHash(hash('a'))
	if got == nil || !got.Valid(f.now) {
		t.Fatalf("token %+v should be valid", got)
	}
	f.rejected(&RevokeTokens{IDs: []string{"nope"}}, "does not exist")
	f.ok(&RevokeTokens{IDs: []string{"aaaaaaaaaaaa"}})
	if got := f.s.TokenByHash(hash('a')); got.Valid(f.now) || !got.Revoked.Equal(f.now) {
		t.Fatalf("revoked token %+v still valid", got)
	}
	exp := Token{ID: "dddd", Hash: hash('d'), User: "svc", Role: "admin", MaxPriority: -1, Expires: f.now.Add(3600e9)}
	f.ok(&PutTokens{Tokens: []Token{exp}})
	if d := f.s.TokenByHash(hash('d')); !d.Valid(f.now) || d.Valid(f.now.Add(3601e9)) {
		t.Fatalf("expiry not honoured: %+v", d)
	}
}
