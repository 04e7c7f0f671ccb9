package quorum

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
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

// newTLSTransport listens on addr and returns a Raft transport over TLS.
func newTLSTransport(addr string, cfg *tls.Config) (*raft.NetworkTransport, error) {
	adv, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("invalid raft address %q: %w", addr, err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		lis.Close()
		return nil, fmt.Errorf("raft address %q: give an address other members can reach, not an unspecified one", addr)
	}
	if adv.Port == 0 {
		adv = lis.Addr().(*net.TCPAddr)
	}
	layer := &tlsStreamLayer{Listener: tls.NewListener(lis, cfg), cfg: cfg, advertise: adv}
	return raft.NewNetworkTransport(layer, 5, 10*time.Second, io.Discard), nil
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
