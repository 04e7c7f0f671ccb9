package auth

import (
	"errors"
	"strings"
	"testing"
)

var (
	alice   = &Identity{User: "alice", Role: RoleUser, Tenants: []string{"physics"}, MaxPriority: -1}
	carol   = &Identity{User: "carol", Role: RoleTenantAdmin, Tenants: []string{"physics"}, MaxPriority: -1}
	root    = &Identity{User: "root", Role: RoleAdmin, MaxPriority: -1}
	rack1   = &Identity{User: "rack1", Role: RoleAgent, Nodes: []string{"node0*", "gpu1"}, MaxPriority: -1}
	mallory = &Identity{User: "mallory", Role: RoleUser, Tenants: []string{"bio"}, MaxPriority: 7}
)

func TestAuthorizeTable(t *testing.T) {
	cases := []struct {
		method string
		id     *Identity
		ok     bool
	}{
		{"/grpc.health.v1.Health/Check", nil, true},
		{"/lattice.v1.AllocationService/List", nil, false},
		{"/lattice.v1.AllocationService/List", alice, true},
		{"/lattice.v1.AllocationService/Submit", rack1, false},
		{"/lattice.v1.AllocationService/Cancel", carol, true},
		{"/lattice.v1.NodeService/Drain", alice, false},
		{"/lattice.v1.NodeService/Drain", carol, false},
		{"/lattice.v1.NodeService/Drain", root, true},
		{"/lattice.v1.NodeService/List", alice, true},
		{"/lattice.v1.NodeService/Heartbeat", alice, false},
		{"/lattice.v1.NodeService/Heartbeat", rack1, true},
		{"/lattice.v1.NodeService/Register", root, false},
		{"/lattice.v1.AgentService/Connect", rack1, true},
		{"/lattice.v1.AgentService/Connect", root, false},
		{"/lattice.v1.AdminService/QuorumJoin", alice, false},
		{"/lattice.v1.AdminService/QuorumJoin", root, true},
		{"/lattice.v1.AdminService/QuorumRemove", carol, false},
		{"/lattice.v1.AdminService/QuorumTransferLeadership", alice, false},
		{"/lattice.v1.AdminService/Backup", carol, false},
		{"/lattice.v1.AdminService/SetTenant", carol, false},
		{"/lattice.v1.AdminService/SetPowerBudget", alice, false},
		{"/lattice.v1.AdminService/SetVCluster", root, true},
		{"/lattice.v1.AdminService/QuorumStatus", alice, true},
		{"/lattice.v1.AdminService/QuorumStatus", rack1, false},
		{"/lattice.v1.NoSuchService/Do", root, false},
	}
	for _, c := range cases {
		t.Run(c.method+"/"+c.id.String(), func(t *testing.T) {
			err := Authorize(c.method, c.id)
			if (err == nil) != c.ok {
				t.Fatalf("Authorize = %v, want ok=%v", err, c.ok)
			}
			var d *Denied
			if err != nil && (!errors.As(err, &d) || !strings.Contains(err.Error(), "may not call") || !strings.Contains(err.Error(), c.id.String())) {
				t.Fatalf("message %q does not name who and what", err)
			}
		})
	}
}

func TestObjectRulesTable(t *testing.T) {
	mine := Object{Kind: "allocation", ID: "12", Owner: "alice", Tenant: "physics"}
	colleague := Object{Kind: "allocation", ID: "13", Owner: "bob", Tenant: "physics"}
	other := Object{Kind: "allocation", ID: "14", Owner: "bob", Tenant: "bio"}
	cases := []struct {
		name       string
		id         *Identity
		o          Object
		read, edit bool
	}{
		{"user own", alice, mine, true, true},
		{"user same tenant", alice, colleague, true, false},
		{"user other tenant", alice, other, false, false},
		{"tenant-admin own tenant", carol, colleague, true, true},
		{"tenant-admin other tenant", carol, other, false, false},
		{"admin anything", root, other, true, true},
		{"agent", rack1, mine, false, false},
		{"anonymous", nil, mine, false, false},
		{"unowned legacy work", alice, Object{Kind: "allocation", ID: "1", Tenant: "physics"}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := CanRead(c.id, "show", c.o); (err == nil) != c.read {
				t.Errorf("CanRead = %v, want %v", err, c.read)
			}
			err := CanChange(c.id, "cancel", c.o)
			if (err == nil) != c.edit {
				t.Errorf("CanChange = %v, want %v", err, c.edit)
			}
			if err != nil && !strings.Contains(err.Error(), "cancel "+c.o.String()) {
				t.Errorf("message %q does not name what was refused", err)
			}
		})
	}
}

