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

package lokipush

// These tests push to a real Loki (test/framework/testenv: bin/loki on
// 127.0.0.1) and stop and restart it to cut the vehicle's uplink. Only the
// HTTP status classification test uses a local HTTP server, to answer 500
// and 429 on demand.

import (
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nettune/nettune/test/framework/nettest"
	"github.com/nettune/nettune/test/framework/testenv"
)

// lpLogger logs to t until the test ends.
func lpLogger(t *testing.T) logr.Logger {
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	return funcr.New(func(prefix, args string) {
		if !done.Load() {
			t.Log(prefix, args)
		}
	}, funcr.Options{Verbosity: 1})
}

// lpRunning is a Shipper with its Run loop.
type lpRunning struct {
	*Shipper
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends Run (as an agent shutdown does) and waits for it.
func (r *lpRunning) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context ending")
	}
}

func lpStart(t *testing.T, opts Options) *lpRunning {
	t.Helper()
	if opts.Log.GetSink() == nil {
		opts.Log = lpLogger(t)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &lpRunning{Shipper: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// lpEntry is one line as Loki returns it.
type lpEntry struct {
	labels map[string]string
	ts     int64
	line   string
}

// lpQueryRange runs a log query over [start, end) forward and returns every
// line.
func lpQueryRange(t *testing.T, base, query string, start, end time.Time) []lpEntry {
	t.Helper()
	u := base + "/loki/api/v1/query_range?" + url.Values{
		"query":     {query},
		"start":     {strconv.FormatInt(start.UnixNano(), 10)},
		"end":       {strconv.FormatInt(end.UnixNano(), 10)},
		"limit":     {"100000"},
		"direction": {"forward"},
	}.Encode()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("query_range %s: %v", query, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Stream map[string]string `json:"stream"`
				Values [][2]string       `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query_range %s: HTTP %d", query, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("query_range %s: %v", query, err)
	}
	if r.Data.ResultType != "streams" {
		t.Fatalf("query_range %s: result type %q", query, r.Data.ResultType)
	}
	var out []lpEntry
	for _, s := range r.Data.Result {
		for _, v := range s.Values {
			ts, err := strconv.ParseInt(v[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, lpEntry{labels: s.Stream, ts: ts, line: v[1]})
		}
	}
	slices.SortFunc(out, func(a, b lpEntry) int { return strings.Compare(a.line, b.line) })
	return out
}

// lpSegments lists the segment files in dir and their total size.
func lpSegments(t *testing.T, dir string) (names []string, size int64) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), segmentSuffix) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		names = append(names, de.Name())
		size += info.Size()
	}
	return names, size
}

func lpWait(t *testing.T, what string, timeout time.Duration, f func() error) {
	t.Helper()
	nettest.WaitFor(t, timeout, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		return nil
	})
}

func lpJob(t *testing.T) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "lokipush-" + hex.EncodeToString(b)
}

// TestShipperPushesToLoki: lines of three streams, added out of order and
// with timestamps an hour old, reach Loki grouped by label set, with their
// own timestamps; an empty label is left out.
func TestShipperPushesToLoki(t *testing.T) {
	t.Parallel()
	l := testenv.StartLoki(t)
	dir := t.TempDir()
	s := lpStart(t, Options{URL: l.URL, Dir: dir, BatchWait: 100 * time.Millisecond, BatchEntries: 64})
	job := lpJob(t)

	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	type want struct {
		peer string
		ts   int64
	}
	wants := map[string]want{}
	const n = 300
	for i := range n {
		peer := fmt.Sprintf("xavier-%c", 'a'+i%3)
		// Reverse order within each stream: the shipper sorts.
		ts := base.Add(time.Duration(n-i) * time.Millisecond)
		line := fmt.Sprintf(`{"latency_ms":%d.125,"seq":%d}`, i, i)
		s.Add(map[string]string{"job": job, "peer": peer, "revision": ""}, ts, line)
		wants[line] = want{peer: peer, ts: ts.UnixNano()}
	}
	l.WaitForCount(t, fmt.Sprintf(`{job=%q}`, job), n, time.Minute)

	got := lpQueryRange(t, l.URL, fmt.Sprintf(`{job=%q}`, job), base, base.Add(time.Hour))
	if len(got) != n {
		t.Fatalf("Loki returned %d lines, want %d", len(got), n)
	}
	for _, e := range got {
		w, ok := wants[e.line]
		if !ok {
			t.Fatalf("unexpected line %q", e.line)
		}
		if e.ts != w.ts {
			t.Errorf("line %q: timestamp %d, want %d", e.line, e.ts, w.ts)
		}
		if len(e.labels) != 2 || e.labels["job"] != job || e.labels["peer"] != w.peer {
			t.Errorf("line %q: labels %v, want exactly job=%s peer=%s", e.line, e.labels, job, w.peer)
		}
	}
	if v := metricValue(s.metrics.pushed); v != n {
		t.Errorf("nettune_loki_pushed_entries_total = %v, want %d", v, n)
	}
	if names, _ := lpSegments(t, dir); len(names) != 0 {
		t.Errorf("segments on disk with Loki up: %v", names)
	}
}

// TestShipperBuffersWhileLokiIsDown: Loki goes away; Add keeps accepting
// without blocking, batches go to segment files, the agent restarts while
// Loki is still down (the segments survive), Loki comes back, and every
// line of the downtime arrives with its original timestamp.
func TestShipperBuffersWhileLokiIsDown(t *testing.T) {
	t.Parallel()
	l := testenv.StartLoki(t)
	dir := t.TempDir()
	opts := Options{URL: l.URL, Dir: dir, BatchWait: 100 * time.Millisecond, BatchEntries: 1000,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Client: &http.Client{Timeout: 2 * time.Second}}
	s := lpStart(t, opts)
	job := lpJob(t)
	labels := map[string]string{"job": job, "vehicle": "av-001", "node": "xavier-a"}

	for i := range 20 {
		s.Add(labels, time.Now(), fmt.Sprintf("up %03d", i))
	}
	l.WaitForCount(t, fmt.Sprintf(`{job=%q} |= "up "`, job), 20, time.Minute)

	l.Stop(t)
	downStart := time.Now()
	want := map[string]int64{}
	var slowest time.Duration
	for i := 0; time.Since(downStart) < 3*time.Second; i++ {
		ts := time.Now()
		line := fmt.Sprintf("down %04d", i)
		began := time.Now()
		s.Add(labels, ts, line)
		slowest = max(slowest, time.Since(began))
		want[line] = ts.UnixNano()
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("added %d lines while Loki was down; slowest Add %v", len(want), slowest)
	if slowest > 50*time.Millisecond {
		t.Errorf("Add blocked for %v while Loki was down", slowest)
	}
	names, _ := lpSegments(t, dir)
	if len(names) == 0 {
		t.Fatal("no segment files on disk while Loki is down")
	}
	if errs := metricValue(s.metrics.errors); errs == 0 {
		t.Error("no push errors counted while Loki is down")
	}

	// The agent restarts while Loki is still down: what was in memory is
	// written to disk, and the new shipper picks every segment up.
	s.stop(t)
	names, size := lpSegments(t, dir)
	downEnd := time.Now()
	buffered := 0
	for _, name := range names {
		_, n, ok := parseSegmentName(name)
		if !ok {
			t.Fatalf("bad segment name %q", name)
		}
		buffered += n
	}
	if buffered != len(want) {
		t.Fatalf("%d entries in %d segments (%d bytes) after the shipper stopped, want %d", buffered, len(names), size, len(want))
	}
	t.Logf("%d entries buffered in %d segments, %d bytes (gzip)", buffered, len(names), size)

	s2 := lpStart(t, opts)
	if got := metricValue(s2.metrics.buffered); got != float64(size) {
		t.Errorf("restarted shipper: nettune_loki_buffered_bytes = %v, want %d", got, size)
	}
	time.Sleep(300 * time.Millisecond) // a few failed retries against the closed port
	l.Restart(t)

	l.WaitForCount(t, fmt.Sprintf(`{job=%q} |= "down "`, job), len(want), time.Minute)
	got := lpQueryRange(t, l.URL, fmt.Sprintf(`{job=%q} |= "down "`, job), downStart.Add(-time.Millisecond), downEnd.Add(time.Millisecond))
	if len(got) != len(want) {
		t.Fatalf("Loki holds %d lines of the downtime, want %d", len(got), len(want))
	}
	for _, e := range got {
		if ts, ok := want[e.line]; !ok || e.ts != ts {
			t.Errorf("line %q at %d, want it at its original timestamp %d", e.line, e.ts, ts)
		}
	}
	lpWait(t, "an empty buffer", 10*time.Second, func() error {
		if names, _ := lpSegments(t, dir); len(names) != 0 {
			return fmt.Errorf("segments left: %v", names)
		}
		if v := metricValue(s2.metrics.buffered); v != 0 {
			return fmt.Errorf("nettune_loki_buffered_bytes = %v", v)
		}
		return nil
	})
	if v := metricValue(s2.metrics.pushed); v != float64(len(want)) {
		t.Errorf("restarted shipper pushed %v entries, want %d", v, len(want))
	}
	// Informational: whether Loki kept what it had before the Stop.
	before := lpQueryRange(t, l.URL, fmt.Sprintf(`{job=%q} |= "up "`, job), downStart.Add(-time.Minute), downStart)
	t.Logf("lines pushed before Loki stopped still queryable after its restart: %d of 20", len(before))
}

// TestShipperBoundsDisk: while Loki is down, the segments never exceed
// MaxBytes; the oldest are dropped and counted, and when Loki is back
// exactly the newest lines arrive.
func TestShipperBoundsDisk(t *testing.T) {
	t.Parallel()
	l := testenv.StartLoki(t)
	l.Stop(t)
	dir := t.TempDir()
	const maxBytes = 24 << 10
	s := lpStart(t, Options{URL: l.URL, Dir: dir, MaxBytes: maxBytes, BatchWait: 20 * time.Millisecond, BatchEntries: 100,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	job := lpJob(t)
	labels := map[string]string{"job": job}

	const n = 6000
	base := time.Now().Add(-10 * time.Minute)
	var maxSeen int64
	var mu sync.Mutex
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() { // watch the disk while lines are added
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
			_, size := lpSegments(t, dir)
			mu.Lock()
			maxSeen = max(maxSeen, size)
			mu.Unlock()
		}
	}()
	for i := range n {
		// Random bytes, so gzip cannot shrink the lines away.
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		s.Add(labels, base.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("seq %05d %s", i, hex.EncodeToString(b)))
		if i%100 == 99 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	lpWait(t, "every line on disk or dropped", 30*time.Second, func() error {
		onDisk := metricValue(s.metrics.bufEntr)
		dropped := metricValue(s.metrics.dropped.WithLabelValues(DropBufferFull))
		if onDisk+dropped != n {
			return fmt.Errorf("%v on disk + %v dropped != %d", onDisk, dropped, n)
		}
		return nil
	})
	close(stopWatch)
	<-watched
	names, size := lpSegments(t, dir)
	dropped := int(metricValue(s.metrics.dropped.WithLabelValues(DropBufferFull)))
	t.Logf("MaxBytes %d: %d segments, %d bytes on disk (max seen %d), %d of %d entries dropped", maxBytes, len(names), size, maxSeen, dropped, n)
	if size > maxBytes || maxSeen > maxBytes {
		t.Errorf("segments hold %d bytes (max seen %d), over MaxBytes %d", size, maxSeen, maxBytes)
	}
	if dropped == 0 || dropped >= n {
		t.Fatalf("%d entries dropped, want some but not all", dropped)
	}

	l.Restart(t)
	lpWantNewest(t, l, job, base, n, dropped)
}

// lpWantNewest checks that Loki holds exactly the n-dropped newest of the
// lines "seq %05d ..." stamped base+seq ms.
func lpWantNewest(t *testing.T, l *testenv.Loki, job string, base time.Time, n, dropped int) {
	t.Helper()
	kept := n - dropped
	l.WaitForCount(t, fmt.Sprintf(`{job=%q}`, job), kept, time.Minute)
	time.Sleep(500 * time.Millisecond) // nothing more may arrive
	got := lpQueryRange(t, l.URL, fmt.Sprintf(`{job=%q}`, job), base.Add(-time.Second), base.Add(time.Hour))
	if len(got) != kept {
		t.Fatalf("Loki holds %d lines, want the %d newest", len(got), kept)
	}
	for i, e := range got { // sorted by line: by seq
		want := fmt.Sprintf("seq %05d ", dropped+i)
		if !strings.HasPrefix(e.line, want) {
			t.Fatalf("line %d is %q, want %q...: the oldest must be dropped first", i, e.line, want)
		}
		if e.ts != base.Add(time.Duration(dropped+i)*time.Millisecond).UnixNano() {
			t.Fatalf("line %q has timestamp %d, not its own", e.line, e.ts)
		}
	}
}

// TestShipperSplitsABatchLargerThanTheDisk: lines added faster than Run
// cuts batches (here: one batch of every line, as a loaded machine once
// made 5,300 lines of 100-line batches) and larger than MaxBytes are
// written in parts, oldest first, so the disk keeps the newest, not none.
func TestShipperSplitsABatchLargerThanTheDisk(t *testing.T) {
	t.Parallel()
	l := testenv.StartLoki(t)
	l.Stop(t)
	dir := t.TempDir()
	const maxBytes = 24 << 10
	opts := Options{URL: l.URL, Dir: dir, MaxBytes: maxBytes, BatchWait: time.Hour, BatchEntries: 100000, MaxMemoryEntries: 100000,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, ShutdownTimeout: time.Second}
	s := lpStart(t, opts)
	job := lpJob(t)
	const n = 3000
	base := time.Now().Add(-10 * time.Minute)
	for i := range n {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		s.Add(map[string]string{"job": job}, base.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("seq %05d %s", i, hex.EncodeToString(b)))
	}
	s.stop(t) // one batch of n lines, Loki down: to disk
	names, size := lpSegments(t, dir)
	dropped := int(metricValue(s.metrics.dropped.WithLabelValues(DropBufferFull)))
	t.Logf("one batch of %d lines, MaxBytes %d: %d segments, %d bytes on disk, %d dropped", n, maxBytes, len(names), size, dropped)
	if size > maxBytes {
		t.Errorf("segments hold %d bytes, over MaxBytes %d", size, maxBytes)
	}
	if dropped == 0 || dropped >= n || len(names) == 0 {
		t.Fatalf("%d of %d lines dropped, %d segments: want the newest on disk", dropped, n, len(names))
	}

	l.Restart(t)
	lpStart(t, opts) // a restarted agent sends what is on disk
	lpWantNewest(t, l, job, base, n, dropped)
}

// TestShipperDropsRejectedBatches: a batch the real Loki rejects with 400
// (timestamps too far in the future) is dropped and counted, and does not
// hold back the lines after it.
func TestShipperDropsRejectedBatches(t *testing.T) {
	t.Parallel()
	l := testenv.StartLoki(t)
	dir := t.TempDir()
	s := lpStart(t, Options{URL: l.URL, Dir: dir, BatchWait: 50 * time.Millisecond, MinBackoff: 20 * time.Millisecond})
	job := lpJob(t)

	for i := range 5 {
		s.Add(map[string]string{"job": job}, time.Now().Add(48*time.Hour), fmt.Sprintf("future %d", i))
	}
	lpWait(t, "the rejected batch to be dropped", 20*time.Second, func() error {
		if v := metricValue(s.metrics.dropped.WithLabelValues(DropRejected)); v != 5 {
			return fmt.Errorf("rejected: %v", v)
		}
		return nil
	})
	if v := metricValue(s.metrics.errors.WithLabelValues("400")); v != 1 {
		t.Errorf("push errors with code 400: %v, want 1", v)
	}
	for i := range 10 {
		s.Add(map[string]string{"job": job}, time.Now(), fmt.Sprintf("good %d", i))
	}
	// Invalid label names never reach Loki.
	s.Add(map[string]string{"job": job, "bad-label": "x"}, time.Now(), "invalid")
	s.Add(map[string]string{"empty": ""}, time.Now(), "no labels")
	l.WaitForCount(t, fmt.Sprintf(`{job=%q} |= "good"`, job), 10, time.Minute)
	if v := metricValue(s.metrics.dropped.WithLabelValues(DropInvalid)); v != 2 {
		t.Errorf("dropped as invalid: %v, want 2", v)
	}
	if names, _ := lpSegments(t, dir); len(names) != 0 {
		t.Errorf("segments left: %v", names)
	}
}

// TestShipperRetriesServerErrors: 500 and 429 are retried (the batch is kept
// on disk until a push succeeds); the push carries gzip JSON.
func TestShipperRetriesServerErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	codes := []int{http.StatusInternalServerError, http.StatusTooManyRequests, http.StatusServiceUnavailable}
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(calls.Add(1)) - 1
		if r.URL.Path != pushPath || r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request shape", http.StatusBadRequest)
			return
		}
		if i < len(codes) {
			http.Error(w, "try later", codes[i])
			return
		}
		var buf strings.Builder
		zr, err := gzipReader(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b := make([]byte, 1<<16)
		for {
			n, err := zr.Read(b)
			buf.Write(b[:n])
			if err != nil {
				break
			}
		}
		mu.Lock()
		bodies = append(bodies, []byte(buf.String()))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	s := lpStart(t, Options{URL: srv.URL, Dir: dir, BatchWait: 20 * time.Millisecond, MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	t0 := time.Unix(1700000000, 0)
	s.Add(map[string]string{"job": "j", "b": "2"}, t0.Add(2*time.Second), "second")
	s.Add(map[string]string{"job": "j", "b": "2"}, t0.Add(time.Second), "first")
	s.Add(map[string]string{"job": "j", "a": "1"}, t0, "other stream")
	lpWait(t, "a successful push", 10*time.Second, func() error {
		if v := metricValue(s.metrics.pushed); v != 3 {
			return fmt.Errorf("pushed %v", v)
		}
		return nil
	})
	if got := calls.Load(); got != 4 {
		t.Errorf("%d pushes, want 4 (500, 429, 503, then 204)", got)
	}
	if v := metricValue(s.metrics.dropped.WithLabelValues(DropRejected)); v != 0 {
		t.Errorf("dropped %v entries on retryable errors", v)
	}
	mu.Lock()
	defer mu.Unlock()
	var req pushRequest
	if err := json.Unmarshal(bodies[0], &req); err != nil {
		t.Fatal(err)
	}
	wantBody := `{"streams":[{"stream":{"a":"1","job":"j"},"values":[["1700000000000000000","other stream"]]},{"stream":{"b":"2","job":"j"},"values":[["1700000001000000000","first"],["1700000002000000000","second"]]}]}`
	if got, _ := json.Marshal(req); string(got) != wantBody {
		t.Errorf("push body\n got %s\nwant %s", got, wantBody)
	}
	if names, _ := lpSegments(t, dir); len(names) != 0 {
		t.Errorf("segments left: %v", names)
	}
}

// TestNewRemovesTemporaryFilesAndTrims: a .tmp file left by a crash is
// removed, segments beyond MaxBytes are dropped oldest first on start.
func TestNewRemovesTemporaryFilesAndTrims(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, size := range []int{400, 300, 200} {
		name := fmt.Sprintf("%020d-%d%s", i+7, 10*(i+1), segmentSuffix)
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, tmpPrefix+"x"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{URL: "http://127.0.0.1:1", Dir: dir, MaxBytes: 600, Log: lpLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	names, size := lpSegments(t, dir)
	if want := []string{fmt.Sprintf("%020d-20%s", 8, segmentSuffix), fmt.Sprintf("%020d-30%s", 9, segmentSuffix)}; !slices.Equal(names, want) || size != 500 {
		t.Errorf("segments %v (%d bytes), want %v (500 bytes)", names, size, want)
	}
	if _, err := os.Stat(filepath.Join(dir, tmpPrefix+"x")); !os.IsNotExist(err) {
		t.Errorf("temporary file not removed (stat: %v)", err)
	}
	if v := metricValue(s.metrics.dropped.WithLabelValues(DropBufferFull)); v != 10 {
		t.Errorf("dropped %v entries, want 10", v)
	}
	if s.nextSeq != 10 {
		t.Errorf("next sequence %d, want 10", s.nextSeq)
	}
}

func gzipReader(r *http.Request) (*gzip.Reader, error) { return gzip.NewReader(r.Body) }

// metricValue sums the values of every counter or gauge c collects.
func metricValue(c prometheus.Collector) float64 {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		panic(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var sum float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
