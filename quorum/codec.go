package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/latticehpc/lattice/model"
)

// Binary bodies of the hot commands.
//
// Every log entry is one CommandType byte followed by a body. Most bodies
// are JSON. The commands every scheduling cycle commits — AssignBatch and
// UpdateAllocs — have a hand-written binary body instead: every member
// decodes every entry, and decoding their JSON cost more CPU than applying
// them. The layout is explicit and versioned; a body that does not follow
// it exactly is an error (and the FSM stops rather than diverge).
//
// Notation: uvarint and varint are encoding/binary's unsigned and zig-zag
// signed varints; str is a uvarint byte length followed by the bytes.
//
//	body         = format:byte(=1) header payload        (nothing may follow)
//	header       = request_id:str seconds:varint nanos:uvarint
//	               (the time as Unix seconds and nanoseconds < 1e9, in UTC,
//	               within years 0-9999 as JSON times, so that a snapshot can
//	               hold it; the zero time.Time is seconds -62135596800)
//	AssignBatch  = vcluster:str count:uvarint assign_item{count}
//	assign_item  = alloc_id:uvarint version:uvarint nodes:uvarint node:str{nodes}
//	UpdateAllocs = count:uvarint update{count}
//	update       = alloc_id:uvarint state reason:str flags:byte [exit_code:varint]
//	state        = code:byte, 1..8 for model.AllocStates in order, or
//	               0 followed by str for any other value (kept verbatim)
//	flags        = bit 0: exit_code follows (ExitCode != nil); other bits 0
//
// Strings are UTF-8: Encode replaces invalid bytes as encoding/json does,
// Decode refuses them (a snapshot, which is JSON, could not keep them
// verbatim). Counts are checked against the bytes left before anything is
// allocated, so garbage can neither panic nor make Decode allocate much
// more than the body's size. Decoded slices are nil when empty and times
// are UTC.

// binaryFormat is the first byte of every binary body.
const binaryFormat = 1

// Minimum encoded sizes, to bound counts by the bytes left.
const (
	minAssignItem = 3 // alloc_id, version, nodes
	minNodeName   = 1 // length
	minUpdate     = 4 // alloc_id, state code, reason length, flags
)

const (
	flagExitCode = 1 << 0
	flagRun      = 1 << 1 // followed by the run (requeue count + 1)
	flagEndTime  = 1 << 2 // followed by the end time, unix milliseconds (varint)
	flagUsage    = 1 << 3 // followed by the run's usage (appendUsage)
	flagStart    = 1 << 4 // followed by the start time, unix milliseconds (varint)
)

// zeroTimeUnix is time.Time{}.Unix(): the zero time encodes like any other.
const zeroTimeUnix = -62135596800

// The times a body may carry: those a JSON snapshot can write.
var (
	minTimeUnix = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxTimeUnix = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
)

var errTruncated = errors.New("truncated body")

// --- encoding ----------------------------------------------------------------------

