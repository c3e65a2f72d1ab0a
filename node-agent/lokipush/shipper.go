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

// Package lokipush ships log lines to Loki's push API
// (POST {URL}/loki/api/v1/push) from a vehicle whose uplink comes and goes.
//
// Lines are batched in memory (Add never blocks on the network). A batch
// Loki does not take (connection refused, timeout, TLS failure, HTTP 5xx,
// 429, 408, a refused login: 401, 403, 407, or credentials the client could
// not read) is written to a segment file in Options.Dir and retried with
// exponential backoff; segments are sent oldest first, before any newer
// data, so an offline vehicle's lines, or those of a vehicle whose
// credentials were revoked until they are rotated, reach Loki late but in
// order and with their own timestamps. The segments' total size is bounded
// by Options.MaxBytes: the oldest are dropped first
// (nettune_loki_dropped_entries_total). Segments survive a restart: New
// picks them up.
//
// A batch Loki rejects with any other 4xx (400: bad labels, line too long,
// too old) is dropped with a logged error: bad data must not block the
// queue.
//
// Health reports the latest push outcome (for the agent's status).
//
// Segment files are named <seq>-<entries>.json.gz (seq: 20 digits, so the
// names sort in push order), hold one gzip-compressed push request body, and
// are written atomically (a .tmp file, fsync, rename). Bodies are sent with
// Content-Encoding: gzip, as stored.
package lokipush

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options.
const (
	DefaultMaxBytes         = 64 << 20
	DefaultBatchWait        = time.Second
	DefaultBatchEntries     = 5000
	DefaultMaxMemoryEntries = 200000
	DefaultMinBackoff       = 500 * time.Millisecond
	DefaultMaxBackoff       = time.Minute
	DefaultShutdownTimeout  = 2 * time.Second
	pushPath                = "/loki/api/v1/push"
	segmentSuffix           = ".json.gz"
	tmpPrefix               = ".tmp-"
	dropLogInterval         = time.Minute
)

// Options configure a Shipper.
type Options struct {
	// URL is Loki's base address, e.g. http://loki.monitoring:3100.
	URL string
	// Dir holds the segments of batches not yet taken by Loki. Required.
	Dir string
	// MaxBytes bounds the total size of the segment files; the oldest are
	// dropped beyond it. Default 64 MiB.
	MaxBytes int64
	// BatchWait is the longest a line waits in memory before its batch is
	// sent (or, while Loki is out of reach, written to disk). Default 1s.
	BatchWait time.Duration
	// BatchEntries sends a batch early once it holds this many lines.
	// Default 5000.
	BatchEntries int
	// MaxMemoryEntries bounds the lines held in memory while a push is in
	// flight; Add drops (and counts) lines beyond it. Default 200000.
	MaxMemoryEntries int
	// Client sends the pushes. Default: a client with a 10s timeout. With
	// credentials: an httpauth client (httpauth.DirClient re-reads a
	// mounted Secret at every push, so a rotation needs no restart).
	Client *http.Client
	// Redact, when set, scrubs secret values from the messages of Health
	// and of the logs about an answer (e.g. Credentials.Redact); an answer
	// refusing the credentials (401, 403, 407) is never quoted anyway.
	Redact func(string) string
	// Log receives push errors and dropped data.
	Log logr.Logger
	// Registerer, when set, registers the shipper's metrics.
	Registerer prometheus.Registerer
	// MinBackoff and MaxBackoff bound the retry delay after a failed push.
	// Defaults 500ms and 1m.
	MinBackoff, MaxBackoff time.Duration
	// ShutdownTimeout bounds the last push when Run's context ends; what is
	// not pushed by then is written to disk. Default 2s.
	ShutdownTimeout time.Duration
}

// Shipper batches lines and pushes them to Loki. Add may be called from any
// goroutine; Run must run (once) for anything to be sent.
type Shipper struct {
	opts    Options
	url     string
	metrics metrics

	mu      sync.Mutex
	cur     *batch
	kick    chan struct{}
	running bool

	// Owned by Run (and New): the segments on disk, oldest first.
	segments []segment
	nextSeq  uint64
	retryAt  time.Time
	backoff  time.Duration

	droppedSinceLog int
	lastDropLog     time.Time

	// health is the latest push outcome (Health), under healthMu: Run
	// writes it, the agent's reconciler reads it.
	healthMu sync.Mutex
	health   PushHealth
}

