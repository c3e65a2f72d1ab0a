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

package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nettune/nettune/internal/localcp"
)

const (
	lokiReadyTimeout = 90 * time.Second
	// lokiCountRange is the range WaitForCount counts over when given a log
	// selector: wide enough for samples pushed hours in the past.
	lokiCountRange = "24h"
	// startAttempts is how often a start is tried on new free ports.
	startAttempts = 3
)

// Loki is a real single-binary Loki (bin/loki, `-target=all`) with filesystem
// storage in a temp dir and an in-memory ring on 127.0.0.1, on free ports.
//
// It accepts entries of any age (reject_old_samples false) and out of order
// within 12h of a stream's newest entry, and its queriers always ask the
// ingester, so what was pushed is queryable at once, whatever its timestamps.
// Streams are stored with exactly the labels pushed (no service_name or
// detected_level is added).
//
// RunLoki runs it with auth_enabled: false (one tenant, "fake", no
// X-Scope-OrgID needed); RunLokiOpts with LokiOptions{Auth: true} runs it
// multi-tenant, as Loki runs by default.
type Loki struct {
	// URL is the HTTP base address, e.g. http://127.0.0.1:34567.
	URL string
	// Tenant is the X-Scope-OrgID the helpers (Push, WaitForCount, queries)
	// send; "" sends none. RunLokiOpts with Auth sets it to
	// LokiOptions.Tenant (default DefaultLokiTenant). A query may name
	// several tenants joined by "|" (multi-tenant queries are enabled).
	Tenant string
	// Logf, if set, is told what Stop and Restart do; nil says nothing.
	Logf func(format string, args ...any)

	server
}

// DefaultLokiTenant is the Tenant of a Loki started with Auth and no Tenant.
const DefaultLokiTenant = "nettune-test"

// LokiOptions configures RunLokiOpts.
type LokiOptions struct {
	// Auth runs Loki multi-tenant (auth_enabled: true, Loki's default, and
	// querier.multi_tenant_queries_enabled: true): a push or query without
	// X-Scope-OrgID gets 401 "no org id".
	Auth bool
	// Tenant is the Loki's Tenant when Auth is set ("" = DefaultLokiTenant).
	Tenant string
}

// WithTenant returns a copy of l whose helpers send X-Scope-OrgID tenant
// (several joined by "|" for queries). Use it for helper calls only: Close,
// Stop and Restart belong to the Loki RunLoki returned.
func (l *Loki) WithTenant(tenant string) *Loki {
	c := *l
	c.Tenant = tenant
	return &c
}

// header is the X-Scope-OrgID of l's Tenant, if any.
func (l *Loki) header() http.Header {
	if l.Tenant == "" {
		return nil
	}
	return http.Header{"X-Scope-Orgid": {l.Tenant}}
}

// LokiEntry is one log line and its timestamp.
type LokiEntry struct {
	Time time.Time
	Line string
}

// errRetry marks a start that failed because a port was taken meanwhile.
var errRetry = errors.New("a listen port was taken before Loki bound it")

// RunLoki starts Loki with its data in dir (emptied first), on free ports,
// and waits until /ready answers 200. Close stops it.
func RunLoki(dir string) (*Loki, error) {
	return RunLokiOpts(dir, LokiOptions{})
}

// RunLokiOpts is RunLoki with options (see LokiOptions).
func RunLokiOpts(dir string, opts LokiOptions) (*Loki, error) {
	root, err := localcp.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(root, "bin", "loki")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s is missing (%v): run `make tools` to build Loki from the Go module proxy", bin, err)
	}
	return runInDir("Loki", dir, func() (*Loki, error) { return launchLoki(bin, dir, opts) })
}

// logf passes a note to l.Logf, if set.
func (l *Loki) logf(format string, args ...any) {
	if l.Logf != nil {
		l.Logf(format, args...)
	}
}

