package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Users (Unix accounts with their tenant associations and role), API
// tokens and `whoami`: AccountService, like Slurm's sacctmgr.

func (r *runner) accountCommands() []*cli.Command {
	return []*cli.Command{r.userCommand(), r.tokenCommand(), {
		Name:   "whoami",
		Usage:  "who the servers take you for: user, role, tenants, default tenant, and how you authenticated",
		Flags:  listingFlags(),
		Action: r.whoami,
	}}
}

func (r *runner) accounts(c *cli.Context, call func(context.Context, latticev1.AccountServiceClient) error) error {
	cn, err := r.connect(c)
	if err != nil {
		return err
	}
	return cn.unary(c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return call(ctx, latticev1.NewAccountServiceClient(cc))
	})
}

func userFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "uid", Usage: "the user's Unix uid (the uid MUNGE vouches for)"},
		&cli.StringFlag{Name: "tenants", Usage: "the tenants (accounts) the user may use, comma-separated"},
		&cli.StringFlag{Name: "default-tenant", Usage: "the tenant of their calls that name none (default: the first of --tenants)"},
		&cli.StringFlag{Name: "role", Usage: "user, tenant-admin or admin"},
		&cli.StringFlag{Name: "max-priority", Usage: "the highest priority class they may ask for (QOS ceiling; default 5, admins 10)"},
	}
}

func (r *runner) userCommand() *cli.Command {
	return &cli.Command{
		Name:  "user",
		Usage: "users: Unix accounts, their tenants and role (admins change them)",
		Subcommands: []*cli.Command{
			{Name: "add", Usage: "add a user", ArgsUsage: "NAME --uid N --tenants A[,B...] [--default-tenant A] [--role user|tenant-admin|admin]",
				Flags: userFlags(), Action: r.userAdd},
			{Name: "modify", Usage: "change a user; flags not given keep their value", ArgsUsage: "NAME [--uid N] [--tenants A,B] [--add-tenants C] [--remove-tenants D] [--default-tenant A] [--role R]",
				Flags: append(userFlags(),
					&cli.StringFlag{Name: "add-tenants", Usage: "tenants to associate, comma-separated"},
					&cli.StringFlag{Name: "remove-tenants", Usage: "tenants to dissociate, comma-separated"}),
				Action: r.userModify},
			{Name: "delete", Usage: "forget a user (their work stays)", ArgsUsage: "NAME", Action: r.userDelete},
			{Name: "list", Usage: "list users (admins: all; others: those sharing a tenant)", Flags: listingFlags(), Action: r.userList},
			{Name: "show", Usage: "one user", ArgsUsage: "NAME", Flags: listingFlags(), Action: r.userList},
		},
	}
}

// userView is a user in -o json/yaml.
type userView struct {
	Name          string   `json:"name"`
	UID           int32    `json:"uid"`
	Role          string   `json:"role"`
	Tenants       []string `json:"tenants"`
	DefaultTenant string   `json:"default_tenant"`
	MaxPriority   int32    `json:"max_priority"`
	Created       string   `json:"created,omitempty"`
	Auto          bool     `json:"auto,omitempty"`
	Via           string   `json:"via,omitempty"`
	Nodes         []string `json:"nodes,omitempty"`
}

func userViewOf(u *latticev1.AccountUser) userView {
	return userView{Name: u.GetName(), UID: u.GetUid(), Role: u.GetRole(), Tenants: u.GetTenants(), DefaultTenant: u.GetDefaultTenant(),
		MaxPriority: u.GetMaxPriority(), Created: tsText(u.GetCreated()), Auto: u.GetAuto(), Via: u.GetVia(), Nodes: u.GetNodes()}
}