type metrics struct {
	pushed   prometheus.Counter
	buffered prometheus.Gauge
	bufEntr  prometheus.Gauge
	errors   *prometheus.CounterVec
	dropped  *prometheus.CounterVec
}

// Reasons of nettune_loki_dropped_entries_total.
const (
	DropBufferFull = "buffer_full" // oldest segment dropped to stay within MaxBytes
	DropRejected   = "rejected"    // Loki answered 400 or another 4xx it does not retry (see retryable)
	DropMemoryFull = "memory_full" // Add beyond MaxMemoryEntries
	DropInvalid    = "invalid"     // no or invalid labels
	DropUnreadable = "unreadable"  // a segment file could not be read back
)

func newMetrics() metrics {
	return metrics{
		pushed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nettune_loki_pushed_entries_total", Help: "Log entries Loki accepted.",
		}),
		buffered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nettune_loki_buffered_bytes", Help: "Bytes of segment files waiting on disk for Loki.",
		}),
		bufEntr: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nettune_loki_buffered_entries", Help: "Log entries in segment files waiting on disk for Loki.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nettune_loki_push_errors_total", Help: "Failed pushes by HTTP status code (\"network\" when there was no answer, \"credentials\" when the credentials could not be read).",
		}, []string{"code"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nettune_loki_dropped_entries_total", Help: "Log entries dropped without reaching Loki, by reason (buffer_full, rejected, memory_full, invalid, unreadable).",
		}, []string{"reason"}),
	}
}

func (m metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.pushed, m.buffered, m.bufEntr, m.errors, m.dropped}
}

// entry is one line of a stream.
type entry struct {
	ts   int64 // Unix nanoseconds
	line string
}

type stream struct {
	labels  map[string]string
	entries []entry
}

// batch is lines grouped by label set.
type batch struct {
	streams map[string]*stream
	entries int
	started time.Time // when its first line was added
}

func newBatch() *batch { return &batch{streams: map[string]*stream{}} }

// segment is one batch waiting on disk.
type segment struct {
	seq     uint64
	entries int
	size    int64
	path    string
}

