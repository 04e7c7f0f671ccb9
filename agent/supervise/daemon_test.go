package supervise

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSocketName(t *testing.T) {
	a, b := SocketName("/var/lib/lattice/agent"), SocketName("/var/lib/lattice/agent2")
	if a == b || !strings.HasPrefix(a, "@lattice-job-supervisor-") {
		t.Errorf("SocketName: %q and %q", a, b)
	}
	if got := SocketName("/var/lib/lattice/agent/../agent"); got != a {
		t.Errorf("SocketName of the same dir spelled otherwise: %q, want %q", got, a)
	}
	if len(SocketName(strings.Repeat("/very-long-directory-name", 20))) > 100 {
		t.Error("SocketName grows with the path (sun_path holds 108 bytes)")
	}
}

// A message and two descriptors cross a SOCK_SEQPACKET pair intact.
func TestSendRecvWithFiles(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	a, b := conn(fds[0]), conn(fds[1])
	defer a.Close()
	defer b.Close()
	if uid, err := PeerUID(b); err != nil || uid != os.Getuid() {
		t.Errorf("PeerUID = %d, %v; want %d", uid, err, os.Getuid())
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	m := &Msg{Op: OpStart, Key: "/d/runs/1-0.status", Path: "/bin/sh", Argv: []string{"sh", "-c", "echo 'x'"}, Env: []string{"A=1"}, Cred: "1:2:3,4"}
	if err := Send(a, m, out, out); err != nil {
		t.Fatal(err)
	}
	buf, oob := RecvBuffers()
	got, files, err := Recv(b, buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	if got.Op != m.Op || got.Key != m.Key || strings.Join(got.Argv, "|") != strings.Join(m.Argv, "|") || got.Cred != m.Cred || len(got.Env) != 1 {
		t.Errorf("received %+v, want %+v", got, m)
	}
	if len(files) != 2 {
		t.Fatalf("received %d descriptors, want 2", len(files))
	}
	if _, err := files[1].WriteString("through the passed descriptor\n"); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.Close()
	}
	if b, _ := os.ReadFile(out.Name()); string(b) != "through the passed descriptor\n" {
		t.Errorf("file holds %q", b)
	}
	big := &Msg{Op: OpStart, Env: []string{strings.Repeat("x", MaxMsg)}}
	if err := Send(a, big, nil...); err == nil {
		t.Error("a message above MaxMsg was sent")
	}
}
