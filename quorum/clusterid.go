package quorum

import "fmt"

// The cluster id: a random name a leader mints once in the life of a
// cluster (command CmdSetClusterID, level Level1: the first leader whose
// members all know it; server/clusterid.go), kept in the state and its
// snapshots. Agents learn
// it on their first connection and refuse afterwards a server that
// presents another (agent/clusterid.go): an agent that moves to any member
// never follows a server of another cluster listening at a listed address.

// SetClusterID names the cluster, once: a cluster that has an id keeps it
// (a second proposal, from a leader that raced another, is answered with
// the id in force as a conflict).
type SetClusterID struct {
	Header
	ID string `json:"id"`
}

// ClusterIDLength is the length of a cluster id: 32 lower-case hex digits.
const ClusterIDLength = 32

// CheckClusterID checks a cluster id's form.
func CheckClusterID(id string) error {
	if len(id) != ClusterIDLength {
		return fmt.Errorf("invalid cluster id %q: allowed %d lower-case hex digits", id, ClusterIDLength)
	}
	for _, r := range id {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return fmt.Errorf("invalid cluster id %q: allowed %d lower-case hex digits", id, ClusterIDLength)
		}
	}
	return nil
}

func (s *State) applySetClusterID(c *SetClusterID) *Result {
	if err := CheckClusterID(c.ID); err != nil {
		return &Result{Rejection: reject(CodeInvalid, "", "%v", err)}
	}
	switch s.clusterID {
	case c.ID:
		return &Result{}
	case "":
		s.clusterID = c.ID
		s.touch()
		return &Result{}
	}
	return &Result{Rejection: reject(CodeConflict, "", "the cluster is named %s already", s.clusterID)}
}

// ClusterID is the cluster's id; "" until a leader minted it.
func (s *State) ClusterID() string { return s.clusterID }
