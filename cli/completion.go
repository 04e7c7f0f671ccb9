package cli

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// Shell completion. bash and zsh ask latticectl itself for candidates
// (urfave/cli's --generate-bash-completion); fish gets a static script
// generated from the command tree.

const bashCompletion = `# bash completion for latticectl
# install: latticectl completion bash > /etc/bash_completion.d/latticectl
_latticectl_complete() {
  local cur opts
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  if [[ "$cur" == "-"* ]]; then
    opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "${cur}" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o bashdefault -o default -F _latticectl_complete latticectl
`

const zshCompletion = `#compdef latticectl
# install: latticectl completion zsh > "${fpath[1]}/_latticectl"
_latticectl() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(_CLI_ZSH_AUTOCOMPLETE_HACK=1 ${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(_CLI_ZSH_AUTOCOMPLETE_HACK=1 ${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _latticectl latticectl
`

func (r *runner) completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script",
		ArgsUsage: "bash|zsh|fish",
		Action: func(c *cli.Context) error {
			if err := needArgs(c, 1, 1, "bash|zsh|fish"); err != nil {
				return err
			}
			switch sh := strings.ToLower(c.Args().First()); sh {
			case "bash":
				_, err := fmt.Fprint(r.Stdout, bashCompletion)
				return err
			case "zsh":
				_, err := fmt.Fprint(r.Stdout, zshCompletion)
				return err
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(r.Stdout, s)
				return err
			default:
				return usageErrorf("invalid shell %q: allowed bash, zsh or fish", sh)
			}
		},
	}
}
