package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

type refusingServer struct {
	latticev1.UnimplementedAgentServiceServer
}

func (refusingServer) Connect(latticev1.AgentService_ConnectServer) error {
	return status.Error(codes.Unauthenticated, "AgentService/Connect refused: the token is not known to this member")
}

// TestAgentGivesUpOnRefusals: an agent whose credential is refused logs
// who it tried to be and what to do, and Run ends with a RefusedError
// after MaxRefusals refusals instead of retrying forever.
func TestAgentGivesUpOnRefusals(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	latticev1.RegisterAgentServiceServer(gs, refusingServer{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	var logs bytes.Buffer
	dir := t.TempDir()
	a, err := New(Config{ID: "rack1", Servers: []string{lis.Addr().String()}, DataDir: filepath.Join(dir, "agent"),
		Nodes: []model.Node{{Name: "n1", HomeVCluster: "hpc"}}, Grace: time.Second, Token: "lat_wrong", MaxRefusals: 3,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = a.Run(ctx)
	var re *RefusedError
	if !errors.As(err, &re) || re.Times != 3 {
		t.Fatalf("Run = %v, want a RefusedError after 3 refusals", err)
	}
	for _, want := range []string{"the server refused this agent's credential", "identity=\"agent rack1 with token ", "latticectl token create NAME --role agent", "refusal=3"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("agent log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String()+err.Error(), "lat_wrong") {
		t.Errorf("the secret token appears in the log or error")
	}
}
