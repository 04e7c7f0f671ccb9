package server

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/latticehpc/lattice/api/lattice/v1" // registers the descriptors used to build replies
	"github.com/latticehpc/lattice/quorum"
)

const forwardedKey = "x-lattice-forwarded"

// forwarder sends API calls that a follower received to the leader, so
// users may talk to any member and read their own writes. A member that
// knows no leader (an election, or cut off from the majority) answers
// Unavailable, reads included: a client then tries another member instead
// of showing a cut-off member's stale state.
type forwarder struct {
	s     *Server
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newForwarder(s *Server) *forwarder {
	return &forwarder{s: s, conns: map[string]*grpc.ClientConn{}}
}

// localMethods are always answered by the member that received them.
var localMethods = map[string]bool{
	"/lattice.v1.AdminService/QuorumStatus": true,
	"/lattice.v1.AdminService/InjectFault":  true,
	// The dashboard's codes and sessions live in the receiving member.
	"/lattice.v1.DashboardService/CreateLogin":  true,
	"/lattice.v1.DashboardService/WhoAmI":       true,
	"/lattice.v1.DashboardService/PowerHistory": true, // each member samples its own copy
	"/grpc.health.v1.Health/Check":              true,
	"/grpc.health.v1.Health/List":               true,
}

func forwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedKey)) > 0
}

func (f *forwarder) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if localMethods[info.FullMethod] {
		return handler(ctx, req)
	}
	if f.s.q.IsLeader() && f.s.currentLeader() == nil {
		// Elected but not past the barrier: its state may not hold the
		// log's commits yet (after a restart it may be empty), so it must
		// neither answer from it nor validate against it.
		return nil, status.Error(codes.Unavailable, "the leader is still applying its log; retry")
	}
	if f.s.q.IsLeader() {
		return handler(ctx, req)
	}
	if forwarded(ctx) {
		// A member forwarded this call believing this one leads; it does
		// not (leadership moved, or this member restarted and has not
		// caught up). Its state may be stale or empty, so it must neither
		// answer from it nor validate against it, and it must not forward
		// again (no loops): the caller retries.
		return nil, status.Errorf(codes.Unavailable, "member %s was forwarded a call but does not lead; retry", f.s.cfg.ID)
	}
	conn, err := f.leaderConn()
	if err != nil {
		return nil, err
	}
	reply, err := newReply(info.FullMethod)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := conn.Invoke(forwardContext(ctx), info.FullMethod, req, reply); err != nil {
		return nil, err
	}
	return reply, nil
}

// forwardContext carries the caller's metadata and marks the hop. A call
// authenticated by a client certificate names its common name for the
// leader (which believes it only from a member); a client's own value of
// that header is never passed on.
func forwardContext(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	md.Set(forwardedKey, "1")
	md.Delete(forwardedCNKey)
	forwardSession(ctx, md)
	if cn, ok := ctx.Value(certCNKey{}).(string); ok && cn != "" {
		md.Set(forwardedCNKey, cn)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// leaderConn returns a client connection to the leader's API.
func (f *forwarder) leaderConn() (*grpc.ClientConn, error) {
	id, _ := f.s.q.Leader()
	if id == "" || f.s.q.PartitionedFrom(id) {
		return nil, status.Error(codes.Unavailable, "no quorum leader right now; retry")
	}
	var addr string
	f.s.view(func(st *quorum.State) {
		if m, ok := st.Member(id); ok {
			addr = m.APIAddr
		}
	})
	if addr == "" {
		return nil, status.Errorf(codes.Unavailable, "leader %s has not published its API address yet; retry", id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.conns[addr]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(addr, f.s.dialCreds(), memberKeepalive())
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "dial leader %s at %s: %v", id, addr, err)
	}
	f.conns[addr] = c
	return c, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for a, c := range f.conns {
		c.Close()
		delete(f.conns, a)
	}
}

// newReply builds an empty reply message for a method from the registered
// descriptors.
func newReply(fullMethod string) (any, error) {
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil, status.Errorf(codes.Internal, "bad method name %s", fullMethod)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, status.Errorf(codes.Internal, "%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, status.Errorf(codes.Internal, "no method %s", fullMethod)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, err
	}
	return mt.New().Interface(), nil
}
