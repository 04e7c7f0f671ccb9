package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// TestDefaultTenantAndAccounts: a call that names no tenant acts in the
// caller's default tenant (not the OS user name of the client: the bug of
// issue 29), users and tokens are managed through AccountService by admins
// only, and a token created through the API is refused once revoked.
func TestDefaultTenantAndAccounts(t *testing.T) {
	s := startSecured(t)
	allocs := latticev1.NewAllocationServiceClient(s.conn)
	accts := latticev1.NewAccountServiceClient(s.conn)
	req := &latticev1.AllocationRequest{Name: "x", NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, Hold: true}

	// alice's token names tenant physics: no --tenant means physics.
	r, err := allocs.Submit(s.as("alice"), &latticev1.SubmitRequest{Request: req})
	if err != nil {
		t.Fatalf("alice submits with no tenant: %v", err)
	}
	a, err := allocs.Get(s.as("alice"), &latticev1.GetAllocationRequest{Id: r.DisplayId})
	if err != nil || a.GetRequest().GetTenant() != "physics" {
		t.Fatalf("alice's allocation: tenant %q (%v), want physics", a.GetRequest().GetTenant(), err)
	}
	// --mine lists the default tenant's; another tenant is refused with the
	// tenants she may use.
	l, err := allocs.List(s.as("alice"), &latticev1.ListAllocationsRequest{Mine: true})
	if err != nil || len(l.Allocations) != 1 || l.Allocations[0].GetRequest().GetTenant() != "physics" {
		t.Fatalf("alice's --mine listing: %v %v", l, err)
	}
	_, err = allocs.List(s.as("alice"), &latticev1.ListAllocationsRequest{Tenant: "bio"})
	wantCode(t, "alice lists bio", err, codes.PermissionDenied, "may use tenant(s) physics")

	// Users: admins only change them; a user sees who shares a tenant.
	_, err = accts.AddUser(s.as("alice"), &latticev1.SetUserRequest{Name: "dave", Uid: 2001, Tenants: []string{"bio"}})
	wantCode(t, "alice adds a user", err, codes.PermissionDenied, "only an admin may")
	for _, u := range []*latticev1.SetUserRequest{
		{Name: "dave", Uid: 2001, Tenants: []string{"bio"}, MaxPriority: -1},
		{Name: "erin", Uid: 2002, Tenants: []string{"physics", "bio"}, DefaultTenant: "bio", Role: "tenant-admin", MaxPriority: -1},
	} {
		if _, err := accts.AddUser(s.as("root"), u); err != nil {
			t.Fatalf("add %s: %v", u.Name, err)
		}
	}
	_, err = accts.AddUser(s.as("root"), &latticev1.SetUserRequest{Name: "frank", Uid: 2001, Tenants: []string{"bio"}, MaxPriority: -1})
	wantCode(t, "a taken uid", err, codes.FailedPrecondition, "uid 2001 is user dave")
	_, err = accts.AddUser(s.as("root"), &latticev1.SetUserRequest{Name: "frank", Uid: 2003, Tenants: []string{"nope"}, MaxPriority: -1})
	wantCode(t, "an unknown tenant", err, codes.InvalidArgument, `unknown tenant "nope"`, "bio, physics")
	u, err := accts.ModifyUser(s.as("root"), &latticev1.SetUserRequest{Name: "dave", AddTenants: []string{"physics"}, DefaultTenant: "physics", Set: []string{"default_tenant"}})
	if err != nil || u.DefaultTenant != "physics" || strings.Join(u.Tenants, ",") != "bio,physics" {
		t.Fatalf("modify dave: %v %v", u, err)
	}
	seen, err := accts.ListUsers(s.as("alice"), &latticev1.ListUsersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range seen.Users {
		names = append(names, u.Name)
	}
	if strings.Join(names, ",") != "dave,erin" { // both share physics with her
		t.Errorf("alice sees users %v", names)
	}
	if _, err := accts.DeleteUser(s.as("root"), &latticev1.DeleteUserRequest{Name: "erin"}); err != nil {
		t.Fatal(err)
	}

	// A token created through the API works at once; revoked, it is
	// refused with when.
	ct, err := accts.CreateToken(s.as("root"), &latticev1.CreateTokenRequest{User: "ci", Role: "user", Tenants: []string{"bio"}, MaxPriority: -1})
	if err != nil {
		t.Fatal(err)
	}
	ciCtx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+ct.Token)
	who, err := accts.WhoAmI(ciCtx, &latticev1.AccountWhoAmIRequest{})
	if err != nil || who.Name != "ci" || who.DefaultTenant != "bio" || who.Via != "token" {
		t.Fatalf("whoami with the new token: %v %v", who, err)
	}
	if _, err := accts.RevokeToken(s.as("root"), &latticev1.RevokeTokenRequest{Ids: []string{ct.Token}}); err != nil {
		t.Fatal(err)
	}
	_, err = accts.WhoAmI(ciCtx, &latticev1.AccountWhoAmIRequest{})
	wantCode(t, "a revoked token", err, codes.Unauthenticated, "token "+ct.Info.Id+" of ci was revoked at")
	exp, err := accts.CreateToken(s.as("root"), &latticev1.CreateTokenRequest{User: "short", Role: "admin", MaxPriority: -1, ExpiresInSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	expCtx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+exp.Token)
	waitFor(t, 10*time.Second, "the token to expire", func() bool {
		_, err := accts.WhoAmI(expCtx, &latticev1.AccountWhoAmIRequest{})
		return err != nil && strings.Contains(err.Error(), "expired at")
	})
}

func TestMungeVerifierRefusesReplaysAndExpired(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := newMungeVerifier("sock", func() time.Time { return now })
	st := mungeSuccess
	v.decode = func(_ context.Context, _, cred string) (int, mungeCred, error) {
		return st, mungeCred{UID: 1001, GID: 1001, Encoded: now.Add(-time.Second), TTL: 300 * time.Second}, nil
	}
	if c, err := v.verify(context.Background(), "cred-1"); err != nil || c.UID != 1001 {
		t.Fatalf("fresh credential: %v %v", c, err)
	}
	if _, err := v.verify(context.Background(), "cred-1"); err == nil || !strings.Contains(err.Error(), "replayed") {
		t.Fatalf("the same credential again: %v, want a replay refusal", err)
	}
	st = mungeReplayed // munged saw it (another member decoded it): Lattice's own cache decides
	if _, err := v.verify(context.Background(), "cred-2"); err != nil {
		t.Fatalf("a credential munged saw but this member did not: %v", err)
	}
	st = mungeExpired
	if _, err := v.verify(context.Background(), "cred-3"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired credential: %v", err)
	}
	st = 10
	var me *mungeError
	if _, err := v.verify(context.Background(), "cred-4"); !errors.As(err, &me) || !strings.Contains(err.Error(), "share the MUNGE key") {
		t.Fatalf("a credential of another key: %v", err)
	}
	// Remembered until it expires, then forgotten.
	now = now.Add(10 * time.Minute)
	st = mungeSuccess
	if _, err := v.verify(context.Background(), "cred-5"); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.seen[keyOf("cred-1")]; ok {
		t.Errorf("an expired credential is still remembered")
	}
}

func TestParseUnmunge(t *testing.T) {
	c, st, ok := parseUnmunge([]byte("STATUS:          17\nENCODE_TIME:     1795825451\nTTL:             300\nUID:             1001\nGID:             1002\n"))
	if !ok || st != 17 || c.UID != 1001 || c.GID != 1002 || c.TTL != 300*time.Second || c.Encoded.Unix() != 1795825451 {
		t.Fatalf("parse: %+v %d %v", c, st, ok)
	}
	if _, st, ok := parseUnmunge([]byte("STATUS:          8\n")); !ok || st != 8 {
		t.Fatalf("a refused credential without metadata: %d %v", st, ok)
	}
	if _, _, ok := parseUnmunge([]byte("STATUS:          0\n")); ok {
		t.Fatalf("success without a uid must not parse")
	}
}

func TestLogLimiter(t *testing.T) {
	l := newLogLimiter(10 * time.Second)
	t0 := time.Unix(0, 0)
	if ok, _ := l.allow("10.0.0.1", t0); !ok {
		t.Fatal("first line refused")
	}
	for i := 1; i <= 5; i++ {
		if ok, _ := l.allow("10.0.0.1", t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("line %d within 10 s let through", i)
		}
	}
	if ok, _ := l.allow("10.0.0.2", t0.Add(time.Second)); !ok {
		t.Fatal("another source is limited by the first")
	}
	if ok, dropped := l.allow("10.0.0.1", t0.Add(11*time.Second)); !ok || dropped != 5 {
		t.Fatalf("after 10 s: %v, %d dropped; want through with 5", ok, dropped)
	}
}
