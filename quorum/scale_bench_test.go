package quorum

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// benchArrayState is 20 arrays of 500 tasks, each with an 8 KiB script and
// an environment of 40 variables, a fifth of the tasks ended: a sweep-heavy
// site's state.
func benchArrayState(b *testing.B) *State {
	b.Helper()
	f := &fixture{t: &testing.T{}, s: NewState(), now: t0}
	f.s.apply(&SetVCluster{Header: Header{Time: t0}, VCluster: model.VCluster{Name: "batch", Type: model.TypeHPCBatch, ReservationDepth: 1}})
	script := "#!/bin/sh\n" + strings.Repeat("# a line of a long batch script, as sweeps have them\n", 8192/52)
	var env []string
	for i := range 40 {
		env = append(env, fmt.Sprintf("VAR_%02d=/some/path/of/a/typical/environment/value/%d", i, i))
	}
	for range 20 {
		r := f.s.apply(&Submit{Header: Header{Time: t0}, Items: []SubmitItem{{Request: model.Request{VCluster: "batch", Script: script, Env: env,
			NodesMin: 1, Walltime: time.Hour, Array: &model.ArraySpec{Start: 0, End: 499, Step: 1}}}}})
		if r.Rejection != nil {
			b.Fatal(r.Rejection)
		}
		var ids []uint64
		for _, id := range r.IDs[:100] {
			ids = append(ids, id)
		}
		f.s.apply(&Cancel{Header: Header{Time: t0}, IDs: ids})
	}
	return f.s
}

// BenchmarkSnapshotOfArrays writes the snapshot of benchArrayState: its
// time and its size (snapshot_MiB). Followers catching up and backups pay both.
//
//	go test -run '^$' -bench SnapshotOfArrays -count 5 ./quorum/
func BenchmarkSnapshotOfArrays(b *testing.B) {
	s := benchArrayState(b)
	var buf bytes.Buffer
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		buf.Reset()
		if err := s.WriteSnapshot(&buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len())/(1<<20), "snapshot_MiB")
}

// BenchmarkRestoreSnapshotOfArrays reads it back, as a follower installing
// the leader's snapshot does.
func BenchmarkRestoreSnapshotOfArrays(b *testing.B) {
	s := benchArrayState(b)
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := ReadSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubmitBurstThreeMembers commits a burst of 500 one-allocation
// submissions through the three-member quorum (fsync on): one entry each
// from 8 concurrent clients (what Submit does), or all in one SubmitBatch
// entry (what `latticectl submit A.sh B.sh ...` and SubmitBatch do). An op
// is one burst; submissions/s is the rate.
func BenchmarkSubmitBurstThreeMembers(b *testing.B) {
	trio := startBenchTrio(b)
	trio.preload(b)
	const burst = 500
	req := func(i int) Submit {
		return Submit{Header: Header{RequestID: fmt.Sprintf("burst-%d-%d", time.Now().UnixNano(), i)},
			Items: []SubmitItem{{Request: model.Request{Name: "burst", VCluster: benchVClusterName(0), Command: []string{"sleep", "60"},
				NodesMin: 1, Walltime: time.Hour}}}}
	}
	b.Run("entry-per-submission", func(b *testing.B) {
		start := time.Now()
		for range b.N {
			var wg sync.WaitGroup
			sem := make(chan struct{}, benchSubmitClients)
			for i := range burst {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					c := req(i)
					if _, err := trio.propose(&c); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		b.ReportMetric(float64(b.N*burst)/time.Since(start).Seconds(), "submissions/s")
	})
	b.Run("one-batch", func(b *testing.B) {
		start := time.Now()
		for range b.N {
			c := &SubmitBatch{}
			for i := range burst {
				c.Submissions = append(c.Submissions, req(i))
			}
			r, err := trio.propose(c)
			if err != nil || len(r.Submissions) != burst {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*burst)/time.Since(start).Seconds(), "submissions/s")
	})
}
