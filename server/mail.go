package server

import "github.com/latticehpc/lattice/model"

// mailWarning is the submission warning when mail is asked for and the
// site has no hook.
func (s *Server) mailWarning(r *model.Request) []string {
	if s.cfg.MailHook != "" || ((r.MailType == "" || r.MailType == "NONE") && r.MailUser == "") {
		return nil
	}
	return []string{"--mail-type/--mail-user are kept with the job, but this site has no mail hook: no mail will be sent"}
}
