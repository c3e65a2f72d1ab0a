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

package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
)

// Prober runs the post-apply checks. They are local on purpose: peer hosts,
// links and TCP counters of this vehicle, never "can I reach the API
// server" — vehicles go offline and that must not revert their tuning.
type Prober interface {
	Probe(ctx context.Context, host *kernel.Handle, spec v1alpha1.NodeNetTuningSpec) error
}

// LocalProber checks, after an apply:
//   - every device the spec routes over (and every tuned interface) is up
//     with carrier and passes traffic, within LinkWait;
//   - a TCP connect to every peer with a probe port succeeds (a refused
//     connect is tried again until ConnectTimeout);
//   - RTO timeouts on the host did not surge while the probe ran.
type LocalProber struct {
	// ConnectTimeout bounds each peer connect. Default 3s: the kernel
	// retransmits a lost SYN (or the peer its SYN-ACK) after 1 s, so one
	// segment dropped by a busy switch port must not read as a dead peer
	// and revert a good change.
	ConnectTimeout time.Duration
	// Window is how long TCP counters are watched. Default 500ms; 0 keeps the default.
	Window time.Duration
	// MaxTimeouts is the most RTO timeouts tolerated during Window. Default 50.
	MaxTimeouts uint64
	// LinkWait bounds the wait for a link to pass traffic. Default
	// LinkSettle: the kernel acts on a carrier change late (see
	// kernel.InterfaceState.Settled), and an MTU or offload change makes
	// some NIC drivers reset the link, so a link read at once may still be
	// coming back.
	LinkWait time.Duration
}

// LinkSettle is how long the agent waits for a link's state to settle after
// a change: the kernel updates a link's operational state up to a second
// after its carrier, and 5.10 and 6.1 kernels took about 2 s.
const LinkSettle = 3 * time.Second

// DefaultConnectTimeout is LocalProber's default ConnectTimeout.
const DefaultConnectTimeout = 3 * time.Second

func (p LocalProber) defaults() LocalProber {
	if p.ConnectTimeout == 0 {
		p.ConnectTimeout = DefaultConnectTimeout
	}
	if p.Window == 0 {
		p.Window = 500 * time.Millisecond
	}
	if p.MaxTimeouts == 0 {
		p.MaxTimeouts = 50
	}
	if p.LinkWait == 0 {
		p.LinkWait = LinkSettle
	}
	return p
}

// refusedRetry is how often a refused connect is tried again.
const refusedRetry = 200 * time.Millisecond

// connect dials addr within ConnectTimeout. A refused connect is tried
// again until then: a peer whose agent is restarting answers with a reset
// until it listens again, and that must not read as a broken path and
// revert a good change. A peer still refusing at the deadline fails the
// probe, as a firewall rejecting the probe port does.
func (p LocalProber) connect(ctx context.Context, addr string) error {
	deadline := time.Now().Add(p.ConnectTimeout)
	refused := 0
	for {
		d := net.Dialer{Deadline: deadline}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || time.Until(deadline) < refusedRetry {
			if refused > 0 {
				return fmt.Errorf("refused %d times in %s: %w", refused+1, p.ConnectTimeout, err)
			}
			return err
		}
		refused++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(refusedRetry):
		}
	}
}

// Probe implements Prober.
func (p LocalProber) Probe(ctx context.Context, host *kernel.Handle, spec v1alpha1.NodeNetTuningSpec) error {
	p = p.defaults()
	before, err := host.ReadTCPCounters()
	if err != nil {
		return fmt.Errorf("reading TCP counters: %w", err)
	}
	deadline := time.Now().Add(p.Window)
	var errs []error

	devices := map[string]bool{}
	for _, r := range spec.Routes {
		if r.Device != "" {
			devices[r.Device] = true
		}
	}
	for _, i := range spec.Interfaces {
		devices[i.Name] = true
	}
	for d := range devices {
		st, err := host.WaitInterface(ctx, d, p.LinkWait, kernel.InterfaceState.Running)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !st.Running() {
			errs = append(errs, fmt.Errorf("link %s is down (up=%t carrier=%t oper=%s after %s)", d, st.Up, st.Carrier, st.OperState, p.LinkWait))
		}
	}

	for _, peer := range spec.Peers {
		if peer.ProbePort == 0 {
			continue
		}
		addr := net.JoinHostPort(peer.Address, strconv.Itoa(int(peer.ProbePort)))
		err := host.Do(func() error { return p.connect(ctx, addr) })
		if err != nil {
			errs = append(errs, fmt.Errorf("peer %s (%s) unreachable: %w", peer.Host, addr, err))
		}
	}

	if wait := time.Until(deadline); wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	after, err := host.ReadTCPCounters()
	if err != nil {
		return fmt.Errorf("reading TCP counters: %w", err)
	}
	if d := after.Timeouts - before.Timeouts; d > p.MaxTimeouts {
		errs = append(errs, fmt.Errorf("%d RTO timeouts in %s after the change (limit %d)", d, p.Window, p.MaxTimeouts))
	}
	return errors.Join(errs...)
}
