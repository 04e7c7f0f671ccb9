package quorum

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Raft authenticated without TLS. Every member of a cluster holds the same
// cluster secret (Config.ClusterSecret: latticed server --cluster-secret,
// LATTICE_CLUSTER_SECRET or the config file); every Raft connection starts
// with a challenge-response that proves both ends hold it, before a byte of
// Raft is read:
//
//	acceptor → dialer   "LRS1" + 32 random bytes A
//	dialer   → acceptor 32 random bytes B + HMAC-SHA256(secret, "dial" A B)
//	acceptor → dialer   HMAC-SHA256(secret, "accept" A B)
//
// A stranger — a raw hashicorp/raft transport asking for TimeoutNow, a
// vote or an AppendEntries — cannot answer and is dropped (and logged). The
// secret authenticates; it does not encrypt: use TLS for that (with TLS the
// member certificates authenticate, and a secret, when set, is checked as
// well). Without TLS and without a secret a member refuses a Raft address
// beyond loopback (checkPlaintextRaft).

const (
	secretMagic     = "LRS1"
	secretNonceSize = 32
	// MinClusterSecretBytes is the shortest cluster secret accepted.
	MinClusterSecretBytes = 16
)

// ErrRaftStranger is a Raft connection that did not prove the cluster secret.
var ErrRaftStranger = errors.New("raft connection refused: it did not prove the cluster secret")

func secretMAC(secret []byte, label string, a, b []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}

// checkClusterSecret checks a secret's length (and so that it was meant).
func checkClusterSecret(s string) error {
	if s != "" && len(s) < MinClusterSecretBytes {
		return fmt.Errorf("invalid cluster-secret: %d bytes given, allowed at least %d (e.g. `openssl rand -hex 32`)", len(s), MinClusterSecretBytes)
	}
	return nil
}

// checkPlaintextRaft refuses a Raft address beyond loopback when Raft is
// neither TLS nor authenticated by a cluster secret: anyone who reaches it
// could vote, append entries or move leadership.
func checkPlaintextRaft(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid raft address %q: allowed HOST:PORT", addr)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("raft address %q is beyond loopback with neither TLS nor a cluster secret: anyone reaching it could take part in Raft; "+
		"set --cluster-secret (the same on every member) or TLS (--tls-ca, --tls-cert, --tls-key), or bind 127.0.0.1", addr)
}

// secretStreamLayer wraps a stream layer (plain TCP or TLS) with the
// cluster-secret handshake. entropy gives the challenges (crypto/rand,
// passed in: this package never draws randomness itself).
type secretStreamLayer struct {
	raft.StreamLayer
	secret  []byte
	entropy io.Reader
	log     *slog.Logger
}

func nonce(entropy io.Reader) ([]byte, error) {
	b := make([]byte, secretNonceSize)
	if _, err := io.ReadFull(entropy, b); err != nil {
		return nil, fmt.Errorf("cluster secret handshake: no randomness: %w", err)
	}
	return b, nil
}

// bounded runs fn, closing c if it takes longer than d (a peer that
// connects and says nothing holds nothing).
func bounded(c net.Conn, d time.Duration, fn func() error) error {
	timer := time.AfterFunc(d, func() { c.Close() })
	err := fn()
	if !timer.Stop() && err == nil {
		err = errors.New("cluster secret handshake: timed out")
	}
	return err
}

// Accept returns the next connection; its handshake runs, bounded, on its
// first read or write (in the transport's per-connection goroutine).
func (l *secretStreamLayer) Accept() (net.Conn, error) {
	c, err := l.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return &secretConn{Conn: c, secret: l.secret, entropy: l.entropy, log: l.log}, nil
}

// Dial connects and proves the secret before handing the connection to Raft.
func (l *secretStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := l.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	if err := bounded(c, max(timeout, handshakeTimeout), func() error { return dialHandshake(c, l.secret, l.entropy) }); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft %s: %w", address, err)
	}
	return c, nil
}

