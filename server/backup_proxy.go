package server

import (
	"errors"
	"io"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// proxyBackup relays a backup from the leader, so `latticectl quorum backup`
// works through any member, like every other command (a follower knows
// where the leader is; the client need not).
func (a *adminService) proxyBackup(stream latticev1.AdminService_BackupServer) error {
	conn, err := a.s.fwd.leaderConn()
	if err != nil {
		return err
	}
	up, err := latticev1.NewAdminServiceClient(conn).Backup(forwardContext(stream.Context()), &latticev1.BackupRequest{})
	if err != nil {
		return err
	}
	for {
		chunk, err := up.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(chunk); err != nil {
			return err
		}
	}
}