// launchLoki writes the configuration into dir and starts Loki there.
func launchLoki(bin, dir string, opts LokiOptions) (*Loki, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	httpPort, grpcPort := ports[0], ports[1]
	configPath := filepath.Join(dir, "loki.yaml")
	if err := os.WriteFile(configPath, []byte(lokiConfig(dir, httpPort, grpcPort, opts.Auth)), 0o644); err != nil {
		return nil, err
	}
	p, err := startProcess("loki", bin, []string{"-config.file=" + configPath, "-target=all"}, dir, filepath.Join(dir, "loki.log"))
	if err != nil {
		return nil, err
	}
	l := &Loki{URL: fmt.Sprintf("http://127.0.0.1:%d", httpPort), server: server{dir: dir, proc: p}}
	if opts.Auth {
		l.Tenant = opts.Tenant
		if l.Tenant == "" {
			l.Tenant = DefaultLokiTenant
		}
	}
	if err := waitReady(p, l.URL+"/ready", lokiReadyTimeout); err != nil {
		p.stop()
		if errors.Is(err, errExited) && addrInUse(p) {
			return nil, fmt.Errorf("%w (%v)", errRetry, err)
		}
		return nil, fmt.Errorf("%v\nlast %d lines of its log:\n%s", err, logTailLines, p.logTail(logTailLines))
	}
	return l, nil
}

// lokiConfig is a minimal single-binary configuration; auth makes it
// multi-tenant.
func lokiConfig(dir string, httpPort, grpcPort int, auth bool) string {
	return fmt.Sprintf(`# Written by internal/stack.
auth_enabled: %[4]t

server:
  http_listen_address: 127.0.0.1
  http_listen_port: %[2]d
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: %[3]d
  log_level: info
  grpc_server_max_recv_msg_size: 104857600
  grpc_server_max_send_msg_size: 104857600

common:
  instance_addr: 127.0.0.1
  path_prefix: %[1]s
  storage:
    filesystem:
      chunks_directory: %[1]s/chunks
      rules_directory: %[1]s/rules
  replication_factor: 1
  ring:
    instance_addr: 127.0.0.1
    kvstore:
      store: inmemory

schema_config:
  configs:
    - from: 2020-10-24
      store: tsdb
      object_store: filesystem
      schema: v13
      index:
        prefix: index_
        period: 24h

ingester:
  # Out-of-order entries are accepted within max_chunk_age/2 of a stream's
  # newest entry: 12h, so callers can push history in any order.
  max_chunk_age: 24h
  chunk_idle_period: 1h
  wal:
    enabled: false
  lifecycler:
    join_after: 0s
    observe_period: 0s
    min_ready_duration: 0s
    final_sleep: 0s

querier:
  # Always ask the ingester: nothing is flushed during a run, and entries
  # pushed with old timestamps would otherwise be invisible.
  query_ingesters_within: 0
  max_concurrent: 8
  # Queries may name several tenants (X-Scope-OrgID: a|b) when auth is on.
  multi_tenant_queries_enabled: %[4]t

# Single binary: the query-frontend and the queriers find the in-process
# query-scheduler through its ring; poll it every second instead of every
# 10s/3s, or /ready takes about 10s.
frontend:
  scheduler_dns_lookup_period: 1s
frontend_worker:
  dns_lookup_duration: 1s

query_range:
  cache_results: false
  cache_index_stats_results: false
  cache_volume_results: false
  cache_series_results: false
  cache_label_results: false
  cache_instant_metric_results: false

limits_config:
  reject_old_samples: false
  unordered_writes: true
  max_query_lookback: 0
  ingestion_rate_mb: 64
  ingestion_burst_size_mb: 128
  per_stream_rate_limit: 64MB
  per_stream_rate_limit_burst: 128MB
  max_entries_limit_per_query: 1000000
  allow_structured_metadata: false
  discover_service_name: []
  discover_log_levels: false

ruler:
  enable_api: false

compactor:
  working_directory: %[1]s/compactor

analytics:
  reporting_enabled: false
`, dir, httpPort, grpcPort, auth)
}

// lokiStream is one stream of a push request.
type lokiStream struct {
	Stream map[string]string `json:"stream"`
	Values [][2]string       `json:"values"`
}