func appendStr(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendHeader(b []byte, h *Header) ([]byte, error) {
	sec := h.Time.Unix()
	if sec < minTimeUnix || sec > maxTimeUnix {
		return nil, fmt.Errorf("time %v outside years 0-9999", h.Time)
	}
	b = append(b, binaryFormat)
	b = appendStr(b, h.RequestID)
	b = binary.AppendVarint(b, sec)
	return binary.AppendUvarint(b, uint64(h.Time.Nanosecond())), nil
}

func appendState(b []byte, st model.AllocState) []byte {
	for i, known := range model.AllocStates {
		if st == known {
			return append(b, byte(i+1))
		}
	}
	return appendStr(append(b, 0), string(st))
}

func encodeAssignBatch(c *AssignBatch) ([]byte, error) {
	size := 1 + 32 + len(c.RequestID) + len(c.VCluster) + 10
	for _, it := range c.Items {
		size += 12
		for _, n := range it.Nodes {
			size += 2 + len(n)
		}
	}
	b := make([]byte, 0, size)
	b, err := appendHeader(append(b, byte(CmdAssignBatch)), &c.Header)
	if err != nil {
		return nil, err
	}
	b = appendStr(b, c.VCluster)
	b = binary.AppendUvarint(b, uint64(len(c.Items)))
	for _, it := range c.Items {
		b = binary.AppendUvarint(b, it.AllocID)
		b = binary.AppendUvarint(b, it.Version)
		b = binary.AppendUvarint(b, uint64(len(it.Nodes)))
		for _, n := range it.Nodes {
			b = appendStr(b, n)
		}
	}
	return b, nil
}

func encodeUpdateAllocs(c *UpdateAllocs) ([]byte, error) {
	size := 1 + 32 + len(c.RequestID) + 10
	for _, u := range c.Updates {
		size += 16 + len(u.Reason)
	}
	b := make([]byte, 0, size)
	b, err := appendHeader(append(b, byte(CmdUpdateAllocs)), &c.Header)
	if err != nil {
		return nil, err
	}
	b = binary.AppendUvarint(b, uint64(len(c.Updates)))
	for _, u := range c.Updates {
		b = binary.AppendUvarint(b, u.AllocID)
		b = appendState(b, u.State)
		b = appendStr(b, u.Reason)
		var flags byte
		if u.ExitCode != nil {
			flags |= flagExitCode
		}
		if u.Run > 0 {
			flags |= flagRun
		}
		if !u.EndTime.IsZero() {
			flags |= flagEndTime
		}
		if u.Usage != nil {
			flags |= flagUsage
		}
		if !u.StartTime.IsZero() {
			flags |= flagStart
		}
		b = append(b, flags)
		if u.ExitCode != nil {
			b = binary.AppendVarint(b, int64(*u.ExitCode))
		}
		if u.Run > 0 {
			b = binary.AppendUvarint(b, uint64(u.Run))
		}
		if !u.EndTime.IsZero() {
			b = binary.AppendVarint(b, u.EndTime.UnixMilli())
		}
		if u.Usage != nil {
			b = appendUsage(b, u.Usage)
		}
		if !u.StartTime.IsZero() {
			b = binary.AppendVarint(b, u.StartTime.UnixMilli())
		}
	}
	return b, nil
}

// --- decoding ----------------------------------------------------------------------

// reader walks a binary body. Every method checks bounds; the first error
// sticks and later reads return zero values.
type reader struct {
	b   []byte
	off int
	err error
	// text is the body as one string, made on first use, so that many
	// short strings (node names) cost one allocation together.
	text string
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("%w at byte %d", err, r.off)
	}
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(errTruncated)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		if n == 0 {
			r.fail(errTruncated)
		} else {
			r.fail(errors.New("varint overflows 64 bits"))
		}
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		if n == 0 {
			r.fail(errTruncated)
		} else {
			r.fail(errors.New("varint overflows 64 bits"))
		}
		return 0
	}
	r.off += n
	return v
}

// count reads a count of elements of at least minSize bytes each, refusing
// one the bytes left cannot hold.
func (r *reader) count(minSize int) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n > uint64(r.left()/minSize) {
		r.fail(fmt.Errorf("count %d exceeds what %d bytes can hold", n, r.left()))
		return 0
	}
	return int(n)
}

// bytes reads a str and returns its bytes, aliasing the body.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(r.left()) {
		r.fail(fmt.Errorf("string of %d bytes with %d left", n, r.left()))
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	if !utf8.Valid(s) {
		r.fail(errors.New("string is not UTF-8"))
		return nil
	}
	r.off += int(n)
	return s
}

// str reads a str into a string of its own (safe to keep for long).
func (r *reader) str() string {
	b := r.bytes()
	if len(b) == 0 {
		return ""
	}
	return string(b)
}

// shared reads a str as a substring of the whole body: one allocation for
// all such strings of an entry, but each keeps the body alive, so it is
// for strings the FSM does not store (node names of an assignment: the
// allocation stores the node's own name).
func (r *reader) shared() string {
	b := r.bytes()
	if len(b) == 0 {
		return ""
	}
	if r.text == "" {
		r.text = string(r.b)
	}
	return r.text[r.off-len(b) : r.off]
}

func (r *reader) header(h *Header) {
	if f := r.byte(); r.err == nil && f != binaryFormat {
		r.fail(fmt.Errorf("unknown body format %d, want %d", f, binaryFormat))
		return
	}
	h.RequestID = r.str()
	sec := r.varint()
	nsec := r.uvarint()
	if r.err != nil {
		return
	}
	if nsec >= 1e9 || sec < minTimeUnix || sec > maxTimeUnix {
		r.fail(fmt.Errorf("time %d s %d ns outside years 0-9999", sec, nsec))
		return
	}
	if sec == zeroTimeUnix && nsec == 0 {
		h.Time = time.Time{}
		return
	}
	h.Time = time.Unix(sec, int64(nsec)).UTC()
}

