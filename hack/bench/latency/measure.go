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
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"golang.org/x/sys/unix"

	"github.com/nettune/nettune/controllers/render"
	"github.com/nettune/nettune/internal/vehiclesim"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/latency"
)

// probePort is the agent's probe port on every host: the agent's post-apply
// connect probes and tcp_metrics priming dial it, and on the receiver it is
// the latency server the topic emulators talk to.
const probePort = render.DefaultProbePort

// servers run latency.Serve on probePort in every host namespace, as the
// agent's probe listener does.
type servers struct {
	lns   []net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startServers(v *vehiclesim.Vehicle) (*servers, error) {
	s := &servers{conns: map[net.Conn]struct{}{}}
	for _, h := range v.Hosts {
		var ln net.Listener
		err := h.Do(func() error {
			var err error
			ln, err = net.Listen("tcp4", h.AddrPort(probePort).String())
			return err
		})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("probe listener on %s: %w", h.Name, err)
		}
		s.lns = append(s.lns, ln)
		s.wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				s.mu.Lock()
				s.conns[c] = struct{}{}
				s.mu.Unlock()
				s.wg.Go(func() {
					latency.Serve(c)
					s.mu.Lock()
					delete(s.conns, c)
					s.mu.Unlock()
				})
			}
		})
	}
	return s, nil
}

// Close closes the listeners and every open connection and waits.
func (s *servers) Close() {
	for _, ln := range s.lns {
		ln.Close()
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// recorder is the emulators' sink for one arm-run: it keeps the latency of
// every message sent inside the measured window.
type recorder struct {
	from, to time.Time

	mu      sync.Mutex
	lat     []time.Duration
	perPeer map[string]int
	seqs    map[string][2]uint64 // topic -> lowest, highest seq acknowledged in the window
	lost    int                  // written in the window, never acknowledged (connection broke)
	outside int
}

func newRecorder(from, to time.Time) *recorder {
	return &recorder{from: from, to: to, perPeer: map[string]int{}, seqs: map[string][2]uint64{}}
}

func (r *recorder) in(t time.Time) bool { return !t.Before(r.from) && t.Before(r.to) }

// Observe implements latency.Sink.
func (r *recorder) Observe(s latency.Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.in(s.Time) {
		r.outside++
		return
	}
	r.lat = append(r.lat, s.Latency)
	r.perPeer[s.Topic]++
	sq, ok := r.seqs[s.Topic]
	if !ok {
		sq = [2]uint64{s.Seq, s.Seq}
	}
	sq[0], sq[1] = min(sq[0], s.Seq), max(sq[1], s.Seq)
	r.seqs[s.Topic] = sq
}

// Lost implements latency.LossObserver.
func (r *recorder) Lost(s latency.Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.in(s.Time) {
		r.lost++
	}
}

// gaps counts sequence numbers inside the acknowledged range of each topic
// that were never acknowledged (sent, then lost with their connection).
func (r *recorder) gaps() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for t, sq := range r.seqs {
		n += int(sq[1]-sq[0]+1) - r.perPeer[t]
	}
	return n
}

// trackedConn is one topic connection, read through TCP_INFO.
type trackedConn struct {
	topic      string
	c          *net.TCPConn
	base       unix.TCPInfo // at the window's start (zero if opened later)
	last       unix.TCPInfo
	maxCwnd    uint32
	maxBackoff uint8
	ok         bool
}

// connTracker follows the emulators' connections: the congestion window
// they actually ran with (the locked clamp shows here) and their own
// retransmissions and RTOs (tcpi_total_retrans, tcpi_total_rto).
type connTracker struct {
	mu    sync.Mutex
	conns []*trackedConn
}

func (t *connTracker) add(topic string, c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	t.mu.Lock()
	t.conns = append(t.conns, &trackedConn{topic: topic, c: tc})
	t.mu.Unlock()
}

func tcpInfo(c *net.TCPConn) (unix.TCPInfo, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return unix.TCPInfo{}, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || ierr != nil {
		return unix.TCPInfo{}, false
	}
	return *info, true
}

// poll reads every live connection; at the window's start (mark) it also
// records the baseline.
func (t *connTracker) poll(mark bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tc := range t.conns {
		info, ok := tcpInfo(tc.c)
		if !ok {
			continue
		}
		if mark {
			tc.base, tc.maxCwnd, tc.maxBackoff = info, 0, 0
		}
		tc.last, tc.ok = info, true
		tc.maxCwnd = max(tc.maxCwnd, info.Snd_cwnd)
		tc.maxBackoff = max(tc.maxBackoff, info.Backoff)
	}
}

// connStats sums the window's deltas over the topic connections.
type connStats struct {
	Retrans uint64
	RTOs    uint64
	MaxCwnd uint32
	// MaxBackoff is the most consecutive RTO expiries of one outstanding
	// segment seen (icsk_backoff: the timer doubled that many times).
	MaxBackoff uint8
	Conns      int
	Reconns    int // connections beyond one per topic
	MinRTTus   uint32
}

func (t *connTracker) stats(topics int) connStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s connStats
	s.Conns = len(t.conns)
	s.Reconns = max(0, len(t.conns)-topics)
	for _, tc := range t.conns {
		if !tc.ok {
			continue
		}
		s.Retrans += uint64(tc.last.Total_retrans - tc.base.Total_retrans)
		s.RTOs += uint64(tc.last.Total_rto - tc.base.Total_rto)
		s.MaxCwnd = max(s.MaxCwnd, tc.maxCwnd)
		s.MaxBackoff = max(s.MaxBackoff, tc.maxBackoff)
		if tc.last.Min_rtt > 0 && (s.MinRTTus == 0 || tc.last.Min_rtt < s.MinRTTus) {
			s.MinRTTus = tc.last.Min_rtt
		}
	}
	return s
}

