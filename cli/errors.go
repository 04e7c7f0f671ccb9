package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/model"
)

// Exit codes of latticectl (CLI.md).
const (
	ExitOK          = 0
	ExitError       = 1
	ExitUsage       = 2  // usage error or invalid input
	ExitNotFound    = 3  // an allocation, node, vCluster or tenant does not exist
	ExitUnavailable = 75 // no leader or no server answered; retry later (EX_TEMPFAIL)
	ExitInterrupted = 130
)

// exitError carries the exit code an error should end the process with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// UsageErrorf is a usage error (exit code 2), for commands defined outside
// this package (cli/offline).
func UsageErrorf(format string, args ...any) error { return usageErrorf(format, args...) }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return &exitError{code: ExitNotFound, err: fmt.Errorf(format, args...)}
}

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// apiError is a gRPC error from a server, reduced to its code and the
// server's message (never the "rpc error: code = ..." wrapping).
type apiError struct {
	code codes.Code
	msg  string
}

func (e *apiError) Error() string { return e.msg }

// fromRPC turns a gRPC status error into an *apiError; other errors pass
// through unchanged.
func fromRPC(err error) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	if msg == "" {
		msg = strings.ToLower(st.Code().String())
	}
	return &apiError{code: st.Code(), msg: msg}
}

// rpcCode reports the gRPC code of err, or codes.Unknown.
func rpcCode(err error) codes.Code {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return codes.Unknown
}

// ExitCode maps an error to latticectl's exit code: model.FieldError and
// InvalidArgument → 2, NotFound → 3, Unavailable (after every address was
// tried) → 75, everything else → 1.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if model.IsFieldError(err) {
		return ExitUsage
	}
	if errors.Is(err, context.Canceled) {
		return ExitInterrupted
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return codeExit(ae.code)
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return codeExit(st.Code())
	}
	return ExitError
}

func codeExit(c codes.Code) int {
	switch c {
	case codes.OK:
		return ExitOK
	case codes.InvalidArgument, codes.OutOfRange:
		return ExitUsage
	case codes.NotFound:
		return ExitNotFound
	case codes.Unavailable, codes.DeadlineExceeded:
		return ExitUnavailable
	case codes.Canceled:
		return ExitInterrupted
	}
	return ExitError
}

// lazyRegexp compiles expr at its first use. Package-level patterns were
// compiled at start-up by every latticectl run, used or not.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
