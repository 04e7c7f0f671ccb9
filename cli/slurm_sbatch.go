package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// sbatchOpts are sbatch 22.05's options. key is the submit setting the
// value goes to (sbatchLong's keys), "-" for options checked and accepted
// but with nothing to do on whole-node allocations, "!" for options
// Lattice does not implement (accepted with a warning, as Slurm accepts
// options of plugins a site lacks).
var sbatchOpts = []sopt{
	{"account", 'A', needArg, optTenant}, {"acctg-freq", 0, needArg, "!"}, {"array", 'a', needArg, optArray},
	{"batch", 0, needArg, "!"}, {"bb", 0, needArg, "!"}, {"bbf", 0, needArg, "!"}, {"begin", 'b', needArg, optBegin},
	{"chdir", 'D', needArg, optWorkDir}, {"cluster-constraint", 0, needArg, "!"}, {"clusters", 'M', needArg, "clusters"},
	{"comment", 0, needArg, "-"}, {"constraint", 'C', needArg, optConstraint}, {"container", 0, needArg, "!"},
	{"contiguous", 0, noArg, "-"}, {"core-spec", 'S', needArg, "!"}, {"cores-per-socket", 0, needArg, "-"},
	{"cpu-freq", 0, needArg, "!"}, {"cpus-per-gpu", 0, needArg, "count"}, {"cpus-per-task", 'c', needArg, "count"},
	{"deadline", 0, needArg, "!"}, {"delay-boot", 0, needArg, "!"}, {"dependency", 'd', needArg, optDependsOn},
	{"distribution", 'm', needArg, "-"}, {"error", 'e', needArg, optStderr}, {"exclude", 'x', needArg, optExclude},
	{"exclusive", 0, optArg, "-"}, {"export", 0, needArg, optExport}, {"export-file", 0, needArg, "!"},
	{"extra-node-info", 'B', needArg, "-"}, {"get-user-env", 0, optArg, "-"}, {"gid", 0, needArg, "!"},
	{"gpu-bind", 0, needArg, "-"}, {"gpu-freq", 0, needArg, "!"}, {"gpus", 'G', needArg, optGPUs},
	{"gpus-per-node", 0, needArg, optGPUsPerNode}, {"gpus-per-socket", 0, needArg, "!"}, {"gpus-per-task", 0, needArg, "!"},
	{"gres", 0, needArg, optGres}, {"gres-flags", 0, needArg, "-"}, {"help", 'h', noArg, "help"},
	{"hint", 0, needArg, "-"}, {"hold", 'H', noArg, optHold}, {"ignore-pbs", 0, noArg, "-"}, {"input", 'i', needArg, "!"},
	{"job-name", 'J', needArg, optName}, {"kill-on-invalid-dep", 0, needArg, "-"}, {"licenses", 'L', needArg, "!"},
	{"mail-type", 0, needArg, optMailType}, {"mail-user", 0, needArg, optMailUser}, {"mcs-label", 0, needArg, "!"},
	{"mem", 0, needArg, "mem"}, {"mem-bind", 0, needArg, "-"}, {"mem-per-cpu", 0, needArg, "mem"},
	{"mem-per-gpu", 0, needArg, "mem"}, {"mincpus", 0, needArg, "count"}, {"network", 0, needArg, "!"},
	{"nice", 0, optArg, "!"}, {"no-kill", 'k', optArg, "-"}, {"no-requeue", 0, noArg, "no-requeue"},
	{"nodefile", 'F', needArg, "!"}, {"nodelist", 'w', needArg, optNodeList}, {"nodes", 'N', needArg, optNodes},
	{"ntasks", 'n', needArg, "count"}, {"ntasks-per-core", 0, needArg, "count"}, {"ntasks-per-gpu", 0, needArg, "count"},
	{"ntasks-per-node", 0, needArg, "count"}, {"ntasks-per-socket", 0, needArg, "count"}, {"overcommit", 'O', noArg, "-"},
	{"oversubscribe", 's', noArg, "-"}, {"output", 'o', needArg, optStdout}, {"open-mode", 0, needArg, "!"},
	{"parsable", 0, noArg, "parsable"}, {"partition", 'p', needArg, optVCluster}, {"power", 0, needArg, "!"},
	{"priority", 0, needArg, "!"}, {"profile", 0, needArg, "!"}, {"propagate", 0, optArg, "-"},
	{"qos", 'q', needArg, "qos"}, {"quiet", 'Q', noArg, "quiet"}, {"reboot", 0, noArg, "!"},
	{"requeue", 0, noArg, "requeue"}, {"reservation", 0, needArg, optReservation}, {"signal", 0, needArg, optSignal},
	{"sockets-per-node", 0, needArg, "-"}, {"spread-job", 0, noArg, "-"}, {"switches", 0, needArg, "!"},
	{"test-only", 0, noArg, "test-only"}, {"thread-spec", 0, needArg, "!"}, {"threads-per-core", 0, needArg, "-"},
	{"time", 't', needArg, optWalltime}, {"time-min", 0, needArg, "-"}, {"tmp", 0, needArg, "mem"},
	{"uid", 0, needArg, "!"}, {"usage", 0, noArg, "help"}, {"use-min-nodes", 0, noArg, "-"},
	{"verbose", 'v', noArg, "-"}, {"version", 'V', noArg, "version"}, {"wait", 'W', noArg, "wait"},
	{"wait-all-nodes", 0, needArg, "-"}, {"wckey", 0, needArg, optProject}, {"wrap", 0, needArg, "wrap"},
}

