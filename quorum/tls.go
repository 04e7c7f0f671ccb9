package quorum

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStreamLayer carries Raft's NetworkTransport over TLS: every
// connection, accepted or dialled, is a TLS session whose configuration
// (pki.Peer) requires a member certificate at both ends. Log entries —
// job environments included — never cross the wire in clear text.
type tlsStreamLayer struct {
	net.Listener
	cfg       *tls.Config
	advertise net.Addr
}

// handshakeTimeout bounds the TLS handshake of an accepted connection, so
// a peer that connects and says nothing does not hold it open.
const handshakeTimeout = 10 * time.Second

// Accept returns the next connection as a TLS server session whose
// handshake runs, bounded, on its first read or write (in the transport's
// per-connection goroutine, not in its accept loop).
func (l *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: tls.Server(c, l.cfg)}, nil
}

type handshakeConn struct {
	*tls.Conn
	once sync.Once
	err  error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		c.err = c.Conn.HandshakeContext(ctx)
		cancel()
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// Dial opens a TLS session to another member, verifying its certificate
// against the host of its Raft address.
func (l *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		return nil, err
	}
	cfg := l.cfg.Clone()
	cfg.ServerName = host
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), cfg)
}

// Addr is the address advertised to other members.
func (l *tlsStreamLayer) Addr() net.Addr { return l.advertise }
