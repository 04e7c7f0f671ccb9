package model

import (
	"fmt"
	"strconv"
	"strings"
)

// MultiProgLine is one line of an srun --multi-prog configuration file:
// the ranks it applies to (nil: every rank, "*") and the program's argv.
type MultiProgLine struct {
	Ranks [][2]int // inclusive ranges
	Argv  []string
}

// ParseMultiProg reads srun's --multi-prog configuration: lines of
// RANKS PROGRAM [ARGS...], where RANKS is "*" or a list of ranks and
// ranges (0,2-3); '#' starts a comment; single and double quotes group
// words. %t in the program or its arguments becomes the task's rank and %o
// its offset within the line's ranks (ArgvFor).
func ParseMultiProg(text string) ([]MultiProgLine, error) {
	var out []MultiProgLine
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words, err := splitWords(line)
		if err != nil || len(words) < 2 {
			return nil, fmt.Errorf("line %d: %q: want RANKS PROGRAM [ARGS...]", i+1, line)
		}
		var l MultiProgLine
		if words[0] != "*" {
			for _, part := range strings.Split(words[0], ",") {
				lo, hi, isRange := strings.Cut(part, "-")
				a, err1 := strconv.Atoi(lo)
				b := a
				var err2 error
				if isRange {
					b, err2 = strconv.Atoi(hi)
				}
				if err1 != nil || err2 != nil || a < 0 || b < a {
					return nil, fmt.Errorf("line %d: invalid ranks %q: allowed * or a list of ranks and ranges such as 0,2-5", i+1, words[0])
				}
				l.Ranks = append(l.Ranks, [2]int{a, b})
			}
		}
		l.Argv = words[1:]
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no program lines")
	}
	return out, nil
}

// ArgvFor is the argv rank runs under a multi-prog configuration (nil: no
// line names the rank).
func ArgvFor(lines []MultiProgLine, rank int) []string {
	for _, l := range lines {
		offset, ok := 0, l.Ranks == nil
		if ok {
			offset = rank
		}
		for _, r := range l.Ranks {
			if rank >= r[0] && rank <= r[1] {
				offset += rank - r[0]
				ok = true
				break
			}
			offset += r[1] - r[0] + 1
		}
		if !ok {
			continue
		}
		argv := make([]string, len(l.Argv))
		for i, w := range l.Argv {
			argv[i] = strings.NewReplacer("%t", strconv.Itoa(rank), "%o", strconv.Itoa(offset)).Replace(w)
		}
		return argv
	}
	return nil
}

// splitWords splits a line into words; quotes group, a backslash escapes.
func splitWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		case ch == '\'' || ch == '"':
			j := strings.IndexByte(s[i+1:], ch)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c", ch)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}
