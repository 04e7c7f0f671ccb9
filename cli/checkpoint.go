package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// checkpointView is `checkpoint ID -o json`.
type checkpointView struct {
	ID       string  `json:"id"`
	State    string  `json:"state"`
	Deadline *string `json:"deadline"`
}

func (r *runner) checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "ask a running allocation to checkpoint now (it keeps running)",
		ArgsUsage: "ID | done ID",
		Description: "The agent delivers the request by the allocation's --checkpoint mode (signal, hook or webhook) and\n" +
			"waits for the acknowledgement until the vCluster's reclaim grace ends. A webhook-mode application\n" +
			"acknowledges with `latticectl checkpoint done ID` (or --failed when it could not checkpoint).",
		Action: r.checkpointNow,
		Subcommands: []*cli.Command{{
			Name:      "done",
			Usage:     "acknowledge a webhook-mode checkpoint of an allocation",
			ArgsUsage: "ID",
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "failed", Usage: "the checkpoint could not be written"}},
			Action:    r.checkpointDone,
		}},
	}
}

func (r *runner) checkpointNow(c *cli.Context) error {
	format, cn, err := r.oneID(c)
	if err != nil {
		return err
	}
	req := &latticev1.CheckpointAllocationRequest{Id: c.Args().First(), ClientRequestId: r.reqID()}
	var resp *latticev1.CheckpointAllocationResponse
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewAllocationServiceClient(cc).Checkpoint(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	v := checkpointView{ID: resp.GetId(), State: resp.GetState(), Deadline: rfc3339(resp.GetDeadlineUnixMs())}
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		_, err := fmt.Fprintf(w, "allocation %s is %s: it has until %s to checkpoint\n", v.ID, v.State, r.tableTime(resp.GetDeadlineUnixMs()))
		return err
	})
}

func (r *runner) checkpointDone(c *cli.Context) error {
	_, cn, err := r.oneID(c)
	if err != nil {
		return err
	}
	req := &latticev1.CheckpointDoneRequest{Id: c.Args().First(), Failed: c.Bool("failed")}
	return cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		_, err := latticev1.NewAllocationServiceClient(cc).CheckpointDone(ctx, req)
		return err
	})
}

// oneID checks the arguments of a command that takes exactly one
// allocation id, and returns the output format and a connection.
func (r *runner) oneID(c *cli.Context) (string, *conn, error) {
	format, err := r.format(c)
	if err != nil {
		return "", nil, err
	}
	if err := needArgs(c, 1, 1, "ID"); err != nil {
		return "", nil, err
	}
	if err := checkIDs(c.Args().Slice()); err != nil {
		return "", nil, err
	}
	cn, err := r.connect(c)
	return format, cn, err
}
