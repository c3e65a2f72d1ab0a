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

// Package faults is the fault matrix: one test per fault a fleet meets, on
// the simulated fleet (a real kube-apiserver and etcd, Loki, Prometheus, the
// controller, and three vehicles of three hosts, each host a network namespace
// with a real nettune-agent). Every test samples every host's kernel routes
// throughout and fails if a host is ever seen half-applied, checks the fleet
// converges once the fault clears, and reports how long that took. Root only.
//
// NETTUNE_FAULTS_REPORT=<file> writes the results as a Markdown table (the
// one in docs/reliability.md).
package faults

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/fleet"
)

var f *fleet.Fleet

// The fleet: three vehicles of three hosts.
var (
	vehicles = []string{"av-001", "av-002", "av-003"}
	hosts    = []string{"xavier-a", "xavier-b", "xavier-c"}
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("faults: skipped (needs root for network namespaces)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "nettune-faults-")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	var specs []fleet.VehicleSpec
	for _, v := range vehicles {
		specs = append(specs, fleet.VehicleSpec{Name: v, Hardware: "xavier", Hosts: hosts})
	}
	ctx, cancel := context.WithCancel(context.Background())
	began := time.Now()
	f, err = fleet.Start(ctx, fleet.Options{Dir: dir, Vehicles: specs, Topics: []string{"planning:4096:20"},
		Heartbeat: 2 * time.Second, Progress: os.Stdout})
	if err != nil {
		fmt.Println("faults: starting the fleet:", err)
		cancel()
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Printf("faults: fleet up in %s\n", time.Since(began).Round(time.Millisecond))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Println("faults: interrupted; closing the fleet")
		cancel()
		_ = f.Close()
		os.Exit(1)
	}()
	code := m.Run()
	cancel()
	if err := f.Close(); err != nil {
		fmt.Println("faults: closing the fleet:", err)
		code = 1
	}
	if err := writeReport(os.Getenv("NETTUNE_FAULTS_REPORT")); err != nil {
		fmt.Println("faults: writing the report:", err)
		code = 1
	}
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Println("faults: logs kept in", dir)
	}
	os.Exit(code)
}

// result is one row of the fault table.
type result struct {
	fault, outcome, converge, checked string
	failed                            bool
}

var (
	resultsMu sync.Mutex
	results   []result
)

// record adds the test's row to the table; its outcome column says FAILED
// when the test failed, whatever outcome it had reached.
func record(t *testing.T, fault, checked string, outcome func() (string, string)) {
	t.Cleanup(func() {
		o, conv := outcome()
		r := result{fault: fault, outcome: o, converge: conv, checked: checked, failed: t.Failed()}
		resultsMu.Lock()
		results = append(results, r)
		resultsMu.Unlock()
		t.Logf("RESULT %s | %s | %s", fault, o, conv)
	})
}

func writeReport(path string) error {
	if path == "" {
		return nil
	}
	resultsMu.Lock()
	defer resultsMu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | outcome | time to converge | what was checked |\n|---|---|---|---|\n")
	for _, r := range results {
		o := r.outcome
		if r.failed {
			o = "**FAILED**: " + o
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.fault, o, r.converge, r.checked)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
