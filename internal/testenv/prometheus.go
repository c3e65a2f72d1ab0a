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

package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// prometheusBin is Debian's package `prometheus` (2.42 on bookworm).
	prometheusBin          = "/usr/bin/prometheus"
	prometheusReadyTimeout = 60 * time.Second
)

// PrometheusJob is the job label of every target StartPrometheus scrapes.
const PrometheusJob = "nettune-test"

// Prometheus is /usr/bin/prometheus (Debian) with a temp TSDB, on a free port,
// scraping the given targets every 1s as job "nettune-test".
type Prometheus struct {
	// URL is the HTTP base address, e.g. http://127.0.0.1:34567.
	URL string

	dir  string
	proc *process
}

// StartPrometheus starts Prometheus scraping targets (host:port, plain HTTP,
// path /metrics) every second and waits until /-/ready answers 200. It fails
// the test if Prometheus is not installed (Debian package `prometheus`). The
// process is killed and its TSDB removed when the test ends.
func StartPrometheus(t testing.TB, targets ...string) *Prometheus {
	t.Helper()
	bin := prometheusBin
	if _, err := os.Stat(bin); err != nil {
		found, lookErr := exec.LookPath("prometheus")
		if lookErr != nil {
			t.Fatalf("testenv: %s is missing (%v): install the Debian package: apt-get install --no-install-recommends prometheus (.ci/run does)", prometheusBin, err)
		}
		bin = found
	}
	for attempt := 1; ; attempt++ {
		p, err := startPrometheus(t, bin, targets)
		if err == nil {
			return p
		}
		if errors.Is(err, errRetry) && attempt < startAttempts {
			t.Logf("testenv: %v; retrying on another port", err)
			continue
		}
		t.Fatalf("testenv: starting Prometheus: %v", err)
	}
}

func startPrometheus(t testing.TB, bin string, targets []string) (*Prometheus, error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "nettune-prometheus-")
	if err != nil {
		return nil, err
	}
	began := time.Now()
	p, err := launchPrometheus(bin, dir, targets)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	registerCleanup(t, p.proc, dir)
	t.Logf("testenv: Prometheus ready at %s in %v (dir %s)", p.URL, time.Since(began).Round(time.Millisecond), dir)
	return p, nil
}

// RunPrometheus starts Prometheus outside a test (the demo), with its TSDB in
// dir (emptied first), scraping targets every second. Close stops it.
func RunPrometheus(dir string, targets []string) (*Prometheus, error) {
	bin := prometheusBin
	if _, err := os.Stat(bin); err != nil {
		found, lookErr := exec.LookPath("prometheus")
		if lookErr != nil {
			return nil, fmt.Errorf("%s is missing: install the Debian package prometheus (make deps)", prometheusBin)
		}
		bin = found
	}
	return runInDir("Prometheus", dir, func() (*Prometheus, error) { return launchPrometheus(bin, dir, targets) })
}

// Close stops a Prometheus started by RunPrometheus.
func (p *Prometheus) Close() error {
	p.proc.stop()
	return nil
}

func launchPrometheus(bin, dir string, targets []string) (*Prometheus, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(prometheusConfig(targets)), 0o644); err != nil {
		return nil, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	args := []string{
		"--config.file=" + configPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + listen,
		"--log.level=info",
	}
	proc, err := startProcess("prometheus", bin, args, dir, filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	p := &Prometheus{URL: "http://" + listen, dir: dir, proc: proc}
	if err := waitReady(proc, p.URL+"/-/ready", prometheusReadyTimeout); err != nil {
		proc.stop()
		if errors.Is(err, errExited) && addrInUse(proc) {
			return nil, fmt.Errorf("%w (%v)", errRetry, err)
		}
		return nil, fmt.Errorf("%v\nlast %d lines of its log:\n%s", err, logTailLines, proc.logTail(logTailLines))
	}
	return p, nil
}

// prometheusConfig scrapes targets every second.
func prometheusConfig(targets []string) string {
	var b strings.Builder
	b.WriteString("# Written by internal/testenv for one test.\n")
	b.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n")
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: %s\n    scrape_interval: 1s\n    scrape_timeout: 1s\n", PrometheusJob)
	b.WriteString("    static_configs:\n      - targets: [")
	for i, target := range targets {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(target))
	}
	b.WriteString("]\n")
	return b.String()
}

// WaitForQuery polls /api/v1/query (at the current time) until promql has at
// least one sample and returns the first one's value. It fails the test on a
// query Prometheus rejects (HTTP 400) and after timeout.
func (p *Prometheus) WaitForQuery(t testing.TB, promql string, timeout time.Duration) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		values, err := p.instantQuery(promql)
		switch {
		case errors.Is(err, errBadQuery):
			t.Fatalf("testenv: Prometheus query %s: %v", promql, err)
		case err != nil:
			last = err.Error()
		case len(values) > 0:
			return values[0]
		default:
			last = "empty result"
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: Prometheus query %s returned no sample within %v; last: %s", promql, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (p *Prometheus) instantQuery(promql string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, body, err := httpGet(ctx, p.URL+"/api/v1/query?"+url.Values{"query": {promql}}.Encode())
	if err != nil {
		return nil, err
	}
	if code == http.StatusBadRequest {
		return nil, fmt.Errorf("%w: HTTP 400: %s", errBadQuery, strings.TrimSpace(truncate(body)))
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(truncate(body)))
	}
	return sampleValues(body)
}
