package leader

import (
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/model"
)

// Nodes that cannot be impersonated. A credential bound to node patterns
// (auth.Identity.Nodes) decides which nodes an agent may ever claim; on
// top of it, the leader keeps which connected agent holds each node, and
// refuses a hello (AgentService.Connect, NodeService.Register) for a node
// that another agent holds while that agent is connected — before anything
// is proposed, so no job of the node is failed and no assignment reaches
// the newcomer. The same agent coming back (a broken stream, a restart)
// is told apart by its agent id, its credential's user and its instance
// (AgentHello.instance, random per agent and kept in its data dir); it
// replaces the old stream.

// nodeClaims is the leader's map of held nodes (one per dispatcher).
type nodeClaims struct {
	mu      sync.Mutex
	held    map[string]*AgentConn // by node
	byAgent map[string]*AgentConn // by agent id: an id is claimed too
}

// Holder is who a connection is: what a reconnection must repeat. Agent
// and Instance come from the hello, User from the credential ("" with
// auth off); Since is when it connected.
type Holder struct {
	Agent, Instance, User string
	Since                 time.Time
}

func (h Holder) same(o Holder) bool {
	return h.Instance != "" && h.Agent == o.Agent && h.Instance == o.Instance && h.User == o.User
}

// claim makes c the holder of its nodes, or refuses naming the first node
// a different connected agent holds. Holders that are the same agent are
// replaced: their streams are closed.
func (nc *nodeClaims) claim(c *AgentConn) error {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	var replaced []*AgentConn
	if h := nc.byAgent[c.id]; h != nil && h != c && !h.isClosed() {
		if !h.holder.same(c.holder) {
			return status.Errorf(codes.AlreadyExists,
				"agent id %s is connected since %s with another credential or instance: another agent may not take its place (the same agent reconnecting repeats its agent id, credential and instance)",
				model.Quote(c.id), h.holder.Since.UTC().Format(time.RFC3339))
		}
		replaced = append(replaced, h)
	}
	for _, n := range c.nodes {
		h := nc.held[n]
		if h == nil || h == c || h.isClosed() {
			continue
		}
		if !h.holder.same(c.holder) {
			return claimRefused(n, h.holder)
		}
		replaced = append(replaced, h)
	}
	if nc.held == nil {
		nc.held, nc.byAgent = map[string]*AgentConn{}, map[string]*AgentConn{}
	}
	nc.byAgent[c.id] = c
	for _, n := range c.nodes {
		nc.held[n] = c
	}
	for _, h := range replaced {
		h.close()
	}
	return nil
}

// check refuses, like claim, without holding anything (NodeService.Register
// has no stream to hold the nodes with).
func (nc *nodeClaims) check(who Holder, nodes []string) error {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	for _, n := range nodes {
		if h := nc.held[n]; h != nil && !h.isClosed() && !h.holder.same(who) {
			return claimRefused(n, h.holder)
		}
	}
	return nil
}

// release forgets the nodes c holds (its stream ended).
func (nc *nodeClaims) release(c *AgentConn) {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	for _, n := range c.nodes {
		if nc.held[n] == c {
			delete(nc.held, n)
		}
	}
	if nc.byAgent[c.id] == c {
		delete(nc.byAgent, c.id)
	}
}

func claimRefused(node string, h Holder) error {
	return status.Errorf(codes.AlreadyExists,
		"node %s is held by agent %s, connected since %s: another agent may not claim it (the same agent reconnecting repeats its agent id, credential and instance)",
		model.Quote(node), model.Quote(h.Agent), h.Since.UTC().Format(time.RFC3339))
}

// Claim makes c the holder of its nodes, or refuses (AlreadyExists) naming
// the first node a different connected agent holds; call it before
// anything of the hello is proposed.
func (t *Term) Claim(c *AgentConn) error { return t.disp.claims.claim(c) }

// CheckClaim refuses, like Claim, without holding anything.
func (t *Term) CheckClaim(who Holder, nodes []string) error { return t.disp.claims.check(who, nodes) }
