package cli

import (
	"regexp"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestHelpPlaceholders: urfave/cli shows a back-quoted word of a flag's
// usage as the flag's value placeholder (`--token latticed dev` read as if
// "latticed dev" were its value). Only placeholders may be back-quoted:
// one word of capitals, digits and a few signs (N, DIR, IDLE:BUSY, fN=W).
func TestHelpPlaceholders(t *testing.T) {
	quoted := regexp.MustCompile("`([^`]*)`")
	placeholder := regexp.MustCompile(`^[A-Za-z]?[A-Z0-9:=_.,-]*[A-Z][A-Z0-9:=_.,-]*$`)
	var walk func(path string, cmds []*cli.Command)
	check := func(path string, flags []cli.Flag) {
		for _, f := range flags {
			df, ok := f.(cli.DocGenerationFlag)
			if !ok {
				continue
			}
			for _, m := range quoted.FindAllStringSubmatch(df.GetUsage(), -1) {
				if !placeholder.MatchString(m[1]) {
					t.Errorf("%s --%s: back-quoted %q in its usage is shown as the value's placeholder: %q", path, f.Names()[0], m[1], df.GetUsage())
				}
			}
		}
	}
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			check(path+" "+c.Name, c.Flags)
			walk(path+" "+c.Name, c.Subcommands)
		}
	}
	app := App()
	check("latticectl", app.Flags)
	walk("latticectl", app.Commands)
}
