package rpc

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// AccountService is: users (uid, tenant associations,
// role), API tokens (created here, kept hashed in the replicated state)
// and tenant deletion. Changes are admins'; auth.Rules says who may call
// what.
type AccountService struct {
	latticev1.UnimplementedAccountServiceServer
	M Member
}

// TokenIDLen is how many hex digits of a token's hash name it.
const TokenIDLen = 12

func (a *AccountService) WhoAmI(ctx context.Context, _ *latticev1.AccountWhoAmIRequest) (*latticev1.AccountUser, error) {
	id := Caller(ctx)
	if id == nil {
		return &latticev1.AccountUser{Name: "anonymous", Role: string(auth.RoleAdmin), Via: "none (authentication is off)", MaxPriority: -1,
			DefaultTenant: model.DefaultTenant}, nil
	}
	out := &latticev1.AccountUser{Name: id.User, Role: string(id.Role), Tenants: id.Tenants, DefaultTenant: a.M.Admission().DefaultTenantOf(id),
		MaxPriority: int32(id.MaxPriority), Via: id.Via, Nodes: id.Nodes, Uid: -1}
	if id.Via == "munge" {
		out.Uid = int32(id.UID)
	}
	return out, nil
}

func userProto(u *quorum.User) *latticev1.AccountUser {
	return &latticev1.AccountUser{Name: u.Name, Uid: int32(u.UID), Tenants: u.Tenants, DefaultTenant: u.DefaultTenant, Role: u.Role,
		MaxPriority: int32(u.MaxPriority), Created: timestamppb.New(u.Created), Auto: u.Auto}
}

func (a *AccountService) AddUser(ctx context.Context, req *latticev1.SetUserRequest) (*latticev1.AccountUser, error) {
	role := req.Role
	if role == "" {
		role = string(auth.RoleUser)
	}
	u := quorum.User{Name: req.Name, UID: int(req.Uid), Tenants: req.Tenants, DefaultTenant: req.DefaultTenant, Role: role, MaxPriority: int(req.MaxPriority)}
	return a.setUser(ctx, req.ClientRequestId, u, true)
}

func (a *AccountService) ModifyUser(ctx context.Context, req *latticev1.SetUserRequest) (*latticev1.AccountUser, error) {
	var u *quorum.User
	a.M.View(func(st *quorum.State) {
		if x := st.User(req.Name); x != nil {
			c := *x
			c.Tenants = slices.Clone(x.Tenants)
			u = &c
		}
	})
	if u == nil {
		return nil, NotFound("user %s does not exist; add it with `latticectl user add %s --uid UID --tenants TENANT`", req.Name, req.Name)
	}
	for _, f := range req.Set {
		switch f {
		case "uid":
			u.UID = int(req.Uid)
		case "tenants":
			u.Tenants = req.Tenants
		case "default_tenant":
			u.DefaultTenant = req.DefaultTenant
		case "role":
			u.Role = req.Role
		case "max_priority":
			u.MaxPriority = int(req.MaxPriority)
		default:
			return nil, Invalid("invalid field %q to set: allowed uid, tenants, default_tenant, role, max_priority", f)
		}
	}
	for _, t := range req.AddTenants {
		if !slices.Contains(u.Tenants, t) {
			u.Tenants = append(u.Tenants, t)
		}
	}
	for _, t := range req.RemoveTenants {
		u.Tenants = slices.DeleteFunc(u.Tenants, func(x string) bool { return x == t })
		if u.DefaultTenant == t && !slices.Contains(req.Set, "default_tenant") {
			u.DefaultTenant = ""
		}
	}
	if !slices.Contains(u.Tenants, u.DefaultTenant) {
		if slices.Contains(req.Set, "default_tenant") && u.DefaultTenant != "" {
			u.Tenants = append(u.Tenants, u.DefaultTenant) // --default-tenant T associates T
		} else {
			u.DefaultTenant = ""
		}
	}
	return a.setUser(ctx, req.ClientRequestId, *u, false)
}

func (a *AccountService) setUser(ctx context.Context, reqID string, u quorum.User, create bool) (*latticev1.AccountUser, error) {
	if u.DefaultTenant == "" && len(u.Tenants) > 0 {
		u.DefaultTenant = u.Tenants[0]
	}
	if err := quorum.ValidateUser(&u); err != nil {
		return nil, Error(err)
	}
	r, err := a.M.Propose(ctx, &quorum.SetUser{Header: quorum.Header{RequestID: reqID}, User: u, Create: create})
	if err != nil {
		return nil, Error(err)
	}
	if r.Rejection != nil {
		return nil, Rejection(r.Rejection)
	}
	var out *latticev1.AccountUser
	a.M.View(func(st *quorum.State) {
		if x := st.User(u.Name); x != nil {
			out = userProto(x)
		}
	})
	if out == nil {
		out = userProto(&u)
	}
	return out, nil
}

