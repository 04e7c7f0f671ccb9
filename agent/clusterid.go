package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"google.golang.org/grpc/metadata"
)

// An agent obeys only servers of its own cluster. The leader presents the
// cluster's id (minted once by a leader: quorum/clusterid.go) in the header
// of every agent stream, ClusterIDHeader. The agent learns it on its first
// connection to a server that presents one, keeps it in its data dir
// (clusterIDFile) and, from then on, refuses a server that presents
// another before it acts on any message: an agent moving to "any member"
// never follows a server of another cluster that listens at a listed
// address. Config.ClusterID pins it instead (latticed agent --cluster-id):
// then a server that presents none is refused too. A server presenting no
// id (an older release, or a cluster not named yet) is otherwise accepted.
//
// This guards against a wrong address, not an impostor: tokens and TLS
// authenticate the servers.

// ClusterIDHeader is the stream header that carries the cluster id.
const ClusterIDHeader = "x-lattice-cluster-id"

// OtherClusterMessage begins a server's refusal (FailedPrecondition) of an
// agent that serves another cluster.
const OtherClusterMessage = "this server belongs to cluster"

// clusterIDFile keeps the learned cluster id in the agent's data dir.
const clusterIDFile = "cluster-id"

// errOtherCluster is a server of another cluster.
var errOtherCluster = errors.New("server of another cluster")

// clusterMemory is the cluster id an agent pinned or learned.
type clusterMemory struct {
	mu     sync.Mutex
	dir    string // "": learned ids live as long as the process
	pinned string
	known  string
}

// loadClusterID reads the learned id from dir; pinned (Config.ClusterID)
// overrides it, and must agree with a learned one.
func loadClusterID(dir, pinned string) (*clusterMemory, error) {
	m := &clusterMemory{dir: dir, pinned: strings.TrimSpace(pinned)}
	if dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, clusterIDFile))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("cluster id: %w", err)
		}
		m.known = strings.TrimSpace(string(b))
	}
	if m.pinned != "" && m.known != "" && m.pinned != m.known {
		return nil, fmt.Errorf("invalid cluster-id %s: this agent's data dir belongs to cluster %s (%s); remove that file to move the agent to another cluster",
			m.pinned, m.known, filepath.Join(dir, clusterIDFile))
	}
	return m, nil
}

// check judges the id a server presented in its stream's header: an error
// (wrapping errOtherCluster) refuses the server; a first id is learned.
func (m *clusterMemory) check(header metadata.MD) (learned string, err error) {
	got := ""
	if v := header.Get(ClusterIDHeader); len(v) > 0 {
		got = v[0]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.pinned != "":
		if got != m.pinned {
			return "", fmt.Errorf("%w: it presents cluster id %q, this agent serves %s (--cluster-id)", errOtherCluster, got, m.pinned)
		}
		return "", nil
	case got == "":
		return "", nil
	case m.known == "":
		if m.dir != "" {
			path := filepath.Join(m.dir, clusterIDFile)
			if err := writeFileSync(path, []byte(got+"\n")); err != nil {
				return "", fmt.Errorf("remember the cluster id: %w", err)
			}
		}
		m.known = got
		return got, nil
	case got != m.known:
		return "", fmt.Errorf("%w: it presents cluster id %s, this agent serves %s (learned on its first connection; %s)",
			errOtherCluster, got, m.known, filepath.Join(m.dir, clusterIDFile))
	}
	return "", nil
}

// serving is the id this agent serves: pinned, else learned ("" none).
func (m *clusterMemory) serving() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pinned != "" {
		return m.pinned
	}
	return m.known
}
