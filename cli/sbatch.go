package cli

import (
	"fmt"
	"strings"
)

// option is one submit setting as typed, and where it came from (for error
// messages): "--nodes" or "job.sh:3 (#SBATCH -N)".
type option struct {
	value  string
	origin string
}

// submitOptions holds submit settings by canonical key. The script's
// #SBATCH lines fill it first; command-line flags then overwrite, so they
// win.
type submitOptions map[string]option

// Canonical submit setting keys.
const (
	optNodes       = "nodes"
	optWalltime    = "walltime"
	optName        = "name"
	optVCluster    = "vcluster"
	optTenant      = "tenant"
	optProject     = "project"
	optArray       = "array"
	optDependsOn   = "depends-on"
	optConstraint  = "constraint"
	optGPUType     = "gpu-type"
	optGres        = "gres"
	optGPUsPerNode = "gpus-per-node"
	optPriority    = "priority" // "class:N" or "qos:NAME"; the later one wins
	optCheckpoint  = "checkpoint"
	optStdout      = "stdout"
	optStderr      = "stderr"
	optWorkDir     = "workdir"
	optExport      = "export"
	optSignal      = "signal"
	optCkptHook    = "checkpoint-hook"
	optCkptWebhook = "checkpoint-webhook"
	optRequeue     = "requeue" // "true" or "false"
	optBegin       = "begin"
	optHold        = "hold" // "true"
	optNodeList    = "nodelist"
	optExclude     = "exclude"
	optReservation = "reservation"
	optGPUs        = "gpus"
	optMailType    = "mail-type"
	optMailUser    = "mail-user"
	// Tasks (tasks.go).
	optNtasks        = "ntasks"
	optNtasksPerNode = "ntasks-per-node"
	optCPUsPerTask   = "cpus-per-task"
	optMem           = "mem"
	optMemPerCPU     = "mem-per-cpu"
	optGPUsPerTask   = "gpus-per-task"
	optExclusive     = "exclusive"  // "true"
	optOvercommit    = "overcommit" // "true"
)

// sbatchSwitches are the options that take no value, with the value they set.
var sbatchSwitches = map[string]struct{ key, value string }{
	"--requeue":    {optRequeue, "true"},
	"--no-requeue": {optRequeue, "false"},
	"--hold":       {optHold, "true"},
	"-H":           {optHold, "true"},
	"--exclusive":  {optExclusive, "true"},
	"--overcommit": {optOvercommit, "true"},
	"-O":           {optOvercommit, "true"},
}

func (o submitOptions) set(key, value, origin string) {
	switch key {
	case "qos":
		o[optPriority] = option{"qos:" + value, origin}
	case "priority-class":
		o[optPriority] = option{"class:" + value, origin}
	default:
		o[key] = option{value, origin}
	}
}

// sbatchLong maps the long #SBATCH options latticectl understands (Slurm's
// spellings and Lattice's own) to setting keys.
var sbatchLong = map[string]string{
	"nodes":          optNodes,
	"time":           optWalltime,
	"walltime":       optWalltime,
	"job-name":       optName,
	"name":           optName,
	"partition":      optVCluster,
	"vcluster":       optVCluster,
	"account":        optTenant,
	"tenant":         optTenant,
	"project":        optProject,
	"array":          optArray,
	"dependency":     optDependsOn,
	"depends-on":     optDependsOn,
	"constraint":     optConstraint,
	"gres":           optGres,
	"gpus-per-node":  optGPUsPerNode,
	"gpu-type":       optGPUType,
	"qos":            "qos",
	"priority-class": "priority-class",
	"checkpoint":     optCheckpoint,
	"output":         optStdout,
	"error":          optStderr,
	"stdout":         optStdout,
	"stderr":         optStderr,
	"chdir":          optWorkDir,
	"workdir":        optWorkDir,
	"export":         optExport,
	"signal":         optSignal,
	// Lattice's own checkpoint settings.
	"checkpoint-hook":    optCkptHook,
	"checkpoint-webhook": optCkptWebhook,
	"requeue":            optRequeue,
	"no-requeue":         optRequeue,
	"begin":              optBegin,
	"hold":               optHold,
	"nodelist":           optNodeList,
	"exclude":            optExclude,
	"reservation":        optReservation,
	"gpus":               optGPUs,
	"mail-type":          optMailType,
	"mail-user":          optMailUser,
	"ntasks":             optNtasks,
	"ntasks-per-node":    optNtasksPerNode,
	"cpus-per-task":      optCPUsPerTask,
	"mem":                optMem,
	"mem-per-cpu":        optMemPerCPU,
	"gpus-per-task":      optGPUsPerTask,
	"exclusive":          optExclusive,
	"overcommit":         optOvercommit,
}

