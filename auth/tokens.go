package auth

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// TokenPrefix starts every token Lattice mints, so a leaked one is easy to
// recognise in logs and scanners.
const TokenPrefix = "lat_"

// NewToken turns 32 random bytes (read by the caller from crypto/rand)
// into a token.
func NewToken(random [32]byte) string {
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(random[:])
}

// HashToken is what the tokens file stores: "sha256:" and the hex digest.
// Tokens carry 256 random bits, so an unsalted hash cannot be reversed.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Tokens maps hashed tokens to identities: one tokens file.
type Tokens struct {
	byHash map[string]*Identity
}

// Len is the number of entries.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.byHash)
}

// Each calls fn for every token entry (not cn: lines) in hash order.
func (t *Tokens) Each(fn func(hash string, id Identity)) {
	if t == nil {
		return
	}
	hashes := make([]string, 0, len(t.byHash))
	for h := range t.byHash {
		if !strings.HasPrefix(h, CertPrefix) {
			hashes = append(hashes, h)
		}
	}
	sort.Strings(hashes)
	for _, h := range hashes {
		fn(h, *t.byHash[h])
	}
}

// Authenticate returns the identity of a bearer token, or nil.
func (t *Tokens) Authenticate(token string) *Identity {
	if t == nil || token == "" {
		return nil
	}
	return t.byHash[HashToken(token)]
}

// CertPrefix starts a tokens-file entry for a client certificate: its
// common name instead of a token's hash ("cn:alice user=alice role=user
// tenants=physics").
const CertPrefix = "cn:"

// AuthenticateCN returns the identity of a verified client certificate's
// common name, or nil.
func (t *Tokens) AuthenticateCN(cn string) *Identity {
	if t == nil || cn == "" {
		return nil
	}
	return t.byHash[CertPrefix+cn]
}

// CertEntry formats the tokens-file line that maps client certificates
// with common name cn to an identity.
func CertEntry(cn string, id Identity) string {
	line := Entry("", id)
	_, rest, _ := strings.Cut(line, " ")
	return CertPrefix + cn + " " + rest
}

// Add adds an entry for a token (used by latticed dev for its own agent).
func (t *Tokens) Add(token string, id Identity) {
	if t.byHash == nil {
		t.byHash = map[string]*Identity{}
	}
	t.byHash[HashToken(token)] = &id
}

// Entry formats one tokens-file line for a token and its identity:
//
//	sha256:HEX user=alice role=user tenants=physics,bio max-priority=7
//	sha256:HEX user=rack1 role=agent nodes=node0*,node1*
func Entry(token string, id Identity) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s user=%s role=%s", HashToken(token), id.User, id.Role)
	if len(id.Tenants) > 0 {
		fmt.Fprintf(&b, " tenants=%s", strings.Join(id.Tenants, ","))
	}
	if len(id.Nodes) > 0 {
		fmt.Fprintf(&b, " nodes=%s", strings.Join(id.Nodes, ","))
	}
	if id.MaxPriority >= 0 {
		fmt.Fprintf(&b, " max-priority=%d", id.MaxPriority)
	}
	return b.String()
}

// ParseTokens reads a tokens file: one entry per line (see Entry), blank
// lines and lines starting with '#' ignored. An error names the line.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{byHash: map[string]*Identity{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		hash, id, err := parseEntry(text)
		if err != nil {
			return nil, fmt.Errorf("tokens file line %d: %w", line, err)
		}
		if _, dup := t.byHash[hash]; dup {
			return nil, fmt.Errorf("tokens file line %d: the same token or certificate name appears twice", line)
		}
		t.byHash[hash] = id
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokens file line %d: %w", line+1, err)
	}
	return t, nil
}

func parseEntry(text string) (string, *Identity, error) {
	fields := strings.Fields(text)
	hash := fields[0]
	if cn, ok := strings.CutPrefix(hash, CertPrefix); ok {
		if cn == "" || len(cn) > 64 {
			return "", nil, fmt.Errorf("invalid certificate name %.70q: allowed cn: and a common name of 1 to 64 bytes", hash)
		}
	} else {
		digest, ok := strings.CutPrefix(hash, "sha256:")
		if b, err := hex.DecodeString(digest); !ok || err != nil || len(b) != sha256.Size {
			return "", nil, fmt.Errorf("invalid hash %.20q: allowed sha256: and 64 hex digits (made by `latticed token create`), or cn:NAME for a client certificate", hash)
		}
	}
	id := &Identity{MaxPriority: -1}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return "", nil, fmt.Errorf("invalid field %q: allowed KEY=VALUE", f)
		}
		switch k {
		case "user":
			id.User = v
		case "role":
			id.Role = Role(v)
		case "tenants":
			id.Tenants = strings.Split(v, ",")
		case "nodes":
			id.Nodes = strings.Split(v, ",")
		case "max-priority":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return "", nil, fmt.Errorf("invalid max-priority %q: allowed 0..10", v)
			}
			id.MaxPriority = n
		default:
			return "", nil, fmt.Errorf("unknown field %q: allowed user, role, tenants, nodes, max-priority", k)
		}
	}
	if err := id.Validate(); err != nil {
		return "", nil, err
	}
	return hash, id, nil
}
