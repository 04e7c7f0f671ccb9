package main

import "github.com/urfave/cli/v2"

// mailHookFlag is the site's mail command for sbatch's --mail-type.
func mailHookFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "mail-hook", EnvVars: env("mail-hook"),
		Usage: "command (sh -c) the leader runs for jobs submitted with --mail-type, with LATTICE_MAIL_EVENT, LATTICE_MAIL_USER, " +
			"LATTICE_MAIL_SUBJECT, LATTICE_ALLOC_ID/NAME/USER/STATE/REASON/EXIT_CODE (e.g. 'mail -s \"$LATTICE_MAIL_SUBJECT\" \"$LATTICE_MAIL_USER\" </dev/null'); empty = no mail"}
}
