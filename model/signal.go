package model

import (
	"strconv"
	"strings"
)

// signalNumbers are the Linux signal numbers users may name (kill -l).
var signalNumbers = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ABRT": 6, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12,
	"PIPE": 13, "ALRM": 14, "TERM": 15, "CONT": 18, "STOP": 19, "TSTP": 20, "URG": 23,
	"XCPU": 24, "XFSZ": 25, "VTALRM": 26, "PROF": 27, "WINCH": 28, "IO": 29, "PWR": 30, "SYS": 31,
}

const signalNamesAllowed = "a signal name (USR1, SIGUSR2, TERM, ...) or number 1..64"

// ParseSignal accepts a signal by name, with or without SIG, in any letter
// case, or by number (1..64); it returns the Linux signal number.
func ParseSignal(s string) (int, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(t); err == nil {
		if n >= 1 && n <= 64 {
			return n, nil
		}
		return 0, fieldErr("signal", s, signalNamesAllowed)
	}
	t = strings.TrimPrefix(t, "SIG")
	if n, ok := signalNumbers[t]; ok {
		return n, nil
	}
	return 0, fieldErr("signal", s, signalNamesAllowed)
}

// SignalSpec is sbatch's --signal=[{R|B}:]SIG[@SECS]: which signal to send
// and how many seconds before the walltime ends (Slurm's default is 60).
type SignalSpec struct {
	Signal string // as the user wrote it, e.g. "USR1"
	Secs   int
	// BatchOnly ("B:") sends it to the batch shell only; Lattice always
	// signals the allocation's whole process group and records the flag.
	BatchOnly bool
}

// ParseSignalSpec parses sbatch's --signal value.
func ParseSignalSpec(s string) (SignalSpec, error) {
	const allowed = "[{R|B}:]SIG[@SECONDS], e.g. USR1@120 or B:TERM@60"
	var spec SignalSpec
	rest := strings.TrimSpace(s)
	if p, r, ok := strings.Cut(rest, ":"); ok {
		switch strings.ToUpper(p) {
		case "B":
			spec.BatchOnly = true
		case "R":
		default:
			return spec, fieldErr("signal", s, allowed)
		}
		rest = r
	}
	sig, secs, hasSecs := strings.Cut(rest, "@")
	if _, err := ParseSignal(sig); err != nil {
		return spec, fieldErr("signal", s, allowed)
	}
	spec.Signal, spec.Secs = strings.TrimSpace(sig), 60
	if hasSecs {
		n, err := strconv.Atoi(strings.TrimSpace(secs))
		if err != nil || n < 0 || n > 65535 {
			return spec, fieldErr("signal", s, allowed+" with 0..65535 seconds")
		}
		spec.Secs = n
	}
	return spec, nil
}
