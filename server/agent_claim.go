package server

import (
	"context"
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
	held    map[string]*agentConn // by node
	byAgent map[string]*agentConn // by agent id: an id is claimed too
}

// claimHolder is who a connection is: what a reconnection must repeat.
type claimHolder struct {
	agent, instance, user string
	since                 time.Time
}

func (h claimHolder) same(o claimHolder) bool {
	return h.instance != "" && h.agent == o.agent && h.instance == o.instance && h.user == o.user
}

// claim makes c the holder of its nodes, or refuses naming the first node
// a different connected agent holds. Holders that are the same agent are
// replaced: their streams are closed.
func (nc *nodeClaims) claim(c *agentConn) error {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	var replaced []*agentConn
	if h := nc.byAgent[c.id]; h != nil && h != c && !h.isClosed() {
		if !h.holder.same(c.holder) {
			return status.Errorf(codes.AlreadyExists,
				"agent id %s is connected since %s with another credential or instance: another agent may not take its place (the same agent reconnecting repeats its agent id, credential and instance)",
				model.Quote(c.id), h.holder.since.UTC().Format(time.RFC3339))
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
		nc.held, nc.byAgent = map[string]*agentConn{}, map[string]*agentConn{}
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
func (nc *nodeClaims) check(who claimHolder, nodes []string) error {
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
func (nc *nodeClaims) release(c *agentConn) {
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

func claimRefused(node string, h claimHolder) error {
	return status.Errorf(codes.AlreadyExists,
		"node %s is held by agent %s, connected since %s: another agent may not claim it (the same agent reconnecting repeats its agent id, credential and instance)",
		model.Quote(node), model.Quote(h.agent), h.since.UTC().Format(time.RFC3339))
}

// holderOf is who is calling: the hello's agent id and instance, and the
// credential's user ("" with auth off).
func holderOf(ctx context.Context, agentID, instance string) claimHolder {
	h := claimHolder{agent: agentID, instance: instance, since: time.Now()}
	if id := caller(ctx); id != nil {
		h.user = id.User
	}
	return h
}

// refuseClaim logs a refused hello (the agent sees the error) and returns it.
func (s *Server) refuseClaim(who claimHolder, verb string, err error) error {
	s.log.Warn("refused an agent claiming a node another connected agent holds", "action", verb,
		"agent", model.Clip(who.agent, model.MaxQuotedBytes), "user", who.user, "err", err)
	return err
}
