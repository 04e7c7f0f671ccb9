package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// While a member runs a release before feature levels, a command of level
// 1 is refused with an error naming that member, and `vcluster set` still
// works — proposing the whole definition, which that member knows. Once
// every member advertises level 1 (over its own QuorumStatus), the change
// goes as a patch of the one field.
func TestFeatureLevelsGateProposals(t *testing.T) {
	servers := startTrioWith(t, nil)
	var l *Server
	waitFor(t, 10*time.Second, "a leader", func() bool { l = leaderOf(servers); return l != nil })
	ctx := context.Background()
	var old string
	for _, s := range servers {
		if s != l {
			old = s.cfg.ID
			break
		}
	}
	// old answers as a release before levels would (no level, no build).
	l.q.SetMemberLevels(func(ctx context.Context, ids []string) []quorum.MemberLevel {
		out := l.memberLevels(ctx, ids)
		for i := range out {
			if out[i].ID == old {
				out[i] = quorum.MemberLevel{ID: old}
			}
		}
		return out
	})
	_, err := l.propose(ctx, &quorum.PatchVCluster{Name: "hpc-batch", Set: map[string]json.RawMessage{"reservation_depth": json.RawMessage("3")}})
	var le *quorum.LevelError
	if !errors.As(err, &le) || le.Member.ID != old || le.Need != quorum.Level1 {
		t.Fatalf("propose of a level-1 command with %s at level 0: %v", old, err)
	}
	if !strings.Contains(err.Error(), "member "+old+" runs level 0") {
		t.Fatalf("the refusal does not name the member and its level: %v", err)
	}
	if err := l.RequireLevel(ctx, quorum.Level1, "the frobnicator"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the frobnicator needs feature level 1") {
		t.Fatalf("RequireLevel = %v", err)
	}

	admin := latticev1.NewAdminServiceClient(dialPlain(t, l))
	info, err := admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: "hpc-batch", SetReservationDepth: true, ReservationDepth: 4})
	if err != nil || info.ReservationDepth != 4 {
		t.Fatalf("vcluster set while a member is old: %v %v", info, err)
	}
	level := func(s *Server) (lv quorum.Level) {
		s.view(func(st *quorum.State) { lv = st.FeatureLevel() })
		return lv
	}
	// The change went as the whole definition. (The state's level cannot
	// tell: the leader's own level-1 commands, such as naming the cluster,
	// may have applied before the old member was simulated.)
	var before model.VCluster
	l.view(func(st *quorum.State) { before = *st.VCluster("hpc-batch") })
	after := before
	after.ReservationDepth = 6
	cmd, err := l.vclusterCommand(ctx, "", true, before, after)
	if err != nil {
		t.Fatalf("vcluster change while a member is old: %v", err)
	}
	if _, whole := cmd.(*quorum.SetVCluster); !whole {
		t.Fatalf("with an old member a change is proposed as %T, not the whole definition", cmd)
	}

	// Every member advertises level 1: the change is a patch.
	l.q.SetMemberLevels(l.memberLevels)
	st, err := admin.QuorumStatus(ctx, &latticev1.QuorumStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.FeatureLevel != uint32(quorum.FeatureLevel) || m.Build == "" {
			t.Fatalf("member %s advertises level %d build %q", m.Id, m.FeatureLevel, m.Build)
		}
	}
	if _, err := admin.SetVCluster(ctx, &latticev1.SetVClusterRequest{Name: "hpc-batch", SetReservationDepth: true, ReservationDepth: 5}); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		waitFor(t, 10*time.Second, s.cfg.ID+" to apply the patch", func() bool {
			var v *model.VCluster
			s.view(func(st *quorum.State) { v = st.VCluster("hpc-batch") })
			return level(s) == quorum.Level1 && v.ReservationDepth == 5
		})
	}
}