// counters are the per-host TCP counters and the switch port counters at
// one instant.
type counters struct {
	tcp    map[string]kernel.TCPCounters
	ports  map[string]vehiclesim.PortStats
	cpu    cpuTimes
	at     time.Time
	load1s string
}

func readCounters(v *vehiclesim.Vehicle) (counters, error) {
	c := counters{tcp: map[string]kernel.TCPCounters{}, at: time.Now()}
	for _, h := range v.Hosts {
		tc, err := h.TCPCounters()
		if err != nil {
			return c, err
		}
		c.tcp[h.Name] = tc
	}
	var err error
	if c.ports, err = v.SwitchStats(); err != nil {
		return c, err
	}
	c.cpu, _ = readCPU()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		c.load1s = strings.Fields(string(b))[0]
	}
	return c, nil
}

// tcpDelta is the change of the TCP counters of some hosts.
type tcpDelta struct {
	Retrans, Timeouts, LossProbes uint64
	OutSegs                       int64
}

func sumTCP(before, after counters, hosts []string) tcpDelta {
	var d tcpDelta
	for _, h := range hosts {
		a, b := after.tcp[h], before.tcp[h]
		d.Retrans += a.RetransSegs - b.RetransSegs
		d.Timeouts += a.Timeouts - b.Timeouts
		d.LossProbes += a.LossProbes - b.LossProbes
		d.OutSegs += a.All["Tcp.OutSegs"] - b.All["Tcp.OutSegs"]
	}
	return d
}

// cpuTimes is the first line of /proc/stat and this process's utime +
// stime from /proc/self/stat (both in USER_HZ ticks).
type cpuTimes struct {
	busy, total, self uint64
	psiSome           uint64 // /proc/pressure/cpu "some" total: µs some task waited for a CPU
}

func readCPU() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var t cpuTimes
	for i, x := range f[1:] {
		n, _ := strconv.ParseUint(x, 10, 64)
		t.total += n
		if i != 3 && i != 4 { // idle, iowait
			t.busy += n
		}
	}
	if b, err := os.ReadFile("/proc/pressure/cpu"); err == nil {
		for _, f := range strings.Fields(strings.SplitN(string(b), "\n", 2)[0]) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				t.psiSome, _ = strconv.ParseUint(v, 10, 64)
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		// Fields after the command (which may hold spaces): state is field 3,
		// utime and stime are fields 14 and 15.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			f := strings.Fields(string(b)[i+1:])
			if len(f) > 12 {
				u, _ := strconv.ParseUint(f[11], 10, 64)
				st, _ := strconv.ParseUint(f[12], 10, 64)
				t.self = u + st
			}
		}
	}
	return t, nil
}

