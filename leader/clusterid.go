package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/latticehpc/lattice/quorum"
)

// The cluster id (quorum/clusterid.go): a leader names the cluster once,
// as soon as every member knows the command (Propose refuses it while a
// member of an older release remains). The member presents it to every
// agent in the header of its stream, and agents refuse a server of
// another cluster (server/clusterid.go).

// clusterIDRetry is how often a leader retries naming the cluster while a
// member does not know the command yet (or cannot be asked).
var clusterIDRetry = 10 * time.Second

// nameCluster is a leader loop: it mints and commits the cluster id when
// the cluster has none, then ends. While a member of an older release
// remains, the proposal is refused (the command's level): it retries.
func (t *Term) nameCluster(ctx context.Context) {
	waiting := ""
	for t.clusterID() == "" {
		err := t.mintClusterID(ctx)
		if err == nil {
			return
		}
		if err.Error() != waiting {
			waiting = err.Error()
			t.log.Info("the cluster gets its id once every member knows it; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(clusterIDRetry):
		}
	}
}

func (t *Term) clusterID() string {
	var id string
	t.host.View(func(st *quorum.State) { id = st.ClusterID() })
	return id
}

func (t *Term) mintClusterID(ctx context.Context) error {
	b := make([]byte, quorum.ClusterIDLength/2) // minted before the proposal: Apply draws nothing
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("mint a cluster id: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := t.host.Propose(pctx, &quorum.SetClusterID{ID: hex.EncodeToString(b)})
	if err != nil {
		return err
	}
	if r.Rejection != nil && r.Rejection.Code != quorum.CodeConflict {
		return r.Rejection
	}
	t.log.Info("the cluster is named; agents check it on every connection", "cluster_id", t.clusterID())
	return nil
}