// Push sends entries as one stream with labels to /loki/api/v1/push; an
// answer other than 2xx is an error.
func (l *Loki) Push(labels map[string]string, entries []LokiEntry) error {
	stream := lokiStream{Stream: labels, Values: make([][2]string, 0, len(entries))}
	for _, e := range entries {
		stream.Values = append(stream.Values, [2]string{strconv.FormatInt(e.Time.UnixNano(), 10), e.Line})
	}
	body, err := json.Marshal(struct {
		Streams []lokiStream `json:"streams"`
	}{Streams: []lokiStream{stream}})
	if err != nil {
		return fmt.Errorf("encoding Loki push: %w", err)
	}
	req, err := http.NewRequest(http.MethodPost, l.URL+"/loki/api/v1/push", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("Loki push request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range l.header() {
		req.Header[k] = v
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("pushing %d entries to Loki: %w", len(entries), err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("pushing %d entries %v to Loki (tenant %q): HTTP %d: %s", len(entries), labels, l.Tenant, resp.StatusCode, strings.TrimSpace(string(answer)))
	}
	return nil
}

// WaitForCount polls Loki until the count of logql is at least want; it
// gives up with an error after timeout, or at once on a query Loki rejects
// (HTTP 400). logql is either a log query (a stream selector
// with an optional pipeline, e.g. `{job="x"} | json`), whose lines are counted
// over the last 24h as sum(count_over_time(<logql> [24h])), or an instant
// metric query such as sum(count_over_time({job="x"}[1h])), whose sample
// values are summed. Either way, reaching want means the entries were
// ingested and are queryable.
func (l *Loki) WaitForCount(logql string, want int, timeout time.Duration) error {
	query := logql
	if strings.HasPrefix(strings.TrimSpace(logql), "{") {
		query = fmt.Sprintf("sum(count_over_time(%s [%s]))", logql, lokiCountRange)
	}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		got, err := l.instantQuery(query, time.Now())
		switch {
		case errors.Is(err, errBadQuery):
			return fmt.Errorf("Loki query %s: %w", query, err)
		case err != nil:
			last = err.Error()
		default:
			var sum float64
			for _, v := range got {
				sum += v
			}
			if sum >= float64(want) {
				return nil
			}
			last = fmt.Sprintf("count %v", sum)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Loki query %s (tenant %q) did not reach %d within %v; last: %s", query, l.Tenant, want, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// errBadQuery is an answer that retrying cannot change (HTTP 400).
var errBadQuery = errors.New("bad query")

// instantQuery runs a metric query at ts and returns its sample values.
func (l *Loki) instantQuery(query string, ts time.Time) ([]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := l.URL + "/loki/api/v1/query?" + url.Values{
		"query": {query},
		"time":  {strconv.FormatInt(ts.UnixNano(), 10)},
	}.Encode()
	code, body, err := httpGetWith(ctx, httpClient, u, l.header())
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

// lokiStopTimeout bounds a graceful Stop before Loki is killed.
const lokiStopTimeout = 30 * time.Second

// Stop shuts Loki down gracefully (SIGTERM, then SIGKILL after 30s) and
// waits until it is gone; its ports stop answering at once. The directory
// and the ports are kept for Restart. With the WAL disabled, what the
// ingester held in memory is flushed to the filesystem store on a graceful
// shutdown; callers should not rely on data pushed before a Stop being
// queryable after Restart unless they check it themselves.
func (l *Loki) Stop() {
	p := l.proc
	if !p.running() {
		return
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		l.logf("SIGTERM to Loki: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(lokiStopTimeout):
		l.logf("Loki did not stop within %v of SIGTERM; killing it", lokiStopTimeout)
		p.stop()
	}
	l.logf("Loki at %s stopped", l.URL)
}

// Restart starts Loki again after Stop with the same configuration, ports
// and directory, and waits until /ready answers 200. It fails if Loki is
// still running or does not become ready (e.g. another process took one of
// its ports meanwhile). Close stops the new process.
func (l *Loki) Restart() error {
	if l.proc.running() {
		return fmt.Errorf("Loki.Restart: Loki at %s is still running (call Stop first)", l.URL)
	}
	root, err := localcp.RepoRoot()
	if err != nil {
		return fmt.Errorf("finding bin/loki: %w", err)
	}
	bin := filepath.Join(root, "bin", "loki")
	configPath := filepath.Join(l.dir, "loki.yaml")
	began := time.Now()
	p, err := startProcess("loki", bin, []string{"-config.file=" + configPath, "-target=all"}, l.dir, filepath.Join(l.dir, "loki.log"))
	if err != nil {
		return fmt.Errorf("restarting Loki: %w", err)
	}
	l.proc = p
	if err := waitReady(p, l.URL+"/ready", lokiReadyTimeout); err != nil {
		p.stop()
		return fmt.Errorf("restarting Loki: %v\nlast %d lines of its log:\n%s", err, logTailLines, p.logTail(logTailLines))
	}
	l.logf("Loki restarted at %s in %v", l.URL, time.Since(began).Round(time.Millisecond))
	return nil
}
