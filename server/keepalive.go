package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// gRPC keepalives, so that a member or an agent that froze or vanished
// without closing its sockets is noticed in seconds rather than after TCP's
// retransmission timeout (about 15 minutes): this server pings each client
// connection silent for KeepaliveTime and drops it when the ping is not
// answered within KeepaliveTimeout; it lets clients ping it as often as
// KeepaliveMinTime (agents ping every agent.KeepaliveTime); a member's
// connections to the others (forwarding to the leader) ping as agents do.
const (
	KeepaliveTime    = 5 * time.Second
	KeepaliveTimeout = 3 * time.Second
	KeepaliveMinTime = 2 * time.Second
)

func keepaliveServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
	}
}

// memberKeepalive is the keepalive of this member's connections to others.
func memberKeepalive() grpc.DialOption {
	return grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true})
}