// sbatchShort maps Slurm's one-letter options. In a script -o and -e are
// output files (unlike on latticectl's command line, where -o is the
// output format).
var sbatchShort = map[byte]string{
	'N': optNodes,
	't': optWalltime,
	'J': optName,
	'p': optVCluster,
	'A': optTenant,
	'a': optArray,
	'd': optDependsOn,
	'C': optConstraint,
	'o': optStdout,
	'e': optStderr,
	'D': optWorkDir,
	'b': optBegin,
	'H': optHold,
	'w': optNodeList,
	'x': optExclude,
	'G': optGPUs,
	'q': "qos",
	'n': optNtasks,
	'c': optCPUsPerTask,
	'O': optOvercommit,
}

// parseSbatch reads the #SBATCH lines of a batch script into opts. Like
// Slurm it reads them from the top of the script up to the first line
// that is neither blank nor a comment. Unknown options become warnings,
// not failures; a known option without its value is an error.
func parseSbatch(file, script string, opts submitOptions) (warnings []string, err error) {
	lines := strings.Split(script, "\n")
	body := false
	for i, line := range lines {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimSpace(line)
		where := fmt.Sprintf("%s:%d", file, i+1)
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			body = true
			continue
		}
		rest, ok := strings.CutPrefix(line, "#SBATCH")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		if body {
			warnings = append(warnings, fmt.Sprintf("%s: #SBATCH after the first command is ignored (as in Slurm)", where))
			continue
		}
		toks, err := splitDirective(rest)
		if err != nil {
			return warnings, usageErrorf("%s: %v", where, err)
		}
		w, err := sbatchTokens(where, toks, opts)
		warnings = append(warnings, w...)
		if err != nil {
			return warnings, err
		}
	}
	return warnings, nil
}

func sbatchTokens(where string, toks []string, opts submitOptions) (warnings []string, err error) {
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		var key, value, spelled string
		hasValue := false
		switch {
		case strings.HasPrefix(t, "--") && len(t) > 2:
			name, v, ok := strings.Cut(t[2:], "=")
			key, spelled, value, hasValue = sbatchLong[name], "--"+name, v, ok
		case strings.HasPrefix(t, "-") && len(t) > 1:
			key, spelled = sbatchShort[t[1]], t[:2]
			if len(t) > 2 {
				value, hasValue = strings.TrimPrefix(t[2:], "="), true
			}
		default:
			warnings = append(warnings, fmt.Sprintf("%s: unexpected %q in #SBATCH line ignored", where, t))
			continue
		}
		if sw, ok := sbatchSwitches[spelled]; ok && !hasValue { // --requeue, --no-requeue, --hold, -H
			opts.set(sw.key, sw.value, fmt.Sprintf("%s (#SBATCH %s)", where, spelled))
			continue
		}
		shown := t
		if !hasValue && i+1 < len(toks) && !strings.HasPrefix(toks[i+1], "-") {
			value, hasValue = toks[i+1], true
			shown = t + " " + value
			i++
		}
		if key == "" {
			warnings = append(warnings, fmt.Sprintf("%s: #SBATCH %s is not supported by Lattice and was ignored", where, shown))
			continue
		}
		if !hasValue {
			return warnings, usageErrorf("%s: #SBATCH %s needs a value", where, spelled)
		}
		opts.set(key, value, fmt.Sprintf("%s (#SBATCH %s)", where, spelled))
	}
	return warnings, nil
}

// splitDirective splits the rest of an #SBATCH line into words the way a
// shell would: quotes group, a backslash escapes, an unquoted # starting a
// word begins a comment.
func splitDirective(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '#' && !inWord:
			return out, nil
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in #SBATCH line")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in #SBATCH line")
			}
			inWord = true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
