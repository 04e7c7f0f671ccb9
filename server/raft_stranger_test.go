package server

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A stranger's Raft RPC (TimeoutNow from a raw hashicorp/raft transport)
// is refused by a TLS member too; quorum's TestRaftClusterSecretRefusesStrangers
// covers plaintext Raft with a cluster secret.
func TestRaftStrangerRefusedWithTLS(t *testing.T) {
	dir := t.TempDir()
	files := testCA(t, filepath.Join(dir, "pki"), []string{"m1"}, nil)
	s, err := New(Config{ID: "m1", DataDir: filepath.Join(dir, "m1"), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
		Bootstrap: true, RaftLogLevel: "off", RaftNoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLS: files["m1"],
		ClusterSecret: "a-cluster-secret-too"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	waitFor(t, 20*time.Second, "leadership", s.Quorum().IsLeader)
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before := s.Quorum().Stats()["term"]
	var resp raft.TimeoutNowResponse
	err = tr.TimeoutNow("m1", raft.ServerAddress(s.Quorum().RaftAddr()), &raft.TimeoutNowRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte(tr.LocalAddr())}}, &resp)
	if err == nil {
		t.Fatal("a stranger's TimeoutNow to a TLS member was answered")
	}
	if after := s.Quorum().Stats()["term"]; after != before {
		t.Fatalf("the term moved from %s to %s", before, after)
	}
}
