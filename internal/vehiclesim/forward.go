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

package vehiclesim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
)

// ForwardToRoot makes target, a TCP server on a loopback address of the root
// namespace (a kube-apiserver on 127.0.0.1:6443, Loki, Prometheus), reachable
// at the same address and port from inside every host namespace: it listens
// there and forwards each connection to target from the root namespace. An
// agent started with Host.Run then uses the very kubeconfig (and TLS server
// name) of the root namespace; no management veth is needed. Forwarding
// stops when the vehicle closes.
func (v *Vehicle) ForwardToRoot(target string) error {
	ap, err := netip.ParseAddrPort(target)
	if err != nil {
		return fmt.Errorf("forward %q: %w", target, err)
	}
	if !ap.Addr().IsLoopback() {
		return fmt.Errorf("forward %s: want a loopback address", target)
	}
	ctx, done, err := v.begin(context.Background())
	if err != nil {
		return err
	}
	var lns []net.Listener
	for _, h := range v.Hosts {
		var ln net.Listener
		err := h.Do(func() error {
			var err error
			ln, err = net.Listen("tcp", target)
			return err
		})
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			done()
			return fmt.Errorf("forward %s: listen in %s: %w", target, h.Name, err)
		}
		lns = append(lns, ln)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if on && ctx.Err() != nil {
			return false
		}
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
		return true
	}
	for _, ln := range lns {
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Go(func() {
					defer c.Close()
					if !track(c, true) {
						return
					}
					defer track(c, false)
					// An ordinary goroutine: its thread is in the root namespace.
					var d net.Dialer
					u, err := d.DialContext(ctx, "tcp", target)
					if err != nil {
						return
					}
					defer u.Close()
					if !track(u, true) {
						return
					}
					defer track(u, false)
					var pw sync.WaitGroup
					pw.Go(func() { _, _ = io.Copy(u, c); closeWrite(u) })
					_, _ = io.Copy(c, u)
					closeWrite(c)
					pw.Wait()
				})
			}
		})
	}
	go func() {
		<-ctx.Done()
		for _, ln := range lns {
			ln.Close()
		}
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		done()
	}()
	return nil
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		c.Close()
	}
}
