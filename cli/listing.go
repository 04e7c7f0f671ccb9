package cli

import (
	"bytes"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// Listings (status, history, nodes, explain without an id, vcluster list,
// usage, dag list) share two flags that shape their table: --no-header
// (squeue/sinfo -h, sacct -n) and --parsable (sacct --parsable2: fields
// separated by '|', no padding, no trailing '|'). JSON and YAML ignore
// them: they have no header and are already parsable.

// listingFlags are the flags every listing takes.
func listingFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "no-header", Aliases: []string{"noheader"}, Usage: "print the table without its header line"},
		&cli.BoolFlag{Name: "parsable", Aliases: []string{"parsable2", "parseable"}, Usage: "print the table as '|'-separated fields, without padding (like sacct --parsable2)"},
	}
}

// tableShape is how a listing's table is printed.
type tableShape struct {
	noHeader bool
	parsable bool
}

// shapeOf reads the listing flags of c (false when c has none).
func shapeOf(c *cli.Context) tableShape {
	if c == nil {
		return tableShape{}
	}
	var s tableShape
	for _, cc := range c.Lineage() {
		if cc.Command == nil {
			continue
		}
		if hasFlag(cc.Command.Flags, []string{"no-header"}) {
			s.noHeader = s.noHeader || cc.Bool("no-header")
			s.parsable = s.parsable || cc.Bool("parsable")
		}
	}
	return s
}

// shapedWriter rewrites the rows a table writes (tab-separated, one per
// line, the header first): it drops the header with --no-header and joins
// the columns with '|' with --parsable, bypassing the aligning writer.
type shapedWriter struct {
	shape   tableShape
	aligned io.Writer // the tabwriter, for aligned tables
	raw     io.Writer // stdout, for parsable tables
	buf     bytes.Buffer
	lines   int
}

func (s *shapedWriter) Write(p []byte) (int, error) {
	s.buf.Write(p)
	for {
		line, err := s.buf.ReadString('\n')
		if err != nil { // an incomplete line: keep it for the next write
			s.buf.Reset()
			s.buf.WriteString(line)
			return len(p), nil
		}
		if err := s.line(line); err != nil {
			return 0, err
		}
	}
}

func (s *shapedWriter) line(line string) error {
	s.lines++
	if s.lines == 1 && s.shape.noHeader {
		return nil
	}
	if s.shape.parsable {
		_, err := io.WriteString(s.raw, strings.ReplaceAll(line, "\t", "|"))
		return err
	}
	_, err := io.WriteString(s.aligned, line)
	return err
}

// flush writes a last line that had no newline.
func (s *shapedWriter) flush() error {
	if s.buf.Len() == 0 {
		return nil
	}
	line := s.buf.String()
	s.buf.Reset()
	return s.line(line)
}
