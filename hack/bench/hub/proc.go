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
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
const clockTicks = 100

// procUsage is a process's CPU time and memory from /proc.
type procUsage struct {
	ticks int64 // utime + stime, in clock ticks
	hwm   int64 // peak RSS (VmHWM), bytes
	rss   int64 // current RSS (VmRSS), bytes
}

// readProc reads pid's CPU time and memory.
func readProc(pid int) (procUsage, error) {
	var u procUsage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// utime and stime are fields 14 and 15; the command name may hold spaces.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return u, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[end+1:]))
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, err
	}
	u.ticks = ut + st
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(l, ":")
		fs := strings.Fields(v)
		if !ok || len(fs) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			u.hwm = kb << 10
		case "VmRSS":
			u.rss = kb << 10
		}
	}
	return u, nil
}

// ticksDuration converts clock ticks to time.
func ticksDuration(t int64) time.Duration { return time.Duration(t) * time.Second / clockTicks }

// findProcs returns the processes whose command line holds every one of
// words (the control plane's binaries by their data directories).
func findProcs(words ...string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		all := true
		for _, w := range words {
			all = all && strings.Contains(string(cmd), w)
		}
		if all {
			out = append(out, pid)
		}
	}
	return out
}

// ticksOf sums the CPU ticks of pids.
func ticksOf(pids []int) int64 {
	var t int64
	for _, pid := range pids {
		if u, err := readProc(pid); err == nil {
			t += u.ticks
		}
	}
	return t
}

// loadavg is the 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// busiest names the processes using the most CPU right now (ps, over
// their lifetime), as "command (pcpu %)": what else the machine runs.
func busiest(n int) string {
	out, err := exec.Command("ps", "-eo", "pcpu=,comm=", "--sort=-pcpu").Output()
	if err != nil {
		return ""
	}
	var parts []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() && len(parts) < n {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (%s %%)", strings.Join(f[1:], " "), f[0]))
	}
	return strings.Join(parts, ", ")
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fetch GETs url with hc and returns the body.
func fetch(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// sample is one series of a scraped metric.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseSamples parses the Prometheus text format, keeping the metrics keep
// accepts. Malformed lines are skipped.
func parseSamples(body []byte, keep func(name string) bool) []sample {
	var out []sample
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end <= 0 || !keep(line[:end]) {
			continue
		}
		s := sample{name: line[:end], labels: map[string]string{}}
		rest := line[end:]
		if rest[0] == '{' {
			brace := strings.LastIndexByte(rest, '}')
			if brace < 0 {
				continue
			}
			for _, kv := range splitLabels(rest[1:brace]) {
				k, v, ok := strings.Cut(kv, "=")
				if ok {
					s.labels[strings.TrimSpace(k)] = strings.Trim(v, `"`)
				}
			}
			rest = rest[brace+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// reqKey is one kind of API request: verb, resource (with its subresource)
// and response code.
type reqKey struct {
	verb, resource, code string
}

// requestCounts are apiserver_request_total by reqKey.
type requestCounts map[reqKey]float64

// apiserverRequests scrapes apiserver_request_total from the kube-apiserver.
func apiserverRequests(ctx context.Context, hc *http.Client, host string) (requestCounts, error) {
	body, err := fetch(ctx, hc, strings.TrimSuffix(host, "/")+"/metrics")
	if err != nil {
		return nil, err
	}
	out := requestCounts{}
	for _, s := range parseSamples(body, func(n string) bool { return n == "apiserver_request_total" }) {
		res := s.labels["resource"]
		if res == "" {
			res = "(non-resource)"
		}
		if sub := s.labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[reqKey{verb: s.labels["verb"], resource: res, code: s.labels["code"]}] += s.value
	}
	return out, nil
}

// minus is c - before, per key.
func (c requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// writes sums the write requests (POST, PUT, PATCH, DELETE) answered with
// success of the resource ("" = every resource).
func (c requestCounts) writes(resource string) float64 {
	t := 0.0
	for k, v := range c {
		if isWrite(k) && ok(k) && (resource == "" || k.resource == resource) {
			t += v
		}
	}
	return t
}

// isWrite says whether a request's verb changes state.
func isWrite(k reqKey) bool {
	switch k.verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// ok says whether a request succeeded (2xx).
func ok(k reqKey) bool { return strings.HasPrefix(k.code, "2") }

// kindCount is the requests of one kind.
type kindCount struct {
	kind  string
	count float64
}

// writesByKind sums the writes by verb, resource and code class
// ("409" apart), largest first.
func (c requestCounts) writesByKind() []kindCount {
	sums := map[string]float64{}
	for k, v := range c {
		if !isWrite(k) {
			continue
		}
		name := k.verb + " " + k.resource
		if !ok(k) {
			name += " (" + k.code + ")"
		}
		sums[name] += v
	}
	out := make([]kindCount, 0, len(sums))
	for k, v := range sums {
		out = append(out, kindCount{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].count != out[j].count {
			return out[i].count > out[j].count
		}
		return out[i].kind < out[j].kind
	})
	return out
}

// ctrlMetrics is what the hub controller's metrics say.
type ctrlMetrics struct {
	workWrites map[string]float64 // nettune_hub_work_writes_total by verb
	reconciles float64            // controller_runtime_reconcile_total{controller="hubprofile"}
	reconcileS float64            // controller_runtime_reconcile_time_seconds_sum of it
	errors     float64            // reconciles that ended in an error
}

// hubController is the hub reconciler's controller name.
const hubController = "hubprofile"

// controllerMetrics scrapes the hub controller's metrics endpoint.
func controllerMetrics(ctx context.Context, url string) (ctrlMetrics, error) {
	m := ctrlMetrics{workWrites: map[string]float64{}}
	body, err := fetch(ctx, http.DefaultClient, url)
	if err != nil {
		return m, err
	}
	keep := func(n string) bool {
		return n == "nettune_hub_work_writes_total" || n == "controller_runtime_reconcile_total" || n == "controller_runtime_reconcile_time_seconds_sum"
	}
	for _, s := range parseSamples(body, keep) {
		switch {
		case s.name == "nettune_hub_work_writes_total":
			m.workWrites[s.labels["verb"]] += s.value
		case s.labels["controller"] != hubController:
		case s.name == "controller_runtime_reconcile_total":
			m.reconciles += s.value
			if s.labels["result"] == "error" {
				m.errors += s.value
			}
		default:
			m.reconcileS += s.value
		}
	}
	return m, nil
}