func (r *reader) state() model.AllocState {
	code := r.byte()
	switch {
	case r.err != nil:
		return ""
	case code == 0:
		return model.AllocState(internReason(r.bytes()))
	case int(code) <= len(model.AllocStates):
		return model.AllocStates[code-1]
	}
	r.fail(fmt.Errorf("unknown state code %d", code))
	return ""
}

// reason reads a reason, sharing the constant when it is a known one.
func (r *reader) reason() string { return internReason(r.bytes()) }

func internReason(b []byte) string {
	switch string(b) { // no allocation: the compiler compares in place
	case "":
		return ""
	case model.ReasonNonZeroExit:
		return model.ReasonNonZeroExit
	case model.ReasonWalltimeExceeded:
		return model.ReasonWalltimeExceeded
	case model.ReasonNodeFailure:
		return model.ReasonNodeFailure
	case model.ReasonPreempted:
		return model.ReasonPreempted
	case model.ReasonCancelled:
		return model.ReasonCancelled
	case model.ReasonLaunchFailed:
		return model.ReasonLaunchFailed
	case model.ReasonCheckpointed:
		return model.ReasonCheckpointed
	case model.ReasonRequeued:
		return model.ReasonRequeued
	}
	return string(b)
}

func (r *reader) end() error {
	if r.err == nil && r.left() != 0 {
		r.fail(fmt.Errorf("%d trailing bytes", r.left()))
	}
	return r.err
}

func decodeAssignBatch(body []byte) (*AssignBatch, error) {
	r := &reader{b: body}
	c := &AssignBatch{}
	r.header(&c.Header)
	c.VCluster = r.str()
	n := r.count(minAssignItem)
	if r.err != nil {
		return nil, r.err
	}
	if n > 0 {
		c.Items = make([]AssignItem, n)
	}
	// All items' node lists share one backing array, each clipped to its
	// own length so that appending to one cannot write into the next.
	var names []string
	ends := make([]int, n)
	for i := range c.Items {
		it := &c.Items[i]
		it.AllocID = r.uvarint()
		it.Version = r.uvarint()
		k := r.count(minNodeName)
		if r.err != nil {
			return nil, r.err
		}
		if names == nil {
			names = make([]string, 0, max(k, n)) // one node per item is the common case
		}
		for range k {
			names = append(names, r.shared())
		}
		ends[i] = len(names)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	start := 0
	for i := range c.Items {
		if ends[i] > start {
			c.Items[i].Nodes = names[start:ends[i]:ends[i]]
		}
		start = ends[i]
	}
	return c, nil
}

func decodeUpdateAllocs(body []byte) (*UpdateAllocs, error) {
	r := &reader{b: body}
	c := &UpdateAllocs{}
	r.header(&c.Header)
	n := r.count(minUpdate)
	if r.err != nil {
		return nil, r.err
	}
	if n > 0 {
		c.Updates = make([]AllocUpdate, n)
	}
	var codes []int // exit codes of the whole entry, allocated once
	for i := range c.Updates {
		u := &c.Updates[i]
		u.AllocID = r.uvarint()
		u.State = r.state()
		u.Reason = r.reason()
		flags := r.byte()
		if r.err != nil {
			return nil, r.err
		}
		if flags&^(flagExitCode|flagRun|flagEndTime|flagUsage|flagStart) != 0 {
			r.fail(fmt.Errorf("unknown update flags %#x", flags))
			return nil, r.err
		}
		if flags&flagExitCode != 0 {
			v := r.varint()
			if r.err != nil {
				return nil, r.err
			}
			if v < math.MinInt || v > math.MaxInt {
				r.fail(fmt.Errorf("exit code %d out of range", v))
				return nil, r.err
			}
			if codes == nil {
				codes = make([]int, 0, n-i)
			}
			codes = append(codes, int(v))
			u.ExitCode = &codes[len(codes)-1]
		}
		if flags&flagRun != 0 {
			run := r.uvarint()
			if r.err != nil {
				return nil, r.err
			}
			if run == 0 || run > math.MaxInt32 {
				r.fail(fmt.Errorf("run %d out of range", run))
				return nil, r.err
			}
			u.Run = int(run)
		}
		if flags&flagEndTime != 0 {
			ms := r.varint()
			if r.err != nil {
				return nil, r.err
			}
			u.EndTime = time.UnixMilli(ms).UTC()
		}
		if flags&flagUsage != 0 {
			u.Usage = r.usage()
			if r.err != nil {
				return nil, r.err
			}
		}
		if flags&flagStart != 0 {
			ms := r.varint()
			if r.err != nil {
				return nil, r.err
			}
			u.StartTime = time.UnixMilli(ms).UTC()
		}
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return c, nil
}
