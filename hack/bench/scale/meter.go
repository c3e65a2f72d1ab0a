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
	"net/http"
	"time"

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// phase is what one phase cost.
type phase struct {
	name string
	took time.Duration
	// cpu is the controller's CPU time (user + system) during the phase.
	cpu time.Duration
	// hwm is the controller's peak RSS (VmHWM, the process's peak so far)
	// at the end of the phase; rss its RSS then.
	hwm, rss int64
	// cpCPU is kube-apiserver's and etcd's CPU time during the phase.
	cpCPU time.Duration
	// requests are the kube-apiserver's apiserver_request_total increases
	// (every client: the controller, the simulated agents, this program);
	// nil when its metrics could not be read (reqErr says why).
	requests benchutil.RequestCounts
	reqErr   string
	// reconciles are controller_runtime_reconcile_total increases by
	// controller; nil when unreadable.
	reconciles map[string]float64
	// simWrites and simConflicts count the simulated agents' writes and
	// their 409 answers.
	simWrites, simConflicts int64
}

// meter takes the readings phases are computed from.
type meter struct {
	controllerPID int
	cpPIDs        []int // kube-apiserver and etcd
	api           *http.Client
	host          string
	metricsURL    string
	agents        *agents // nil before the agents start
}

// reading is the meter's state at one moment.
type reading struct {
	at         time.Time
	ctrl       benchutil.Usage
	cpTicks    int64
	requests   benchutil.RequestCounts
	reqErr     error
	reconciles map[string]float64
	writes     int64
	conflicts  int64
}

// read takes a reading.
func (m *meter) read(ctx context.Context) reading {
	r := reading{at: time.Now()}
	r.ctrl, _ = benchutil.ReadProc(m.controllerPID)
	r.cpTicks = benchutil.TicksOf(m.cpPIDs)
	r.requests, r.reqErr = benchutil.APIServerRequests(ctx, m.api, m.host)
	r.reconciles, _ = reconcileCounts(ctx, m.metricsURL)
	if m.agents != nil {
		r.writes, r.conflicts = m.agents.writes.Load(), m.agents.conflicts.Load()
	}
	return r
}

// phase is what happened between two readings.
func (m *meter) phase(name string, a, b reading) phase {
	p := phase{
		name: name, took: b.at.Sub(a.at),
		cpu: benchutil.TicksDuration(b.ctrl.Ticks - a.ctrl.Ticks), hwm: b.ctrl.HWM, rss: b.ctrl.RSS,
		cpCPU:     benchutil.TicksDuration(b.cpTicks - a.cpTicks),
		simWrites: b.writes - a.writes, simConflicts: b.conflicts - a.conflicts,
	}
	switch {
	case a.reqErr != nil:
		p.reqErr = a.reqErr.Error()
	case b.reqErr != nil:
		p.reqErr = b.reqErr.Error()
	default:
		p.requests = b.requests.Minus(a.requests)
	}
	if a.reconciles != nil && b.reconciles != nil {
		p.reconciles = map[string]float64{}
		for k, v := range b.reconciles {
			p.reconciles[k] = v - a.reconciles[k]
		}
	}
	return p
}
