package quorum

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Users, their tenant associations, and API tokens, in the replicated
// state (issue 29): like Slurm's accounting database (sacctmgr), so every
// member knows them at once.

// UserRoles are the roles a user may have (agents have tokens, not users).
var UserRoles = []string{"user", "tenant-admin", "admin"}

// TokenRoles are the roles a token may carry.
var TokenRoles = []string{"user", "tenant-admin", "admin", "agent"}

// User is a person known by their Unix uid (MUNGE vouches for it), with
// the tenants they may use (their associations) and the one their calls use
// when they name none.
type User struct {
	Name          string   `json:"name"`
	UID           int      `json:"uid"`
	Tenants       []string `json:"tenants"`
	DefaultTenant string   `json:"default_tenant"`
	Role          string   `json:"role"`
	// MaxPriority is the highest priority class they may ask for; -1 = the
	// role's default.
	MaxPriority int       `json:"max_priority"`
	Created     time.Time `json:"created"`
	// Auto is set on users the servers created on first contact (the site
	// option that lets everyone in).
	Auto bool `json:"auto,omitempty"`
}

// Token is an API token for services, agents and the web API: only its
// hash is kept. ID names it in lists and revocations (the first hex digits
// of the hash).
type Token struct {
	ID            string    `json:"id"`
	Hash          string    `json:"hash"`
	User          string    `json:"user"`
	Role          string    `json:"role"`
	Tenants       []string  `json:"tenants,omitempty"`
	DefaultTenant string    `json:"default_tenant,omitempty"`
	Nodes         []string  `json:"nodes,omitempty"`
	MaxPriority   int       `json:"max_priority"`
	Created       time.Time `json:"created"`
	// Expires is when it stops working; zero = never.
	Expires time.Time `json:"expires,omitempty"`
	// Revoked is when it was revoked; zero = in force.
	Revoked time.Time `json:"revoked,omitempty"`
	// Note says what it is for ("imported from /var/lib/lattice/tokens").
	Note string `json:"note,omitempty"`
}

// Valid reports whether the token works at time now.
func (t *Token) Valid(now time.Time) bool {
	return t.Revoked.IsZero() && (t.Expires.IsZero() || now.Before(t.Expires))
}

// SetUser adds a user (Create) or replaces one that exists.
type SetUser struct {
	Header
	User   User `json:"user"`
	Create bool `json:"create,omitempty"`
}

// DeleteUser forgets a user.
type DeleteUser struct {
	Header
	Name string `json:"name"`
}

// DeleteTenant deletes a tenant that has no work left and is nobody's
// default tenant; it is removed from every user's associations.
type DeleteTenant struct {
	Header
	Name string `json:"name"`
}

// PutTokens adds tokens (all or none): one a user created, or a tokens
// file's entries being imported.
type PutTokens struct {
	Header
	Tokens []Token `json:"tokens"`
}

// RevokeTokens revokes tokens by ID (or every token of User), at the
// header's time.
type RevokeTokens struct {
	Header
	IDs  []string `json:"ids,omitempty"`
	User string   `json:"user,omitempty"`
}

// User returns a user by name (nil if unknown).
func (s *State) User(name string) *User { return s.users[name] }

// UserByUID returns the user with a uid (nil if none).
func (s *State) UserByUID(uid int) *User {
	for _, u := range s.users {
		if u.UID == uid {
			return u
		}
	}
	return nil
}