// runResult is one arm-run.
type runResult struct {
	Round, Slot int
	Arm         string
	Attempt     int

	Lat      []time.Duration // per message sent in the window
	Lost     int
	Gaps     int
	Expected int // ticks in the window: topics x rate x window

	Window time.Duration
	Topic  connStats

	Senders  tcpDelta // the topic sender hosts (topic and burst connections)
	AllHosts tcpDelta
	Heavy    tcpDelta // the heavy-transfer host

	PortDrops, PortSentBytes uint64 // receiver's switch port
	PortSentPackets          uint64
	OtherDrops               uint64 // every other switch port

	Solo         vehiclesim.TransferStats // the heavy transfer alone, before the scenario
	HeavyStats   vehiclesim.TransferStats
	BurstStats   vehiclesim.BurstStats
	ForeignStats vehiclesim.UDPStats

	CPUBusy float64 // machine-wide, over the window
	CPUSelf float64 // this process (emulators, scenarios, server), share of the machine
	Load1   string  // 1-minute load average at the window's start and end
	MaxLoad float64
	// CPUPressure is the share of the window in which some task was
	// runnable but waiting for a CPU (/proc/pressure/cpu "some").
	CPUPressure float64
	// TimerLate is the largest lateness of a 1 ms sleep in this process
	// during the window: how long the Go scheduler (and the kernel) could
	// keep a ready goroutine, such as an emulator's, from running.
	TimerLate  time.Duration
	ApplyTime  time.Duration
	Applied    applied
	RunElapsed time.Duration
}

// bench is the running benchmark.
type bench struct {
	c        config
	v        *vehiclesim.Vehicle
	receiver *vehiclesim.Host
	topics   []*vehiclesim.Host // topic senders
	burst    []*vehiclesim.Host
	foreign  *vehiclesim.Host
	heavy    *vehiclesim.Host
	log      logr.Logger
}

var topicNames = []string{"planning", "perception", "prediction", "localization", "control"}

func topicName(i int) string {
	if i < len(topicNames) {
		return topicNames[i]
	}
	return fmt.Sprintf("topic%d", i)
}

