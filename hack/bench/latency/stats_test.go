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
	"path/filepath"
	"testing"
	"time"
)

func TestDistQuantiles(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 10000; i++ {
		lat = append(lat, time.Duration(i)*time.Microsecond)
	}
	d := newDist(lat)
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {0.9999, 9999 * time.Microsecond}, {1, 10000 * time.Microsecond}} {
		if got := d.q(c.q); got != c.want {
			t.Errorf("q(%g) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := d.atLeast(9990 * time.Microsecond); got != 11 {
		t.Errorf("atLeast = %d, want 11", got)
	}
	pts := ccdf(d)
	if first, last := pts[0], pts[len(pts)-1]; first.Y != 1 || last.Y != 1.0/10000 || last.X != 10 {
		t.Errorf("ccdf from %v to %v, want from y=1 to (10 ms, 1e-4)", first, last)
	}
}

func TestPlot(t *testing.T) {
	mk := func(name string, scale time.Duration) *armResult {
		var lat []time.Duration
		for i := range 20000 {
			lat = append(lat, scale*time.Duration(1+i%1000)/100)
		}
		return &armResult{Arm: &arm{Name: name}, D: newDist(lat)}
	}
	path := filepath.Join(t.TempDir(), "ccdf.png")
	if err := writePlot(path, []*armResult{mk("defaults", 3*time.Millisecond), mk("v2", time.Millisecond), mk("v1", time.Millisecond)}, "test"); err != nil {
		t.Fatal(err)
	}
}
