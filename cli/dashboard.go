package cli

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// dashboard logs a browser into the web dashboard as the caller, the
// Jupyter way: the member makes a one-time URL (valid two minutes, spent by
// its first use) that the browser trades for a session cookie.

func (r *runner) dashboardCommand() *cli.Command {
	return &cli.Command{
		Name:  "dashboard",
		Usage: "open the web dashboard in a browser, logged in as you (a one-time login URL)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "print-url", Usage: "only print the URL (for another machine's browser, or an ssh tunnel)"},
		},
		Action: r.dashboard,
	}
}

// openBrowser opens a URL in the desktop's browser (tests replace it).
var openBrowser = func(url string) error {
	name, args := "xdg-open", []string{url}
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", url}
	}
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

func (r *runner) dashboard(c *cli.Context) error {
	if c.Args().Present() {
		return usageErrorf("dashboard takes no arguments (got %q)", c.Args().First())
	}
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	var login *latticev1.DashboardLogin
	err = cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		login, err = latticev1.NewDashboardServiceClient(cc).CreateLogin(ctx, &latticev1.CreateDashboardLoginRequest{})
		return err
	})
	if err != nil {
		return err
	}
	valid := time.Until(time.UnixMilli(login.GetExpiresUnixMs())).Round(time.Second)
	if c.Bool("print-url") {
		fmt.Fprintln(r.Stdout, login.GetUrl())
		fmt.Fprintf(r.Stderr, "latticectl: the link logs one browser in and works once, within %s\n", valid)
		return nil
	}
	if err := openBrowser(login.GetUrl()); err != nil {
		fmt.Fprintf(r.Stderr, "latticectl: no browser to open here (%v); open this link yourself within %s:\n", err, valid)
	} else {
		fmt.Fprintf(r.Stderr, "latticectl: opening the dashboard in your browser (if nothing opens, use this link within %s):\n", valid)
	}
	fmt.Fprintln(r.Stdout, login.GetUrl())
	return nil
}
