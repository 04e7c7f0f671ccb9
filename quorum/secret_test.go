package quorum

import (
	"bytes"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// openSecretMember starts a one-member quorum on loopback TCP with the
// given cluster secret and waits for it to lead.
func openSecretMember(t *testing.T, secret string, log io.Writer) *Quorum {
	t.Helper()
	q, err := Open(Config{ID: "m1", DataDir: filepath.Join(t.TempDir(), "m1"), RaftAddr: "127.0.0.1:0", Bootstrap: true,
		NoSync: true, RaftLogLevel: "off", ClusterSecret: secret, Entropy: rand.Reader, Logger: slog.New(slog.NewTextHandler(log, nil))}, NewFSM())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Shutdown() })
	deadline := time.Now().Add(20 * time.Second)
	for !q.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return q
}

// timeoutNow sends a TimeoutNow RPC (what moves leadership) over tr.
func timeoutNow(q *Quorum, tr *raft.NetworkTransport) error {
	var resp raft.TimeoutNowResponse
	return tr.TimeoutNow("m1", raft.ServerAddress(q.RaftAddr()), &raft.TimeoutNowRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte(tr.LocalAddr())}}, &resp)
}

func strangerTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func peerTransport(t *testing.T, secret string) *raft.NetworkTransport {
	t.Helper()
	lis, adv, err := listenRaft("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	layer := &secretStreamLayer{StreamLayer: &tcpStreamLayer{Listener: lis, advertise: adv}, secret: []byte(secret), entropy: rand.Reader,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	tr := raft.NewNetworkTransport(layer, 1, 2*time.Second, io.Discard)
	t.Cleanup(func() { tr.Close() })
	return tr
}

func term(q *Quorum) string { return q.Stats()["term"] }

// A stranger's Raft RPC — TimeoutNow from a raw hashicorp/raft transport,
// as in the probe that moved leadership — is refused by a member with a
// cluster secret; a peer proving the secret is heard.
func TestRaftClusterSecretRefusesStrangers(t *testing.T) {
	const secret = "0123456789abcdef-cluster"
	log := &syncLog{}
	q := openSecretMember(t, secret, log)
	before := term(q)
	if err := timeoutNow(q, strangerTransport(t)); err == nil {
		t.Fatal("a stranger's TimeoutNow was answered")
	}
	if err := timeoutNow(q, peerTransport(t, "another-secret-of-16+")); err == nil {
		t.Fatal("a TimeoutNow proving another secret was answered")
	}
	if got := term(q); got != before {
		t.Fatalf("the term moved from %s to %s after refused RPCs", before, got)
	}
	if !strings.Contains(log.String(), "refused a raft connection") {
		t.Fatalf("no refusal logged:\n%s", log.String())
	}
	if err := timeoutNow(q, peerTransport(t, secret)); err != nil {
		t.Fatalf("a peer proving the secret: %v", err)
	}
}

// Without a secret, plaintext Raft is what the stranger can talk to (the
// attack above is real) — and so it is refused beyond loopback.
func TestPlaintextRaftOnlyOnLoopback(t *testing.T) {
	q := openSecretMember(t, "", io.Discard)
	if err := timeoutNow(q, strangerTransport(t)); err != nil {
		t.Fatalf("control: a plaintext member on loopback answers anyone: %v", err)
	}
	_, err := Open(Config{ID: "m2", DataDir: filepath.Join(t.TempDir(), "m2"), RaftAddr: "192.0.2.7:7000", RaftLogLevel: "off"}, NewFSM())
	if err == nil || !strings.Contains(err.Error(), "cluster-secret") {
		t.Fatalf("plaintext Raft beyond loopback: %v", err)
	}
	_, err = Open(Config{ID: "m3", DataDir: filepath.Join(t.TempDir(), "m3"), RaftAddr: "127.0.0.1:0", RaftLogLevel: "off", ClusterSecret: "short", Entropy: rand.Reader}, NewFSM())
	if err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("a short secret: %v", err)
	}
}
