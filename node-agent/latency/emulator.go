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

package latency

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Defaults of Options.
const (
	DefaultAckTimeout  = 10 * time.Second
	DefaultDialTimeout = 2 * time.Second
	DefaultMinBackoff  = 200 * time.Millisecond
	DefaultMaxBackoff  = 10 * time.Second
	DefaultMaxInflight = 4096
)

// DialFunc opens a TCP connection to addr (host:port). The agent's dials
// happen inside the tuned host's network namespace.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// Options configure an Emulator.
type Options struct {
	// Topics are emulated towards every target.
	Topics []Topic
	// Sink receives the samples (and, if it is a LossObserver, the losses).
	Sink Sink
	// Dial opens the connections. Default: a net.Dialer in the process's
	// own network namespace.
	Dial DialFunc
	// Log receives connection errors (at V(1) for repeated ones).
	Log logr.Logger
	// AckTimeout is how long a message may go unacknowledged before the
	// connection is considered dead and re-established. Default 10s.
	AckTimeout time.Duration
	// DialTimeout bounds each connect. Default 2s.
	DialTimeout time.Duration
	// MinBackoff and MaxBackoff bound the delay between reconnects.
	// Defaults 200ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// MaxInflight is the most unacknowledged messages of one connection; a
	// tick finding that many outstanding sends nothing (counted as skipped).
	// Default 4096.
	MaxInflight int
}

// Emulator runs one flow per (topic, target): a persistent TCP connection
// to the target's probe port carrying the topic's messages at its rate.
// Update sets the targets; Close stops everything.
type Emulator struct {
	opts Options

	mu     sync.Mutex
	flows  map[flowKey]*flow
	closed bool
	wg     sync.WaitGroup
}

type flowKey struct{ topic, peer string }

// NewEmulator returns an emulator with no targets.
func NewEmulator(opts Options) *Emulator {
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = DefaultAckTimeout
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = DefaultMaxInflight
	}
	if opts.Dial == nil {
		opts.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	if opts.Sink == nil {
		opts.Sink = Sinks(nil)
	}
	return &Emulator{opts: opts, flows: map[flowKey]*flow{}}
}

// Update makes the running flows match targets: flows of targets that are
// gone stop, flows of new targets start, and a target whose address, port,
// profile or revision changed gets a new connection (new route metrics and
// tcp_metrics apply to new connections, and its samples carry the new
// labels from then on). Unchanged flows keep their connection.
func (e *Emulator) Update(targets []Target) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	want := map[flowKey]Target{}
	for _, t := range targets {
		for _, tp := range e.opts.Topics {
			want[flowKey{tp.Name, t.Peer}] = t
		}
	}
	for k, f := range e.flows {
		if t, ok := want[k]; !ok || t != f.target {
			f.cancel()
			delete(e.flows, k)
		}
	}
	for _, tp := range e.opts.Topics {
		for _, t := range targets {
			k := flowKey{tp.Name, t.Peer}
			if _, ok := e.flows[k]; ok {
				continue
			}
			t, ok := want[k] // the last entry of a peer listed twice
			if !ok {
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			f := &flow{e: e, topic: tp, target: t, cancel: cancel,
				log: e.opts.Log.WithValues("topic", tp.Name, "peer", t.Peer, "addr", t.Addr(), "revision", t.Revision)}
			e.flows[k] = f
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				f.run(ctx)
			}()
		}
	}
}

