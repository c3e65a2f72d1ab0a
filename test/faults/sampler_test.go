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

package faults

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ssthresh40 is the metric the test's profile gives every route ("ssthresh
// 40", or "ssthresh lock 40"), the lock kept as $1.
var ssthresh40 = regexp.MustCompile(`ssthresh( lock)? 40\b`)

// TestSamplerCatchesHalfApplied is the matrix's check of its own check: a
// host whose routes are made half-applied by hand (one route's ssthresh
// changed outside any agent transaction) is reported by the sampler every
// fault test runs, both as two metric sets and as a kernel that differs
// from the committed last-known-good; the untouched hosts are not.
func TestSamplerCatchesHalfApplied(t *testing.T) {
	const name = "fault-sampler"
	start(t, name, 40)
	v, h := "av-003", "xavier-a"
	rs, err := kernelRoutes(v, h)
	if err != nil {
		t.Fatal(err)
	}
	var dst string
	for d := range rs {
		if dst == "" || d < dst {
			dst = d
		}
	}
	ns := f.Vehicles[v].Host(h).Netns
	out, err := exec.Command("ip", "-n", ns, "route", "show", "exact", dst, "proto", "static").CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) == 0 {
		t.Fatalf("ip route show %s: %v: %s", dst, err, out)
	}
	// `ip route show ... proto static` leaves out the proto it filters on.
	line := strings.TrimSpace(string(out)) + " proto static"
	original := strings.Fields(line)
	route := strings.Fields(ssthresh40.ReplaceAllString(line, "ssthresh${1} 41"))
	if out, err := exec.Command("ip", append([]string{"-n", ns, "route", "replace"}, route...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip route replace %v: %v: %s", route, err, out)
	}
	// The agent repairs drift; sample at once, a few times.
	s := &sampler{}
	for range 5 {
		s.sample(v, h)
		if len(s.violations) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(s.violations) == 0 {
		t.Fatalf("the sampler took %d sample(s) of %s/%s with %s changed by hand (%v) and reported nothing", s.samples, v, h, dst, route)
	}
	msg := s.violations[0]
	if !strings.Contains(msg, "routes on 2 revisions") {
		t.Errorf("violation %q does not say the routes carry two revisions", msg)
	}
	t.Logf("reported: %s", msg)
	clean := &sampler{}
	for _, host := range hosts {
		clean.sample("av-001", host)
	}
	if len(clean.violations) != 0 || clean.samples == 0 {
		t.Errorf("untouched vehicle: %d samples, violations %v", clean.samples, clean.violations)
	}
	// Put it back for the tests after this one.
	waitFor(t, time.Minute, "the host repaired or put back", func() bool {
		if hostsOn(t, v, 40) == len(hosts) {
			return true
		}
		_ = exec.Command("ip", append([]string{"-n", ns, "route", "replace"}, original...)...).Run()
		return false
	})
}
