package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refusals: an agent whose credential the servers refuse says so in its
// own log, naming the identity it tried and what to do, and gives up after
// Config.MaxRefusals refusals in a row (RefusedError; latticed exits 77,
// EX_NOPERM) instead of retrying forever.

// DefaultMaxRefusals is how many refusals in a row an agent takes before
// it gives up.
const DefaultMaxRefusals = 5

// RefusedError ends Run when the servers keep refusing the agent's
// credential.
type RefusedError struct {
	Identity string
	Times    int
	Last     string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the servers refused this agent's credential (%s) %d times in a row; last: %s; give the agent an agent token that names its nodes (an admin runs `latticectl token create NAME --role agent --nodes PATTERN`; pass it with --token or LATTICE_TOKEN)",
		e.Identity, e.Times, e.Last)
}

// refused reports whether err is the servers refusing the credential.
func refused(err error) (string, bool) {
	st, ok := status.FromError(err)
	if !ok || (st.Code() != codes.Unauthenticated && st.Code() != codes.PermissionDenied) {
		return "", false
	}
	return st.Message(), true
}

// credentialName names the agent's credential without its secret: the id
// `latticectl token list` shows (the first hex digits of its hash).
func (a *Agent) credentialName() string {
	if a.cfg.Token == "" {
		if a.cfg.TLS != nil && len(a.cfg.TLS.Certificates) > 0 {
			return fmt.Sprintf("agent %s with its client certificate", a.cfg.ID)
		}
		return fmt.Sprintf("agent %s with no token", a.cfg.ID)
	}
	sum := sha256.Sum256([]byte(a.cfg.Token))
	return fmt.Sprintf("agent %s with token %s", a.cfg.ID, hex.EncodeToString(sum[:])[:12])
}

// noteSession counts a session's outcome; it returns the error that ends
// Run after too many refusals in a row.
func (a *Agent) noteSession(addr string, err error, count *int) error {
	msg, ok := refused(err)
	if !ok {
		*count = 0
		return nil
	}
	*count++
	limit := a.cfg.MaxRefusals
	if limit == 0 {
		limit = DefaultMaxRefusals
	}
	a.log.Error("the server refused this agent's credential", "server", addr, "identity", a.credentialName(),
		"refusal", *count, "gives_up_after", limit, "reason", msg,
		"fix", "give the agent an agent token naming its nodes: `latticectl token create NAME --role agent --nodes PATTERN`, then --token or LATTICE_TOKEN")
	if limit > 0 && *count >= limit {
		return &RefusedError{Identity: a.credentialName(), Times: *count, Last: msg}
	}
	return nil
}