// New opens (creating) opts.Dir and picks up the segments a previous run
// left there.
func New(opts Options) (*Shipper, error) {
	if opts.URL == "" {
		return nil, errors.New("lokipush: URL is required")
	}
	if opts.Dir == "" {
		return nil, errors.New("lokipush: Dir is required")
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.BatchWait <= 0 {
		opts.BatchWait = DefaultBatchWait
	}
	if opts.BatchEntries <= 0 {
		opts.BatchEntries = DefaultBatchEntries
	}
	if opts.MaxMemoryEntries <= 0 {
		opts.MaxMemoryEntries = DefaultMaxMemoryEntries
	}
	if opts.MaxMemoryEntries < opts.BatchEntries {
		opts.MaxMemoryEntries = opts.BatchEntries
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	s := &Shipper{
		opts:    opts,
		url:     strings.TrimRight(opts.URL, "/") + pushPath,
		metrics: newMetrics(),
		cur:     newBatch(),
		kick:    make(chan struct{}, 1),
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	if opts.Registerer != nil {
		for _, c := range s.metrics.collectors() {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("lokipush: registering metrics: %w", err)
			}
		}
	}
	return s, nil
}

// load scans Dir: leftover temporary files are removed, segments are queued
// oldest first and trimmed to MaxBytes.
func (s *Shipper) load() error {
	if err := os.MkdirAll(s.opts.Dir, 0o755); err != nil {
		return fmt.Errorf("lokipush: creating buffer directory: %w", err)
	}
	des, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return fmt.Errorf("lokipush: reading buffer directory: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		path := filepath.Join(s.opts.Dir, name)
		if strings.HasPrefix(name, tmpPrefix) {
			_ = os.Remove(path) // a write a crash interrupted; never renamed, never counted
			continue
		}
		seq, n, ok := parseSegmentName(name)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		s.segments = append(s.segments, segment{seq: seq, entries: n, size: info.Size(), path: path})
		s.nextSeq = max(s.nextSeq, seq+1)
	}
	sort.Slice(s.segments, func(i, j int) bool { return s.segments[i].seq < s.segments[j].seq })
	if len(s.segments) > 0 {
		s.opts.Log.Info("picked up buffered Loki segments", "segments", len(s.segments), "entries", s.bufferedEntries(), "bytes", s.bufferedBytes())
	}
	s.trim(0)
	s.updateGauges()
	return nil
}

var segmentName = regexp.MustCompile(`^(\d{20})-(\d+)\.json\.gz$`)

func parseSegmentName(name string) (seq uint64, entries int, ok bool) {
	m := segmentName.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, false
	}
	seq, err1 := strconv.ParseUint(m[1], 10, 64)
	entries, err2 := strconv.Atoi(m[2])
	return seq, entries, err1 == nil && err2 == nil
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Add queues one line with labels and timestamp t. It never blocks on the
// network or the disk. Labels with an empty value are left out (Loki and
// Prometheus treat an empty label as absent); a line with no label left or
// an invalid label name is dropped and counted. labels is copied.
func (s *Shipper) Add(labels map[string]string, t time.Time, line string) {
	key, clean, ok := labelKey(labels)
	if !ok {
		s.metrics.dropped.WithLabelValues(DropInvalid).Inc()
		return
	}
	s.mu.Lock()
	if s.cur.entries >= s.opts.MaxMemoryEntries {
		s.mu.Unlock()
		s.metrics.dropped.WithLabelValues(DropMemoryFull).Inc()
		return
	}
	st := s.cur.streams[key]
	if st == nil {
		st = &stream{labels: clean}
		s.cur.streams[key] = st
	}
	if s.cur.entries == 0 {
		s.cur.started = time.Now()
	}
	st.entries = append(st.entries, entry{ts: t.UnixNano(), line: line})
	s.cur.entries++
	full := s.cur.entries >= s.opts.BatchEntries
	first := s.cur.entries == 1
	s.mu.Unlock()
	if full || first { // first: Run may sleep longer than BatchWait when idle
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// labelKey validates labels and returns a canonical key and a copy without
// empty values.
func labelKey(labels map[string]string) (string, map[string]string, bool) {
	names := make([]string, 0, len(labels))
	clean := make(map[string]string, len(labels))
	for k, v := range labels {
		if v == "" {
			continue
		}
		if !labelName.MatchString(k) {
			return "", nil, false
		}
		names = append(names, k)
		clean[k] = v
	}
	if len(names) == 0 {
		return "", nil, false
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(clean[k])
		b.WriteByte(0)
	}
	return b.String(), clean, true
}

// take returns the current batch when it is due (full, older than
// BatchWait, or force) and starts a new one.
func (s *Shipper) take(force bool) *batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.entries == 0 {
		return nil
	}
	if !force && s.cur.entries < s.opts.BatchEntries && time.Since(s.cur.started) < s.opts.BatchWait {
		return nil
	}
	b := s.cur
	s.cur = newBatch()
	return b
}

// untilDue is how long until the current batch is due (BatchWait when empty).
func (s *Shipper) untilDue() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.entries == 0 {
		return s.opts.BatchWait
	}
	if s.cur.entries >= s.opts.BatchEntries {
		return 0
	}
	return s.opts.BatchWait - time.Since(s.cur.started)
}

// Run sends batches until ctx ends, then pushes (or writes to disk) what is
// left in memory within ShutdownTimeout, and returns. It returns an error
// only when called twice.
func (s *Shipper) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("lokipush: Run called twice")
	}
	s.running = true
	s.mu.Unlock()

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.shutdown()
			return nil
		case <-s.kick:
		case <-timer.C:
		}
		s.cycle(ctx, s.take(false))
		wait := s.untilDue()
		if len(s.segments) > 0 {
			wait = min(wait, time.Until(s.retryAt))
		}
		timer.Reset(max(wait, time.Millisecond))
	}
}

// cycle sends the segments on disk, oldest first, then b. While Loki is out
// of reach (backing off), or older segments wait, b goes to disk behind
// them; batches falling due during a long catch-up follow it there, so
// memory stays bounded and the order is kept.
func (s *Shipper) cycle(ctx context.Context, b *batch) {
	if !s.retryAt.IsZero() && time.Now().Before(s.retryAt) {
		s.spill(b)
		return
	}
	if len(s.segments) > 0 {
		s.spill(b)
		b = nil
	}
	for len(s.segments) > 0 && ctx.Err() == nil {
		seg := s.segments[0]
		body, err := os.ReadFile(seg.path)
		if err != nil {
			s.opts.Log.Error(err, "reading a buffered Loki segment; dropping it", "segment", seg.path)
			s.metrics.dropped.WithLabelValues(DropUnreadable).Add(float64(seg.entries))
			s.removeOldest()
			continue
		}
		if s.push(ctx, body, seg.entries) == pushRetry {
			return
		}
		s.removeOldest() // pushed, or rejected and dropped
		s.spill(s.take(false))
	}
	if b == nil || ctx.Err() != nil {
		s.spill(b)
		return
	}
	body, err := encode(b)
	if err != nil {
		s.opts.Log.Error(err, "encoding a Loki batch; dropping it", "entries", b.entries)
		s.metrics.dropped.WithLabelValues(DropInvalid).Add(float64(b.entries))
		return
	}
	if s.push(ctx, body, b.entries) == pushRetry {
		s.write(body, b.entries)
	}
}

