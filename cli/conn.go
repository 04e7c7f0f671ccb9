package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Connection defaults.
const (
	DefaultServer      = "127.0.0.1:7070"
	defaultRetryBudget = 5 * time.Second
	// attemptTimeout bounds one unary call on one address. Writes wait for
	// a Raft commit, so it is generous; an unreachable address fails much
	// sooner (connection refused, or the connect timeout below).
	attemptTimeout = 20 * time.Second
	connectTimeout = 2 * time.Second
)

// conn reaches the quorum through any of several API addresses. A call that
// fails with Unavailable (no leader, member down, connection refused) or
// times out moves on to the next address; when a whole round fails it
// backs off and tries again until the retry budget is spent. Only then does
// it give up, with exit code 75.
type conn struct {
	addrs  []string
	cred   credSource // nil = none
	budget time.Duration
	opts   []grpc.DialOption

	mu      sync.Mutex // logs -f follows two streams at once
	clients []*grpc.ClientConn
	pref    int // the address that answered last; tried first
}

func newConn(addrs []string, cred credSource, budget time.Duration, extra ...grpc.DialOption) *conn {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()), // replaced by TLS credentials in extra
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: connectTimeout,
		}),
	}
	return &conn{
		addrs:   addrs,
		cred:    cred,
		budget:  budget,
		opts:    append(opts, extra...),
		clients: make([]*grpc.ClientConn, len(addrs)),
	}
}

// parseServers splits "ADDR[,ADDR...]".
func parseServers(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, usageErrorf("invalid server %q: allowed ADDR[,ADDR...] such as %s", s, DefaultServer)
	}
	return out, nil
}

func (c *conn) client(i int) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clients[i] != nil {
		return c.clients[i], nil
	}
	cc, err := grpc.NewClient(c.addrs[i], c.opts...)
	if err != nil {
		return nil, usageErrorf("invalid server %q: %v", c.addrs[i], err)
	}
	c.clients[i] = cc
	return cc, nil
}

func (c *conn) close() {
	for _, cc := range c.clients {
		if cc != nil {
			_ = cc.Close()
		}
	}
}

// unary runs one request/response call with a per-attempt timeout.
func (c *conn) unary(ctx context.Context, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	return c.do(ctx, attemptTimeout, fn)
}

// stream runs a streaming call: no per-attempt timeout. fn must be safe to
// run again on another address (resume from an offset, or start over).
func (c *conn) stream(ctx context.Context, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	return c.do(ctx, 0, fn)
}

func (c *conn) do(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, cc grpc.ClientConnInterface) error) error {
	deadline := time.Now().Add(c.budget)
	pause := 100 * time.Millisecond
	var last error
	for {
		c.mu.Lock()
		pref := c.pref
		c.mu.Unlock()
		for k := range c.addrs {
			i := (pref + k) % len(c.addrs)
			cc, err := c.client(i)
			if err != nil {
				return err
			}
			actx, cancel := ctx, context.CancelFunc(func() {})
			if c.cred != nil {
				// One credential per attempt: MUNGE credentials are
				// single-use.
				h, err := c.cred.header(ctx)
				if err != nil {
					return err
				}
				actx = metadata.AppendToOutgoingContext(ctx, "authorization", h)
			}
			if timeout > 0 {
				actx, cancel = context.WithTimeout(actx, timeout)
			}
			err = fn(actx, cc)
			cancel()
			if err == nil {
				c.prefer(i)
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !retryable(err) {
				c.prefer(i)
				return refusedHint(fromRPC(err), c.cred)
			}
			last = fmt.Errorf("%s: %s", c.addrs[i], transportText(fromRPC(err)))
		}
		if time.Now().Add(pause).After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(pause*2, time.Second)
	}
	return &exitError{code: ExitUnavailable, err: fmt.Errorf("no Lattice server answered (tried %s for %s): %v; %s",
		strings.Join(c.addrs, ", "), c.budget, last, tlsHint(last))}
}

// tlsHint explains the failures of a client and a server that disagree
// about TLS, which gRPC reports only as broken connections.
func tlsHint(err error) string {
	msg := fmt.Sprint(err)
	switch {
	case strings.Contains(msg, "server preface"):
		return "the server may speak TLS only: give its CA with --cacert (LATTICE_CACERT)"
	case strings.Contains(msg, "does not look like a TLS handshake"):
		return "the server does not speak TLS: leave out --cacert/--cert (LATTICE_CACERT, LATTICE_CERT)"
	case strings.Contains(msg, "certificate signed by unknown authority"), strings.Contains(msg, "certificate is valid for"):
		return "the server's certificate does not match --cacert or its address"
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"):
		return "the server refused the client certificate (--cert, --key): is it signed by the cluster's CA?"
	}
	return "retry later"
}

// dialDetail is the tail of gRPC's "connection error: desc = \"transport:
// Error while dialing: dial tcp ADDR: connect: connection refused\"".
var dialDetail = lazyRegexp(`^connection error: desc = "(?:transport: )?(?:[Ee]rror while dialing:? )?(?:dial tcp [^ ]+: )?(.*?)"?$`)

// transportText says why an address did not answer in a few words
// ("connect: connection refused"), without gRPC's wrapping.
func transportText(err error) string {
	msg := err.Error()
	if m := dialDetail().FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return msg
}

func (c *conn) prefer(i int) {
	c.mu.Lock()
	c.pref = i
	c.mu.Unlock()
}

// retryable reports whether another address (or a later attempt) may
// succeed where this one failed.
func retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch rpcCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// newRequestID returns a random UUID (version 4) string.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