const sbatchUsage = `Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]

Lattice's sbatch: Slurm's options and output. Whole nodes are allocated, so
--mem, --mem-per-cpu, --cpus-per-task and --ntasks are checked but always met
by a node's whole resources. See docs/slurm-commands.md.

Parallel run options:
  -A, --account=name          charge job to specified account (Lattice tenant)
  -a, --array=indexes         job array index values
  -b, --begin=time            defer job until HH:MM MM/DD/YY
  -C, --constraint=list       specify a list of constraints
  -c, --cpus-per-task=ncpus   number of cpus required per task
  -D, --chdir=directory       set working directory for batch script
  -d, --dependency=type:jobid[:time] defer job until condition on jobid is satisfied
  -e, --error=err             file for batch script's standard error
      --export[=names]        specify environment variables to export
  -H, --hold                  submit job in held state
  -J, --job-name=jobname      name of job
      --mem=MB                minimum amount of real memory
      --mem-per-cpu=MB        maximum amount of real memory per allocated cpu
  -N, --nodes=N               number of nodes on which to run (N = min[-max])
  -n, --ntasks=ntasks         number of tasks to run
  -o, --output=out            file for batch script's standard output
  -p, --partition=partition   partition requested (Lattice vCluster)
      --parsable              outputs only the jobid and cluster name (if present)
  -q, --qos=qos               quality of service
  -t, --time=minutes          time limit
      --test-only             validate the job; do not submit it
  -W, --wait                  wait for completion of submitted job
      --wrap[=command string] wrap command string in a sh script and submit
`

