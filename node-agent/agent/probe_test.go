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
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
)

// TestProbeWaitsForARestartingPeer: a peer whose agent is restarting
// refuses the probe port until it listens again. The probe tries again
// within its connect timeout and passes once the peer listens; a peer that
// refuses for the whole timeout fails it, saying how often it was refused.
func TestProbeWaitsForARestartingPeer(t *testing.T) {
	p := newPair(t)
	// A free port in B: listen, note it, close.
	ln := listenIn(t, p.B, p.addrB)
	port := ln.port()
	ln.ln.Close()
	spec := v1alpha1.NodeNetTuningSpec{Peers: []v1alpha1.Peer{{Host: "b", Address: p.addrB, ProbePort: port}}}
	prober := LocalProber{ConnectTimeout: 3 * time.Second, Window: time.Millisecond}

	// Nobody listens for the whole timeout: the probe fails.
	start := time.Now()
	err := prober.Probe(context.Background(), p.A.h, spec)
	t.Logf("peer refusing throughout: %v after %s", err, time.Since(start).Round(time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("probe of a peer refusing throughout = %v, want a failure saying it was refused", err)
	}
	if elapsed := time.Since(start); elapsed < 2*time.Second {
		t.Errorf("probe gave up on a refusing peer after %s, want it to retry for about its 3s connect timeout", elapsed)
	}

	// The peer listens again 1 s after the probe starts: the probe passes
	// and its connection reaches the new listener.
	listening := make(chan net.Listener, 1)
	go func() {
		time.Sleep(time.Second)
		var l net.Listener
		err := kernel.DoInNetns(p.B.h.Namespace(), func() error {
			var err error
			l, err = net.Listen("tcp4", net.JoinHostPort(p.addrB, strconv.Itoa(int(port))))
			return err
		})
		if err != nil {
			t.Errorf("listening again on %d in B: %v", port, err)
			listening <- nil
			return
		}
		listening <- l
	}()
	if err := prober.Probe(context.Background(), p.A.h, spec); err != nil {
		t.Fatalf("probe of a peer listening again after 1s failed: %v", err)
	}
	l := <-listening
	if l == nil {
		t.FailNow()
	}
	defer l.Close()
	if err := l.(*net.TCPListener).SetDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("the probe passed but no connection reached the peer's new listener: %v", err)
	}
	c.Close()
}
