package rest

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"sync"
	"time"

	"github.com/latticehpc/lattice/auth"
)

// SessionPrefix starts every session credential, so the authenticator can
// tell one from a token without a lookup.
const SessionPrefix = "lsess_"

// Default lifetimes of a one-time login code and of a browser session.
const (
	DefaultCodeTTL    = 2 * time.Minute
	DefaultSessionTTL = 12 * time.Hour
)

// maxPending bounds the codes and sessions one member keeps, so a flood of
// logins cannot grow its memory without end; past it the oldest go.
const maxPending = 10000

// Sessions holds a member's one-time login codes and browser sessions, each
// standing for the auth.Identity that created it (nil with auth off). They
// live in the member's memory: a restart logs every browser out.
type Sessions struct {
	CodeTTL    time.Duration
	SessionTTL time.Duration
	Now        func() time.Time

	mu       sync.Mutex
	codes    map[string]grant
	sessions map[string]grant
}

type grant struct {
	id      *auth.Identity
	expires time.Time
}

// NewSessions returns an empty store with the default lifetimes.
func NewSessions() *Sessions {
	return &Sessions{
		CodeTTL: DefaultCodeTTL, SessionTTL: DefaultSessionTTL, Now: time.Now,
		codes: map[string]grant{}, sessions: map[string]grant{},
	}
}

func secret(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

func copyIdentity(id *auth.Identity) *auth.Identity {
	if id == nil {
		return nil
	}
	c := *id
	c.Tenants = append([]string(nil), id.Tenants...)
	c.Nodes = append([]string(nil), id.Nodes...)
	return &c
}

// NewCode mints a one-time login code for id, valid CodeTTL.
func (s *Sessions) NewCode(id *auth.Identity) (code string, expires time.Time) {
	code = secret(24)
	now := s.Now()
	expires = now.Add(s.CodeTTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune(now)
	s.codes[code] = grant{id: copyIdentity(id), expires: expires}
	return code, expires
}

// Exchange spends a code and opens a session for its identity; ok is false
// for an unknown, spent or expired code.
func (s *Sessions) Exchange(code string) (session string, expires time.Time, ok bool) {
	now := s.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prune(now)
	g, found := s.codes[code]
	delete(s.codes, code)
	if !found {
		return "", time.Time{}, false
	}
	session = SessionPrefix + secret(32)
	expires = now.Add(s.SessionTTL)
	s.sessions[session] = grant{id: g.id, expires: expires}
	return session, expires, true
}

// Lookup resolves a live session to its identity (nil when unknown or
// expired).
func (s *Sessions) Lookup(session string) *auth.Identity {
	if s == nil || !strings.HasPrefix(session, SessionPrefix) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.sessions[session]
	if !ok || !s.Now().Before(g.expires) {
		delete(s.sessions, session)
		return nil
	}
	return copyIdentity(g.id)
}

// Valid reports whether a session is live (with auth off too, where its
// identity is nil).
func (s *Sessions) Valid(session string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.sessions[session]
	return ok && s.Now().Before(g.expires)
}

// End logs a session out.
func (s *Sessions) End(session string) {
	s.mu.Lock()
	delete(s.sessions, session)
	s.mu.Unlock()
}

// prune drops what expired and, past maxPending, the entries closest to
// expiry. Under mu.
func (s *Sessions) prune(now time.Time) {
	for _, m := range []map[string]grant{s.codes, s.sessions} {
		for k, g := range m {
			if !now.Before(g.expires) {
				delete(m, k)
			}
		}
		for len(m) >= maxPending {
			var oldest string
			for k, g := range m {
				if oldest == "" || g.expires.Before(m[oldest].expires) {
					oldest = k
				}
			}
			delete(m, oldest)
		}
	}
}