func tsText(t *timestamppb.Timestamp) string {
	if t == nil || (t.Seconds == 0 && t.Nanos == 0) {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

func (r *runner) printUsers(format string, views []userView) error {
	return r.emitAs(format, views, func(w io.Writer, _ bool) error {
		row(w, "USER", "UID", "ROLE", "DEFAULT_TENANT", "TENANTS", "MAX_PRIORITY")
		for _, u := range views {
			mp := "default"
			if u.MaxPriority >= 0 {
				mp = strconv.Itoa(int(u.MaxPriority))
			}
			row(w, u.Name, u.UID, u.Role, u.DefaultTenant, strings.Join(u.Tenants, ","), mp)
		}
		return nil
	})
}

// userRequest reads the user flags; set lists those given.
func userRequest(c *cli.Context) (*latticev1.SetUserRequest, error) {
	req := &latticev1.SetUserRequest{Name: c.Args().First(), MaxPriority: -1}
	if c.IsSet("uid") {
		n, err := strconv.Atoi(strings.TrimSpace(c.String("uid")))
		if err != nil || n < 0 {
			return nil, &model.FieldError{Field: "uid", Value: c.String("uid"), Allowed: "a Unix uid >= 0"}
		}
		req.Uid = int32(n)
		req.Set = append(req.Set, "uid")
	}
	if c.IsSet("tenants") {
		req.Tenants = splitList(c.String("tenants"))
		req.Set = append(req.Set, "tenants")
	}
	if c.IsSet("default-tenant") {
		req.DefaultTenant = strings.TrimSpace(c.String("default-tenant"))
		req.Set = append(req.Set, "default_tenant")
	}
	if c.IsSet("role") {
		req.Role = strings.TrimSpace(c.String("role"))
		switch req.Role {
		case "user", "tenant-admin", "admin":
		default:
			return nil, &model.FieldError{Field: "role", Value: req.Role, Allowed: "user, tenant-admin or admin"}
		}
		req.Set = append(req.Set, "role")
	}
	if c.IsSet("max-priority") {
		n, err := strconv.Atoi(strings.TrimSpace(c.String("max-priority")))
		if err != nil || n < 0 || n > model.MaxPriorityClass {
			return nil, &model.FieldError{Field: "max-priority", Value: c.String("max-priority"), Allowed: fmt.Sprintf("0..%d", model.MaxPriorityClass)}
		}
		req.MaxPriority = int32(n)
		req.Set = append(req.Set, "max_priority")
	}
	req.ClientRequestId = newRequestID()
	return req, nil
}

func (r *runner) userAdd(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "NAME --uid N --tenants A[,B...] [--default-tenant A] [--role user|tenant-admin|admin]"); err != nil {
		return err
	}
	req, err := userRequest(c)
	if err != nil {
		return err
	}
	if !c.IsSet("uid") {
		return &model.FieldError{Field: "uid", Allowed: "the user's Unix uid (`id -u NAME`)"}
	}
	if !c.IsSet("tenants") && req.Role != "admin" {
		return &model.FieldError{Field: "tenants", Allowed: "at least one tenant (`latticectl tenant list` shows them)"}
	}
	var u *latticev1.AccountUser
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		u, err = cl.AddUser(ctx, req)
		return err
	}); err != nil {
		return err
	}
	return r.printUsers(format, []userView{userViewOf(u)})
}

func (r *runner) userModify(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "NAME [--uid N] [--tenants A,B] [--add-tenants C] [--remove-tenants D] [--default-tenant A] [--role R]"); err != nil {
		return err
	}
	req, err := userRequest(c)
	if err != nil {
		return err
	}
	req.AddTenants, req.RemoveTenants = splitList(c.String("add-tenants")), splitList(c.String("remove-tenants"))
	if len(req.Set) == 0 && len(req.AddTenants) == 0 && len(req.RemoveTenants) == 0 {
		return usageErrorf("nothing to change: give --uid, --tenants, --add-tenants, --remove-tenants, --default-tenant, --role or --max-priority")
	}
	var u *latticev1.AccountUser
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		u, err = cl.ModifyUser(ctx, req)
		return err
	}); err != nil {
		return err
	}
	return r.printUsers(format, []userView{userViewOf(u)})
}

func (r *runner) userDelete(c *cli.Context) error {
	if err := needArgs(c, 1, 1, "NAME"); err != nil {
		return err
	}
	name := c.Args().First()
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		_, err := cl.DeleteUser(ctx, &latticev1.DeleteUserRequest{Name: name, ClientRequestId: r.reqID()})
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(r.Stderr, "deleted user %s\n", name)
	return nil
}

func (r *runner) userList(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	req := &latticev1.ListUsersRequest{}
	if c.Command.Name == "show" {
		if err := needArgs(c, 1, 1, "NAME"); err != nil {
			return err
		}
		req.Names = []string{c.Args().First()}
	}
	var resp *latticev1.ListUsersResponse
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		resp, err = cl.ListUsers(ctx, req)
		return err
	}); err != nil {
		return err
	}
	views := make([]userView, 0, len(resp.GetUsers()))
	for _, u := range resp.GetUsers() {
		views = append(views, userViewOf(u))
	}
	if len(req.Names) > 0 && len(views) == 0 {
		return notFoundf("user %q not found (or shares no tenant with you)", req.Names[0])
	}
	return r.printUsers(format, views)
}