func (a *AccountService) DeleteUser(ctx context.Context, req *latticev1.DeleteUserRequest) (*latticev1.DeleteUserResponse, error) {
	r, err := a.M.Propose(ctx, &quorum.DeleteUser{Header: quorum.Header{RequestID: req.ClientRequestId}, Name: req.Name})
	if err != nil {
		return nil, Error(err)
	}
	if r.Rejection != nil {
		return nil, Rejection(r.Rejection)
	}
	return &latticev1.DeleteUserResponse{}, nil
}

// ListUsers: admins see every user; others the users who share a tenant
// with them (sacctmgr shows associations to everyone; Lattice keeps other
// tenants' members private).
func (a *AccountService) ListUsers(ctx context.Context, req *latticev1.ListUsersRequest) (*latticev1.ListUsersResponse, error) {
	id := Caller(ctx)
	all := !a.M.AuthOn() || (id != nil && id.Role == auth.RoleAdmin)
	resp := &latticev1.ListUsersResponse{}
	var missing []string
	a.M.View(func(st *quorum.State) {
		for _, n := range req.Names {
			if st.User(n) == nil {
				missing = append(missing, n)
			}
		}
		for _, u := range st.Users() {
			if len(req.Names) > 0 && !slices.Contains(req.Names, u.Name) {
				continue
			}
			if all || u.Name == id.User || slices.ContainsFunc(u.Tenants, id.InTenant) {
				resp.Users = append(resp.Users, userProto(u))
			}
		}
	})
	if len(missing) > 0 {
		return nil, NotFound("no such user: %s (`latticectl user list` shows them)", strings.Join(missing, ", "))
	}
	return resp, nil
}

func (a *AccountService) DeleteTenant(ctx context.Context, req *latticev1.DeleteTenantRequest) (*latticev1.DeleteTenantResponse, error) {
	r, err := a.M.Propose(ctx, &quorum.DeleteTenant{Header: quorum.Header{RequestID: req.ClientRequestId}, Name: req.Name})
	if err != nil {
		return nil, Error(err)
	}
	if r.Rejection != nil {
		return nil, Rejection(r.Rejection)
	}
	return &latticev1.DeleteTenantResponse{}, nil
}

func tokenProto(t *quorum.Token) *latticev1.TokenInfo {
	out := &latticev1.TokenInfo{Id: t.ID, User: t.User, Role: t.Role, Tenants: t.Tenants, DefaultTenant: t.DefaultTenant, Nodes: t.Nodes,
		MaxPriority: int32(t.MaxPriority), Created: timestamppb.New(t.Created), Note: t.Note}
	if !t.Expires.IsZero() {
		out.Expires = timestamppb.New(t.Expires)
	}
	if !t.Revoked.IsZero() {
		out.Revoked = timestamppb.New(t.Revoked)
	}
	return out
}

// tokenRecord checks an identity as auth does and makes its record.
func tokenRecord(hash string, id auth.Identity, note string) (quorum.Token, error) {
	if err := id.Validate(); err != nil {
		return quorum.Token{}, err
	}
	t := quorum.Token{ID: strings.TrimPrefix(hash, "sha256:")[:TokenIDLen], Hash: hash, User: id.User, Role: string(id.Role),
		Tenants: id.Tenants, DefaultTenant: id.DefaultTenant, Nodes: id.Nodes, MaxPriority: id.MaxPriority, Note: note}
	if t.MaxPriority < -1 {
		t.MaxPriority = -1
	}
	return t, quorum.ValidateToken(&t)
}

func (a *AccountService) CreateToken(ctx context.Context, req *latticev1.CreateTokenRequest) (*latticev1.CreateTokenResponse, error) {
	role, err := auth.ParseRole(req.Role)
	if err != nil {
		return nil, Error(err)
	}
	id := auth.Identity{User: req.User, Role: role, Tenants: req.Tenants, DefaultTenant: req.DefaultTenant, Nodes: req.Nodes, MaxPriority: int(req.MaxPriority)}
	if id.DefaultTenant != "" && !slices.Contains(id.Tenants, id.DefaultTenant) && role != auth.RoleAdmin {
		return nil, Error(&model.FieldError{Field: "default-tenant", Value: id.DefaultTenant, Allowed: "one of --tenants"})
	}
	if req.ExpiresInSeconds < 0 {
		return nil, Invalid("invalid expires-in %ds: allowed >= 0 (0 = never)", req.ExpiresInSeconds)
	}
	var r [32]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, status.Errorf(codes.Internal, "no randomness for a token: %v", err)
	}
	secret := auth.NewToken(r)
	t, err := tokenRecord(auth.HashToken(secret), id, req.Note)
	if err != nil {
		return nil, Error(err)
	}
	now := a.M.Now()
	if req.ExpiresInSeconds > 0 {
		t.Expires = now.Add(time.Duration(req.ExpiresInSeconds) * time.Second)
	}
	res, err := a.M.Propose(ctx, &quorum.PutTokens{Header: quorum.Header{Time: now}, Tokens: []quorum.Token{t}})
	if err != nil {
		return nil, Error(err)
	}
	if res.Rejection != nil {
		return nil, Rejection(res.Rejection)
	}
	t.Created = now
	return &latticev1.CreateTokenResponse{Token: secret, Info: tokenProto(&t)}, nil
}