func (s *slurmRun) sbatch(args []string) error {
	a, err := s.parse(sbatchOpts, args, true, sbatchUsage)
	if a == nil {
		return err
	}
	in := submitInput{opts: submitOptions{}}
	var warnings []string
	wrap := a.get("wrap")
	switch {
	case a.has("wrap") && len(a.pos) > 0:
		return fmt.Errorf("Script arguments not permitted with --wrap option")
	case a.has("wrap"):
		in.script = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n" + wrap + "\n"
		in.scriptPath = "wrap"
	case len(a.pos) > 1:
		return fmt.Errorf("script arguments are not supported by Lattice (got %q after %s); pass them in the environment (--export) instead", strings.Join(a.pos[1:], " "), a.pos[0])
	case len(a.pos) == 1:
		in.scriptPath = a.pos[0]
		b, err := readFile(in.scriptPath)
		if err != nil {
			return fmt.Errorf("Unable to open file %s", in.scriptPath)
		}
		in.script = string(b)
	default:
		in.scriptPath = "-"
		if in.script, err = s.readScript("-"); err != nil {
			return err
		}
	}
	if strings.TrimSpace(in.script) == "" {
		return fmt.Errorf("Batch script is empty!")
	}
	if !strings.HasPrefix(in.script, "#!") {
		return fmt.Errorf("This does not look like a batch script.  The first\nsbatch: error: line must start with #! followed by the path to an interpreter.\nsbatch: error: For instance: #!/bin/sh")
	}
	if !a.has("wrap") {
		label := scriptLabel(in.scriptPath)
		if warnings, err = parseSbatch(label, in.script, in.opts); err != nil {
			return err
		}
		warnings = slices.DeleteFunc(warnings, sbatchAccepts)
	}
	if err := s.applySbatchOpts(a, &in, &warnings); err != nil {
		return err
	}
	if _, ok := in.opts[optName]; !ok {
		switch in.scriptPath {
		case "wrap":
			in.opts.set(optName, "wrap", "")
		case "-":
			in.opts.set(optName, "sbatch", "")
		}
	}
	in.now = s.Now()
	if _, ok := in.opts[optTenant]; !ok {
		in.defaultTenant = s.tenant(s.c)
	}
	if in.cwd, err = s.Getwd(); err != nil {
		return fmt.Errorf("cannot read the current directory: %w", err)
	}
	if s.Environ != nil {
		in.environ = s.Environ()
	}
	test := a.has("test-only")
	var cn *conn
	if !test {
		if cn, err = s.connect(s.c); err != nil {
			return err
		}
		in.resolveTask = func(display string) (uint64, error) { return getAllocationID(s.c.Context, cn, display) }
	}
	req, err := resolveSubmit(in)
	if err != nil {
		return err
	}
	quiet := a.has("quiet")
	if test {
		warnings = append(warnings, s.resolveSiteDry(s.c, req)...)
	}
	if !quiet {
		for _, w := range warnings {
			fmt.Fprintf(s.Stderr, "sbatch: warning: %s\n", w)
		}
	}
	if test {
		part := req.VCluster
		if part == "" {
			part = "(the default)"
		}
		fmt.Fprintf(s.Stderr, "sbatch: Job would be accepted: %s node(s) for %s in partition %s (Lattice predicts a start only for submitted jobs: squeue --start)\n",
			nodeRange(req.NodesMin, req.NodesMax), slurmSecs(int64(req.Walltime/time.Second)), part)
		return nil
	}
	var resp *latticev1.SubmitResponse
	sr := &latticev1.SubmitRequest{Request: requestProto(req), ClientRequestId: s.reqID()}
	err = cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewAllocationServiceClient(cc).Submit(ctx, sr)
		return err
	})
	if err != nil {
		return fmt.Errorf("Batch job submission failed: %w", err)
	}
	if !quiet {
		for _, w := range resp.GetWarnings() {
			fmt.Fprintf(s.Stderr, "sbatch: warning: %s\n", w)
		}
	}
	id := resp.GetDisplayId()
	if len(resp.GetIds()) > 0 {
		id = strconv.FormatUint(resp.GetIds()[0], 10)
		if req.Array != nil && resp.GetDisplayId() != "" {
			id, _, _ = strings.Cut(resp.GetDisplayId(), "_")
		}
	}
	if a.has("parsable") {
		fmt.Fprintln(s.Stdout, id)
	} else {
		fmt.Fprintf(s.Stdout, "Submitted batch job %s\n", id)
	}
	if a.has("wait") {
		return s.sbatchWait(cn, id, req.Array != nil)
	}
	return nil
}

