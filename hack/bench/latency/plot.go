/*
Copyright 2026 The nettune Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var armColors = map[string]color.RGBA{
	"defaults": {R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	"v2":       {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	"v1":       {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
}

// ccdf returns the points (x in ms, fraction of samples >= x) of d: every
// sample of the tail (the last 5000) and about 400 log-spaced points below.
func ccdf(d dist) plotter.XYs {
	n := len(d)
	if n == 0 {
		return nil
	}
	ms := func(t time.Duration) float64 { return math.Max(float64(t)/1e6, 1e-3) }
	var pts plotter.XYs
	tail := max(0, n-5000)
	lo, hi := math.Log10(ms(d[0])), math.Log10(ms(d[max(tail, 0)]))
	if tail > 0 && hi > lo {
		const steps = 400
		for k := 0; k <= steps; k++ {
			x := math.Pow(10, lo+(hi-lo)*float64(k)/steps)
			i := d.atLeast(time.Duration(x * 1e6))
			if i == 0 {
				break
			}
			pts = append(pts, plotter.XY{X: x, Y: float64(i) / float64(n)})
		}
	}
	for i := tail; i < n; i++ {
		if i+1 < n && d[i+1] == d[i] {
			continue
		}
		// Fraction >= d[i]: the first index holding d[i].
		j := i
		for j > 0 && d[j-1] == d[i] {
			j--
		}
		pts = append(pts, plotter.XY{X: ms(d[i]), Y: float64(n-j) / float64(n)})
	}
	return pts
}

// writePlot draws the CCDF of every arm on one chart.
func writePlot(path string, arms []*armResult, title string) error {
	p := plot.New()
	p.Title.Text = title
	// Short axis labels: gonum pads the top of the data area by the length
	// of the (rotated) y label; the long form is in the title.
	p.X.Label.Text = "latency x (ms)"
	p.Y.Label.Text = "P(latency >= x)"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = decadeTicks{}
	p.Y.Tick.Marker = decadeTicks{}
	p.Add(plotter.NewGrid())
	// Bottom left of the data area: the curves fall towards the bottom right.
	p.Legend.Top = false
	p.Legend.Left = true

	minY, maxX, minX := 1.0, 1.0, math.Inf(1)
	for _, a := range arms {
		pts := ccdf(a.D)
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = armColors[a.Arm.Name]
		l.Width = vg.Points(1.6)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s: %d msgs, p99.99 %s, max %s", a.Arm.Name, len(a.D), fmtMs(a.D.q(0.9999)), fmtMs(a.D.max())), l)
		minY = math.Min(minY, pts[len(pts)-1].Y)
		maxX = math.Max(maxX, pts[len(pts)-1].X)
		minX = math.Min(minX, pts[0].X)
	}
	yLo := math.Pow(10, math.Floor(math.Log10(minY)))
	xHi := math.Pow(10, math.Ceil(math.Log10(math.Max(maxX*1.05, 300))))
	xLo := math.Pow(10, math.Floor(math.Log10(minX)))
	p.X.Min, p.X.Max = xLo, xHi
	p.Y.Min, p.Y.Max = yLo, 1

	ref := func(pts plotter.XYs, c color.Color, label string) error {
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(0.8)
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(label, l)
		return nil
	}
	gray := color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	if err := ref(plotter.XYs{{X: xLo, Y: 1e-4}, {X: xHi, Y: 1e-4}}, gray, "1e-4: where a curve crosses it is its p99.99"); err != nil {
		return err
	}
	orange := color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	if err := ref(plotter.XYs{{X: 200, Y: yLo}, {X: 200, Y: 1}}, orange, "200 ms: the default RTO floor (rto_min)"); err != nil {
		return err
	}
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.Padding = vg.Points(2)
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = vg.Points(8)
	return p.Save(10*vg.Inch, 6*vg.Inch, path)
}

// decadeTicks labels every power of ten ("0.001", "1", "1000", "1e-05")
// with unlabelled minor ticks at 2..9 times each.
type decadeTicks struct{}

func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		for i := 1; i < 10; i++ {
			x := v * float64(i)
			if x < lo*0.999 || x > hi*1.001 {
				continue
			}
			t := plot.Tick{Value: x}
			if i == 1 {
				if e >= -3 && e <= 3 {
					t.Label = strconv.FormatFloat(v, 'f', -1, 64)
				} else {
					t.Label = fmt.Sprintf("1e%d", int(e))
				}
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
