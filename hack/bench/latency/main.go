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

// Command bench-latency proves the Xavier LAN tuning on the testbed, in one
// run and side by side: kernel defaults, the shipped profile (v2,
// config/samples/xavier-lan-v2.yaml) and the earlier one (v1,
// config/samples/xavier-lan-v1.yaml), each applied to every host of a
// six-host testbed vehicle by the real agent (bin/nettune-agent apply), under
// the field report's three loss conditions at once (incast bursts, a heavy
// transfer, foreign UDP bursts), with the topic latency measured by the real
// emulator (node-agent/latency). Arms are interleaved and repeated in
// rotating order. It writes docs/benchmarks.md and docs/bench-latency-ccdf.png.
//
// Run it with `make bench-latency` (root; about 10 minutes on 2 cores).
// Everything it creates (the testbed namespaces, the agent state
// directories, the spec files) is removed at the end, on errors and on
// Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nettune/nettune/internal/localcp"
)

// config is the benchmark's parameters (flags).
type config struct {
	rounds int
	warmup time.Duration
	window time.Duration
	grace  time.Duration

	topicSize int
	topicRate float64

	burstHosts []string
	burstBytes int
	burstEvery time.Duration

	foreignBytes int
	foreignEvery time.Duration

	noHeavy bool

	maxStall time.Duration
	retries  int
	solo     time.Duration

	agent   string
	samples string
	out     string
	png     string
	arms    []string
}

func main() {
	var c config
	var burstHosts, arms string
	flag.IntVar(&c.rounds, "rounds", 4, "rounds; every round runs each arm once, the order rotating from round to round")
	flag.DurationVar(&c.warmup, "warmup", 5*time.Second, "discarded warm-up of every arm-run (new connections, scenarios running)")
	flag.DurationVar(&c.window, "window", 30*time.Second, "measured window of every arm-run")
	flag.DurationVar(&c.grace, "grace", 2*time.Second, "time after the window for the messages sent in it to be acknowledged (load keeps running)")
	flag.IntVar(&c.topicSize, "topic-size", 16<<10, "bytes per topic message")
	flag.Float64Var(&c.topicRate, "topic-rate", 400, "messages per second per topic")
	flag.StringVar(&burstHosts, "burst-hosts", "xavier-b,xavier-c,xavier-d", "hosts bursting into the receiver at once (scenario 1)")
	flag.IntVar(&c.burstBytes, "burst-bytes", 128<<10, "bytes each burst host writes per burst round")
	flag.DurationVar(&c.burstEvery, "burst-every", 100*time.Millisecond, "burst period")
	flag.IntVar(&c.foreignBytes, "foreign-bytes", 64<<10, "bytes of each foreign UDP burst (scenario 3)")
	flag.DurationVar(&c.foreignEvery, "foreign-every", 100*time.Millisecond, "foreign UDP burst period")
	flag.DurationVar(&c.solo, "solo", 3*time.Second, "before each arm-run's scenario, run the heavy transfer alone this long (the clamp's cost to a bulk flow with the port to itself; 0 = skip)")
	flag.BoolVar(&c.noHeavy, "no-heavy", false, "leave out the heavy transfer (scenario 2); for calibration only")
	flag.DurationVar(&c.maxStall, "max-stall", 100*time.Millisecond, "repeat an arm-run whose benchmark process was kept from running longer than this (a 1 ms sleep woke up this late: other load on the machine); 0 = never repeat")
	flag.IntVar(&c.retries, "retries", 2, "how many times an arm-run may be repeated for -max-stall")
	flag.StringVar(&c.agent, "agent", "bin/nettune-agent", "the node agent binary (built with `go build -o bin/ ./cmd/nettune-agent` when missing)")
	flag.StringVar(&c.samples, "samples", "config/samples", "directory of xavier-lan-v1.yaml and xavier-lan-v2.yaml")
	flag.StringVar(&c.out, "out", "docs/benchmarks.md", "report to write (\"\" = none)")
	flag.StringVar(&c.png, "png", "docs/bench-latency-ccdf.png", "CCDF plot to write (\"\" = none)")
	flag.StringVar(&arms, "arms", "defaults,v2,v1,recommended", "arms, in the order of the first round")
	flag.Parse()
	c.burstHosts = splitList(burstHosts)
	c.arms = splitList(arms)

	// The default paths are the repository's (make runs this from hack/bench).
	if root, err := localcp.RepoRoot(); err == nil {
		if err := os.Chdir(root); err != nil {
			fmt.Fprintf(os.Stderr, "bench-latency: %v\n", err)
			os.Exit(1)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = errors.New("interrupted; the testbed and the agent state directories were removed")
		}
		fmt.Fprintf(os.Stderr, "bench-latency: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}