func (r *runner) whoami(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	var u *latticev1.AccountUser
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		u, err = cl.WhoAmI(ctx, &latticev1.AccountWhoAmIRequest{})
		return err
	}); err != nil {
		return err
	}
	v := userViewOf(u)
	return r.emitAs(format, v, func(w io.Writer, _ bool) error {
		row(w, "USER", "UID", "ROLE", "DEFAULT_TENANT", "TENANTS", "VIA")
		uid := "-"
		if v.UID >= 0 {
			uid = strconv.Itoa(int(v.UID))
		}
		tenants := strings.Join(v.Tenants, ",")
		if v.Role == "admin" {
			tenants = "*"
		}
		row(w, v.Name, uid, v.Role, v.DefaultTenant, tenants, v.Via)
		return nil
	})
}

// ---- tenant delete ----

func (r *runner) tenantDeleteCommand() *cli.Command {
	return &cli.Command{Name: "delete", Usage: "delete a tenant with no pending or running work (admins)", ArgsUsage: "NAME", Action: r.tenantDelete}
}

func (r *runner) tenantDelete(c *cli.Context) error {
	if err := needArgs(c, 1, 1, "NAME"); err != nil {
		return err
	}
	name := c.Args().First()
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		_, err := cl.DeleteTenant(ctx, &latticev1.DeleteTenantRequest{Name: name, ClientRequestId: r.reqID()})
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(r.Stderr, "deleted tenant %s\n", name)
	return nil
}

// ---- tokens ----

func (r *runner) tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "API tokens for services, agents and the web API, kept hashed by the quorum (admins)",
		Subcommands: []*cli.Command{
			{Name: "create", Usage: "mint a token for USER and print it (only this once)", ArgsUsage: "USER",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "role", Value: "user", Usage: "user, tenant-admin, admin or agent"},
					&cli.StringFlag{Name: "tenants", Usage: "tenants it may use, comma-separated (user, tenant-admin)"},
					&cli.StringFlag{Name: "default-tenant", Usage: "the tenant of its calls that name none (default: the first of --tenants)"},
					&cli.StringFlag{Name: "nodes", Usage: "agent only: node names or patterns it may register and report for, comma-separated (node0*)"},
					&cli.StringFlag{Name: "max-priority", Usage: "the highest priority class it may ask for (QOS ceiling)"},
					&cli.StringFlag{Name: "expires-in", Usage: "how long it works, such as 720h (default: until revoked)"},
					&cli.StringFlag{Name: "note", Usage: "what it is for, shown by token list"},
				},
				Action: r.tokenCreate},
			{Name: "list", Usage: "list tokens (never their secrets)", Flags: listingFlags(), Action: r.tokenList},
			{Name: "revoke", Usage: "revoke tokens by id (token list), by the token itself, or every token of --user; every member refuses them within seconds",
				ArgsUsage: "ID...", Flags: []cli.Flag{&cli.StringFlag{Name: "user", Usage: "revoke every token of this user"}}, Action: r.tokenRevoke},
			{Name: "import", Usage: "copy a tokens file's tokens (their hashes) into the quorum", ArgsUsage: "FILE", Action: r.tokenImport},
		},
	}
}

type tokenView struct {
	ID            string   `json:"id"`
	User          string   `json:"user"`
	Role          string   `json:"role"`
	Tenants       []string `json:"tenants,omitempty"`
	DefaultTenant string   `json:"default_tenant,omitempty"`
	Nodes         []string `json:"nodes,omitempty"`
	MaxPriority   int32    `json:"max_priority"`
	Created       string   `json:"created,omitempty"`
	Expires       string   `json:"expires,omitempty"`
	Revoked       string   `json:"revoked,omitempty"`
	Note          string   `json:"note,omitempty"`
	Token         string   `json:"token,omitempty"`
}

func tokenViewOf(t *latticev1.TokenInfo) tokenView {
	return tokenView{ID: t.GetId(), User: t.GetUser(), Role: t.GetRole(), Tenants: t.GetTenants(), DefaultTenant: t.GetDefaultTenant(),
		Nodes: t.GetNodes(), MaxPriority: t.GetMaxPriority(), Created: tsText(t.GetCreated()), Expires: tsText(t.GetExpires()),
		Revoked: tsText(t.GetRevoked()), Note: t.GetNote()}
}