// Users returns every user in name order.
func (s *State) Users() []*User {
	out := make([]*User, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TokenByHash returns the token with a hash (nil if unknown).
func (s *State) TokenByHash(hash string) *Token { return s.tokens[hash] }

// Tokens returns every token in ID order.
func (s *State) Tokens() []*Token {
	out := make([]*Token, 0, len(s.tokens))
	for _, t := range s.tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *State) tenantNames() string {
	var names []string
	for n := range s.tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none (an admin creates tenants with `latticectl tenant set`)"
	}
	return strings.Join(names, ", ")
}

// ValidateUser checks a user record: names, uid, role, and that the
// default tenant is one of its tenants. It does not look at the state.
func ValidateUser(u *User) error {
	if !model.IsName(u.Name) {
		return &model.FieldError{Field: "name", Value: u.Name, Allowed: "letters, digits, '.', '-' and '_'"}
	}
	if u.UID < 0 || u.UID > 1<<31-2 {
		return &model.FieldError{Field: "uid", Value: fmt.Sprint(u.UID), Allowed: "0..2147483646"}
	}
	if !slices.Contains(UserRoles, u.Role) {
		return &model.FieldError{Field: "role", Value: u.Role, Allowed: strings.Join(UserRoles, ", ")}
	}
	if len(u.Tenants) == 0 && u.Role != "admin" {
		return &model.FieldError{Field: "tenants", Allowed: "at least one tenant for role " + u.Role}
	}
	for _, t := range u.Tenants {
		if !model.IsName(t) {
			return &model.FieldError{Field: "tenants", Value: t, Allowed: "tenant names"}
		}
	}
	if u.DefaultTenant != "" && !slices.Contains(u.Tenants, u.DefaultTenant) {
		return &model.FieldError{Field: "default-tenant", Value: u.DefaultTenant, Allowed: "one of the user's tenants: " + strings.Join(u.Tenants, ", ")}
	}
	if u.MaxPriority < -1 || u.MaxPriority > model.MaxPriorityClass {
		return &model.FieldError{Field: "max-priority", Value: fmt.Sprint(u.MaxPriority), Allowed: fmt.Sprintf("0..%d", model.MaxPriorityClass)}
	}
	return nil
}

func (s *State) applySetUser(c *SetUser) *Result {
	u := c.User
	u.Tenants = slices.Clone(u.Tenants)
	if u.DefaultTenant == "" && len(u.Tenants) > 0 {
		u.DefaultTenant = u.Tenants[0]
	}
	if err := ValidateUser(&u); err != nil {
		return &Result{Rejection: reject(CodeInvalid, "", "%v", err)}
	}
	old := s.users[u.Name]
	switch {
	case c.Create && old != nil:
		return &Result{Rejection: reject(CodeConflict, "", "user %s exists (uid %d); change it with `latticectl user modify %s`", u.Name, old.UID, u.Name)}
	case !c.Create && old == nil:
		return &Result{Rejection: reject(CodeNotFound, "", "user %s does not exist; add it with `latticectl user add %s --uid UID --tenants TENANT`", u.Name, u.Name)}
	}
	if other := s.UserByUID(u.UID); other != nil && other.Name != u.Name {
		return &Result{Rejection: reject(CodeConflict, "", "uid %d is user %s already", u.UID, other.Name)}
	}
	for _, t := range u.Tenants {
		if s.tenants[t] == nil {
			return &Result{Rejection: reject(CodeInvalid, "", "unknown tenant %q: allowed one of %s", t, s.tenantNames())}
		}
	}
	if old != nil {
		u.Created = old.Created
	} else {
		u.Created = c.Time
	}
	if s.users == nil {
		s.users = map[string]*User{}
	}
	s.users[u.Name] = &u
	s.touch()
	return &Result{}
}

func (s *State) applyDeleteUser(c *DeleteUser) *Result {
	if s.users[c.Name] == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "user %s does not exist", c.Name)}
	}
	delete(s.users, c.Name)
	s.touch()
	return &Result{}
}

func (s *State) applyDeleteTenant(c *DeleteTenant) *Result {
	if s.tenants[c.Name] == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "tenant %q does not exist; known: %s", c.Name, s.tenantNames())}
	}
	work := 0
	for _, a := range s.allocs {
		if a.Tenant == c.Name && !a.State.Terminal() {
			work++
		}
	}
	if work > 0 {
		return &Result{Rejection: reject(CodeConflict, "", "tenant %s has %d allocation(s) pending or running; cancel them or let them end first", c.Name, work)}
	}
	var defaults []string
	for _, u := range s.Users() {
		if u.DefaultTenant == c.Name {
			defaults = append(defaults, u.Name)
		}
	}
	if len(defaults) > 0 {
		return &Result{Rejection: reject(CodeConflict, "", "tenant %s is the default tenant of user(s) %s; give them another with `latticectl user modify NAME --default-tenant T` first",
			c.Name, strings.Join(defaults, ", "))}
	}
	for _, u := range s.Users() {
		if i := slices.Index(u.Tenants, c.Name); i >= 0 {
			nu := *u
			nu.Tenants = slices.Delete(slices.Clone(u.Tenants), i, i+1)
			s.users[u.Name] = &nu
		}
	}
	delete(s.tenants, c.Name)
	s.touch()
	return &Result{}
}

