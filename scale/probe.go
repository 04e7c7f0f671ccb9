package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// sample is one scrape of a member's /metrics: value by series
// ("name{labels}" as printed).
type sample map[string]float64

var httpClient = &http.Client{Timeout: 10 * time.Second}

func scrape(ctx context.Context, addr string) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format, enough for the harness:
// one sample per line, "name{labels} value".
func parseMetrics(r io.Reader) (sample, error) {
	out := sample{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sum adds every series of name whose labels contain all of want ("k=\"v\"").
func (s sample) sum(name string, want ...string) float64 {
	t := 0.0
	for k, v := range s {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(labels, w) {
				ok = false
				break
			}
		}
		if ok {
			t += v
		}
	}
	return t
}

// labelValues lists the values label takes in series of name.
func (s sample) labelValues(name, label string) []string {
	seen := map[string]bool{}
	for k := range s {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		for _, part := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if lk, lv, ok := strings.Cut(part, "="); ok && lk == label {
				seen[strings.Trim(lv, `"`)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// histogram is the change of one histogram between two scrapes.
type histogram struct {
	Count float64
	Sum   float64
	// buckets: upper bound → cumulative count
	buckets map[float64]float64
}

func histDelta(before, after sample, name string, labels ...string) histogram {
	h := histogram{buckets: map[float64]float64{}}
	h.Count = after.sum(name+"_count", labels...) - before.sum(name+"_count", labels...)
	h.Sum = after.sum(name+"_sum", labels...) - before.sum(name+"_sum", labels...)
	for k := range after {
		n, l, _ := strings.Cut(k, "{")
		if n != name+"_bucket" {
			continue
		}
		i := strings.Index(l, `le="`)
		if i < 0 {
			continue
		}
		le := l[i+4:]
		le = le[:strings.IndexByte(le, '"')]
		ub, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		if _, done := h.buckets[ub]; done {
			continue
		}
		lab := append([]string{`le="` + le + `"`}, labels...)
		h.buckets[ub] = after.sum(name+"_bucket", lab...) - before.sum(name+"_bucket", lab...)
	}
	return h
}

func (h histogram) mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / h.Count
}

// quantile is the upper bound of the bucket holding quantile q.
func (h histogram) quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	bounds := make([]float64, 0, len(h.buckets))
	for b := range h.buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	for _, b := range bounds {
		if h.buckets[b] >= q*h.Count {
			return b
		}
	}
	return math.Inf(1)
}

// procStat is a process's CPU time and memory, from /proc.
type procStat struct {
	CPU time.Duration // user + system
	// ChildCPU is the user + system time of its children that ended and
	// were waited for (an agent's: its jobs' supervisors and the jobs).
	ChildCPU time.Duration
	RSS      int64 // bytes
	PeakRSS  int64
}

var clockTick = 100.0 // USER_HZ on Linux

// machineBusy is the CPU time every CPU of the machine spent busy since
// boot (/proc/stat: all but idle and iowait).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 && i < 8 { // idle, iowait; guest time is in user already
			busy += n
		}
	}
	return time.Duration(busy / clockTick * float64(time.Second)), nil
}

func readProc(pid int) (procStat, error) {
	var ps procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, err
	}
	// Fields after the command (which may hold spaces) start after ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) > 13 {
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		ps.CPU = time.Duration((ut + st) / clockTick * float64(time.Second))
		cut, _ := strconv.ParseFloat(f[13], 64)
		cst, _ := strconv.ParseFloat(f[14], 64)
		ps.ChildCPU = time.Duration((cut + cst) / clockTick * float64(time.Second))
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			ps.RSS = kb << 10
		case "VmHWM":
			ps.PeakRSS = kb << 10
		}
	}
	return ps, nil
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// latestSnapshot is the size of the newest Raft snapshot of a member.
func latestSnapshot(memberDir string) int64 {
	dirs, _ := filepath.Glob(filepath.Join(memberDir, "snapshots", "*", "state.bin"))
	sort.Strings(dirs) // names start with term-index-time: the last is the newest
	if len(dirs) == 0 {
		return 0
	}
	info, err := os.Stat(dirs[len(dirs)-1])
	if err != nil {
		return 0
	}
	return info.Size()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