func dialHandshake(c net.Conn, secret []byte, entropy io.Reader) error {
	hello := make([]byte, len(secretMagic)+secretNonceSize)
	if _, err := io.ReadFull(c, hello); err != nil {
		return fmt.Errorf("cluster secret handshake: %w", err)
	}
	if string(hello[:len(secretMagic)]) != secretMagic {
		return errors.New("cluster secret handshake: the member does not use a cluster secret")
	}
	a := hello[len(secretMagic):]
	b, err := nonce(entropy)
	if err != nil {
		return err
	}
	if _, err := c.Write(append(b, secretMAC(secret, "dial", a, b)...)); err != nil {
		return fmt.Errorf("cluster secret handshake: %w", err)
	}
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("cluster secret handshake: refused (not the same cluster secret?): %w", err)
	}
	if !hmac.Equal(got, secretMAC(secret, "accept", a, b)) {
		return errors.New("cluster secret handshake: the member did not prove the cluster secret")
	}
	return nil
}

// secretConn is an accepted connection that proves itself before Raft
// reads or writes anything on it.
type secretConn struct {
	net.Conn
	secret  []byte
	entropy io.Reader
	log     *slog.Logger
	once    sync.Once
	err     error
}

func (c *secretConn) handshake() error {
	c.once.Do(func() {
		c.err = bounded(c.Conn, handshakeTimeout, c.accept)
		if c.err != nil {
			c.log.Warn("refused a raft connection", "remote", c.Conn.RemoteAddr().String(), "err", c.err)
			c.Conn.Close()
		}
	})
	return c.err
}

func (c *secretConn) accept() error {
	a, err := nonce(c.entropy)
	if err != nil {
		return err
	}
	if _, err := c.Conn.Write(append([]byte(secretMagic), a...)); err != nil {
		return fmt.Errorf("%w: %v", ErrRaftStranger, err)
	}
	resp := make([]byte, secretNonceSize+sha256.Size)
	if _, err := io.ReadFull(c.Conn, resp); err != nil {
		return fmt.Errorf("%w: %v", ErrRaftStranger, err)
	}
	b, mac := resp[:secretNonceSize], resp[secretNonceSize:]
	if !hmac.Equal(mac, secretMAC(c.secret, "dial", a, b)) {
		return ErrRaftStranger
	}
	if _, err := c.Conn.Write(secretMAC(c.secret, "accept", a, b)); err != nil {
		return fmt.Errorf("%w: %v", ErrRaftStranger, err)
	}
	return nil
}

func (c *secretConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *secretConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// tcpStreamLayer is plain TCP (what raft.NewTCPTransport uses inside),
// for wrapping.
type tcpStreamLayer struct {
	net.Listener
	advertise net.Addr
}

func (l *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

func (l *tcpStreamLayer) Addr() net.Addr { return l.advertise }

// listenRaft binds addr and returns the stream layer it advertises.
func listenRaft(addr string) (net.Listener, *net.TCPAddr, error) {
	adv, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid raft address %q: %w", addr, err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		lis.Close()
		return nil, nil, fmt.Errorf("raft address %q: give an address other members can reach, not an unspecified one", addr)
	}
	if adv.Port == 0 {
		adv = lis.Addr().(*net.TCPAddr)
	}
	return lis, adv, nil
}

// newRaftTransport is the member's network transport: TCP or TLS, with
// the cluster-secret handshake when a secret is set.
func newRaftTransport(cfg *Config, log *slog.Logger) (*raft.NetworkTransport, error) {
	if err := checkClusterSecret(cfg.ClusterSecret); err != nil {
		return nil, err
	}
	if cfg.TLS == nil && cfg.ClusterSecret == "" {
		if err := checkPlaintextRaft(cfg.RaftAddr); err != nil {
			return nil, err
		}
	}
	lis, adv, err := listenRaft(cfg.RaftAddr)
	if err != nil {
		return nil, err
	}
	var layer raft.StreamLayer = &tcpStreamLayer{Listener: lis, advertise: adv}
	if cfg.TLS != nil {
		layer = &tlsStreamLayer{Listener: lis, cfg: cfg.TLS, advertise: adv}
	}
	if cfg.ClusterSecret != "" {
		if cfg.Entropy == nil {
			lis.Close()
			return nil, errors.New("quorum: a cluster secret needs Config.Entropy (crypto/rand.Reader)")
		}
		layer = &secretStreamLayer{StreamLayer: layer, secret: []byte(cfg.ClusterSecret), entropy: cfg.Entropy, log: log}
	}
	return raft.NewNetworkTransport(layer, 5, 10*time.Second, io.Discard), nil
}
