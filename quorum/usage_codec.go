package quorum

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/latticehpc/lattice/model"
)

// A run's usage in a binary UpdateAllocs body: user, system and energy as
// float64 bits (fixed 8 bytes each), max RSS and OOM kills as varints, a
// flags byte (bit 0: max RSS sampled) and the energy source.
func appendUsage(b []byte, u *model.Usage) []byte {
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(u.UserCPUSeconds))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(u.SystemCPUSeconds))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(u.EnergyJoules))
	b = binary.AppendVarint(b, u.MaxRSSBytes)
	b = binary.AppendVarint(b, u.OOMKills)
	var f byte
	if u.MaxRSSSampled {
		f |= 1
	}
	b = append(b, f)
	return appendStr(b, u.EnergySource)
}

func (r *reader) float64() float64 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 8 {
		r.fail(errTruncated)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return v
}

func (r *reader) usage() *model.Usage {
	u := &model.Usage{UserCPUSeconds: r.float64(), SystemCPUSeconds: r.float64(), EnergyJoules: r.float64()}
	u.MaxRSSBytes, u.OOMKills = r.varint(), r.varint()
	f := r.byte()
	u.EnergySource = r.str()
	if r.err != nil {
		return nil
	}
	if f&^1 != 0 {
		r.fail(fmt.Errorf("unknown usage flags %#x", f))
		return nil
	}
	u.MaxRSSSampled = f&1 != 0
	for _, v := range []float64{u.UserCPUSeconds, u.SystemCPUSeconds, u.EnergyJoules} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			r.fail(fmt.Errorf("usage figure %v is not finite", v))
			return nil
		}
	}
	return u
}
