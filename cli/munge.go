package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// MUNGE, like Slurm's auth/munge: on a host whose munged shares the site
// key with the servers', latticectl needs no token. Every call carries a
// fresh credential from `munge -n` (the servers refuse one they have seen
// before), which vouches for the uid that runs latticectl.
//
// Why the tool and not libmunge: a cgo binding would tie every build of
// latticectl to libmunge's headers and library, and a binary built without
// them could not use MUNGE at all; `munge -n` costs one process start
// (measured in docs/operations.md), and only when no token is given.

// DefaultMungeSocket is munged's own default socket (Debian's munge).
const DefaultMungeSocket = "/run/munge/munge.socket.2"

// credSource makes the authorization header of each call.
type credSource interface {
	header(ctx context.Context) (string, error)
	// describe names the credential in refusals ("the token from
	// LATTICE_TOKEN").
	describe() string
}

type tokenCred struct{ token, from string }

func (t tokenCred) header(context.Context) (string, error) { return "Bearer " + t.token, nil }
func (t tokenCred) describe() string                       { return "the token from " + t.from }

type mungeCred struct {
	socket string
	uid    int
}

func (m mungeCred) describe() string {
	return fmt.Sprintf("a MUNGE credential for uid %d (socket %s)", m.uid, m.socket)
}

func (m mungeCred) header(ctx context.Context) (string, error) {
	cred, err := mungeEncode(ctx, m.socket)
	if err != nil {
		return "", err
	}
	return "MUNGE " + cred, nil
}

// mungeEncode runs `munge -n` for a credential with no payload.
func mungeEncode(ctx context.Context, socket string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "munge", "-n", "-S", socket)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("no MUNGE credential from %s: %s (is munged running? give a token with --token or LATTICE_TOKEN instead)", socket, msg)
	}
	return strings.TrimSpace(out.String()), nil
}

// credentials picks what latticectl authenticates with: --token,
// LATTICE_TOKEN, the token `latticed dev` saved, else MUNGE when its
// socket exists; nil = nothing (a server without auth).
func (r *runner) credentials(tokenFlag, tokenFrom, socket string) (credSource, error) {
	tok, err := r.token(tokenFlag)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		from := tokenFrom
		if tokenFlag == "" {
			from = "the saved token file"
			if p, err := TokenPath(r.Getenv); err == nil {
				from = p
			}
		}
		return tokenCred{token: tok, from: from}, nil
	}
	if socket == "" || socket == "off" || socket == "none" {
		return nil, nil
	}
	if fi, err := os.Stat(socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		if r.Getenv != nil && r.Getenv("LATTICE_MUNGE_SOCKET") == socket && socket != DefaultMungeSocket {
			return nil, fmt.Errorf("MUNGE socket %s (LATTICE_MUNGE_SOCKET): not a socket; is munged running?", socket)
		}
		return nil, nil
	}
	return mungeCred{socket: socket, uid: os.Getuid()}, nil
}

// refusedHint names the credential a refused call sent and what to do.
func refusedHint(err error, cred credSource) error {
	var ae *apiError
	if !errors.As(err, &ae) || (ae.code != codes.Unauthenticated && ae.code != codes.PermissionDenied) {
		return err
	}
	if ae.code == codes.PermissionDenied && !strings.Contains(ae.msg, "is not a Lattice user") {
		return err
	}
	sent := "no credential (no --token, LATTICE_TOKEN or saved token, and no MUNGE socket at " + DefaultMungeSocket + ")"
	if cred != nil {
		sent = cred.describe()
	}
	return &apiError{code: ae.code, msg: ae.msg + " [latticectl sent " + sent + "]"}
}
