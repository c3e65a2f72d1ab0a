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
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/nettune/nettune/internal/vehiclesim"
)

const (
	vehicleName  = "av-042"
	receiverName = "xavier-a"
	foreignName  = "xavier-e"
	heavyName    = "xavier-f"
)

var topicSenders = []string{"xavier-b", "xavier-c", "xavier-d"}

func run(ctx context.Context, c config) (err error) {
	started := time.Now()
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces); run `sudo make bench-latency`")
	}
	if c.rounds < 1 || c.window <= 0 || c.topicRate <= 0 || c.topicSize <= 0 {
		return errors.New("want rounds >= 1, window > 0, topic rate and size > 0")
	}
	arms, err := loadArms(c.samples, c.arms)
	if err != nil {
		return err
	}
	if _, err := os.Stat(c.agent); err != nil {
		logf("building %s", c.agent)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Dir(c.agent)+"/", "./cmd/nettune-agent")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building the agent: %w", err)
		}
	}

	v, err := vehiclesim.New(ctx, vehiclesim.Options{Name: vehicleName, Hosts: vehiclesim.DefaultHosts})
	if err != nil {
		return err
	}
	logf("testbed %s up: switch %s, hosts %d", v.Name, v.Switch, len(v.Hosts))
	defer func() {
		if cerr := v.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the testbed: %w", cerr))
		}
	}()
	srv, err := startServers(v)
	if err != nil {
		return err
	}
	defer srv.Close()
	agent, err := newAgentRunner(c.agent, v)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := agent.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	b := &bench{c: c, v: v, receiver: v.Host(receiverName), foreign: v.Host(foreignName), heavy: v.Host(heavyName), log: newLogger()}
	for _, n := range topicSenders {
		b.topics = append(b.topics, v.Host(n))
	}
	for _, n := range c.burstHosts {
		h := v.Host(n)
		if h == nil || h == b.receiver {
			return fmt.Errorf("burst host %q: not a sender of the vehicle", n)
		}
		b.burst = append(b.burst, h)
	}

	var recommendation []string
	for i, a := range arms {
		if a.Name != "recommended" {
			continue
		}
		v2, err := loadArms(c.samples, []string{"v2"})
		if err != nil {
			return err
		}
		if arms[i], recommendation, err = b.recommendArm(ctx, agent, v2[0]); err != nil {
			return fmt.Errorf("the recommended arm: %w", err)
		}
	}

	runs := map[string][]*runResult{}
	var discarded []*runResult
	evidence := map[string]applied{}
	var order [][]string
	for round := range c.rounds {
		var names []string
		for i := range arms {
			a := arms[(i+round)%len(arms)]
			names = append(names, a.Name)
			var r *runResult
			for attempt := 1; ; attempt++ {
				ap, err := agent.apply(ctx, v, a, b.topics[0], b.receiver)
				if err != nil {
					return fmt.Errorf("round %d, arm %s: applying: %w", round+1, a.Name, err)
				}
				if _, ok := evidence[a.Name]; !ok {
					evidence[a.Name] = ap
				}
				logf("round %d/%d arm %s (attempt %d) applied by the agent in %s; route %s -> %s: %q", round+1, c.rounds, a.Name, attempt, ap.Duration.Round(time.Millisecond), b.topics[0].Name, b.receiver.Name, ap.Route)
				r, err = b.runArm(ctx, round+1, i+1, a, ap)
				if err != nil {
					return fmt.Errorf("round %d, arm %s: %w", round+1, a.Name, err)
				}
				r.Attempt = attempt
				d := newDist(r.Lat)
				logf("  %s: %d msgs (of %d ticks), p50 %s p99 %s p99.9 %s p99.99 %s max %s, >=200ms %d, >=100ms %d, port drops %d, sender RTOs %d TLPs %d retrans %d; topic conns RTOs %d retrans %d max cwnd %d backoff %d; heavy %.0f Mbit/s; bursts %d (max %s); cpu %.0f%% pressure %.0f%% timer lateness %s load %s",
					a.Name, len(d), r.Expected, fmtMs(d.q(.5)), fmtMs(d.q(.99)), fmtMs(d.q(.999)), fmtMs(d.q(.9999)), fmtMs(d.max()),
					d.atLeast(200*time.Millisecond), d.atLeast(100*time.Millisecond), r.PortDrops,
					r.Senders.Timeouts, r.Senders.LossProbes, r.Senders.Retrans, r.Topic.RTOs, r.Topic.Retrans, r.Topic.MaxCwnd, r.Topic.MaxBackoff,
					r.HeavyStats.Throughput()/1e6, r.BurstStats.Rounds, r.BurstStats.MaxRoundTime().Round(time.Millisecond), 100*r.CPUBusy, 100*r.CPUPressure, fmtMs(r.TimerLate), r.Load1)
				if c.maxStall <= 0 || r.TimerLate <= c.maxStall || attempt > c.retries {
					break
				}
				logf("  %s: the benchmark process was stalled %s (> %s) by other load: repeating this arm-run", a.Name, fmtMs(r.TimerLate), c.maxStall)
				discarded = append(discarded, r)
			}
			runs[a.Name] = append(runs[a.Name], r)
		}
		order = append(order, names)
	}
	// Leave the hosts at kernel defaults before tearing down (the agent's
	// own restore path, checked like every arm).
	for _, a := range arms {
		if a.Profile == nil {
			if _, err := agent.apply(ctx, v, a, b.topics[0], b.receiver); err != nil {
				return fmt.Errorf("final revert to kernel defaults: %w", err)
			}
		}
	}

	var results []*armResult
	for _, a := range arms {
		results = append(results, aggregate(a, runs[a.Name]))
	}
	elapsed := time.Since(started)
	rep := &report{c: c, v: v, b: b, arms: results, order: order, evidence: evidence, elapsed: elapsed, started: started, discarded: discarded, recommendation: recommendation}
	rep.printSummary(os.Stderr)
	if c.png != "" {
		if err := writePlot(c.png, results, fmt.Sprintf("Topic message latency (first byte written -> application ack), %s -> %s\nunder incast + heavy transfer + UDP bursts; CCDF: fraction of messages with latency >= x; %d rounds x %s per arm", topicSendersShort(), receiverName, c.rounds, c.window)); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		logf("wrote %s", c.png)
	}
	if c.out != "" {
		if err := os.WriteFile(c.out, []byte(rep.markdown()), 0o644); err != nil {
			return err
		}
		logf("wrote %s", c.out)
	}
	logf("done in %s", time.Since(started).Round(time.Second))
	return nil
}

func topicSendersShort() string { return "xavier-b,c,d" }
