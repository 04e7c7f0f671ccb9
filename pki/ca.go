package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// A development CA: `latticed ca init --dir D` keeps D/ca.crt and
// D/ca.key and issues NAME.crt/NAME.key next to them. ECDSA P-256 keys;
// the CA lives ten years, the certificates it issues one.

// CA is a loaded certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	Dir  string
}

// CAFile and CAKeyFile are the CA's files inside its directory.
const (
	CAFile    = "ca.crt"
	CAKeyFile = "ca.key"
)

// OpenCA loads the CA kept in dir, creating it (named name) when dir holds
// none. created says whether it was made now.
func OpenCA(dir, name string, now time.Time) (ca *CA, created bool, err error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if _, err := os.Stat(certPath); err == nil {
		ca, err := loadCA(dir)
		return ca, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("CA directory: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, false, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"Lattice"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, false, err
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, false, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, false, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, Key: key, Dir: dir}, true, nil
}

func loadCA(dir string) (*CA, error) {
	cb, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	kb, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("the CA's key: %w", err)
	}
	cblock, _ := pem.Decode(cb)
	kblock, _ := pem.Decode(kb)
	if cblock == nil || kblock == nil {
		return nil, fmt.Errorf("%s: the CA's certificate or key is not PEM", dir)
	}
	cert, err := x509.ParseCertificate(cblock.Bytes)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kblock.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA's key cannot sign")
	}
	return &CA{Cert: cert, Key: signer, Dir: dir}, nil
}

// Kind is what a certificate is for.
type Kind int

// Member certificates serve the API and Raft and dial other members;
// client certificates identify a user or an agent.
const (
	KindMember Kind = iota
	KindClient
)

// Issue writes NAME.crt and NAME.key in the CA's directory: a member
// certificate valid for hosts (names or IPs; localhost and the loopback
// addresses are always added), or a client certificate whose common name is
// name. It returns the two paths.
func (ca *CA) Issue(kind Kind, name string, hosts []string, now time.Time) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"Lattice"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if kind == KindMember {
		tmpl.Subject.OrganizationalUnit = []string{MemberOU}
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range append([]string{"localhost", "127.0.0.1", "::1"}, hosts...) {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(ca.Dir, name+".crt"), filepath.Join(ca.Dir, name+".key")
	if err := writeKey(keyPath, key); err != nil {
		return "", "", err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported systems
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