// ValidateToken checks a token record without looking at the state.
func ValidateToken(t *Token) error {
	if !strings.HasPrefix(t.Hash, "sha256:") || len(t.Hash) != len("sha256:")+64 {
		return &model.FieldError{Field: "hash", Value: t.Hash, Allowed: "sha256: and 64 hex digits"}
	}
	if t.ID == "" || !strings.HasPrefix(t.Hash[len("sha256:"):], t.ID) {
		return &model.FieldError{Field: "id", Value: t.ID, Allowed: "the first hex digits of the hash"}
	}
	if !model.IsName(t.User) {
		return &model.FieldError{Field: "user", Value: t.User, Allowed: "letters, digits, '.', '-' and '_'"}
	}
	if !slices.Contains(TokenRoles, t.Role) {
		return &model.FieldError{Field: "role", Value: t.Role, Allowed: strings.Join(TokenRoles, ", ")}
	}
	if (t.Role == "user" || t.Role == "tenant-admin") && len(t.Tenants) == 0 {
		return &model.FieldError{Field: "tenants", Allowed: "at least one tenant for role " + t.Role}
	}
	if t.Role == "agent" && len(t.Nodes) == 0 {
		return &model.FieldError{Field: "nodes", Allowed: "at least one node name or pattern for role agent"}
	}
	return nil
}

func (s *State) applyPutTokens(c *PutTokens) *Result {
	seen := map[string]bool{}
	for i := range c.Tokens {
		t := &c.Tokens[i]
		if err := ValidateToken(t); err != nil {
			return &Result{Rejection: reject(CodeInvalid, "", "token %d: %v", i+1, err)}
		}
		if s.tokens[t.Hash] != nil || seen[t.Hash] {
			return &Result{Rejection: reject(CodeConflict, "", "token %s exists already", t.ID)}
		}
		for _, o := range s.tokens {
			if o.ID == t.ID {
				return &Result{Rejection: reject(CodeConflict, "", "token id %s is taken", t.ID)}
			}
		}
		seen[t.Hash] = true
	}
	if s.tokens == nil {
		s.tokens = map[string]*Token{}
	}
	for _, t := range c.Tokens {
		t.Tenants, t.Nodes = slices.Clone(t.Tenants), slices.Clone(t.Nodes)
		if t.Created.IsZero() {
			t.Created = c.Time
		}
		t.Revoked = time.Time{}
		s.tokens[t.Hash] = &t
	}
	s.touch()
	return &Result{}
}

func (s *State) applyRevokeTokens(c *RevokeTokens) *Result {
	var hit []*Token
	for _, t := range s.Tokens() {
		if slices.Contains(c.IDs, t.ID) || (c.User != "" && t.User == c.User) {
			hit = append(hit, t)
		}
	}
	for _, id := range c.IDs {
		if !slices.ContainsFunc(hit, func(t *Token) bool { return t.ID == id }) {
			return &Result{Rejection: reject(CodeNotFound, "", "token %s does not exist (`latticectl token list` shows them)", id)}
		}
	}
	if len(hit) == 0 {
		return &Result{Rejection: reject(CodeNotFound, "", "user %s has no tokens", c.User)}
	}
	for _, t := range hit {
		if !t.Revoked.IsZero() {
			continue
		}
		nt := *t
		nt.Revoked = c.Time
		s.tokens[t.Hash] = &nt
	}
	s.touch()
	return &Result{}
}

// loadUserRecord restores a snapshot's "user" or "token" record.
func (s *State) loadUserRecord(rec *record, missing func() error) error {
	switch {
	case rec.Kind == "user" && rec.User != nil:
		if s.users == nil {
			s.users = map[string]*User{}
		}
		s.users[rec.User.Name] = rec.User
	case rec.Kind == "token" && rec.Token != nil:
		if s.tokens == nil {
			s.tokens = map[string]*Token{}
		}
		s.tokens[rec.Token.Hash] = rec.Token
	default:
		return missing()
	}
	return nil
}