// runArm measures one arm-run: it starts the scenarios and the emulators
// (new connections, so the arm's route metrics apply), discards the
// warm-up, measures the window, lets the window's messages be acknowledged
// and stops everything.
func (b *bench) runArm(ctx context.Context, round, slot int, a *arm, ap applied) (*runResult, error) {
	c := b.c
	res := &runResult{Round: round, Slot: slot, Arm: a.Name, Window: c.window, Applied: ap, ApplyTime: ap.Duration}
	began := time.Now()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The heavy transfer alone first: what the clamp costs a bulk flow that
	// has the receiver's port to itself.
	if !c.noHeavy && c.solo > 0 {
		sctx, scancel := context.WithTimeout(rctx, c.solo)
		st, err := vehiclesim.HeavyTransfer(sctx, b.heavy, b.receiver)
		scancel()
		if err != nil {
			return nil, fmt.Errorf("heavy transfer alone: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res.Solo = st
	}

	var wg sync.WaitGroup
	var emu sync.Mutex
	var errs []error
	fail := func(err error) {
		emu.Lock()
		errs = append(errs, err)
		emu.Unlock()
		cancel()
	}
	if !c.noHeavy {
		wg.Go(func() {
			st, err := vehiclesim.HeavyTransfer(rctx, b.heavy, b.receiver)
			res.HeavyStats = st
			if err != nil {
				fail(err)
			}
		})
	}
	if len(b.burst) > 0 && c.burstBytes > 0 {
		wg.Go(func() {
			st, err := vehiclesim.Burst(rctx, b.burst, b.receiver, c.burstBytes, c.burstEvery)
			res.BurstStats = st
			if err != nil {
				fail(err)
			}
		})
	}
	if b.foreign != nil && c.foreignBytes > 0 {
		wg.Go(func() {
			st, err := vehiclesim.ForeignBursts(rctx, b.foreign, b.receiver, c.foreignBytes, c.foreignEvery)
			res.ForeignStats = st
			if err != nil {
				fail(err)
			}
		})
	}

	from := time.Now().Add(c.warmup)
	to := from.Add(c.window)
	rec := newRecorder(from, to)
	tracker := &connTracker{}
	var emus []*latency.Emulator
	stopEmus := func() {
		for _, e := range emus {
			e.Close()
		}
		emus = nil
	}
	defer stopEmus()
	for i, h := range b.topics {
		name := topicName(i)
		e := latency.NewEmulator(latency.Options{
			Topics: []latency.Topic{{Name: name, Size: c.topicSize, Rate: c.topicRate}},
			Sink:   rec,
			Log:    b.log.WithValues("sender", h.Name),
			Dial: func(ctx context.Context, addr string) (net.Conn, error) {
				var conn net.Conn
				err := h.Do(func() error {
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: h.Addr.AsSlice()}}
					var err error
					conn, err = d.DialContext(ctx, "tcp4", addr)
					return err
				})
				if err != nil {
					return nil, err
				}
				tracker.add(name, conn)
				return conn, nil
			},
		})
		emus = append(emus, e)
		profile, revision := "", ""
		if a.Profile != nil {
			profile, revision = a.Profile.Name, a.Revision
		}
		e.Update([]latency.Target{{Peer: b.receiver.Name, Address: b.receiver.Addr.String(), Port: probePort, Profile: profile, Revision: revision}})
	}

	sleepUntil := func(t time.Time) error {
		select {
		case <-rctx.Done():
			return rctx.Err()
		case <-time.After(time.Until(t)):
			return nil
		}
	}
	finish := func() error {
		stopEmus()
		cancel()
		wg.Wait()
		emu.Lock()
		defer emu.Unlock()
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		return ctx.Err()
	}
	if err := sleepUntil(from); err != nil {
		return nil, errors.Join(err, finish())
	}
	before, err := readCounters(b.v)
	if err != nil {
		return nil, errors.Join(err, finish())
	}
	tracker.poll(true)
	late := startLateness(to)
	tick := time.NewTicker(10 * time.Millisecond)
	for time.Now().Before(to) && rctx.Err() == nil {
		select {
		case <-tick.C:
			tracker.poll(false)
		case <-rctx.Done():
		}
	}
	tick.Stop()
	late.stop()
	tracker.poll(false)
	after, err := readCounters(b.v)
	if err != nil {
		return nil, errors.Join(err, finish())
	}
	if err := sleepUntil(to.Add(c.grace)); err != nil {
		return nil, errors.Join(err, finish())
	}
	if err := finish(); err != nil {
		return nil, err
	}

	rec.mu.Lock()
	res.Lat = rec.lat
	res.Lost = rec.lost
	rec.mu.Unlock()
	res.Gaps = rec.gaps()
	res.Expected = int(float64(len(b.topics)) * c.topicRate * c.window.Seconds())
	res.Topic = tracker.stats(len(b.topics))
	var senders, all []string
	for _, h := range b.topics {
		senders = append(senders, h.Name)
	}
	for _, h := range b.v.Hosts {
		all = append(all, h.Name)
	}
	res.Senders = sumTCP(before, after, senders)
	res.AllHosts = sumTCP(before, after, all)
	res.Heavy = sumTCP(before, after, []string{b.heavy.Name})
	for port, st := range after.ports {
		d := st.Sub(before.ports[port])
		if port == b.receiver.SwitchPort {
			res.PortDrops, res.PortSentBytes, res.PortSentPackets = d.Drops, d.SentBytes, d.SentPackets
		} else {
			res.OtherDrops += d.Drops
		}
	}
	if dt := after.cpu.total - before.cpu.total; dt > 0 {
		res.CPUBusy = float64(after.cpu.busy-before.cpu.busy) / float64(dt)
		res.CPUSelf = float64(after.cpu.self-before.cpu.self) / float64(dt)
	}
	if w := after.at.Sub(before.at); w > 0 && after.cpu.psiSome >= before.cpu.psiSome {
		res.CPUPressure = float64(after.cpu.psiSome-before.cpu.psiSome) / float64(w.Microseconds())
	}
	res.TimerLate = late.max()
	res.Load1 = before.load1s + " -> " + after.load1s
	for _, l := range []string{before.load1s, after.load1s} {
		if f, err := strconv.ParseFloat(l, 64); err == nil {
			res.MaxLoad = max(res.MaxLoad, f)
		}
	}
	res.RunElapsed = time.Since(began)
	return res, nil
}

func newLogger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		fmt.Fprintf(os.Stderr, "%s %s %s\n", time.Now().Format("15:04:05.000"), prefix, args)
	}, funcr.Options{})
}

// lateness measures how late a 1 ms sleep wakes up, until a deadline.
type lateness struct {
	mu    sync.Mutex
	worst time.Duration
	done  chan struct{}
	quit  chan struct{}
}

func startLateness(until time.Time) *lateness {
	l := &lateness{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(l.done)
		for time.Now().Before(until) {
			select {
			case <-l.quit:
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			d := time.Since(t0) - time.Millisecond
			l.mu.Lock()
			l.worst = max(l.worst, d)
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *lateness) stop() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	<-l.done
}

func (l *lateness) max() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.worst
}
