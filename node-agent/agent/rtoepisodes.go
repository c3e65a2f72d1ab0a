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
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sync"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
)

// DefaultRTOPollInterval is how often the agent polls sock_diag and
// TCPTimeouts for nettune_tcp_rto_episodes_total.
const DefaultRTOPollInterval = time.Second

// EstimateRTOEpisodes names the estimate in status.kernel.estimatedCounters
// (v1alpha1.EstimateRTOEpisodes).
const EstimateRTOEpisodes = v1alpha1.EstimateRTOEpisodes

// rtoSource is what the poller reads: the namespace's TCP sockets and its
// counters (a *kernel.Handle).
type rtoSource interface {
	TCPSockets(dst *net.IPNet) ([]kernel.TCPSocketInfo, error)
	ReadTCPCounters() (kernel.TCPCounters, error)
}

// RTOPoller polls a namespace's sockets and TcpExt TCPTimeouts and keeps
// the per-peer estimate of retransmission timeouts
// (kernel.RTOEstimator) that nettune_tcp_rto_episodes_total exports.
type RTOPoller struct {
	// Interval is the time between polls.
	Interval time.Duration

	mu    sync.Mutex
	est   kernel.RTOEstimator
	polls uint64
}

// Poll takes one poll of src.
func (p *RTOPoller) Poll(src rtoSource) error {
	socks, err := src.TCPSockets(nil) // first, then the counters (kernel.RTOEstimator)
	if err != nil {
		return fmt.Errorf("rto episodes: %w", err)
	}
	c, cerr := src.ReadTCPCounters()
	p.mu.Lock()
	defer p.mu.Unlock()
	_, has := c.All["TcpExt.TCPTimeouts"]
	p.est.Observe(socks, c.Timeouts, cerr == nil && has)
	p.polls++
	return nil
}

// Run polls src every Interval until ctx ends; a failed poll is retried
// at the next tick.
func (p *RTOPoller) Run(ctx context.Context, src rtoSource) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		_ = p.Poll(src)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Totals are the estimated timeouts per peer address since the first poll.
func (p *RTOPoller) Totals() map[netip.Addr]float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.est.Totals)
}

// Stats are the estimate's parts: timeouts seen in a socket's state,
// shared out from TCPTimeouts, and not attributable; and the polls taken.
func (p *RTOPoller) Stats() (direct, attributed, unattributed float64, polls uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.est.Direct, p.est.Attributed, p.est.Unattributed, p.polls
}

// RTOEpisodesMeaning is what nettune_tcp_rto_episodes_total counts, for
// status.kernel.estimatedCounters: the method, its polling interval and
// what it misses on the kernel release.
func RTOEpisodesMeaning(interval time.Duration, release string) string {
	m := fmt.Sprintf("retransmission timeouts per peer, estimated by polling every %s: a socket's tcpi_retransmits, tcpi_backoff and tcpi_ca_state=Loss, and the namespace's TcpExt TCPTimeouts shared among the sockets that retransmitted since the previous poll; misses timeouts of sockets that closed before a poll; not the exact count (tcpi_total_rto, 6.7+)", interval)
	if kernel.TimeoutsFirstRTOOnly(release) {
		m += "; this kernel's TCPTimeouts counts only the first timeout of an episode: it undercounts"
	}
	return m
}

// rtoEpisodesHelp is the help of nettune_tcp_rto_episodes_total.
const rtoEpisodesHelp = "Retransmission timeouts of the connections to the destination, ESTIMATED on every kernel (for kernels before 6.7, which lack tcpi_total_rto; nettune_tcp_rto_timeouts_total is the exact count where it exists): the agent polls sock_diag and TcpExt TCPTimeouts (--rto-poll-interval); a socket's rise of tcpi_retransmits or tcpi_backoff, or its entry into TCP_CA_Loss, counts for its peer, and the rest of the namespace's TCPTimeouts increase is shared among the sockets that retransmitted since the previous poll, in proportion to their retransmitted segments. Fractional. Missed: timeouts of sockets that close before the next poll; shared wrongly: timeouts in an interval in which sockets to several peers retransmitted."
