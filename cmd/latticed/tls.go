package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/pki"
)

// tlsFlags are the TLS files of a member (all three) or an agent (the CA,
// and optionally a client certificate and key).
func tlsFlags(who string) []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(str("tls-ca", "", "CA certificate (PEM) of the cluster; with it "+who+" talks TLS only")),
		altsrc.NewStringFlag(str("tls-cert", "", "this "+who+"'s certificate (PEM), signed by --tls-ca")),
		altsrc.NewStringFlag(str("tls-key", "", "the private key (PEM) of --tls-cert")),
	}
}

func tlsFiles(c *cli.Context) pki.Files {
	return pki.Files{CA: c.String("tls-ca"), Cert: c.String("tls-cert"), Key: c.String("tls-key")}
}

// tlsUsage turns a pki file error into a usage error naming the flag.
func tlsUsage(err error) error {
	var fe *pki.FieldError
	if errors.As(err, &fe) {
		return usageError{&model.FieldError{Field: "tls-" + fe.Field, Value: fe.Value, Allowed: fe.Problem}}
	}
	return err
}

// dialCreds are the transport credentials of latticed's own client calls
// (dev's readiness wait and demo).
func dialCreds(f pki.Files) (grpc.DialOption, error) {
	if !f.Enabled() {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	cfg, err := pki.Client(f)
	if err != nil {
		return nil, err
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg)), nil
}

// --- ca -------------------------------------------------------------------------------

func caCommand() *cli.Command {
	return &cli.Command{
		Name:  "ca",
		Usage: "a development certificate authority for TLS between members, agents and clients",
		Subcommands: []*cli.Command{{
			Name: "init",
			Usage: "create a CA in DIR (or reuse the one there) and issue member and client certificates from it: " +
				"DIR/ca.crt, DIR/NAME.crt, DIR/NAME.key",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "dir", Usage: "where the CA and the certificates live (required; the CA key stays there, 0600)", EnvVars: env("ca-dir")},
				&cli.StringFlag{Name: "members", Usage: "quorum members to issue member certificates for, comma-separated ids"},
				&cli.StringFlag{Name: "hosts", Usage: "host names and IP addresses the member certificates are valid for, comma-separated (localhost, 127.0.0.1 and ::1 always)"},
				&cli.StringFlag{Name: "clients", Usage: "users or agents to issue client certificates for (their common name), comma-separated"},
			},
			Action:       runCAInit,
			OnUsageError: onUsageError,
		}},
	}
}

func runCAInit(c *cli.Context) error {
	dir := c.String("dir")
	if dir == "" {
		return usageError{&model.FieldError{Field: "dir", Allowed: "a directory for the CA (--dir or LATTICE_CA_DIR)"}}
	}
	members, clients := splitList(c.String("members")), splitList(c.String("clients"))
	for _, n := range append(append([]string{}, members...), clients...) {
		if !model.IsName(n) {
			return usageError{&model.FieldError{Field: "members/clients", Value: n, Allowed: "names of letters, digits, '.', '-' and '_'"}}
		}
	}
	now := time.Now()
	ca, created, err := pki.OpenCA(dir, "Lattice development CA", now)
	if err != nil {
		return fmt.Errorf("CA in %s: %w", dir, err)
	}
	if created {
		fmt.Fprintf(os.Stderr, "created a CA in %s (keep %s private)\n", dir, filepath.Join(dir, pki.CAKeyFile))
	}
	fmt.Println(filepath.Join(dir, pki.CAFile))
	for _, m := range members {
		cert, key, err := ca.Issue(pki.KindMember, m, splitList(c.String("hosts")), now)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", cert, key)
	}
	for _, u := range clients {
		cert, key, err := ca.Issue(pki.KindClient, u, nil, now)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", cert, key)
	}
	return nil
}

// devTLS makes (once) a CA and a member certificate for `latticed dev
// --tls` under DATA_DIR/pki and returns the server's files.
func devTLS(dataDir string) (pki.Files, error) {
	dir := filepath.Join(dataDir, "pki")
	ca, _, err := pki.OpenCA(dir, "Lattice dev CA", time.Now())
	if err != nil {
		return pki.Files{}, fmt.Errorf("dev CA: %w", err)
	}
	f := pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: filepath.Join(dir, "dev.crt"), Key: filepath.Join(dir, "dev.key")}
	if _, err := os.Stat(f.Cert); err != nil {
		host, _ := os.Hostname()
		if _, _, err := ca.Issue(pki.KindMember, "dev", []string{host}, time.Now()); err != nil {
			return pki.Files{}, fmt.Errorf("dev certificate: %w", err)
		}
	}
	return f, nil
}

// certEntry adds a cn: line (a client certificate's common name mapped to
// an identity) to a tokens file.
func appendCertEntry(path, cn string, id auth.Identity) error {
	if strings.ContainsAny(cn, " \t\n") || cn == "" {
		return usageError{&model.FieldError{Field: "cn", Value: cn, Allowed: "a certificate common name without spaces"}}
	}
	return appendLine(path, auth.CertEntry(cn, id))
}
