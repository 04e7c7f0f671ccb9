package quorum

import (
	"bytes"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func TestReservations(t *testing.T) {
	f := newFixture(t)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	maint := model.Reservation{Name: "maint", Nodes: []string{"b0", "b1"}, Start: at(10 * time.Minute), End: at(70 * time.Minute),
		Users: []string{"root"}, Maint: true, CreatedBy: "root"}
	f.ok(&SetReservation{Reservation: maint})
	f.rejected(&SetReservation{Reservation: maint}, `reservation "maint" already exists`)
	f.rejected(&SetReservation{Reservation: model.Reservation{Name: "x", Nodes: []string{"b1"}, Start: at(time.Hour), End: at(2 * time.Hour)}},
		`overlaps reservation "maint"`)
	f.rejected(&SetReservation{Reservation: model.Reservation{Name: "x", Nodes: []string{"nope"}, Start: at(time.Hour), End: at(2 * time.Hour)}},
		"invalid nodes nope: no such node")
	f.rejected(&SetReservation{Reservation: model.Reservation{Name: "x", Nodes: []string{"b2"}, Start: at(-2 * time.Hour), End: at(-time.Hour)}},
		"would already be over")
	f.rejected(&SetReservation{Reservation: model.Reservation{Name: "bad name", Nodes: []string{"b2"}, Start: at(0), End: at(time.Hour)}},
		"invalid name")
	f.rejected(&SetReservation{Reservation: model.Reservation{Name: "x", Nodes: []string{"b2"}, Start: at(0), End: at(time.Hour)}, Update: true},
		`reservation "x" does not exist`)
	// Same nodes, after the window: fine; an update keeps who created it.
	f.ok(&SetReservation{Reservation: model.Reservation{Name: "later", Nodes: []string{"b1", "b2"}, Start: at(70 * time.Minute), End: at(2 * time.Hour)}})
	moved := maint
	moved.End, moved.CreatedBy = at(30*time.Minute), "someone"
	f.ok(&SetReservation{Reservation: moved, Update: true})
	if r := f.s.Reservation("maint"); r == nil || !r.End.Equal(at(30*time.Minute)) || r.CreatedBy != "root" {
		t.Fatalf("after update: %+v", r)
	}
	if got := f.s.Reservations(time.Time{}); len(got) != 2 || got[0].Name != "later" || got[1].Name != "maint" {
		t.Fatalf("list: %+v", got)
	}
	if got := f.s.Reservations(at(45 * time.Minute)); len(got) != 1 || got[0].Name != "later" {
		t.Fatalf("list at +45m (maint over): %+v", got)
	}
	// They survive a snapshot.
	var buf bytes.Buffer
	if err := f.s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	s2, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r := s2.Reservation("maint"); r == nil || !r.Maint || len(r.Nodes) != 2 || r.Users[0] != "root" {
		t.Fatalf("after restore: %+v", r)
	}
	f.ok(&DeleteReservation{Name: "maint"})
	f.rejected(&DeleteReservation{Name: "maint"}, `reservation "maint" does not exist`)
	if got := f.s.Reservations(time.Time{}); len(got) != 1 {
		t.Fatalf("after delete: %+v", got)
	}
	// A submission into a reservation needs level 1; one without does not.
	in := &Submit{Items: []SubmitItem{{Request: model.Request{Reservation: "later"}}}}
	if NeededLevel(in) != Level1 || NeededLevel(&Submit{Items: []SubmitItem{{}}}) != LevelBase ||
		NeededLevel(&SubmitBatch{Submissions: []Submit{*in}}) != Level1 || NeededLevel(&DeleteReservation{}) != Level1 {
		t.Fatal("levels: a reservation (command or field) must need Level1")
	}
}
