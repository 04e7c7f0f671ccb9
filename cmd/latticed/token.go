package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/metadata"

	"github.com/latticehpc/lattice/auth"
	latticecli "github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/model"
)

// tokensFileName is a member's tokens file inside its data dir.
const tokensFileName = "tokens"

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "manage API tokens",
		Subcommands: []*cli.Command{{
			Name:      "create",
			Usage:     "print a new token for USER and add its hash to the member's tokens file (for a first admin without MUNGE; otherwise use `latticectl token create`, which every member knows at once)",
			ArgsUsage: "USER",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "data-dir", Usage: "the member's data dir (its tokens file is DATA_DIR/tokens)", EnvVars: env("data-dir")},
				&cli.StringFlag{Name: "tokens-file", Usage: "the tokens file (default DATA_DIR/tokens)", EnvVars: env("tokens-file")},
				&cli.StringFlag{Name: "tenant", Usage: "tenant(s) the user belongs to, comma-separated (user, tenant-admin)"},
				&cli.StringFlag{Name: "role", Value: "user", Usage: "user, tenant-admin, admin or agent"},
				&cli.StringFlag{Name: "nodes", Usage: "agent only: node names or patterns it may register and report for, comma-separated (node0*)"},
				&cli.IntFlag{Name: "max-priority", Value: -1, Usage: "the highest priority class USER may ask for (QOS ceiling; default 5, admins 10)"},
				&cli.StringFlag{Name: "cn", Usage: "instead of a token, let client certificates with this common name (signed by the cluster CA) act as USER; prints nothing"},
			},
			Action:       runTokenCreate,
			OnUsageError: onUsageError,
		}},
	}
}

func runTokenCreate(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError{&model.FieldError{Field: "USER", Allowed: "exactly one user name"}}
	}
	path, err := tokensPath(c.String("tokens-file"), c.String("data-dir"))
	if err != nil {
		return err
	}
	role, err := auth.ParseRole(c.String("role"))
	if err != nil {
		return usageError{err}
	}
	id := auth.Identity{User: c.Args().First(), Role: role, Tenants: splitList(c.String("tenant")),
		Nodes: splitList(c.String("nodes")), MaxPriority: c.Int("max-priority")}
	if err := id.Validate(); err != nil {
		return usageError{err}
	}
	if cn := c.String("cn"); cn != "" {
		if err := appendCertEntry(path, cn, id); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "client certificates named %s now act as %s (%s) on the members using %s (copy that file to every member)\n", cn, id.User, role, path)
		return nil
	}
	tok := mintToken()
	if err := appendToken(path, tok, id); err != nil {
		return err
	}
	fmt.Println(tok)
	fmt.Fprintf(os.Stderr, "added a %s token for %s to %s (copy that file to every member)\n", role, id.User, path)
	fmt.Fprintf(os.Stderr, "note: tokens now live in the quorum: `latticectl token create` makes one every member accepts at once, and `latticectl token import %s` moves this file's tokens there\n", path)
	return nil
}

func tokensPath(file, dataDir string) (string, error) {
	switch {
	case file != "":
		return file, nil
	case dataDir != "":
		return filepath.Join(dataDir, tokensFileName), nil
	}
	return "", usageError{&model.FieldError{Field: "data-dir", Allowed: "the member's data dir (--data-dir) or --tokens-file"}}
}

func mintToken() string {
	var r [32]byte
	if _, err := rand.Read(r[:]); err != nil {
		panic(err) // crypto/rand never fails on supported systems
	}
	return auth.NewToken(r)
}

// appendToken adds a hashed entry to a tokens file (created 0600).
func appendToken(path string, token string, id auth.Identity) error {
	return appendLine(path, auth.Entry(token, id))
}

// appendLine adds one line to a tokens file (created 0600).
func appendLine(path, line string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tokens file %s: %w", path, err)
	}
	return nil
}

// readTokens parses a tokens file; a missing one has no tokens.
func readTokens(path string) (*auth.Tokens, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return &auth.Tokens{}, nil
	}
	if err != nil {
		return nil, err
	}
	t, err := auth.ParseTokens(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// localUser is the local user's name as a Lattice name ("dev" if it has
// none usable).
func localUser() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if !model.IsName(name) {
		return "dev"
	}
	return name
}

// devCredentials makes sure the local user has an admin token that this dev
// data dir accepts: the token saved in the user's config dir is reused
// (its hash added here if missing), or a new one is minted and saved. It
// returns the token.
func devCredentials(dataDir string) (string, error) {
	path := filepath.Join(dataDir, tokensFileName)
	toks, err := readTokens(path)
	if err != nil {
		return "", err
	}
	saved, err := latticecli.ReadSavedToken(os.Getenv)
	if err != nil {
		return "", err
	}
	if saved != "" {
		if id := toks.Authenticate(saved); id != nil && id.Role == auth.RoleAdmin {
			return saved, nil
		}
	}
	tok := saved
	if tok == "" {
		tok = mintToken()
	}
	if err := appendToken(path, tok, auth.Identity{User: localUser(), Role: auth.RoleAdmin, MaxPriority: -1}); err != nil {
		return "", err
	}
	if saved == "" {
		p, err := latticecli.SaveToken(os.Getenv, tok)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(os.Stderr, "lattice dev: saved an admin token for %s in %s (latticectl sends it)\n", localUser(), p)
	}
	return tok, nil
}

// loopbackOnly refuses an address that listens beyond loopback.
func loopbackOnly(flag, addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{&model.FieldError{Field: flag, Value: addr, Allowed: "HOST:PORT"}}
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usageError{fmt.Errorf("--%s %s listens beyond loopback without authentication: create a tokens file first (latticed token create --data-dir DIR --role admin USER)", flag, addr)}
}

// withBearer is a context for latticed's own client calls.
func withBearer(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// serverTokensFile decides whether a member authenticates: with
// --tokens-file, with a tokens file in its data dir, or with MUNGE.
// Without any it may listen on loopback only.
func serverTokensFile(c *cli.Context, munge bool) (string, error) {
	if f := c.String("tokens-file"); f != "" {
		return f, nil
	}
	def := filepath.Join(c.String("data-dir"), tokensFileName)
	if _, err := os.Stat(def); err == nil {
		return def, nil
	}
	if munge {
		return "", nil
	}
	for _, flag := range []string{"api-addr", "raft-addr", "metrics-addr", "http"} {
		if err := loopbackOnly(flag, c.String(flag)); err != nil {
			return "", err
		}
	}
	slog.Warn("authentication is off: no munged socket (--munge-socket) and no tokens file; listening on loopback only (run munged, or latticed token create --data-dir DIR --role admin USER, to turn it on at next start)")
	return "", nil
}
