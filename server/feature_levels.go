package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/quorum"
)

// Every member advertises its feature level (quorum.FeatureLevel) in its
// own QuorumStatus answer; the leader asks every other member before it
// proposes a command or field of a later level (quorum.RequireLevel, which
// Propose calls). A member of a release before levels answers without one
// (level 0); one that does not answer is unknown and refuses the use.
//
// An answer is kept levelTTL, so a burst of gated proposals asks once. A
// member replaced by an older binary within that window could still be
// handed one entry it does not know (it stops, as before); upgrades and
// roll-backs take longer than that.

const levelTTL = 2 * time.Second

type levelCache struct {
	mu   sync.Mutex
	seen map[string]cachedLevel
}

type cachedLevel struct {
	m  quorum.MemberLevel
	at time.Time
}

// memberLevels implements quorum.MemberLevels over the members' APIs.
func (s *Server) memberLevels(ctx context.Context, ids []string) []quorum.MemberLevel {
	addrs := map[string]string{}
	s.view(func(st *quorum.State) {
		for _, m := range st.Members() {
			addrs[m.ID] = m.APIAddr
		}
	})
	out := make([]quorum.MemberLevel, len(ids))
	var wg sync.WaitGroup
	now := time.Now()
	for i, id := range ids {
		s.levels.mu.Lock()
		c, ok := s.levels.seen[id]
		s.levels.mu.Unlock()
		if ok && now.Sub(c.at) < levelTTL && c.m.Err == nil {
			out[i] = c.m
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := s.askLevel(ctx, id, addrs[id])
			out[i] = m
			if m.Err == nil {
				s.levels.mu.Lock()
				if s.levels.seen == nil {
					s.levels.seen = map[string]cachedLevel{}
				}
				s.levels.seen[id] = cachedLevel{m: m, at: time.Now()}
				s.levels.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// askLevel asks one member for its level (QuorumStatus about itself).
func (s *Server) askLevel(ctx context.Context, id, addr string) quorum.MemberLevel {
	m := quorum.MemberLevel{ID: id}
	if addr == "" {
		m.Err = errors.New("no API address published")
		return m
	}
	conn, err := grpc.NewClient(addr, s.dialCreds())
	if err != nil {
		m.Err = err
		return m
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(s.memberContext(ctx), selfOnlyKey, "1"), 2*time.Second)
	defer cancel()
	r, err := latticev1.NewAdminServiceClient(conn).QuorumStatus(cctx, &latticev1.QuorumStatusRequest{})
	if err != nil {
		m.Err = errors.New(status.Convert(err).Message())
		return m
	}
	if len(r.Members) == 0 {
		m.Err = errors.New("it answered without itself")
		return m
	}
	m.Level, m.Build = quorum.Level(r.Members[0].FeatureLevel), r.Members[0].Build
	return m
}

// RequireLevel is the gate for a use of a later feature level that is not
// a command of its own (a new option whose command is gated by its type
// alone, say): nil when every member knows need, else a FailedPrecondition
// naming the member and the level. Commands and their fields are gated by
// propose itself (quorum.NeededLevel).
func (s *Server) RequireLevel(ctx context.Context, need quorum.Level, what string) error {
	return levelStatus(s.q.RequireLevel(ctx, need, what))
}

// levelStatus maps a *quorum.LevelError to FailedPrecondition.
func levelStatus(err error) error {
	var le *quorum.LevelError
	if errors.As(err, &le) {
		return status.Error(codes.FailedPrecondition, le.Error())
	}
	return err
}
