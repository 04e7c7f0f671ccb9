package quorum

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func intPtr(i int) *int { return &i }

// codecSamples are commands of every shape the binary bodies must carry,
// edge values included.
func codecSamples() []Command {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.UTC)
	return []Command{
		&AssignBatch{Header: Header{Time: at}, VCluster: "batch"},
		&AssignBatch{Header: Header{RequestID: "req-1", Time: at}, VCluster: "batch", Items: []AssignItem{
			{AllocID: 1, Nodes: []string{"n001"}, Version: 7},
			{AllocID: math.MaxUint64, Nodes: []string{"n002", "n003", "a-very-long-node-name.example.org"}, Version: math.MaxUint64},
			{AllocID: 0, Version: 0},                        // no nodes
			{AllocID: 300, Nodes: []string{""}, Version: 1}, // an empty name survives
		}},
		&AssignBatch{}, // zero time, no vCluster
		&UpdateAllocs{Header: Header{Time: at}},
		&UpdateAllocs{Header: Header{RequestID: "r", Time: time.Unix(-1, 5).UTC()}, Updates: []AllocUpdate{
			{AllocID: 1, State: model.StateRunning},
			{AllocID: 2, State: model.StateCompleted, ExitCode: intPtr(0)},
			{AllocID: 3, State: model.StateFailed, Reason: model.ReasonNonZeroExit, ExitCode: intPtr(-129)},
			{AllocID: 4, State: model.StateFailed, Reason: "a reason of its own", ExitCode: intPtr(math.MaxInt)},
			{AllocID: 5, State: model.AllocState("BOGUS")}, // the FSM rejects it, the codec keeps it
			{AllocID: 6, State: ""},
			{AllocID: 7, State: model.StateCancelled, ExitCode: intPtr(math.MinInt)},
			{AllocID: 8, State: model.StateSuspended, Reason: model.ReasonCheckpointed, Run: 3},
			{AllocID: 9, State: model.StateCompleted, ExitCode: intPtr(0), Run: math.MaxInt32},
			{AllocID: 10, State: model.StateFailed, Reason: model.ReasonNodeFailure, Run: 1, EndTime: time.UnixMilli(1772600000123).UTC()},
			{AllocID: 11, State: model.StateCompleted, EndTime: time.UnixMilli(-5).UTC()},
			{AllocID: 12, State: model.StateFailed, Reason: model.ReasonOutOfMemory, Usage: &model.Usage{UserCPUSeconds: 1.5, SystemCPUSeconds: 0.25,
				MaxRSSBytes: 200 << 20, MaxRSSSampled: true, EnergyJoules: 1234.5, EnergySource: model.EnergyModel, OOMKills: 1}},
			{AllocID: 13, State: model.StateCompleted, Usage: &model.Usage{}},
			{AllocID: 14, State: model.StateRunning, Run: 2, StartTime: time.UnixMilli(1772600000456).UTC()},
			{AllocID: 15, State: model.StateCompleted, StartTime: time.UnixMilli(7).UTC(), EndTime: time.UnixMilli(9).UTC()},
		}},
		&UpdateAllocs{Header: Header{Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		&UpdateAllocs{Header: Header{Time: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}},
		&Submit{Header: Header{Time: at}, Items: []SubmitItem{{Request: model.Request{Name: "x", Command: []string{"true"}, NodesMin: 1}}}},
		&Cancel{Header: Header{Time: at}, IDs: []uint64{1, 2}, Reason: "r"},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, c := range codecSamples() {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if CommandType(data[0]) != c.Type() {
			t.Fatalf("%s: type byte %d", c.Type(), data[0])
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", c.Type(), err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s round trip:\n got %+v\nwant %+v", c.Type(), got, c)
		}
	}
}

// TestCodecTimes: any instant comes back exact and in UTC, the zero time
// as the zero time.
func TestCodecTimes(t *testing.T) {
	for _, at := range []time.Time{
		{},
		time.Unix(0, 0),
		time.Date(2026, 1, 1, 12, 0, 0, 1, time.FixedZone("X", 3600)),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Nanosecond),
		time.Now(), // with a monotonic reading, dropped as JSON drops it
	} {
		data, err := Encode(&UpdateAllocs{Header: Header{Time: at}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		got := c.CommandHeader().Time
		if !got.Equal(at) || got.Location() != time.UTC || got.IsZero() != at.IsZero() {
			t.Errorf("time %v came back %v (%v)", at, got, got.Location())
		}
		if at.IsZero() && got != (time.Time{}) {
			t.Errorf("zero time came back %#v", got)
		}
	}
}

// TestCodecKeepsWhatSnapshotsCanWrite: a binary body carries only what the
// JSON snapshot can hold verbatim, as the JSON bodies did. Encode refuses
// times beyond years 0-9999 and replaces invalid UTF-8; Decode refuses both.
func TestCodecKeepsWhatSnapshotsCanWrite(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC),
	} {
		if _, err := Encode(&AssignBatch{Header: Header{Time: at}}); err == nil {
			t.Errorf("time %v encoded", at)
		}
		body := []byte{byte(CmdUpdateAllocs), binaryFormat, 0}
		body = binary.AppendVarint(body, at.Unix())
		body = append(body, 0, 0)
		if _, err := Decode(body); err == nil || !strings.Contains(err.Error(), "years") {
			t.Errorf("time %v decoded: %v", at, err)
		}
	}
	data, err := Encode(&UpdateAllocs{Updates: []AllocUpdate{{AllocID: 1, State: model.StateFailed, Reason: "bad \xff\xfe byte"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.(*UpdateAllocs).Updates[0].Reason; got != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8 came back %q", got)
	}
	raw := []byte{byte(CmdAssignBatch), binaryFormat, 0, 0, 0, 2, 'v', 0xff, 0}
	if _, err := Decode(raw); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("invalid UTF-8 decoded: %v", err)
	}
}

// TestCodecCoversEveryField fails when a field is added to a command with a
// binary body: the codec would silently drop it. Add the field to the
// layout in codec.go (a new format version if it changes the meaning of
// existing bodies), then here.
func TestCodecCoversEveryField(t *testing.T) {
	want := map[reflect.Type]string{
		reflect.TypeFor[Header]():       "RequestID Time",
		reflect.TypeFor[AssignBatch]():  "Header VCluster Items",
		reflect.TypeFor[AssignItem]():   "AllocID Nodes Version",
		reflect.TypeFor[UpdateAllocs](): "Header Updates",
		reflect.TypeFor[AllocUpdate]():  "AllocID State Reason ExitCode Run EndTime Usage StartTime",
	}
	for typ, fields := range want {
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if strings.Join(got, " ") != fields {
			t.Errorf("%s has fields %v; the binary codec knows %s", typ, got, fields)
		}
	}
}

// TestDecodeRejectsMalformed: every truncation of a valid body, trailing
// bytes, an unknown format and counts no body can hold are errors.
func TestDecodeRejectsMalformed(t *testing.T) {
	for _, c := range codecSamples() {
		if c.Type() != CmdAssignBatch && c.Type() != CmdUpdateAllocs {
			continue
		}
		data, _ := Encode(c)
		for n := 1; n < len(data); n++ {
			if _, err := Decode(data[:n]); err == nil {
				t.Errorf("%s truncated to %d of %d bytes decoded", c.Type(), n, len(data))
			}
		}
		if _, err := Decode(append(bytes.Clone(data), 0)); err == nil {
			t.Errorf("%s with a trailing byte decoded", c.Type())
		}
		bad := bytes.Clone(data)
		bad[1] = 2
		if _, err := Decode(bad); err == nil || !strings.Contains(err.Error(), "format") {
			t.Errorf("%s with format 2: %v", c.Type(), err)
		}
	}
	// A count of 2^62 items in a few bytes must fail before allocating.
	huge := []byte{byte(CmdAssignBatch), binaryFormat, 0, 0, 0, 0}
	huge = binary.AppendUvarint(huge, 1<<62)
	if _, err := Decode(huge); err == nil || !strings.Contains(err.Error(), "count") {
		t.Errorf("huge count: %v", err)
	}
	huge = []byte{byte(CmdUpdateAllocs), binaryFormat, 0, 0, 0}
	huge = binary.AppendUvarint(huge, math.MaxUint64)
	if _, err := Decode(huge); err == nil {
		t.Error("huge update count decoded")
	}
	// Nanoseconds out of range, unknown flags and state codes.
	for _, data := range [][]byte{
		{byte(CmdUpdateAllocs), binaryFormat, 0, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03, 0},         // nanos = 1e9
		{byte(CmdUpdateAllocs), binaryFormat, 0, 0, 0, 1, 1, 1, 0, 2},                        // flags 2
		{byte(CmdUpdateAllocs), binaryFormat, 0, 0, 0, 1, 1, 9, 0, 0},                        // state code 9
		{byte(CmdUpdateAllocs), binaryFormat, 0, 0, 0, 1, 1, 0, 5, 'A', 0, 0},                // state string longer than the body
		{byte(CmdAssignBatch), binaryFormat, 0, 0, 0, 0, 1, 1, 1, 1, 0xff, 0xff, 0xff, 0x7f}, // name length beyond the body
	} {
		if _, err := Decode(data); err == nil {
			t.Errorf("% x decoded", data)
		}
	}
}

// FuzzDecode feeds arbitrary entries to Decode, which must never panic; an
// entry that decodes must encode and decode again to the same command.
func FuzzDecode(f *testing.F) {
	for _, c := range codecSamples() {
		data, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{byte(CmdAssignBatch)})
	f.Add([]byte{byte(CmdUpdateAllocs), binaryFormat})
	f.Add([]byte{byte(CmdSubmit), '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Encode(c)
		if err != nil {
			// Only JSON can refuse to encode what it decoded (e.g. a time
			// beyond year 9999); binary bodies always encode.
			if c.Type() == CmdAssignBatch || c.Type() == CmdUpdateAllocs {
				t.Fatalf("%s decoded but does not encode: %v", c.Type(), err)
			}
			return
		}
		c2, err := Decode(again)
		if err != nil {
			t.Fatalf("%s re-encoded does not decode: %v", c.Type(), err)
		}
		if c.Type() != CmdAssignBatch && c.Type() != CmdUpdateAllocs {
			// JSON folds some values ([] and null, omitted fields): compare
			// what it writes, not the structs.
			if again2, _ := Encode(c2); !bytes.Equal(again, again2) {
				t.Fatalf("%s round trip differs:\n%s\n%s", c.Type(), again, again2)
			}
			return
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("%s round trip differs:\n%+v\n%+v", c.Type(), c, c2)
		}
	})
}

// BenchmarkDecodePlacementCycle is the decoding share of placements: one
// cycle's AssignBatch and UpdateAllocs entries of 256 one-node items,
// decoded as every member decodes them. An op is one cycle; ns/placement
// divides by its items.
func BenchmarkDecodePlacementCycle(b *testing.B) {
	const n = 256
	ids := make([]uint64, n)
	nodes := make([]string, n)
	for i := range ids {
		ids[i] = 1_000_000 + uint64(i)
		nodes[i] = benchNodeName(0, 1000+i)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	assign := assignBatch(benchVClusterName(0), ids, nodes, 100_000)
	assign.Time = at
	update := completeBatch(ids)
	update.Time = at
	var entries [][]byte
	for _, c := range []Command{assign, update} {
		data, err := Encode(c)
		if err != nil {
			b.Fatal(err)
		}
		entries = append(entries, data)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(entries[0]) + len(entries[1])))
	for b.Loop() {
		for _, data := range entries {
			if _, err := Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/placement")
}