// shutdown sends what is in memory, or writes it to disk, within
// ShutdownTimeout.
func (s *Shipper) shutdown() {
	b := s.take(true)
	if b == nil {
		return
	}
	body, err := encode(b)
	if err != nil {
		s.metrics.dropped.WithLabelValues(DropInvalid).Add(float64(b.entries))
		return
	}
	if len(s.segments) == 0 && (s.retryAt.IsZero() || time.Now().After(s.retryAt)) {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
		res := s.push(ctx, body, b.entries)
		cancel()
		if res != pushRetry {
			return
		}
	}
	s.spillEncoded(b, body)
}

type pushResult int

const (
	pushOK pushResult = iota
	pushRetry
	pushDropped
)

// push sends one gzip-compressed body and classifies the answer (see
// classify); it updates the backoff, the metrics and Health.
func (s *Shipper) push(ctx context.Context, body []byte, entries int) pushResult {
	code, msg, err := s.post(ctx, body)
	if err != nil && ctx.Err() != nil {
		// Run is ending (or the shutdown push ran out of time): not an
		// outcome of Loki's, the batch goes to disk.
		return pushRetry
	}
	o := classify(code, msg, err)
	switch {
	case o.ok:
		s.metrics.pushed.Add(float64(entries))
		s.retryAt, s.backoff = time.Time{}, 0
		s.setHealth(o, "")
		return pushOK
	case o.retry:
		s.metrics.errors.WithLabelValues(o.code).Inc()
		if s.backoff == 0 {
			s.backoff = s.opts.MinBackoff
		} else {
			s.backoff = min(2*s.backoff, s.opts.MaxBackoff)
		}
		s.retryAt = time.Now().Add(s.backoff)
		s.setHealth(o, "")
		s.opts.Log.V(1).Info("Loki push failed; buffering on disk", "code", o.code, "reason", o.reason, "error", o.message, "entries", entries, "retryIn", s.backoff)
		return pushRetry
	default:
		s.metrics.errors.WithLabelValues(o.code).Inc()
		s.metrics.dropped.WithLabelValues(DropRejected).Add(float64(entries))
		s.setHealth(o, fmt.Sprintf("; a batch of %d line(s) was dropped", entries))
		s.opts.Log.Error(errors.New(o.message), "Loki rejected a batch; dropping it", "entries", entries)
		return pushDropped
	}
}

func (s *Shipper) post(ctx context.Context, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(msg)), nil
}

// spill writes b (if any) to disk. A batch larger than MaxBytes (lines
// added faster than Run could cut batches, as on a loaded machine) is
// split by line time and written oldest half first: the oldest segments
// are the ones trimmed, so the newest lines are kept, as with small
// batches.
func (s *Shipper) spill(b *batch) {
	if b == nil {
		return
	}
	body, err := encode(b)
	if err != nil {
		s.metrics.dropped.WithLabelValues(DropInvalid).Add(float64(b.entries))
		return
	}
	s.spillEncoded(b, body)
}

// spillEncoded is spill of b already encoded as body.
func (s *Shipper) spillEncoded(b *batch, body []byte) {
	if int64(len(body)) > s.opts.MaxBytes && b.entries > 1 {
		older, newer := split(b)
		s.spill(older)
		s.spill(newer)
		return
	}
	s.write(body, b.entries)
}

// split halves b by line time (ties in label-set order): the older half
// and the newer.
func split(b *batch) (older, newer *batch) {
	type ref struct {
		key string
		e   entry
	}
	keys := make([]string, 0, len(b.streams))
	for k := range b.streams {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	all := make([]ref, 0, b.entries)
	for _, k := range keys {
		for _, e := range b.streams[k].entries {
			all = append(all, ref{k, e})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].e.ts < all[j].e.ts })
	older, newer = newBatch(), newBatch()
	older.started, newer.started = b.started, b.started
	for i, r := range all {
		dst := older
		if i >= len(all)/2 {
			dst = newer
		}
		st := dst.streams[r.key]
		if st == nil {
			st = &stream{labels: b.streams[r.key].labels}
			dst.streams[r.key] = st
		}
		st.entries = append(st.entries, r.e)
		dst.entries++
	}
	return older, newer
}

