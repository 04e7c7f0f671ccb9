package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MUNGE authentication (issue 29): latticectl sends "authorization: MUNGE
// <credential>" (made by `munge -n`, one per call); the member decodes it
// through its own munged (`unmunge`, same site key) and the uid MUNGE
// vouches for is the caller. The member remembers every credential it
// accepted until it expires and refuses a second use (a replay), whoever
// sends it. munged keeps its own replay cache; its "replayed" verdict is
// not final here, because a follower and the leader both decode a
// forwarded call, and in tests they share one munged: Lattice's own cache,
// one per member, is the check.

// MungeScheme is the authorization scheme of a MUNGE credential.
const MungeScheme = "MUNGE "

// unmunge status codes (munge.h) that Lattice names.
const (
	mungeSuccess  = 0
	mungeExpired  = 15
	mungeRewound  = 16
	mungeReplayed = 17
)

// mungeCred is what munged vouches for.
type mungeCred struct {
	UID, GID int
	Encoded  time.Time
	TTL      time.Duration
}

// mungeVerifier decodes credentials with unmunge and refuses replays.
type mungeVerifier struct {
	socket string
	clock  func() time.Time
	// decode runs unmunge (tests may replace it).
	decode func(ctx context.Context, socket, cred string) (int, mungeCred, error)

	mu   sync.Mutex
	seen map[[32]byte]time.Time // credential hash → when it expires
	next time.Time              // next sweep of expired entries
}

func newMungeVerifier(socket string, clock func() time.Time) *mungeVerifier {
	return &mungeVerifier{socket: socket, clock: clock, decode: runUnmunge, seen: map[[32]byte]time.Time{}}
}

// mungeError is a refused credential; its text goes to the caller.
type mungeError struct{ msg string }

func (e *mungeError) Error() string { return e.msg }

// verify decodes cred and records it; a credential seen before, expired,
// or not decodable is refused.
func (v *mungeVerifier) verify(ctx context.Context, cred string) (mungeCred, error) {
	key := keyOf(cred)
	now := v.clock()
	v.mu.Lock()
	_, dup := v.seen[key]
	v.mu.Unlock()
	if dup {
		return mungeCred{}, &mungeError{"the MUNGE credential was used before (replayed): every call needs a fresh one (`munge -n`)"}
	}
	st, c, err := v.decode(ctx, v.socket, cred)
	if err != nil {
		return mungeCred{}, err
	}
	switch st {
	case mungeSuccess, mungeReplayed:
	case mungeExpired:
		return mungeCred{}, &mungeError{fmt.Sprintf("the MUNGE credential of uid %d expired (encoded %s, ttl %s): are the clocks of this host and the member in step?", c.UID, c.Encoded.UTC().Format(time.RFC3339), c.TTL)}
	case mungeRewound:
		return mungeCred{}, &mungeError{fmt.Sprintf("the MUNGE credential of uid %d was encoded in the future: are the clocks of this host and the member in step?", c.UID)}
	default:
		return mungeCred{}, &mungeError{fmt.Sprintf("the MUNGE credential was refused by this member's munged (status %d: %s); do this host and the member share the MUNGE key?", st, mungeStatusText(st))}
	}
	// Expiry is munged's to judge; Lattice remembers the credential until
	// then (and at least a minute, against clock skew).
	until := c.Encoded.Add(c.TTL)
	if min := now.Add(time.Minute); until.Before(min) {
		until = min
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, dup := v.seen[key]; dup { // two calls with it at once
		return mungeCred{}, &mungeError{"the MUNGE credential was used before (replayed): every call needs a fresh one (`munge -n`)"}
	}
	v.seen[key] = until
	if now.After(v.next) {
		for k, exp := range v.seen {
			if now.After(exp) {
				delete(v.seen, k)
			}
		}
		v.next = now.Add(time.Minute)
	}
	return c, nil
}

func keyOf(cred string) [32]byte { return sha256.Sum256([]byte(cred)) }

func mungeStatusText(st int) string {
	switch st {
	case 1:
		return "snafu"
	case 6:
		return "socket error"
	case 8:
		return "invalid credential"
	case 9:
		return "invalid cipher"
	case 10:
		return "invalid MAC"
	case 11:
		return "invalid compression"
	case 12:
		return "invalid realm"
	case 13:
		return "invalid credential"
	case 14:
		return "invalid credential format"
	case 18:
		return "unauthorized credential"
	}
	return "error"
}

// runUnmunge decodes a credential with `unmunge`: its exit status is the
// MUNGE status, its metadata the uid, gid, encode time and ttl.
func runUnmunge(ctx context.Context, socket, cred string) (int, mungeCred, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := []string{"-N", "-k", "UID,GID,ENCODE_TIME,TTL,STATUS", "-o", "/dev/null"}
	if socket != "" {
		args = append(args, "-S", socket)
	}
	cmd := exec.CommandContext(ctx, "unmunge", args...)
	cmd.Stdin = strings.NewReader(cred)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 0, mungeCred{}, fmt.Errorf("cannot run unmunge to check a MUNGE credential: %w (install munge on the member)", err)
	}
	c, st, ok := parseUnmunge(out.Bytes())
	if !ok {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		return 0, mungeCred{}, &mungeError{"this member could not check the MUNGE credential: " + msg}
	}
	return st, c, nil
}

// parseUnmunge reads unmunge -N metadata ("UID:  1001").
func parseUnmunge(b []byte) (mungeCred, int, bool) {
	var c mungeCred
	st, have := -1, 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch strings.TrimSpace(k) {
		case "STATUS":
			st = int(n)
		case "UID":
			c.UID, have = int(n), have|1
		case "GID":
			c.GID, have = int(n), have|2
		case "ENCODE_TIME":
			c.Encoded, have = time.Unix(n, 0), have|4
		case "TTL":
			c.TTL = time.Duration(n) * time.Second
		}
	}
	ok := st >= 0 && (st != mungeSuccess && st != mungeReplayed || have == 7)
	return c, st, ok
}