func (r *runner) tokenCreate(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	if err := needArgs(c, 1, 1, "USER [--role R] [--tenants A,B] [--nodes PATTERNS] [--expires-in D]"); err != nil {
		return err
	}
	req := &latticev1.CreateTokenRequest{User: c.Args().First(), Role: c.String("role"), Tenants: splitList(c.String("tenants")),
		DefaultTenant: c.String("default-tenant"), Nodes: splitList(c.String("nodes")), MaxPriority: -1, Note: c.String("note"),
		ClientRequestId: r.reqID()}
	if v := c.String("max-priority"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > model.MaxPriorityClass {
			return &model.FieldError{Field: "max-priority", Value: v, Allowed: fmt.Sprintf("0..%d", model.MaxPriorityClass)}
		}
		req.MaxPriority = int32(n)
	}
	if v := c.String("expires-in"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return &model.FieldError{Field: "expires-in", Value: v, Allowed: "a duration of at least 1s such as 720h"}
		}
		req.ExpiresInSeconds = int64(d / time.Second)
	}
	var resp *latticev1.CreateTokenResponse
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		resp, err = cl.CreateToken(ctx, req)
		return err
	}); err != nil {
		return err
	}
	if format == formatJSON || format == formatYAML {
		v := tokenViewOf(resp.GetInfo())
		v.Token = resp.GetToken()
		return r.emitAs(format, v, nil)
	}
	fmt.Fprintln(r.Stdout, resp.GetToken())
	fmt.Fprintf(r.Stderr, "token %s for %s (%s): every member accepts it now; it is shown only this once (revoke it with `latticectl token revoke %s`)\n",
		resp.GetInfo().GetId(), req.User, req.Role, resp.GetInfo().GetId())
	return nil
}

func (r *runner) tokenList(c *cli.Context) error {
	format, err := r.format(c)
	if err != nil {
		return err
	}
	var resp *latticev1.ListTokensResponse
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		resp, err = cl.ListTokens(ctx, &latticev1.ListTokensRequest{})
		return err
	}); err != nil {
		return err
	}
	views := make([]tokenView, 0, len(resp.GetTokens()))
	for _, t := range resp.GetTokens() {
		views = append(views, tokenViewOf(t))
	}
	return r.emitAs(format, views, func(w io.Writer, _ bool) error {
		row(w, "ID", "USER", "ROLE", "TENANTS", "NODES", "EXPIRES", "REVOKED", "NOTE")
		for _, t := range views {
			row(w, t.ID, t.User, t.Role, dash(strings.Join(t.Tenants, ",")), dash(strings.Join(t.Nodes, ",")), dash(t.Expires), dash(t.Revoked), dash(t.Note))
		}
		return nil
	})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (r *runner) tokenRevoke(c *cli.Context) error {
	ids := c.Args().Slice()
	user := c.String("user")
	if len(ids) == 0 && user == "" {
		return usageErrorf("usage: %s ID... | --user USER", c.Command.HelpName)
	}
	var resp *latticev1.RevokeTokenResponse
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		resp, err = cl.RevokeToken(ctx, &latticev1.RevokeTokenRequest{Ids: ids, User: user, ClientRequestId: r.reqID()})
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(r.Stderr, "revoked %d token(s); every member refuses them once it applies the revocation (seconds)\n", resp.GetRevoked())
	return nil
}

func (r *runner) tokenImport(c *cli.Context) error {
	if err := needArgs(c, 1, 1, "FILE"); err != nil {
		return err
	}
	path := c.Args().First()
	b, err := os.ReadFile(path)
	if err != nil {
		return &model.FieldError{Field: "FILE", Value: path, Allowed: "a readable tokens file (" + err.Error() + ")"}
	}
	var resp *latticev1.ImportTokensResponse
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		resp, err = cl.ImportTokens(ctx, &latticev1.ImportTokensRequest{File: string(b), Note: "imported from " + path, ClientRequestId: r.reqID()})
		return err
	}); err != nil {
		return err
	}
	for _, m := range resp.GetMessages() {
		fmt.Fprintln(r.Stderr, m)
	}
	fmt.Fprintf(r.Stderr, "imported %d token(s), skipped %d; every member accepts them now\n", resp.GetImported(), resp.GetSkipped())
	return nil
}

// callerName is who the server says the caller is (WhoAmI), else $USER.
func (r *runner) callerName(c *cli.Context) string {
	var u *latticev1.AccountUser
	if err := r.accounts(c, func(ctx context.Context, cl latticev1.AccountServiceClient) error {
		var err error
		u, err = cl.WhoAmI(ctx, &latticev1.AccountWhoAmIRequest{})
		return err
	}); err == nil && u.GetName() != "" {
		return u.GetName()
	}
	return r.Getenv("USER")
}