// write stores body as the newest segment (tmp file, fsync, rename), then
// drops the oldest segments beyond MaxBytes.
func (s *Shipper) write(body []byte, entries int) {
	size := int64(len(body))
	if size > s.opts.MaxBytes {
		s.opts.Log.Error(fmt.Errorf("%d bytes, more than MaxBytes %d", size, s.opts.MaxBytes), "a Loki batch does not fit the disk buffer; dropping it", "entries", entries)
		s.metrics.dropped.WithLabelValues(DropBufferFull).Add(float64(entries))
		return
	}
	// Make room first: the files on disk never exceed MaxBytes, not even
	// while the new one is written.
	s.trim(size)
	seq := s.nextSeq
	s.nextSeq++
	name := fmt.Sprintf("%020d-%d%s", seq, entries, segmentSuffix)
	path := filepath.Join(s.opts.Dir, name)
	tmp := filepath.Join(s.opts.Dir, tmpPrefix+name)
	if err := writeFileSync(tmp, body); err != nil {
		_ = os.Remove(tmp)
		s.opts.Log.Error(err, "writing a Loki segment; dropping its entries", "entries", entries)
		s.metrics.dropped.WithLabelValues(DropBufferFull).Add(float64(entries))
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		s.opts.Log.Error(err, "writing a Loki segment; dropping its entries", "entries", entries)
		s.metrics.dropped.WithLabelValues(DropBufferFull).Add(float64(entries))
		return
	}
	syncDir(s.opts.Dir)
	s.segments = append(s.segments, segment{seq: seq, entries: entries, size: size, path: path})
	s.updateGauges()
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// trim drops the oldest segments until the rest and room more bytes fit in
// MaxBytes. The log about it is rate-limited.
func (s *Shipper) trim(room int64) {
	var dropped, files int
	for len(s.segments) > 0 && s.bufferedBytes()+room > s.opts.MaxBytes {
		n := s.segments[0].entries
		dropped += n
		files++
		s.removeOldest()
		s.metrics.dropped.WithLabelValues(DropBufferFull).Add(float64(n))
	}
	s.droppedSinceLog += dropped
	if s.droppedSinceLog > 0 && time.Since(s.lastDropLog) >= dropLogInterval {
		s.opts.Log.Info("Loki buffer full: dropped the oldest entries", "entries", s.droppedSinceLog, "since", s.lastDropLog, "maxBytes", s.opts.MaxBytes)
		s.droppedSinceLog, s.lastDropLog = 0, time.Now()
	}
}

func (s *Shipper) removeOldest() {
	seg := s.segments[0]
	if err := os.Remove(seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.opts.Log.Error(err, "removing a Loki segment", "segment", seg.path)
	}
	s.segments = s.segments[1:]
	s.updateGauges()
}

func (s *Shipper) bufferedBytes() int64 {
	var n int64
	for _, seg := range s.segments {
		n += seg.size
	}
	return n
}

func (s *Shipper) bufferedEntries() int {
	var n int
	for _, seg := range s.segments {
		n += seg.entries
	}
	return n
}

func (s *Shipper) updateGauges() {
	n := s.bufferedEntries()
	s.metrics.buffered.Set(float64(s.bufferedBytes()))
	s.metrics.bufEntr.Set(float64(n))
	s.healthMu.Lock()
	s.health.Buffered = n
	s.healthMu.Unlock()
}

// pushRequest is Loki's JSON push body.
type pushRequest struct {
	Streams []pushStream `json:"streams"`
}

type pushStream struct {
	Stream map[string]string `json:"stream"`
	Values [][2]string       `json:"values"`
}

// encode renders b as a gzip-compressed push body, streams in label order
// and entries in time order within each stream.
func encode(b *batch) ([]byte, error) {
	keys := make([]string, 0, len(b.streams))
	for k := range b.streams {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	req := pushRequest{Streams: make([]pushStream, 0, len(keys))}
	for _, k := range keys {
		st := b.streams[k]
		sort.SliceStable(st.entries, func(i, j int) bool { return st.entries[i].ts < st.entries[j].ts })
		ps := pushStream{Stream: st.labels, Values: make([][2]string, len(st.entries))}
		for i, e := range st.entries {
			ps.Values[i] = [2]string{strconv.FormatInt(e.ts, 10), e.line}
		}
		req.Streams = append(req.Streams, ps)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(req); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
