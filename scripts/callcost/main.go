package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// command is one line of the spec and what its runs cost.
type command struct {
	label  string
	argv   []string
	cpu    []float64 // ms, user+sys
	wall   []float64 // ms
	faults []float64 // minor page faults
	failed bool
}

func main() {
	n := flag.Int("n", 30, "calls of each command")
	warm := flag.Int("warm", 2, "unmeasured calls of each command first (file cache, server caches)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: callcost [-n CALLS] [-warm K] SPEC  (SPEC: LABEL<TAB>PROGRAM<TAB>ARG... per line)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *n < 1 || *warm < 0 {
		flag.Usage()
		os.Exit(2)
	}
	cmds, err := readSpec(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "callcost:", err)
		os.Exit(2)
	}
	for i := 0; i < *warm+*n; i++ {
		for _, c := range cmds {
			cpu, wall, faults, err := run(c)
			if err != nil {
				if !c.failed {
					fmt.Fprintf(os.Stderr, "callcost: %s: %v\n", c.label, err)
				}
				c.failed = true
			}
			if i >= *warm {
				c.cpu = append(c.cpu, cpu)
				c.wall = append(c.wall, wall)
				c.faults = append(c.faults, faults)
			}
		}
	}
	report(os.Stdout, cmds, *n)
}

func readSpec(path string) ([]*command, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cmds []*command
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 2 || f[0] == "" || f[1] == "" {
			return nil, fmt.Errorf("%s:%d: want LABEL<TAB>PROGRAM[<TAB>ARG...], got %q", path, i+1, line)
		}
		cmds = append(cmds, &command{label: f[0], argv: f[1:]})
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("%s: no commands", path)
	}
	return cmds, nil
}

// run runs c once and returns its CPU and wall milliseconds and its page
// faults. The wall time is from just before the start to the end of the
// wait: what a caller that runs the command waits.
func run(c *command) (cpu, wall, faults float64, err error) {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	var out bytes.Buffer
	if !c.failed {
		cmd.Stdout, cmd.Stderr = &out, &out
	}
	t0 := time.Now()
	err = cmd.Run()
	wall = float64(time.Since(t0).Microseconds()) / 1000
	if cmd.ProcessState == nil {
		return 0, wall, 0, err
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru != nil {
		cpu = float64((ru.Utime.Nano() + ru.Stime.Nano())) / 1e6
		faults = float64(ru.Minflt + ru.Majflt)
	}
	if err != nil {
		err = fmt.Errorf("%v; it printed: %s", err, strings.TrimSpace(out.String()))
	}
	return cpu, wall, faults, err
}

// quartiles are the 25th, 50th and 75th percentiles of v.
func quartiles(v []float64) (q1, med, q3 float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	at := func(p float64) float64 {
		x := p * float64(len(s)-1)
		i := int(x)
		if i+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[i] + (x-float64(i))*(s[i+1]-s[i])
	}
	return at(0.25), at(0.5), at(0.75)
}

func report(f *os.File, cmds []*command, n int) {
	w := bufio.NewWriter(f)
	defer w.Flush()
	width := len("command")
	for _, c := range cmds {
		width = max(width, len(c.label))
	}
	fmt.Fprintf(w, "%-*s  %23s  %23s  %6s\n", width, "command", "cpu ms median [p25-p75]", "wall ms median [p25-p75]", "faults")
	for _, c := range cmds {
		c1, cm, c3 := quartiles(c.cpu)
		w1, wm, w3 := quartiles(c.wall)
		_, fm, _ := quartiles(c.faults)
		note := ""
		if c.failed {
			note = "  (failed)"
		}
		fmt.Fprintf(w, "%-*s  %7.1f [%5.1f-%6.1f]  %7.1f [%5.1f-%6.1f]  %6.0f%s\n", width, c.label, cm, c1, c3, wm, w1, w3, fm, note)
	}
	// Pairs: the same NAME on two sides.
	type side struct {
		name string
		cpu  float64
		wall float64
	}
	byName := map[string][]side{}
	var names []string
	for _, c := range cmds {
		s, name, ok := strings.Cut(c.label, ":")
		if !ok {
			continue
		}
		if _, seen := byName[name]; !seen {
			names = append(names, name)
		}
		_, cm, _ := quartiles(c.cpu)
		_, wm, _ := quartiles(c.wall)
		byName[name] = append(byName[name], side{s, cm, wm})
	}
	first := true
	for _, name := range names {
		p := byName[name]
		if len(p) < 2 {
			continue
		}
		if first {
			fmt.Fprintf(w, "\nmedians of %d calls each, interleaved; each side over %s\n", n, p[0].name)
			first = false
		}
		fmt.Fprintf(w, "%-*s  cpu", width, name)
		for i, sd := range p {
			fmt.Fprintf(w, " %s %.1f ms", sd.name, sd.cpu)
			if i > 0 {
				fmt.Fprintf(w, " (%.2fx)", sd.cpu/p[0].cpu)
			}
		}
		fmt.Fprint(w, "   wall")
		for i, sd := range p {
			fmt.Fprintf(w, " %s %.1f ms", sd.name, sd.wall)
			if i > 0 {
				fmt.Fprintf(w, " (%.2fx)", sd.wall/p[0].wall)
			}
		}
		fmt.Fprintln(w)
	}
}
