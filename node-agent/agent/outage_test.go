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
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/nettune/nettune/test/framework/nettest"
)

// outageProxy forwards TCP connections from a loopback port to the API
// server. Cut makes the API server unreachable as the fault matrix's
// iptables rule does: every live connection is reset and new ones are
// refused (nothing listens on the port); Restore listens on the same port
// again.
type outageProxy struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newOutageProxy(t *testing.T, target string) *outageProxy {
	t.Helper()
	p := &outageProxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.Cut()
		p.wg.Wait()
	})
	return p
}

func (p *outageProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
}

// track records c as live, or closes it when the proxy is cut.
func (p *outageProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *outageProxy) forward(c net.Conn) {
	if !p.track(c) {
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(up) {
		c.Close()
		up.Close()
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut resets every live connection and stops listening.
func (p *outageProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not an orderly close
		}
		c.Close()
	}
}

// Restore listens on the proxy's port again.
func (p *outageProxy) Restore(t *testing.T) {
	t.Helper()
	var ln net.Listener
	nettest.WaitFor(t, rtTimeout, func() error {
		var err error
		ln, err = net.Listen("tcp", p.addr)
		return err
	})
	p.serve(ln)
}

// config is cfg pointed at the proxy.
func (p *outageProxy) config(t *testing.T, cfg *rest.Config) *rest.Config {
	t.Helper()
	c := rest.CopyConfig(cfg)
	u, err := url.Parse(c.Host)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.addr
	c.Host = u.String()
	c.Timeout = 10 * time.Second // as connect sets it
	return c
}

// rtRun is one connection of the agent: its reconciler run through cfg as
// connect does, in the background until stop. finished is closed when Run
// returned, with its result in *result; stop ends the run and returns that
// result (an error when Run did not return within rtTimeout of its
// context's end).
func (a *rtAgent) rtRun(t *testing.T, cfg *rest.Config, syncTimeout time.Duration) (finished <-chan struct{}, result *error, stop func() error) {
	t.Helper()
	kube, err := NewKube(cfg)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	log := rtLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	a.rec.Recorder = kube.EventRecorder(ctx, rtRecorder, log.WithName("events"))
	fin := make(chan struct{})
	var res error
	go func() {
		defer close(fin)
		res = a.rec.Run(ctx, kube, syncTimeout, log.WithName("reconciler"))
	}()
	stop = func() error {
		cancel()
		select {
		case <-fin:
			return res
		case <-time.After(rtTimeout):
			return errors.New("Run did not return within " + rtTimeout.String() + " of its context's end")
		}
	}
	t.Cleanup(func() { _ = stop() })
	return fin, &res, stop
}

// TestAgentRecoversFromAnAPIServerOutage: the API server out of reach (its
// connections reset, new ones refused), as in the fault matrix's
// TestAPIServerDown. A connection whose first list times out returns, so
// that the agent connects again (it used to wait forever for its own watch,
// which nothing stopped); a connection made during the outage takes a spec
// changed meanwhile within WatchRetryMax of the API server's return; and a
// status write that failed during an outage, whose retry had backed off to
// minutes, is made as soon as the API server answers again.
func TestAgentRecoversFromAnAPIServerOutage(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp := rtControlPlane(t)
	h := rtNewHost(t)
	a := rtNewAgent(t, cp, h, "rt-node-"+nettest.RandHex(t, 4))
	rtCreate(t, cp.Client, a.node, h.rtSpec("r1", rtCwndFirst))
	target, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newOutageProxy(t, target.Host)
	cfg := proxy.config(t, cp.Config)

	_, _, stop := a.rtRun(t, cfg, rtTimeout)
	rtAssertApplied(t, a, rtWaitStatus(t, cp.Client, a.node), rtCwndFirst)

	// The outage; the agent restarts meanwhile: its running connection
	// ends, and a new one cannot list.
	proxy.Cut()
	if err := stop(); err != nil {
		t.Fatalf("stopping the connection made before the outage: %v", err)
	}
	const shortSync = 2 * time.Second
	finished, result, stop := a.rtRun(t, cfg, shortSync)
	select {
	case <-finished:
		if err := *result; err == nil {
			t.Fatalf("Run returned nil while the API server was out of reach, want an error (no list within %s)", shortSync)
		}
		t.Logf("the connection made during the outage ended: %v", *result)
	case <-time.After(shortSync + rtTimeout):
		t.Fatalf("Run did not return %s after it started although its first list timed out after %s", shortSync+rtTimeout, shortSync)
	}
	_ = stop()

	// The next connection (runAgent's loop) while the API server is still
	// out of reach; the spec changes meanwhile.
	_, _, stop = a.rtRun(t, cfg, 10*time.Minute)
	defer func() { _ = stop() }()
	rtUpdateSpec(t, cp.Client, a.node, h.rtSpec("r2", rtCwndFirst+5))
	proxy.Restore(t)
	back := time.Now()
	nettest.WaitFor(t, WatchRetryMax+rtTimeout, func() error {
		nnt := rtGet(t, cp.Client, a.node)
		if nnt.Status.AppliedRevision != "r2" || nnt.Status.ObservedGeneration != nnt.Generation {
			return fmt.Errorf("waiting for revision r2 reported after the API server came back: appliedRevision %q, observedGeneration %d of %d",
				nnt.Status.AppliedRevision, nnt.Status.ObservedGeneration, nnt.Generation)
		}
		return nil
	})
	t.Logf("revision r2 changed during the outage reported %s after the API server came back (bound %s + one reconcile)",
		time.Since(back).Round(10*time.Millisecond), WatchRetryMax)
	rtAssertApplied(t, a, rtGet(t, cp.Client, a.node), rtCwndFirst+5)

	// A second outage with a status write failing: a drift repair wakes
	// the reconciler, whose status write fails; its retry is an hour away
	// (as it would be minutes away after the failures of a long outage,
	// the queue's backoff doubling from 5 ms up to 1000 s).
	proxy.Cut()
	// The limiter is read by the next Run only: a connection of its own.
	if err := stop(); err != nil {
		t.Fatalf("stopping the connection: %v", err)
	}
	a.rec.retryLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour)
	proxy.Restore(t)
	_, _, stop = a.rtRun(t, cfg, rtTimeout)
	rtEventually(t, "the watch of "+a.node+" to be listed", func() error {
		if _, err := a.rtWatched(a.node); err != nil {
			return err
		}
		return nil
	})
	proxy.Cut()
	before := a.rec.reconciles.Load()
	a.rec.DriftRepaired(1)
	rtEventually(t, "a reconcile after the drift repair", func() error {
		if a.rec.reconciles.Load() == before {
			return errors.New("no reconcile since the drift repair")
		}
		return nil
	})
	if n := rtGet(t, cp.Client, a.node).Status.DriftRepairs; n != 0 {
		t.Fatalf("driftRepairs %d written while the API server was out of reach", n)
	}
	proxy.Restore(t)
	back = time.Now()
	nettest.WaitFor(t, WatchRetryMax+rtTimeout, func() error {
		if n := rtGet(t, cp.Client, a.node).Status.DriftRepairs; n != 1 {
			return fmt.Errorf("waiting for the drift repair of the outage reported after the API server came back: driftRepairs %d, want 1", n)
		}
		return nil
	})
	t.Logf("the status held back by the outage written %s after the API server came back", time.Since(back).Round(10*time.Millisecond))
	if c := rtGet(t, cp.Client, a.node); c.Status.AppliedRevision != "r2" {
		t.Errorf("appliedRevision %q after the second outage, want r2", c.Status.AppliedRevision)
	}
}
