package replay

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotBins is how many time buckets a chart over time has.
const plotBins = 200

// Named is one replay's result under a name (a policy or a sweep setting).
type Named struct {
	Name   string
	Result *Result
}

// WritePlots writes PNG charts of the replays into dir: queue length,
// utilization and mean wait over (virtual) time, and the distribution of
// waits, one line per replay. Each Result needs its Series (Config.Series).
// It returns the files written.
func WritePlots(dir string, runs []Named) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		s := r.Result.Series
		if s == nil || len(s.T) == 0 {
			return nil, fmt.Errorf("plot: replay %s recorded no time series", r.Name)
		}
		lo, hi = min(lo, s.T[0]), max(hi, s.T[len(s.T)-1])
	}
	if !(hi > lo) {
		hi = lo + 1
	}
	const day = 86400.0
	charts := []struct {
		file, title, y string
		line           func(s *Series) plotter.XYs
	}{
		{"queue.png", "Queue length over time", "queued jobs (time-weighted mean)", func(s *Series) plotter.XYs {
			return stepMeans(s.T, s.Queue, lo, hi, 1, day)
		}},
		{"utilization.png", "Utilization over time", "busy nodes / capacity", func(s *Series) plotter.XYs {
			return stepMeans(s.T, s.Busy, lo, hi, 1/float64(max(s.Capacity, 1)), day)
		}},
		{"wait.png", "Mean wait by eligible time", "mean wait (hours)", func(s *Series) plotter.XYs {
			return binMeans(s.JobSubmit, s.JobWait, lo, hi, 1/3600.0, day)
		}},
		{"wait_cdf.png", "Distribution of waits", "share of jobs waiting at most x", func(s *Series) plotter.XYs {
			return waitCDF(s.JobWait)
		}},
	}
	var files []string
	for _, ch := range charts {
		p := plot.New()
		p.Title.Text = ch.title
		p.X.Label.Text = "days since the first submit"
		if ch.file == "wait_cdf.png" {
			p.X.Label.Text = "wait (hours, log scale; 0 shown at 1 s)"
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		}
		p.Y.Label.Text = ch.y
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		for i, r := range runs {
			xys := ch.line(r.Result.Series)
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return files, fmt.Errorf("plot %s: %w", ch.file, err)
			}
			l.Color = plotutil.Color(i)
			l.Dashes = plotutil.Dashes(i)
			l.Width = vg.Points(1.2)
			p.Add(l)
			p.Legend.Add(r.Name, l)
		}
		if ch.file == "wait_cdf.png" {
			p.Legend.Left = true
		} else {
			// Head room above the lines for the legend.
			p.Y.Max = p.Y.Min + (p.Y.Max-p.Y.Min)*1.2
		}
		path := filepath.Join(dir, ch.file)
		if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
			return files, fmt.Errorf("plot: %w", err)
		}
		files = append(files, path)
	}
	return files, nil
}

// stepMeans averages a step function (v[i] holds from t[i] to t[i+1]) over
// plotBins buckets of [lo, hi], scaled by k; x in units of xunit seconds
// from lo.
func stepMeans(t []float64, v []int32, lo, hi, k, xunit float64) plotter.XYs {
	w := (hi - lo) / plotBins
	sum := make([]float64, plotBins)
	for i := range t {
		a := t[i]
		b := hi
		if i+1 < len(t) {
			b = t[i+1]
		}
		for a < b {
			bin := min(int((a-lo)/w), plotBins-1)
			end := min(b, lo+float64(bin+1)*w)
			if end <= a { // float edge: move on
				end = b
			}
			sum[bin] += float64(v[i]) * (end - a)
			a = end
		}
	}
	xys := make(plotter.XYs, plotBins)
	for i := range xys {
		xys[i].X = (float64(i) + 0.5) * w / xunit
		xys[i].Y = sum[i] / w * k
	}
	return xys
}

// binMeans averages y by x over plotBins buckets of [lo, hi], skipping
// empty buckets.
func binMeans(x, y []float64, lo, hi, k, xunit float64) plotter.XYs {
	w := (hi - lo) / plotBins
	sum := make([]float64, plotBins)
	n := make([]int, plotBins)
	for i := range x {
		bin := min(max(int((x[i]-lo)/w), 0), plotBins-1)
		sum[bin] += y[i]
		n[bin]++
	}
	var xys plotter.XYs
	for i := range sum {
		if n[i] > 0 {
			xys = append(xys, plotter.XY{X: (float64(i) + 0.5) * w / xunit, Y: sum[i] / float64(n[i]) * k})
		}
	}
	return xys
}

// waitCDF is the empirical distribution of waits in hours, at most 400
// points; waits under one second are shown at one second (log axis).
func waitCDF(waits []float64) plotter.XYs {
	if len(waits) == 0 {
		return nil
	}
	s := slices.Clone(waits)
	slices.Sort(s)
	const points = 400
	step := max(1, len(s)/points)
	var xys plotter.XYs
	for i := 0; i < len(s); i += step {
		xys = append(xys, plotter.XY{X: max(s[i], 1) / 3600, Y: float64(i+1) / float64(len(s))})
	}
	xys = append(xys, plotter.XY{X: max(s[len(s)-1], 1) / 3600, Y: 1})
	return xys
}