func TestCanSubmitTable(t *testing.T) {
	cases := []struct {
		name   string
		id     *Identity
		tenant string
		class  int
		want   string // "" = allowed, else part of the message
	}{
		{"own tenant", alice, "physics", 3, ""},
		{"default ceiling", alice, "physics", DefaultMaxPriority, ""},
		{"above default ceiling", alice, "physics", 10, "QOS ceiling is priority class 5"},
		{"other tenant", alice, "bio", 0, "may not submit to tenant bio"},
		{"configured ceiling", mallory, "bio", 7, ""},
		{"above configured ceiling", mallory, "bio", 8, "ceiling is priority class 7"},
		{"admin any tenant any class", root, "bio", 10, ""},
		{"agent", rack1, "physics", 0, "only a user"},
		{"anonymous", nil, "physics", 0, "only a user"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CanSubmit(c.id, c.tenant, c.class)
			if c.want == "" {
				if err != nil {
					t.Fatalf("CanSubmit = %v, want allowed", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CanSubmit = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestAgentNodes(t *testing.T) {
	for node, ok := range map[string]bool{"node000": true, "node099": true, "gpu1": true, "gpu10": false, "node1": false} {
		if err := CanReportFor(rack1, node); (err == nil) != ok {
			t.Errorf("CanReportFor(%s) = %v, want %v", node, err, ok)
		}
	}
	if CanReportFor(root, "node000") == nil {
		t.Error("an admin is not an agent and may not report for nodes")
	}
}

func TestTokensFileRoundTrip(t *testing.T) {
	var r1, r2 [32]byte
	r2[0] = 1
	t1, t2 := NewToken(r1), NewToken(r2)
	file := "# made by latticed token create\n\n" +
		Entry(t1, *mallory) + "\n" + Entry(t2, *rack1) + "\n"
	if strings.Contains(file, t1) || strings.Contains(file, t2) {
		t.Fatal("the tokens file holds a token in clear")
	}
	toks, err := ParseTokens(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if toks.Len() != 2 {
		t.Fatalf("Len = %d, want 2", toks.Len())
	}
	got := toks.Authenticate(t1)
	if got == nil || got.User != "mallory" || got.Role != RoleUser || got.MaxPriority != 7 || !got.InTenant("bio") {
		t.Fatalf("Authenticate(t1) = %+v", got)
	}
	if a := toks.Authenticate(t2); a == nil || !a.OwnsNode("node007") {
		t.Fatalf("Authenticate(t2) = %+v", a)
	}
	for _, bad := range []string{"", "lat_wrong", t1 + "x"} {
		if toks.Authenticate(bad) != nil {
			t.Errorf("Authenticate(%q) accepted", bad)
		}
	}
}

// TestCertEntries: a cn: line maps a client certificate's common name to
// an identity; tokens and names never stand for each other.
func TestCertEntries(t *testing.T) {
	var r [32]byte
	tok := NewToken(r)
	file := CertEntry("alice", *mallory) + "\n" + Entry(tok, *rack1) + "\n"
	if !strings.HasPrefix(file, "cn:alice user=mallory role=user") {
		t.Fatalf("CertEntry = %q", file)
	}
	toks, err := ParseTokens(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if id := toks.AuthenticateCN("alice"); id == nil || id.User != "mallory" || !id.InTenant("bio") {
		t.Fatalf("AuthenticateCN(alice) = %+v", id)
	}
	for _, cn := range []string{"", "bob", "sha256:" + strings.TrimPrefix(HashToken(tok), "sha256:")} {
		if toks.AuthenticateCN(cn) != nil {
			t.Errorf("AuthenticateCN(%q) accepted", cn)
		}
	}
	for _, bad := range []string{"alice", "cn:alice"} {
		if toks.Authenticate(bad) != nil {
			t.Errorf("Authenticate(%q) accepted a certificate name as a token", bad)
		}
	}
	if _, err := ParseTokens(strings.NewReader("cn: user=a role=admin\n")); err == nil {
		t.Error("an empty common name accepted")
	}
	if _, err := ParseTokens(strings.NewReader(CertEntry("alice", *mallory) + "\n" + CertEntry("alice", *rack1) + "\n")); err == nil {
		t.Error("the same common name twice accepted")
	}
}

func TestParseTokensErrors(t *testing.T) {
	h := HashToken("x")
	cases := map[string]string{
		"plain token":      "lat_abc user=a role=user tenants=t",
		"bad role":         h + " user=a role=root tenants=t",
		"user sans tenant": h + " user=a role=user",
		"agent sans nodes": h + " user=a role=agent",
		"unknown key":      h + " user=a role=admin colour=blue",
		"bad priority":     h + " user=a role=user tenants=t max-priority=11",
		"bad user":         h + " user=a/b role=admin",
		"duplicate":        h + " user=a role=admin\n" + h + " user=b role=admin",
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTokens(strings.NewReader("# comment\n" + text + "\n"))
			want := "line 2:"
			if name == "duplicate" {
				want = "line 3:"
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("ParseTokens = %v, want an error naming %s", err, want)
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range Roles {
		if got, err := ParseRole(string(r)); err != nil || got != r {
			t.Errorf("ParseRole(%s) = %v, %v", r, got, err)
		}
	}
	if _, err := ParseRole("superuser"); err == nil {
		t.Error("ParseRole(superuser) accepted")
	}
}
