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
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Repair re-tunes every item of the committed spec that no longer reads back
// as desired (a route recreated without metrics by a link flap, DHCP or a
// hand-typed `ip route`, a sysctl changed by someone else) and returns how
// many items it repaired.
func (e *Engine) Repair(ctx context.Context) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	spec, err := e.CommittedSpec()
	if err != nil || spec.Revision == "" {
		return 0, err
	}
	repaired := 0
	// The routes are converted once, for the verify and the repair.
	routes := convertRoutes(spec.Routes)
	byDestination := make(map[string]int, len(routes))
	for i, d := range routes {
		byDestination[d.route.Destination] = i
	}
	for _, it := range e.observe(spec, routes) {
		if it.State == StateVerified || it.State == StateNotEffective {
			continue
		}
		switch it.Kind {
		case "Route":
			d := routes[byDestination[it.Name]]
			if d.err != nil {
				return repaired, d.err
			}
			if _, err := e.Host.ApplyRoute(d.spec); err != nil {
				return repaired, fmt.Errorf("repairing route %s: %w", it.Name, err)
			}
		case "Sysctl":
			for _, s := range spec.Sysctls {
				if s.Name == it.Name {
					if _, err := e.Host.WriteSysctl(s.Name, s.Value); err != nil {
						return repaired, fmt.Errorf("repairing sysctl %s: %w", s.Name, err)
					}
				}
			}
		case "Interface":
			for _, i := range spec.Interfaces {
				if i.Name == it.Name {
					if _, _, err := e.Host.ApplyInterface(linkSettings(i)); err != nil {
						return repaired, fmt.Errorf("repairing interface %s: %w", i.Name, err)
					}
				}
			}
		}
		repaired++
		e.Log.Info("drift repaired", "kind", it.Kind, "item", it.Name, "was", it.Observed, "want", it.Desired)
	}
	if repaired > 0 {
		e.prime(ctx, spec)
	}
	return repaired, nil
}

// WatchDrift subscribes to route and link changes of the host's namespace and
// repairs drift shortly after each burst of changes (debounced), and every
// resync interval regardless. onRepair is called with the number of items
// repaired. It returns when ctx ends.
//
// A subscription the kernel overflows (ENOBUFS: notifications dropped, e.g.
// hundreds of route changes of a rollback while a repair waits for the
// apply to finish) is closed by the netlink library; the watcher then
// subscribes again and re-checks the host instead of stopping for good.
func (e *Engine) WatchDrift(ctx context.Context, resync, debounce time.Duration, onRepair func(int)) error {
	// Only a foreign namespace is named: subscribing in one means setns,
	// which needs CAP_SYS_ADMIN, and the agent's own namespace needs none.
	var nsp *netns.NsHandle
	if e.Host.Foreign() {
		ns := e.Host.Namespace()
		nsp = &ns
	}
	var (
		routes chan netlink.RouteUpdate
		links  chan netlink.LinkUpdate
		done   chan struct{}
	)
	errCb := func(err error) { e.Log.Error(err, "netlink subscription") }
	subscribe := func() error {
		routes = make(chan netlink.RouteUpdate, 64)
		links = make(chan netlink.LinkUpdate, 64)
		done = make(chan struct{})
		if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{Namespace: nsp, ErrorCallback: errCb}); err != nil {
			return fmt.Errorf("subscribing to route changes: %w", err)
		}
		if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{Namespace: nsp, ErrorCallback: errCb}); err != nil {
			return fmt.Errorf("subscribing to link changes: %w", err)
		}
		return nil
	}
	err := subscribe()
	defer func() { close(done) }()
	if err != nil {
		return err
	}
	var fire <-chan time.Time
	resubscribe := func(which string) error {
		e.Log.Info("netlink subscription lost, notifications may have been dropped: subscribing again and re-checking the host", "subscription", which)
		close(done)
		// Keep the old subscriptions' senders unblocked until they close.
		go func(r <-chan netlink.RouteUpdate, l <-chan netlink.LinkUpdate) {
			for range r {
			}
			for range l {
			}
		}(routes, links)
		if err := subscribe(); err != nil {
			return err
		}
		if fire == nil {
			fire = time.After(debounce)
		}
		return nil
	}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	repair := func() {
		n, err := e.Repair(ctx)
		if err != nil {
			e.Log.Error(err, "drift repair")
		}
		if n > 0 && onRepair != nil {
			onRepair(n)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-routes:
			if !ok {
				if err := resubscribe("route"); err != nil {
					return err
				}
				continue
			}
			if fire == nil {
				fire = time.After(debounce)
			}
		case _, ok := <-links:
			if !ok {
				if err := resubscribe("link"); err != nil {
					return err
				}
				continue
			}
			if fire == nil {
				fire = time.After(debounce)
			}
		case <-fire:
			fire = nil
			repair()
		case <-tick.C:
			repair()
		}
	}
}
