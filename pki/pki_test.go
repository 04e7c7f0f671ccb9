package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCAIssues(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, created, err := OpenCA(dir, "test", now)
	if err != nil || !created {
		t.Fatalf("OpenCA: %v created=%v", err, created)
	}
	again, created, err := OpenCA(dir, "test", now)
	if err != nil || created || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("OpenCA again: %v created=%v", err, created)
	}
	if fi, _ := os.Stat(filepath.Join(dir, CAKeyFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key mode %v", fi.Mode().Perm())
	}
	mc, mk, err := again.Issue(KindMember, "s1", []string{"lattice-1", "10.0.0.11"}, now)
	if err != nil {
		t.Fatal(err)
	}
	cc, _, err := again.Issue(KindClient, "alice", []string{"ignored"}, now)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	m, c := readCert(t, mc), readCert(t, cc)
	for _, tc := range []struct {
		name   string
		cert   *x509.Certificate
		host   string
		usage  x509.ExtKeyUsage
		member bool
	}{
		{"member as server by name", m, "lattice-1", x509.ExtKeyUsageServerAuth, true},
		{"member as server by IP", m, "10.0.0.11", x509.ExtKeyUsageServerAuth, true},
		{"member on loopback", m, "127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"member as client", m, "", x509.ExtKeyUsageClientAuth, true},
		{"client", c, "", x509.ExtKeyUsageClientAuth, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Fatal(err)
			}
			if IsMember(tc.cert) != tc.member {
				t.Fatalf("IsMember = %v", !tc.member)
			}
		})
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a client certificate verifies as a server's")
	}
	if fi, _ := os.Stat(mk); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", fi.Mode().Perm())
	}
	if slices.Contains(c.DNSNames, "ignored") {
		t.Fatal("a client certificate got host names")
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca, _, err := OpenCA(dir, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cc, ck, _ := ca.Issue(KindClient, "alice", nil, time.Now())
	caFile := filepath.Join(dir, CAFile)
	notPEM := filepath.Join(dir, "x.pem")
	os.WriteFile(notPEM, []byte("hello"), 0o644)
	cases := []struct {
		name string
		fn   func() error
		want string
	}{
		{"server without key", func() error { _, err := Server(Files{CA: caFile, Cert: cc}); return err }, "key: missing"},
		{"server without CA", func() error { _, err := Server(Files{Cert: cc, Key: ck}); return err }, "ca: missing"},
		{"unreadable CA", func() error { _, err := Client(Files{CA: filepath.Join(dir, "none")}); return err }, "cannot read"},
		{"CA not PEM", func() error { _, err := Client(Files{CA: notPEM}); return err }, "no PEM certificate"},
		{"cert without key", func() error { _, err := Client(Files{CA: caFile, Cert: cc}); return err }, "go together"},
		{"key of another cert", func() error { _, err := Client(Files{CA: caFile, Cert: caFile, Key: ck}); return err }, "cert"},
		{"peer with a client cert", func() error { _, err := Peer(Files{CA: caFile, Cert: cc, Key: ck}); return err }, "not a member certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.fn()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPeerHandshake: two members complete a handshake; a member does not
// accept a client certificate of the same CA.
func TestPeerHandshake(t *testing.T) {
	dir := t.TempDir()
	ca, _, _ := OpenCA(dir, "test", time.Now())
	files := map[string]Files{}
	for _, n := range []string{"s1", "s2"} {
		c, k, _ := ca.Issue(KindMember, n, nil, time.Now())
		files[n] = Files{CA: filepath.Join(dir, CAFile), Cert: c, Key: k}
	}
	c, k, _ := ca.Issue(KindClient, "alice", nil, time.Now())
	files["alice"] = Files{CA: filepath.Join(dir, CAFile), Cert: c, Key: k}
	shake := func(client *tls.Config) error {
		server, err := Peer(files["s1"])
		if err != nil {
			t.Fatal(err)
		}
		lis, err := tls.Listen("tcp", "127.0.0.1:0", server)
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		errc := make(chan error, 1)
		go func() {
			conn, err := lis.Accept()
			if err != nil {
				errc <- err
				return
			}
			defer conn.Close()
			errc <- conn.(*tls.Conn).Handshake()
		}()
		client.ServerName = "127.0.0.1"
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", lis.Addr().String(), client)
		if err != nil {
			<-errc
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		serr := <-errc
		if serr != nil {
			return serr
		}
		// TLS 1.3: a refused client certificate shows on the client's first read.
		_, rerr := conn.Read(make([]byte, 1))
		if rerr != nil && !os.IsTimeout(rerr) && rerr.Error() != "EOF" {
			return rerr
		}
		return nil
	}
	peer, _ := Peer(files["s2"])
	if err := shake(peer); err != nil {
		t.Fatalf("two members: %v", err)
	}
	alice, _ := Client(files["alice"])
	alice.MinVersion = tls.VersionTLS13
	if err := shake(alice); err == nil {
		t.Fatal("a member accepted a client certificate as a peer")
	}
}