// applySbatchOpts lays sbatch's command line over the script's #SBATCH
// lines, checking the options Lattice has nothing to do with.
func (s *slurmRun) applySbatchOpts(a *sargs, in *submitInput, warnings *[]string) error {
	for _, o := range sbatchOpts {
		vals, ok := a.vals[o.id()]
		if !ok {
			continue
		}
		v := vals[len(vals)-1]
		switch o.id() {
		case "help", "version", "parsable", "quiet", "test-only", "wait", "wrap", "-":
		case "!":
			*warnings = append(*warnings, fmt.Sprintf("--%s is not supported by Lattice and was ignored", o.long))
		case "clusters":
			// One cluster: -M with its name (or all) is accepted.
		case "count":
			for _, v := range vals {
				if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 1 {
					return &model.FieldError{Field: o.long, Value: v, Allowed: "an integer >= 1"}
				}
			}
		case "mem":
			for _, v := range vals {
				if _, err := parseSlurmMem(v); err != nil {
					return &model.FieldError{Field: o.long, Value: v, Allowed: "a size such as 4000 (MB), 4G, 512M or 1T"}
				}
			}
		case "requeue":
			in.opts.set(optRequeue, "true", "")
		case "no-requeue":
			in.opts.set(optRequeue, "false", "")
		case optHold:
			in.opts.set(optHold, "true", "")
		default:
			in.opts.set(o.id(), v, "")
		}
	}
	// Both given: the later on the command line wins, as in Slurm.
	if k := a.last("requeue", "no-requeue"); k != "" {
		in.opts.set(optRequeue, strconv.FormatBool(k == "requeue"), "")
	}
	return nil
}

// sbatchAccepts reports whether an #SBATCH warning is about an option
// sbatch accepts with nothing to do (whole nodes: --mem, --cpus-per-task,
// --ntasks, ...): sbatch takes it silently, as it does on its command line.
func sbatchAccepts(warning string) bool {
	_, rest, ok := strings.Cut(warning, "#SBATCH ")
	if !ok || !strings.HasSuffix(warning, "is not supported by Lattice and was ignored") {
		return false
	}
	word, _, _ := strings.Cut(rest, " ")
	name, _, _ := strings.Cut(strings.TrimLeft(word, "-"), "=")
	for _, o := range sbatchOpts {
		if (o.long == name || (len(name) == 1 && o.short == name[0])) && (o.key == "-" || o.key == "count" || o.key == "mem" || o.key == "clusters") {
			return true
		}
	}
	return false
}

// parseSlurmMem reads Slurm's memory sizes: a number of megabytes, or with
// a K, M, G or T suffix; it returns megabytes.
func parseSlurmMem(s string) (int64, error) {
	v := strings.TrimSpace(s)
	mult := int64(1)
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'K', 'k':
			mult, v = -1024, v[:n-1]
		case 'M', 'm':
			v = v[:n-1]
		case 'G', 'g':
			mult, v = 1024, v[:n-1]
		case 'T', 't':
			mult, v = 1024*1024, v[:n-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	if mult < 0 {
		return (n + 1023) / 1024, nil
	}
	return n * mult, nil
}

// sbatchWait is sbatch -W: wait for the job to end, and exit with its
// exit code (an array: the highest of its tasks').
func (s *slurmRun) sbatchWait(cn *conn, id string, array bool) error {
	for {
		req := &latticev1.ListAllocationsRequest{Ids: []string{id}, TerminalWindowSeconds: 7 * 24 * 3600}
		if array {
			req.Ids = nil
		}
		allocs, err := s.listAllocations(s.c, req)
		if err != nil {
			return err
		}
		done, worst, seen := true, int32(0), false
		for _, al := range allocs {
			if array && fmt.Sprint(al.GetArrayJobId()) != id {
				continue
			}
			seen = true
			if !model.AllocState(al.GetState()).Terminal() {
				done = false
			}
			if al.GetExitCode() > worst {
				worst = al.GetExitCode()
			}
			if al.GetState() != string(model.StateCompleted) && worst == 0 {
				worst = 1
			}
		}
		if seen && done {
			if worst != 0 {
				return withCode(int(worst), errReported)
			}
			return nil
		}
		select {
		case <-s.c.Context.Done():
			return s.c.Context.Err()
		case <-time.After(time.Second):
		}
	}
}