func (a *AccountService) ListTokens(context.Context, *latticev1.ListTokensRequest) (*latticev1.ListTokensResponse, error) {
	resp := &latticev1.ListTokensResponse{}
	a.M.View(func(st *quorum.State) {
		for _, t := range st.Tokens() {
			resp.Tokens = append(resp.Tokens, tokenProto(t))
		}
	})
	return resp, nil
}

func (a *AccountService) RevokeToken(ctx context.Context, req *latticev1.RevokeTokenRequest) (*latticev1.RevokeTokenResponse, error) {
	if len(req.Ids) == 0 && req.User == "" {
		return nil, Invalid("nothing to revoke: name token ids (`latticectl token list`) or --user")
	}
	ids := make([]string, len(req.Ids))
	for i, x := range req.Ids {
		if strings.HasPrefix(x, auth.TokenPrefix) { // the token itself
			x = strings.TrimPrefix(auth.HashToken(x), "sha256:")[:TokenIDLen]
		}
		ids[i] = x
	}
	before := map[string]bool{}
	a.M.View(func(st *quorum.State) {
		for _, t := range st.Tokens() {
			before[t.ID] = t.Revoked.IsZero()
		}
	})
	r, err := a.M.Propose(ctx, &quorum.RevokeTokens{Header: quorum.Header{RequestID: req.ClientRequestId}, IDs: ids, User: req.User})
	if err != nil {
		return nil, Error(err)
	}
	if r.Rejection != nil {
		return nil, Rejection(r.Rejection)
	}
	n := 0
	a.M.View(func(st *quorum.State) {
		for _, t := range st.Tokens() {
			if before[t.ID] && !t.Revoked.IsZero() {
				n++
			}
		}
	})
	a.M.Log().Info("tokens revoked", "ids", strings.Join(ids, ","), "user", req.User, "count", n)
	return &latticev1.RevokeTokenResponse{Revoked: int32(n)}, nil
}

// ImportTokens adds a tokens file's token entries (their hashes: no secret
// travels) to the replicated state; entries already there and cn: lines
// are skipped.
func (a *AccountService) ImportTokens(ctx context.Context, req *latticev1.ImportTokensRequest) (*latticev1.ImportTokensResponse, error) {
	file, err := auth.ParseTokens(bytes.NewReader([]byte(req.File)))
	if err != nil {
		return nil, Invalid("%v", err)
	}
	note := req.Note
	if note == "" {
		note = "imported from a tokens file"
	}
	resp := &latticev1.ImportTokensResponse{}
	var add []quorum.Token
	var ferr error
	a.M.View(func(st *quorum.State) {
		file.Each(func(hash string, id auth.Identity) {
			if ferr != nil {
				return
			}
			if st.TokenByHash(hash) != nil {
				resp.Skipped++
				return
			}
			t, err := tokenRecord(hash, id, note)
			if err != nil {
				ferr = fmt.Errorf("entry for %s: %w", id.User, err)
				return
			}
			add = append(add, t)
		})
	})
	if ferr != nil {
		return nil, Error(ferr)
	}
	if n := strings.Count(req.File, "\n"+auth.CertPrefix) + boolInt(strings.HasPrefix(req.File, auth.CertPrefix)); n > 0 {
		resp.Skipped += int32(n)
		resp.Messages = append(resp.Messages, fmt.Sprintf("%d client-certificate (cn:) line(s) stay in the tokens file: certificates are not tokens", n))
	}
	if len(add) > 0 {
		r, err := a.M.Propose(ctx, &quorum.PutTokens{Header: quorum.Header{RequestID: req.ClientRequestId}, Tokens: add})
		if err != nil {
			return nil, Error(err)
		}
		if r.Rejection != nil {
			return nil, Rejection(r.Rejection)
		}
	}
	resp.Imported = int32(len(add))
	return resp, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
