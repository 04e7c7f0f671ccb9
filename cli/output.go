package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/latticehpc/lattice/model"
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
	if r.shape == (tableShape{}) {
		if err := table(tw, format == formatWide); err != nil {
			return err
		}
		return tw.Flush()
	}
	sw := &shapedWriter{shape: r.shape, aligned: tw, raw: r.Stdout}
	if err := table(sw, format == formatWide); err != nil {
		return err
	}
	if err := sw.flush(); err != nil {
		return err
	}
	return tw.Flush()
}

// WriteJSON and WriteYAML print v as -o json and -o yaml do, for commands
// defined outside this package (cli/offline).
func WriteJSON(w io.Writer, v any) error { return writeJSON(w, v) }
func WriteYAML(w io.Writer, v any) error { return writeYAML(w, v) }

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

// hostlist compresses node names Slurm-style (model.CompressHostlist).
func hostlist(names []string) string { return model.CompressHostlist(names) }

// truncate shortens s to n runes for narrow table columns.
func truncate(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-1]) + "…"
}
