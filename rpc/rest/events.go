package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// GET /api/v1/events is a server-sent-events stream of state changes, so a
// page or a script need not poll: "allocation" events carry an Allocation
// (as GET /api/v1/allocations lists it) whenever one appears or changes
// state, reason, nodes or steps; "allocation-removed" names one that left
// the listing; "node" events carry a Node whenever its state, reason,
// vCluster, allocation or loan changes. The first events describe
// everything (the stream starts from nothing). Query parameters narrow the
// allocations as the listing does: tenant, vcluster. The member looks on the
// caller's behalf through the same calls, so the caller sees exactly what
// the listing shows them.

const maxEventPages = 50

// eventsResync bounds how long a stream goes without listing when the
// state version says nothing changed.
const eventsResync = 30 * time.Second

var eventJSON = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// errUnchanged marks a tick at which the state version had not moved.
var errUnchanged = errors.New("state unchanged")

func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	for k := range q {
		if k != "tenant" && k != "vcluster" {
			badRequest(w, k, "not a parameter of /api/v1/events (tenant, vcluster)")
			return
		}
	}
	ctx := outgoing(r)
	req := &latticev1.ListAllocationsRequest{Tenant: q.Get("tenant"), Vcluster: q.Get("vcluster"), TerminalWindowSeconds: 3600}
	version := func() uint64 {
		if h.cfg.StateVersion == nil {
			return 0
		}
		return h.cfg.StateVersion()
	}
	lastVersion, listed := version(), time.Now()
	allocs, nodes, err := h.poll(ctx, req)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	seenA := map[uint64]string{}
	seenN := map[string]string{}
	seq := 0
	send := func(event string, m proto.Message) {
		b, err := eventJSON.Marshal(m)
		if err != nil {
			return
		}
		seq++
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", seq, event, b)
	}
	tick := time.NewTicker(h.cfg.EventsInterval)
	defer tick.Stop()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		if err == errUnchanged {
			// Nothing to compare: keep what was sent.
		} else if err == nil {
			now := map[uint64]bool{}
			for _, a := range allocs {
				now[a.Id] = true
				if fp := allocFingerprint(a); seenA[a.Id] != fp {
					seenA[a.Id] = fp
					send("allocation", a)
				}
			}
			for id := range seenA {
				if !now[id] {
					delete(seenA, id)
					seq++
					fmt.Fprintf(w, "id: %d\nevent: allocation-removed\ndata: {\"id\":%q}\n\n", seq, strconv.FormatUint(id, 10))
				}
			}
			for _, n := range nodes {
				if fp := nodeFingerprint(n); seenN[n.Name] != fp {
					seenN[n.Name] = fp
					send("node", n)
				}
			}
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
			continue
		case <-tick.C:
		}
		v := version()
		if h.cfg.StateVersion != nil && v == lastVersion && time.Since(listed) < eventsResync {
			err = errUnchanged
			continue
		}
		lastVersion, listed = v, time.Now()
		allocs, nodes, err = h.poll(ctx, req)
		if err != nil && ctx.Err() == nil && err != errUnchanged {
			// A leader change or a lost session: say so, keep trying.
			seq++
			fmt.Fprintf(w, "id: %d\nevent: error\ndata: %q\n\n", seq, err.Error())
			flusher.Flush()
		}
	}
}

// poll lists the allocations (every page, up to a bound) and the nodes.
func (h *handler) poll(ctx context.Context, req *latticev1.ListAllocationsRequest) ([]*latticev1.Allocation, []*latticev1.Node, error) {
	var allocs []*latticev1.Allocation
	page := proto.Clone(req).(*latticev1.ListAllocationsRequest)
	for range maxEventPages {
		resp, err := h.alloc.List(ctx, page)
		if err != nil {
			return nil, nil, err
		}
		allocs = append(allocs, resp.Allocations...)
		if resp.NextPageToken == "" {
			break
		}
		page.PageToken = resp.NextPageToken
	}
	nresp, err := h.nodes.List(ctx, &latticev1.ListNodesRequest{})
	if err != nil {
		return nil, nil, err
	}
	return allocs, nresp.Nodes, nil
}

func allocFingerprint(a *latticev1.Allocation) string {
	return strings.Join([]string{a.State, a.Reason, a.Held, strings.Join(a.Nodes, ","),
		strconv.Itoa(len(a.History)), strconv.Itoa(len(a.Steps)), strconv.FormatInt(a.EndTimeUnixMs, 10)}, "|")
}

func nodeFingerprint(n *latticev1.Node) string {
	return strings.Join([]string{n.State, n.StateReason, n.CurrentVcluster, strconv.FormatUint(n.Allocation, 10),
		strconv.FormatBool(n.Borrowed), strconv.FormatBool(n.ReturnRequested)}, "|")
}
