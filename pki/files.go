package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// MemberOU is the organizational unit of quorum member certificates.
const MemberOU = "lattice-member"

// Files names the PEM files of one party: the CA that signs the cluster's
// certificates, and this party's own certificate and key.
type Files struct {
	CA   string
	Cert string
	Key  string
}

// Enabled reports whether any file is named (TLS on).
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// FieldError is a bad or missing file setting; Field is the flag's name.
type FieldError struct {
	Field, Value, Problem string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Problem)
	}
	return fmt.Sprintf("%s %s: %s", e.Field, e.Value, e.Problem)
}

func (f Files) pool() (*x509.CertPool, error) {
	b, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, &FieldError{Field: "ca", Value: f.CA, Problem: fmt.Sprintf("cannot read it: %v", errors.Unwrap(err))}
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, &FieldError{Field: "ca", Value: f.CA, Problem: "holds no PEM certificate"}
	}
	return p, nil
}

func (f Files) pair() (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return tls.Certificate{}, &FieldError{Field: "cert", Value: f.Cert, Problem: fmt.Sprintf("with key %s: %v", f.Key, err)}
	}
	return c, nil
}

// needAll checks that CA, certificate and key are all named.
func (f Files) needAll(who string) error {
	for _, x := range []struct{ field, v string }{{"ca", f.CA}, {"cert", f.Cert}, {"key", f.Key}} {
		if x.v == "" {
			return &FieldError{Field: x.field, Problem: "missing: " + who + " with TLS needs a CA, a certificate and its key"}
		}
	}
	return nil
}

// loadAll reads the CA pool and the certificate pair, all three required
// for who.
func (f Files) loadAll(who string) (*x509.CertPool, tls.Certificate, error) {
	if err := f.needAll(who); err != nil {
		return nil, tls.Certificate{}, err
	}
	pool, err := f.pool()
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	cert, err := f.pair()
	return pool, cert, err
}

// Server is the API server's configuration: its certificate, and client
// certificates verified against the CA when a client presents one (mTLS
// is optional; tokens still work).
func Server(f Files) (*tls.Config, error) {
	pool, cert, err := f.loadAll("a server")
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}, nil
}

// Client is an API client's configuration: the server is verified against
// the CA (the system's roots when none is named); the certificate and key,
// when named, are presented as the client's identity.
func Client(f Files) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := f.pool()
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, &FieldError{Field: "cert", Problem: "a client certificate and its key go together (--cert and --key)"}
	}
	if f.Cert != "" {
		cert, err := f.pair()
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Peer is the Raft transport's configuration, used both to accept and to
// dial: both ends present member certificates signed by the CA and refuse
// a peer whose certificate is not a member's.
func Peer(f Files) (*tls.Config, error) {
	pool, cert, err := f.loadAll("a quorum member")
	if err != nil {
		return nil, err
	}
	if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err != nil || !IsMember(leaf) {
		return nil, &FieldError{Field: "cert", Value: f.Cert, Problem: "is not a member certificate (its subject needs OU=" + MemberOU + "; `latticed ca init --members` makes them)"}
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
		RootCAs: pool, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !IsMember(cs.PeerCertificates[0]) {
				return errors.New("the peer's certificate is not a quorum member's (OU=" + MemberOU + ")")
			}
			return nil
		}}, nil
}

// IsMember reports whether a certificate is a quorum member's.
func IsMember(c *x509.Certificate) bool {
	return c != nil && slices.Contains(c.Subject.OrganizationalUnit, MemberOU)
}
