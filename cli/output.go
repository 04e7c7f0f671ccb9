package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"
)

// emit prints v as JSON or YAML, or calls table for the table and wide
// formats. JSON and YAML share the keys of v's JSON encoding.
func (r *runner) emit(c *cli.Context, v any, table func(w io.Writer, wide bool) error) error {
	f, err := r.format(c)
	if err != nil {
		return err
	}
	return r.emitAs(f, v, table)
}

func (r *runner) emitAs(format string, v any, table func(w io.Writer, wide bool) error) error {
	switch format {
	case formatJSON:
		return writeJSON(r.Stdout, v)
	case formatYAML:
		return writeYAML(r.Stdout, v)
	}
	tw := tabwriter.NewWriter(r.Stdout, 0, 4, 2, ' ', 0)
	if err := table(tw, format == formatWide); err != nil {
		return err
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeYAML prints v as YAML with the same keys, in the same order, as its
// JSON encoding: the JSON is read back as a YAML node tree (JSON is YAML)
// and printed in block style.
func writeYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return err
	}
	blockStyle(&n)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	return enc.Close()
}

func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// row writes one tab-separated table row.
func row(w io.Writer, cols ...any) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

// kv writes "Key:<tab>value" lines for show-style output.
func kv(w io.Writer, key string, value any) {
	fmt.Fprintf(w, "%s:\t%v\n", key, value)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// rfc3339 formats unix milliseconds as RFC 3339 (UTC); 0 is null.
func rfc3339(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format(time.RFC3339)
	return &s
}

// tableTime formats unix milliseconds for tables, in the user's zone.
func (r *runner) tableTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	loc := r.Location
	if loc == nil {
		loc = time.Local
	}
	return time.UnixMilli(ms).In(loc).Format("2006-01-02T15:04:05")
}

// elapsed formats a duration the way squeue's TIME column does:
// M:SS, H:MM:SS or D-HH:MM:SS.
func elapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	days, h, m, sec := s/86400, s%86400/3600, s%3600/60, s%60
	switch {
	case days > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, sec)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}

// hostlist compresses node names Slurm-style: n001,n002,n003,n007 →
// n[001-003,007]. Names without a numeric suffix are listed as they are.
func hostlist(names []string) string {
	type key struct {
		prefix string
		width  int
	}
	type group struct {
		key  key
		nums []int
	}
	var groups []*group
	index := map[key]*group{}
	var plain []string
	for _, n := range names {
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		if i == len(n) || len(n)-i > 9 {
			plain = append(plain, n)
			continue
		}
		num, _ := strconv.Atoi(n[i:])
		k := key{n[:i], len(n) - i}
		if n[i] != '0' || len(n)-i == 1 {
			// no zero padding: numbers of different widths may share a range
			k.width = 0
		}
		g := index[k]
		if g == nil {
			g = &group{key: k}
			index[k] = g
			groups = append(groups, g)
		}
		g.nums = append(g.nums, num)
	}
	var out []string
	for _, g := range groups {
		sort.Ints(g.nums)
		var ranges []string
		for i := 0; i < len(g.nums); {
			j := i
			for j+1 < len(g.nums) && g.nums[j+1] <= g.nums[j]+1 {
				j++
			}
			a := fmt.Sprintf("%0*d", g.key.width, g.nums[i])
			if g.nums[j] != g.nums[i] {
				a += "-" + fmt.Sprintf("%0*d", g.key.width, g.nums[j])
			}
			ranges = append(ranges, a)
			i = j + 1
		}
		if len(ranges) == 1 && !strings.Contains(ranges[0], "-") {
			out = append(out, g.key.prefix+ranges[0])
		} else {
			out = append(out, g.key.prefix+"["+strings.Join(ranges, ",")+"]")
		}
	}
	return strings.Join(append(out, plain...), ",")
}

// truncate shortens s to n runes for narrow table columns.
func truncate(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-1]) + "…"
}