// Close stops every flow and waits for them.
func (e *Emulator) Close() {
	e.mu.Lock()
	e.closed = true
	for k, f := range e.flows {
		f.cancel()
		delete(e.flows, k)
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// flow is one (topic, target).
type flow struct {
	e      *Emulator
	topic  Topic
	target Target
	cancel context.CancelFunc
	log    logr.Logger
	seq    atomic.Uint64 // last seq sent; unique across reconnects
}

// run connects, runs a session and reconnects with backoff until ctx ends.
func (f *flow) run(ctx context.Context) {
	o := f.e.opts
	backoff := o.MinBackoff
	failures := 0
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
		conn, err := o.Dial(dctx, f.target.Addr())
		cancel()
		if err == nil {
			began := time.Now()
			err = f.session(ctx, conn)
			if ctx.Err() != nil {
				return
			}
			if time.Since(began) > 2*o.MaxBackoff {
				backoff, failures = o.MinBackoff, 0 // it ran well for a while
			}
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		if failures <= 3 || failures%100 == 0 {
			f.log.Error(err, "latency probe connection failed; reconnecting", "retryIn", backoff, "failures", failures)
		} else {
			f.log.V(1).Info("latency probe connection failed; reconnecting", "error", err.Error(), "retryIn", backoff, "failures", failures)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
}

// sent is one message awaiting its ack.
type sent struct {
	seq uint64
	at  time.Time
}

// inflight is the FIFO of unacknowledged messages of one connection.
type inflight struct {
	mu     sync.Mutex
	q      []sent
	signal chan struct{} // a message was queued
}

func (q *inflight) push(s sent) {
	q.mu.Lock()
	q.q = append(q.q, s)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *inflight) front() (sent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.q) == 0 {
		return sent{}, false
	}
	return q.q[0], true
}

func (q *inflight) pop() {
	q.mu.Lock()
	q.q = q.q[1:]
	if len(q.q) == 0 {
		q.q = q.q[:0:0] // let the backing array go
	}
	q.mu.Unlock()
}

func (q *inflight) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.q)
}

func (q *inflight) drain() []sent {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.q
	q.q = nil
	return out
}

// session runs one connection: the magic, then a sender and an ack reader
// until either fails or ctx ends.
func (f *flow) session(ctx context.Context, conn net.Conn) error {
	defer conn.Close()
	o := f.e.opts
	_ = conn.SetWriteDeadline(time.Now().Add(o.AckTimeout))
	if _, err := io.WriteString(conn, Magic); err != nil {
		return fmt.Errorf("writing the protocol magic: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := &inflight{signal: make(chan struct{}, 1)}
	errc := make(chan error, 2)
	go func() { errc <- f.send(sctx, conn, q) }()
	go func() { errc <- f.receive(sctx, conn, q) }()
	err := <-errc
	cancel()
	_ = conn.Close()      // unblocks the other goroutine
	<-errc                //nolint:errcheck // waits for the other goroutine; the first error decides
	if ctx.Err() == nil { // the network lost them, not a target change
		if lo, ok := o.Sink.(LossObserver); ok {
			now := time.Now()
			for _, s := range q.drain() {
				lo.Lost(f.sample(s, now))
			}
		}
	}
	return err
}

func (f *flow) sample(s sent, ackAt time.Time) Sample {
	return Sample{Time: s.at, Topic: f.topic.Name, Peer: f.target.Peer, Profile: f.target.Profile,
		Revision: f.target.Revision, Latency: ackAt.Sub(s.at), Size: f.topic.Size, Seq: s.seq}
}

// send writes one message per tick. Ticks missed while a write blocked
// (the send buffer full during a stall) are not made up: the next message
// goes out on the next regular tick, stamped with its real send time.
func (f *flow) send(ctx context.Context, conn net.Conn, q *inflight) error {
	o := f.e.opts
	interval := time.Duration(float64(time.Second) / f.topic.Rate)
	buf := make([]byte, headerLen+f.topic.Size)
	_, _ = rand.Read(buf[headerLen:]) // incompressible, like sensor data
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if q.len() >= o.MaxInflight {
			f.log.V(1).Info("too many unacknowledged messages; skipping a tick", "inflight", o.MaxInflight)
			continue
		}
		seq := f.seq.Add(1)
		putHeader(buf, f.topic.Size, seq)
		at := time.Now()
		q.push(sent{seq: seq, at: at})
		_ = conn.SetWriteDeadline(at.Add(o.AckTimeout))
		if _, err := conn.Write(buf); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("writing message %d: %w", seq, err)
		}
		if time.Since(at) >= interval {
			// The write stalled past the next tick: drop the tick that
			// queued meanwhile rather than send two back to back.
			select {
			case <-tick.C:
			default:
			}
		}
	}
}

// receive reads the acks in order and reports a sample per message.
func (f *flow) receive(ctx context.Context, conn net.Conn, q *inflight) error {
	o := f.e.opts
	r := bufio.NewReaderSize(conn, 4096)
	var ack [ackLen]byte
	for {
		s, ok := q.front()
		if !ok {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-q.signal:
				continue
			}
		}
		_ = conn.SetReadDeadline(s.at.Add(o.AckTimeout))
		if _, err := io.ReadFull(r, ack[:]); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("no acknowledgement of message %d within %v", s.seq, o.AckTimeout)
			}
			return fmt.Errorf("reading the acknowledgement of message %d: %w", s.seq, err)
		}
		now := time.Now()
		q.pop()
		if got := binary.BigEndian.Uint64(ack[:]); got != s.seq {
			return fmt.Errorf("acknowledgement of message %d out of order: got %d", s.seq, got)
		}
		o.Sink.Observe(f.sample(s, now))
	}
}
