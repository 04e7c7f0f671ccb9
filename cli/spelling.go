package cli

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Spelling: what latticectl accepts beyond urfave/cli's own parsing, and
// what it suggests when it cannot make sense of a word.
//
// Slurm users type short options joined to their value (-N1, -t30, -n4,
// -pgpu, -Jname). splitJoined turns such an argument into the flag and its
// value before urfave/cli parses, knowing which one-letter flags of the
// command take a value: a word that is itself a flag name (-name, Go's
// single-dash long form) stays as it is, and so does a one-letter boolean
// flag followed by more letters.

// splitJoined returns the arguments a stands for: "-N1" → "-N", "1" when
// -N is a one-letter flag of flags (or a global flag) that takes a value;
// otherwise a alone.
func splitJoined(flags []cli.Flag, a string) []string {
	if len(a) < 3 || a[0] != '-' || a[1] == '-' || strings.HasPrefix(a[2:], "=") {
		return []string{a}
	}
	name, _, _ := strings.Cut(a[1:], "=")
	if lookupFlag(flags, name) != nil {
		return []string{a} // -name: a flag typed with one dash
	}
	short := a[1:2]
	if f := lookupFlag(flags, short); f != nil && flagTakesValue(f) {
		return []string{"-" + short, a[2:]}
	}
	return []string{a}
}

// lookupFlag finds the flag called name among flags and the global flags.
func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	for _, f := range globalFlags() {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func flagTakesValue(f cli.Flag) bool {
	return !isBoolFlag(f)
}

// suggest returns the candidate closest to word, or "" when none is close
// enough to be a plausible typo: within a third of the word's length in
// edits (at least 1, at most 3), or a candidate that word is a prefix of.
func suggest(word string, candidates []string) string {
	word = strings.ToLower(word)
	if len(word) < 3 {
		return "" // one or two letters are a typo for too many things
	}
	best, bestDist := "", 1<<30
	limit := min(max(len(word)/3, 1), 3)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := editDistance(word, lc)
		if strings.HasPrefix(lc, word) && d > limit {
			d = limit // a prefix: "stat" for "status"
		}
		if d <= limit && d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (adjacent swaps count
// one edit: "stauts" is one edit from "status").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// commandNames lists the names and aliases of visible commands.
func commandNames(cmds []*cli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c.Names()...)
		}
	}
	return out
}

// didYouMean is " (did you mean X?)" when a suggestion exists, else "".
func didYouMean(s string) string {
	if s == "" {
		return ""
	}
	return " (did you mean " + s + "?)"
}

// flagSuggestion suggests a flag of flags (with its dashes) for the
// unknown flag name (without dashes).
func flagSuggestion(flags []cli.Flag, name string) string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	s := suggest(name, names)
	switch {
	case s == "":
		return ""
	case len(s) == 1:
		return "-" + s
	}
	return "--" + s
}
