package quorum

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
)

// Version gating: a command type or field is proposed only when every
// member of the Raft configuration (voters and non-voters: all of them
// apply the log) advertises a feature level that knows it. An old member
// handed an entry it does not know would stop (an unknown type) or, worse,
// silently drop a field and diverge.
//
// Propose checks every command against its level (LevelOf its type, and
// its own Level() when it has fields of later levels) through the
// configured MemberLevels source; a refusal is a *LevelError naming the
// member and the level needed.

// MemberLevel is what one member advertises.
type MemberLevel struct {
	ID    string
	Level Level
	// Build names the member's build (a version or VCS revision; "" when
	// it advertises none: a release before levels).
	Build string
	// Err: the member did not answer (its level is unknown).
	Err error
}

// MemberLevels reports the level of every member of the configuration.
type MemberLevels func(ctx context.Context, ids []string) []MemberLevel

// Leveled is a command whose fields may need a later level than its type.
type Leveled interface {
	Level() Level
}

// NeededLevel is the feature level every member needs to apply c.
func NeededLevel(c Command) Level {
	need := LevelOf(c.Type())
	if l, ok := c.(Leveled); ok {
		need = max(need, l.Level())
	}
	return need
}

// LevelError says why a use was refused: a member does not (or may not)
// know the level it needs.
type LevelError struct {
	What   string // the command or feature refused
	Need   Level
	Member MemberLevel
}

func (e *LevelError) Error() string {
	m := e.Member
	if m.Err != nil {
		return fmt.Sprintf("%s needs feature level %d on every quorum member; member %s did not say its level (%v): retry when it is up", e.What, e.Need, m.ID, m.Err)
	}
	build := m.Build
	if build == "" {
		build = "a release before feature levels"
	}
	return fmt.Sprintf("%s needs feature level %d on every quorum member; member %s runs level %d (%s): upgrade it first", e.What, e.Need, m.ID, m.Level, build)
}

// SetMemberLevels sets where RequireLevel learns the members' levels (the
// server asks each member's API). Without one, only this member is known.
func (q *Quorum) SetMemberLevels(f MemberLevels) {
	q.levelsMu.Lock()
	q.levels = f
	q.levelsMu.Unlock()
}

// RequireLevel returns nil when every member of the configuration knows
// need, else a *LevelError naming the first member that does not (in
// configuration order). what names the refused use in the error.
func (q *Quorum) RequireLevel(ctx context.Context, need Level, what string) error {
	if need <= LevelBase {
		return nil
	}
	if own := q.AdvertisedLevel(); need > own {
		return &LevelError{What: what, Need: need, Member: MemberLevel{ID: q.cfg.ID, Level: own, Build: Build()}}
	}
	others, err := q.otherLevels(ctx)
	if err != nil {
		return err
	}
	return checkLevels(need, what, others)
}

// AdvertisedLevel is the feature level this member advertises and
// proposes at: the level its build knows (FeatureLevel), or lower when
// the site pins it (Config.PinLevel, `latticed server --feature-level`)
// so that an upgrade can still be rolled back.
func (q *Quorum) AdvertisedLevel() Level {
	if p := q.cfg.PinLevel; p != nil && *p < FeatureLevel {
		return *p
	}
	return FeatureLevel
}

// checkLevels refuses need unless every member answered with it or more.
func checkLevels(need Level, what string, members []MemberLevel) error {
	for _, m := range members {
		if m.Err != nil || m.Level < need {
			return &LevelError{What: what, Need: need, Member: m}
		}
	}
	return nil
}

// ClusterLevel is the lowest level any member advertises (a member that
// does not answer counts as LevelBase), and that member.
func (q *Quorum) ClusterLevel(ctx context.Context) (MemberLevel, error) {
	lowest := MemberLevel{ID: q.cfg.ID, Level: q.AdvertisedLevel(), Build: Build()}
	others, err := q.otherLevels(ctx)
	if err != nil {
		return lowest, err
	}
	for _, m := range others {
		if m.Err != nil {
			m.Level = LevelBase
		}
		if m.Level < lowest.Level {
			lowest = m
		}
	}
	return lowest, nil
}

// otherLevels asks the level source about every other member of the
// configuration, in its order.
func (q *Quorum) otherLevels(ctx context.Context) ([]MemberLevel, error) {
	servers, err := q.Servers()
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range servers {
		if s.ID != q.cfg.ID {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	q.levelsMu.Lock()
	f := q.levels
	q.levelsMu.Unlock()
	byID := map[string]MemberLevel{}
	if f != nil {
		for _, m := range f(ctx, ids) {
			byID[m.ID] = m
		}
	}
	out := make([]MemberLevel, len(ids))
	for i, id := range ids {
		m, ok := byID[id]
		if !ok {
			m = MemberLevel{ID: id, Err: errors.New("not asked")}
		}
		out[i] = m
	}
	return out, nil
}

// Build names this binary's build: its VCS revision (12 hex digits,
// "+dirty" when built from a modified tree), or its module version.
var Build = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		return "latticed " + rev + dirty
	}
	return "latticed " + bi.Main.Version
})

// FeatureLevel is the highest feature level of any command applied to
// the state (kept in its snapshots).
func (s *State) FeatureLevel() Level { return s.level }
