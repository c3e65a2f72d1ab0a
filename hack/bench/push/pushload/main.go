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

// Command pushload is the child process of bench-push (hack/bench/push): it
// ships the latency probe's Loki lines the way the node agent does, and
// nothing else, for a fixed time, then prints what that cost the process as
// one JSON object on stdout.
//
// The lines are the agent's own: latency.LokiSink over a lokipush.Shipper
// whose client is httpauth.DirClient(-creds, false, 10s), the client the
// agent builds for --loki-credentials-dir (cmd/nettune-agent lokiClient).
// One goroutine per flow (topic x peer) adds a sample every 1/-rate
// seconds, as the topic emulator's sender does (but catching up on ticks a
// loaded machine made it miss, so that every run ships rate x duration
// lines). The GC runs at the agent's
// GOGC=50 unless GOGC is set.
//
// It is built for the machine and for arm64 (run under qemu-user) by the
// driver; it imports only what the agent's push path imports.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/node-agent/latency"
	"github.com/nettune/nettune/node-agent/lokipush"
)

// gcPercent is the agent's GOGC (cmd/nettune-agent/memory.go).
const gcPercent = 50

// pushTimeout is the agent's lokiPushTimeout.
const pushTimeout = 10 * time.Second

// Result is what the child prints. The driver decodes the same type (it is
// copied there: a main package cannot be imported).
type Result struct {
	GOARCH string `json:"goarch"`
	// Wall is the shipping window: from the first line until the shipper
	// has pushed the last one and Run has returned.
	Wall time.Duration `json:"wall"`
	// UserCPU and SysCPU are getrusage(RUSAGE_SELF) over the window;
	// TotalCPU is the process's whole life (start-up included).
	UserCPU  time.Duration `json:"user_cpu"`
	SysCPU   time.Duration `json:"sys_cpu"`
	TotalCPU time.Duration `json:"total_cpu"`
	// MaxRSSKiB is getrusage's ru_maxrss at the end. Linux carries the
	// high-water mark of the process that exec'd over into it (os/exec's
	// vfork shares the parent's memory until the exec), so it is at least
	// the spawning process's RSS: VmHWM is this program's own peak.
	MaxRSSKiB int64 `json:"max_rss_kib"`
	// Status are /proc/self/status's VmRSS, RssAnon, RssFile, VmHWM at
	// the end, in KiB.
	VmRSSKiB   int64 `json:"vm_rss_kib"`
	RssAnonKiB int64 `json:"rss_anon_kib"`
	RssFileKiB int64 `json:"rss_file_kib"`
	VmHWMKiB   int64 `json:"vm_hwm_kib"`
	// GoMappedBytes is the Go runtime's memory not returned to the OS
	// (/memory/classes/total minus heap/released), GoHeapBytes its heap
	// objects, at the end: the same under emulation as on the hardware.
	GoMappedBytes uint64 `json:"go_mapped_bytes"`
	GoHeapBytes   uint64 `json:"go_heap_bytes"`
	GCCycles      uint64 `json:"gc_cycles"`
	// Added are the lines handed to the shipper; Pushed, Dropped and
	// Buffered its metrics and Health at the end.
	Added    int64 `json:"added"`
	Pushed   int64 `json:"pushed"`
	Dropped  int64 `json:"dropped"`
	Errors   int64 `json:"errors"`
	Buffered int   `json:"buffered"`
	// Requests are the pushes sent; NewConns those that opened a
	// connection; TLSHandshakes those that did a TLS handshake.
	Requests      int64 `json:"requests"`
	NewConns      int64 `json:"new_conns"`
	TLSHandshakes int64 `json:"tls_handshakes"`
	// BodyBytes are the push bodies' bytes (gzip), all pushes.
	BodyBytes   int64  `json:"body_bytes"`
	TLS         string `json:"tls,omitempty"`
	LastReason  string `json:"last_reason"`
	LastMessage string `json:"last_message,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "pushload: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("url", "", "Loki (or gateway) base URL")
	creds := flag.String("creds", "", "credentials directory (httpauth.ReadDir)")
	dir := flag.String("dir", "", "the shipper's buffer directory")
	dur := flag.Duration("duration", 30*time.Second, "how long to ship")
	rate := flag.Float64("rate", 40, "messages per second per flow (the topic's rate)")
	peers := flag.Int("peers", 2, "peers probed (one flow each)")
	topic := flag.String("topic", "planning", "topic name")
	size := flag.Int("size", 16384, "topic message size (a field of each line)")
	vehicle := flag.String("vehicle", "", "vehicle label (the driver counts by it)")
	flag.Parse()
	if *url == "" || *creds == "" || *dir == "" || *vehicle == "" {
		return fmt.Errorf("-url, -creds, -dir and -vehicle are required")
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}

	tr := &tracing{}
	client := httpauth.DirClient(*creds, false, pushTimeout)
	tr.base = client.Transport
	client.Transport = tr
	reg := prometheus.NewRegistry()
	sh, err := lokipush.New(lokipush.Options{URL: *url, Dir: *dir, Client: client, Log: logr.Discard(), Registerer: reg})
	if err != nil {
		return err
	}
	sink := &latency.LokiSink{Shipper: sh, Vehicle: *vehicle, Node: *vehicle + "-xavier-a", Host: "xavier-a"}

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = sh.Run(ctx)
	}()

	u0, s0 := rusage()
	began := time.Now()
	var added atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	interval := time.Duration(float64(time.Second) / *rate)
	for p := range *peers {
		peer := fmt.Sprintf("xavier-%c", 'b'+p)
		rng := rand.New(rand.NewPCG(uint64(p)+1, 42))
		wg.Go(func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			var seq uint64
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				// Unlike the emulator, a sender the loaded machine delayed
				// catches up on the ticks it missed: every run ships the
				// same number of lines, whatever the load.
				due := uint64(time.Since(began).Seconds() * *rate)
				for seq < max(due, 1) {
					seq++
					// A LAN latency: log-normal around 0.4 ms.
					lat := time.Duration(400e3 * math.Exp(0.5*rng.NormFloat64()))
					sink.Observe(latency.Sample{Time: time.Now(), Topic: *topic, Peer: peer, Profile: "xavier-lan",
						Revision: "bench", Latency: lat, Size: *size, Seq: seq})
					added.Add(1)
				}
			}
		})
	}
	time.Sleep(*dur)
	close(stop)
	wg.Wait()
	// Let the shipper push the last lines through its normal cycle: ending
	// Run while a push is in flight writes that batch to disk (as the agent
	// does when it stops), which would count as lines not delivered.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if p, d, _ := shipperCounts(reg); p+d >= added.Load() {
			break
		}
	}
	cancel()
	<-ran
	wall := time.Since(began)
	u1, s1 := rusage()

	res := Result{GOARCH: runtime.GOARCH, Wall: wall, UserCPU: u1 - u0, SysCPU: s1 - s0, TotalCPU: u1 + s1, Added: added.Load()}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		res.MaxRSSKiB = ru.Maxrss
	}
	st := procStatus()
	res.VmRSSKiB, res.RssAnonKiB, res.RssFileKiB, res.VmHWMKiB = st["VmRSS"], st["RssAnon"], st["RssFile"], st["VmHWM"]
	res.GoMappedBytes, res.GoHeapBytes, res.GCCycles = goMemory()
	res.Pushed, res.Dropped, res.Errors = shipperCounts(reg)
	h := sh.Health()
	res.Buffered, res.LastReason, res.LastMessage = h.Buffered, h.Reason, h.Message
	res.Requests, res.NewConns, res.TLSHandshakes = tr.requests.Load(), tr.newConns.Load(), tr.handshakes.Load()
	res.BodyBytes = tr.bodyBytes.Load()
	if s, ok := tr.tls.Load().(string); ok {
		res.TLS = s
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// tracing counts the pushes, the connections they opened and the TLS
// handshakes they made (httptrace), and notes the TLS parameters.
type tracing struct {
	base                           http.RoundTripper
	requests, newConns, handshakes atomic.Int64
	bodyBytes                      atomic.Int64
	tls                            atomic.Value
}

func (t *tracing) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	t.bodyBytes.Add(max(req.ContentLength, 0))
	trace := &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			if !i.Reused {
				t.newConns.Add(1)
			}
		},
		TLSHandshakeDone: func(cs tls.ConnectionState, err error) {
			if err == nil {
				t.handshakes.Add(1)
				t.tls.Store(fmt.Sprintf("%s %s %s", tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), cs.CurveID))
			}
		},
	}
	return t.base.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}

func rusage() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// procStatus reads the kB fields of /proc/self/status.
func procStatus() map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 2 && f[1] == "kB" {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out
}

func goMemory() (mapped, heap, gcs uint64) {
	s := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()
}

// shipperCounts sums the shipper's counters: pushed, dropped (any reason)
// and push errors (any code).
func shipperCounts(reg *prometheus.Registry) (pushed, dropped, errs int64) {
	mfs, err := reg.Gather()
	if err != nil {
		return -1, -1, -1
	}
	for _, mf := range mfs {
		var n float64
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
		sum := int64(n)
		switch mf.GetName() {
		case "nettune_loki_pushed_entries_total":
			pushed = sum
		case "nettune_loki_dropped_entries_total":
			dropped = sum
		case "nettune_loki_push_errors_total":
			errs = sum
		}
	}
	return pushed, dropped, errs
}
