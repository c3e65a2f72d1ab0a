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

// Package agent is the node agent: a transactional engine that applies a
// NodeNetTuningSpec to the host (preflight, snapshot, journal, apply, verify,
// probe, then commit or restore), the reconciler that feeds it the node's own
// NodeNetTuning, the drift watcher, and the agent's metrics.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/state"
)

// Item states reported in NodeNetTuning status.
const (
	StateVerified     = "Verified"
	StateNotEffective = "NotEffective"
	StateMismatch     = "Mismatch"
	StateFailed       = "Failed"
)

// Snapshot is the state of every item an apply touches, taken before the
// first change; restoring it undoes the apply. It is written to the journal,
// so it survives a crash.
type Snapshot struct {
	Routes     []kernel.RouteSnapshot     `json:"routes,omitempty"`
	Sysctls    []v1alpha1.Sysctl          `json:"sysctls,omitempty"`
	Interfaces []v1alpha1.InterfaceTuning `json:"interfaces,omitempty"`
}

// Outcome is the result of one Apply.
type Outcome struct {
	// Revision is the revision in force on the host afterwards.
	Revision string
	// Changed is true when the target was committed and differs from before.
	Committed bool
	// Refused is true when preflight refused the spec: nothing was touched.
	Refused bool
	// RolledBack is true when the apply was undone (apply error, verify
	// mismatch or failed probe).
	RolledBack bool
	// Reason explains Refused, RolledBack or Retry.
	Reason string
	// Retry, when set, says the host's environment stopped the apply, not
	// the revision (RetryReason: v1alpha1.ReasonStateUnwritable or
	// ReasonInterrupted): the host is on Revision, and the same spec is to be
	// applied again after Retry.
	Retry       time.Duration
	RetryReason string
	// Items is the per-item report of the target (desired vs observed).
	Items []v1alpha1.ItemResult
	// Duration of the whole transaction.
	Duration time.Duration
}

// Engine applies node specs to one host (network namespace) transactionally.
type Engine struct {
	Host   *kernel.Handle
	Store  *state.Store
	Probes Prober
	Log    logr.Logger
	Now    func() time.Time
	// PrimeTimeout bounds the tcp_metrics priming of one peer after a
	// change, its repairs included (0: one second).
	PrimeTimeout time.Duration

	// mu serializes applies and drift repairs: a repair must never run in the
	// middle of an apply and "repair" routes back to the previous revision.
	mu sync.Mutex
	// notices are the state directory's repairs not yet reported.
	notices []string
}

// TakeNotices returns, and forgets, what was repaired in the state directory
// (an unreadable last-known-good or journal kept aside): for the agent to
// report.
func (e *Engine) TakeNotices() []string {
	more := e.Store.Notices()
	e.mu.Lock()
	defer e.mu.Unlock()
	out := append(e.notices, more...)
	e.notices = nil
	return out
}

// committed returns the last-known-good spec and the originals, empty when
// nothing was committed yet.
func (e *Engine) committed() (v1alpha1.NodeNetTuningSpec, Snapshot, error) {
	lkg, err := e.Store.LastKnownGood()
	if err != nil || lkg == nil {
		return v1alpha1.NodeNetTuningSpec{}, Snapshot{}, err
	}
	var orig Snapshot
	if len(lkg.Originals) > 0 {
		if err := json.Unmarshal(lkg.Originals, &orig); err != nil {
			return v1alpha1.NodeNetTuningSpec{}, Snapshot{}, fmt.Errorf("decoding originals: %w", err)
		}
	}
	return lkg.Spec, orig, nil
}

// CommittedSpec is the last-known-good spec (zero when none).
func (e *Engine) CommittedSpec() (v1alpha1.NodeNetTuningSpec, error) {
	s, _, err := e.committed()
	return s, err
}

// plan is the concrete work of one apply: what to set, and what to return to
// its original state because the new spec no longer names it.
type plan struct {
	routes        []kernel.RouteSpec
	restoreRoutes []kernel.RouteSnapshot
	sysctls       []v1alpha1.Sysctl
	interfaces    []v1alpha1.InterfaceTuning
}

// Preflight checks that target can be applied to this host in full, without
// touching its network: every value converts, every device exists, every
// congestion control is there, every sysctl exists and is the namespace's
// own. A congestion control that is not loaded is asked for once
// (Host.LoadCongestionControl): a kernel that builds it as a module loads it
// then, as it would when the route is written, and a refusal would be wrong.
func (e *Engine) Preflight(target v1alpha1.NodeNetTuningSpec) error {
	return e.preflight(target, convertRoutes(target.Routes))
}

// preflight is Preflight of target, whose routes are converted.
func (e *Engine) preflight(target v1alpha1.NodeNetTuningSpec, routes []desiredRoute) error {
	var errs []error
	devices := map[string]error{} // each device checked once
	ccs := congestionControls{host: e.Host, log: e.Log}
	for _, d := range routes {
		r := d.route
		if d.err != nil {
			errs = append(errs, d.err)
			continue
		}
		if r.Device != "" {
			derr, seen := devices[r.Device]
			if !seen {
				_, derr = e.Host.ReadInterface(r.Device)
				devices[r.Device] = derr
			}
			if derr != nil {
				errs = append(errs, fmt.Errorf("route %s: device %s does not exist", r.Destination, r.Device))
			}
		}
		if cc := r.Parameters.CongestionControl; cc != nil {
			if err := ccs.require(string(*cc)); err != nil {
				errs = append(errs, fmt.Errorf("route %s: %w", r.Destination, err))
			}
		}
	}
	for _, s := range target.Sysctls {
		// A global sysctl is refused whatever its value: the namespace
		// lacks it or shows it read-only (the write, and the restore of a
		// snapshot, would fail), and it is not the namespace's to tune.
		werr := e.Host.CheckSysctlWritable(s.Name)
		if errors.Is(werr, kernel.ErrNotPerNamespace) {
			errs = append(errs, werr)
			continue
		}
		cur, err := e.Host.ReadSysctl(s.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("sysctl %s: %w", s.Name, err))
			continue
		}
		// A value that must change must be writable: found now, nothing is
		// touched; found halfway, the snapshot could not be restored either.
		if cur != kernel.NormalizeSysctlValue(s.Value) && werr != nil {
			errs = append(errs, werr)
		}
	}
	for _, i := range target.Interfaces {
		if _, err := e.Host.ReadInterface(i.Name); err != nil {
			errs = append(errs, fmt.Errorf("interface %s does not exist", i.Name))
		}
	}
	return errors.Join(errs...)
}

// congestionControls checks the congestion controls of one preflight
// against the host's, reading the host's list only when a route names one:
// a namespace of a 4.9 kernel has no tcp_available_congestion_control of
// its own, and a spec without congestion controls must not need it.
type congestionControls struct {
	host      *kernel.Handle
	log       logr.Logger
	available []string
	read      bool
}

// require returns nil when the kernel has cc, loading it if it can, or an
// error naming cc and listing what the kernel has.
func (c *congestionControls) require(cc string) error {
	if !c.read {
		available, err := c.host.AvailableCongestionControls()
		if err != nil {
			return fmt.Errorf("congestion control %q: %w", cc, err)
		}
		c.available, c.read = available, true
	}
	if slices.Contains(c.available, cc) {
		return nil
	}
	loadErr := c.host.LoadCongestionControl(cc)
	available, err := c.host.AvailableCongestionControls()
	if err != nil {
		return fmt.Errorf("congestion control %q: %w", cc, err)
	}
	c.available = available
	if slices.Contains(available, cc) {
		c.log.Info("congestion control loaded on demand", "algorithm", cc, "available", available)
		return nil
	}
	if loadErr == nil {
		loadErr = errors.New("the kernel accepted it on a socket but does not list it")
	}
	return fmt.Errorf("congestion control %q is not available on this host (have %v): %w", cc, available, loadErr)
}

// Apply applies target as one transaction. The host ends either in target
// (committed as last-known-good) or exactly as it was.
func (e *Engine) Apply(ctx context.Context, target v1alpha1.NodeNetTuningSpec) (Outcome, error) {
	return e.transact(ctx, target, true)
}

// transact runs one apply under the engine lock and times it.
func (e *Engine) transact(ctx context.Context, target v1alpha1.NodeNetTuningSpec, probe bool) (Outcome, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	start := time.Now()
	out, err := e.apply(ctx, target, probe)
	out.Duration = time.Since(start)
	return out, err
}

func (e *Engine) apply(ctx context.Context, target v1alpha1.NodeNetTuningSpec, probe bool) (Outcome, error) {
	prevSpec, originals, err := e.committed()
	if err != nil {
		return Outcome{}, err
	}
	// The routes are converted once: preflight, write, verify and the
	// judgment of a rollback all carry this conversion.
	desired := convertRoutes(target.Routes)
	if err := e.preflight(target, desired); err != nil {
		return Outcome{Revision: prevSpec.Revision, Refused: true, Reason: "refused before any change: " + err.Error()}, nil
	}
	routes := make([]kernel.RouteSpec, len(desired))
	for i, d := range desired {
		routes[i] = d.spec
	}
	p := plan{routes: routes, sysctls: target.Sysctls, interfaces: target.Interfaces}

	// Items the previous spec owned and the target drops go back to their
	// original (pre-nettune) state.
	routeKeys := keySet(routes, func(r kernel.RouteSpec) string { return r.Dst.String() })
	sysctlKeys := keySet(target.Sysctls, sysctlKey)
	ifaceKeys := keySet(target.Interfaces, ifaceKey)
	var newOriginals Snapshot
	newOriginals.Routes, p.restoreRoutes = splitOwned(originals.Routes, routeSnapKey, routeKeys)
	var dropped []v1alpha1.Sysctl
	newOriginals.Sysctls, dropped = splitOwned(originals.Sysctls, sysctlKey, sysctlKeys)
	p.sysctls = append(p.sysctls, dropped...)
	var droppedIfaces []v1alpha1.InterfaceTuning
	newOriginals.Interfaces, droppedIfaces = splitOwned(originals.Interfaces, ifaceKey, ifaceKeys)
	p.interfaces = append(p.interfaces, droppedIfaces...)

	snap, err := e.snapshot(p)
	if err != nil {
		return Outcome{Revision: prevSpec.Revision, Refused: true, Reason: "refused before any change: " + err.Error()}, nil
	}
	// First-time items: their current state is their original.
	newOriginals.Routes = adoptNew(newOriginals.Routes, snap.Routes, routeSnapKey, routeKeys)
	newOriginals.Sysctls = adoptNew(newOriginals.Sysctls, snap.Sysctls, sysctlKey, sysctlKeys)
	newOriginals.Interfaces = adoptNew(newOriginals.Interfaces, snap.Interfaces, ifaceKey, ifaceKeys)

	rawSnap, err := json.Marshal(snap)
	if err != nil {
		return Outcome{}, fmt.Errorf("encoding snapshot: %w", err)
	}
	if err := e.Store.BeginJournal(state.Journal{Target: target, Snapshot: rawSnap, Started: e.now()}); err != nil {
		return Outcome{Revision: prevSpec.Revision, Retry: RetryAfter, RetryReason: v1alpha1.ReasonStateUnwritable,
			Reason: "nothing was changed: the apply cannot be recorded in the state directory: " + err.Error()}, nil
	}

	rollback := func(reason string, items []v1alpha1.ItemResult) (Outcome, error) {
		// Judged before the restore, which re-writes the routes.
		interruption := e.interrupted(target, desired, reason)
		if err := e.restore(snap); err != nil {
			return Outcome{}, fmt.Errorf("%s; restoring the snapshot failed too: %w", reason, err)
		}
		if err := e.Store.EndJournal(); err != nil {
			return Outcome{}, err
		}
		// Restoring flushed the tcp_metrics entries of the restored routes:
		// prime them again, or the next connection runs without the clamp
		// of the revision still in force.
		e.prime(ctx, prevSpec)
		e.Log.Info("apply rolled back", "revision", target.Revision, "reason", reason, "interruption", interruption)
		o := Outcome{Revision: prevSpec.Revision, RolledBack: true, Reason: reason, Items: items}
		if interruption != "" {
			o.Retry, o.RetryReason, o.Reason = RetryAfter, v1alpha1.ReasonInterrupted, reason+" ("+interruption+")"
		}
		return o, nil
	}

	if err := e.write(ctx, p); err != nil {
		return rollback("apply failed: "+err.Error(), nil)
	}
	e.prime(ctx, target)
	items := e.observe(target, desired)
	for _, it := range items {
		if it.State == StateMismatch || it.State == StateFailed {
			return rollback(fmt.Sprintf("verify failed: %s %s: %s", it.Kind, it.Name, it.Message), items)
		}
	}
	if probe && e.Probes != nil {
		if err := e.Probes.Probe(ctx, e.Host, target); err != nil {
			return rollback("probe failed: "+err.Error(), items)
		}
	}

	committed := target
	lkgOrig, err := json.Marshal(newOriginals)
	if err != nil {
		return Outcome{}, fmt.Errorf("encoding originals: %w", err)
	}
	if err := e.Store.Commit(committed, lkgOrig, e.now()); err != nil {
		// The kernel must not hold what the last-known-good does not say.
		o, rbErr := rollback("the last-known-good state cannot be recorded: "+err.Error(), items)
		if rbErr == nil {
			o.Retry, o.RetryReason = RetryAfter, v1alpha1.ReasonStateUnwritable
		}
		return o, rbErr
	}
	e.Log.Info("applied", "revision", target.Revision, "routes", len(target.Routes), "sysctls", len(target.Sysctls), "interfaces", len(target.Interfaces))
	return Outcome{Revision: target.Revision, Committed: true, Items: items}, nil
}

// RetryAfter is how soon an apply the host's environment stopped is tried
// again.
const RetryAfter = 10 * time.Second

// interrupted explains why an apply that failed with reason was stopped by
// the host's network rather than by the revision, or returns "": the kernel
// said the network is down, an interface the target routes use is down, or
// a route the apply had written is gone (a link that went down takes its
// routes with it; a DHCP client flushes them). A revision that is wrong
// leaves its routes in place and fails its verify or probe on a link that
// is up. routes are target's, converted.
func (e *Engine) interrupted(target v1alpha1.NodeNetTuningSpec, routes []desiredRoute, reason string) string {
	if strings.Contains(reason, "network is down") || strings.Contains(reason, "no such device") {
		return "the network was down"
	}
	devices := map[string]bool{}
	for _, r := range target.Routes {
		if r.Device != "" && !devices[r.Device] {
			devices[r.Device] = true
			// The link may have changed a moment ago: judge it once its
			// operational state agrees with its carrier.
			st, err := e.Host.WaitInterface(context.Background(), r.Device, LinkSettle, kernel.InterfaceState.Settled)
			if err != nil {
				return fmt.Sprintf("interface %s: %v", r.Device, err)
			}
			if !st.Running() {
				return fmt.Sprintf("interface %s is down (%s)", r.Device, st.OperState)
			}
		}
	}
	table, err := e.Host.ReadRouteTable()
	if err != nil {
		return ""
	}
	for _, d := range routes {
		if d.err == nil && table.Lookup(d.spec.Dst) == nil {
			return "route " + d.route.Destination + " was removed while the apply ran (a link flap or a DHCP client's flush)"
		}
	}
	return ""
}

// prime re-creates the tcp_metrics cache entry of every peer route after a
// change: connections take a locked cwnd only from that cache, so without it
// the first connection after a flush would run unclamped. The entry is read
// back and re-made until it carries the route's locked cwnd and ssthresh
// (kernel.Handle.PrimeTCPMetrics): a connection closing under the old route
// between the flush and the prime would otherwise leave it unclamped for an
// hour. An entry that stays wrong is logged as an error; failures to reach
// the peer are left to the connect probe to judge.
func (e *Engine) prime(ctx context.Context, spec v1alpha1.NodeNetTuningSpec) {
	for _, r := range spec.Routes {
		var want kernel.TCPMetricsWant
		if rs, err := routeSpec(r); err == nil {
			want = kernel.WantTCPMetrics(rs.Metrics)
		}
		for _, p := range spec.Peers {
			if p.Host != r.Peer || p.ProbePort == 0 {
				continue
			}
			addr := &net.TCPAddr{IP: net.ParseIP(p.Address), Port: int(p.ProbePort)}
			var src net.IP
			if r.Source != "" {
				src = net.ParseIP(r.Source)
			}
			timeout := e.PrimeTimeout
			if timeout <= 0 {
				timeout = time.Second
			}
			pctx, cancel := context.WithTimeout(ctx, timeout)
			repairs, err := e.Host.PrimeTCPMetrics(pctx, addr, src, want)
			cancel()
			switch {
			case errors.Is(err, kernel.ErrTCPMetricsUnclamped):
				e.Log.Error(err, "tcp_metrics entry left without the route's clamp", "peer", p.Host, "route", r.Destination)
			case err != nil:
				e.Log.V(1).Info("priming tcp_metrics failed", "peer", p.Host, "error", err.Error())
			case repairs > 0:
				e.Log.Info("tcp_metrics entry made again: a connection closing under the previous route had made it without the route's clamp",
					"peer", p.Host, "route", r.Destination, "times", repairs)
			}
		}
	}
}

func routeSnapKey(r kernel.RouteSnapshot) string { return r.Dst.String() }
func sysctlKey(s v1alpha1.Sysctl) string         { return s.Name }
func ifaceKey(i v1alpha1.InterfaceTuning) string { return i.Name }

// keySet is the set of keys of items.
func keySet[T any](items []T, key func(T) string) map[string]bool {
	set := make(map[string]bool, len(items))
	for _, it := range items {
		set[key(it)] = true
	}
	return set
}

// splitOwned partitions the originals of previously owned items into those
// the target still names (kept) and those it drops (to be restored).
func splitOwned[T any](originals []T, key func(T) string, target map[string]bool) (kept, dropped []T) {
	for _, o := range originals {
		if target[key(o)] {
			kept = append(kept, o)
		} else {
			dropped = append(dropped, o)
		}
	}
	return kept, dropped
}

// adoptNew adds to originals the current state of every item the target
// names that has no original yet (nettune touches it for the first time).
func adoptNew[T any](originals, current []T, key func(T) string, target map[string]bool) []T {
	known := keySet(originals, key)
	for _, c := range current {
		if k := key(c); target[k] && !known[k] {
			originals = append(originals, c)
			known[k] = true
		}
	}
	return originals
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// snapshot records the current state of every item p touches.
func (e *Engine) snapshot(p plan) (Snapshot, error) {
	var s Snapshot
	table, err := e.Host.ReadRouteTable()
	if err != nil {
		return s, err
	}
	for _, r := range p.routes {
		s.Routes = append(s.Routes, table.Snapshot(r.Dst))
	}
	for _, r := range p.restoreRoutes {
		s.Routes = append(s.Routes, table.Snapshot(r.Dst))
	}
	for _, sc := range p.sysctls {
		v, err := e.Host.ReadSysctl(sc.Name)
		if err != nil {
			return s, err
		}
		s.Sysctls = append(s.Sysctls, v1alpha1.Sysctl{Name: sc.Name, Value: v})
	}
	for _, i := range p.interfaces {
		st, err := e.Host.ReadInterface(i.Name)
		if err != nil {
			return s, err
		}
		s.Interfaces = append(s.Interfaces, interfaceTuning(st))
	}
	return s, nil
}

// write makes every change of p.
func (e *Engine) write(ctx context.Context, p plan) error {
	if _, err := e.Host.ApplyRoutes(p.routes); err != nil {
		return err
	}
	for _, r := range p.restoreRoutes {
		if _, err := e.Host.RestoreRoute(r); err != nil {
			return err
		}
	}
	for _, s := range p.sysctls {
		if _, err := e.Host.WriteSysctl(s.Name, s.Value); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", s.Name, s.Value, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for _, i := range p.interfaces {
		if _, _, err := e.Host.ApplyInterface(linkSettings(i)); err != nil {
			return err
		}
	}
	return nil
}

// restore puts every item of s back, in reverse order of write, attempting
// every item even when one fails.
func (e *Engine) restore(s Snapshot) error {
	var errs []error
	for _, i := range slices.Backward(s.Interfaces) {
		if _, _, err := e.Host.ApplyInterface(linkSettings(i)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, sc := range slices.Backward(s.Sysctls) {
		if _, err := e.Host.WriteSysctl(sc.Name, sc.Value); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range slices.Backward(s.Routes) {
		if _, err := e.Host.RestoreRoute(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Recover finishes what a crash interrupted: if a journal is pending, the
// snapshot it holds is restored, so the host is back in its committed state.
// It reports whether anything was recovered.
func (e *Engine) Recover() (bool, error) {
	j, err := e.Store.PendingJournal()
	if err != nil || j == nil {
		return false, err
	}
	var snap Snapshot
	if err := json.Unmarshal(j.Snapshot, &snap); err != nil {
		return false, fmt.Errorf("decoding journal snapshot: %w", err)
	}
	if err := e.restore(snap); err != nil {
		return false, fmt.Errorf("restoring the snapshot of the interrupted apply of %s: %w", j.Target.Revision, err)
	}
	e.Log.Info("recovered an interrupted apply", "revision", j.Target.Revision, "started", j.Started)
	return true, e.Store.EndJournal()
}

// Boot recovers an interrupted apply, then applies the last-known-good spec,
// so a host that restarts with no control plane in reach comes up tuned.
func (e *Engine) Boot(ctx context.Context) (Outcome, error) {
	if _, err := e.Recover(); err != nil {
		return Outcome{}, err
	}
	spec, err := e.CommittedSpec()
	if err != nil {
		return Outcome{}, err
	}
	for _, n := range e.Store.Notices() {
		e.Log.Info("state directory repaired", "notice", n)
		e.mu.Lock()
		e.notices = append(e.notices, n)
		e.mu.Unlock()
	}
	if spec.Revision == "" {
		return Outcome{Reason: "no last-known-good state"}, nil
	}
	// The last-known-good state passed its probes when it was committed. At
	// boot the peers may not be up yet (the whole vehicle powers on at once),
	// so re-probing them would roll a rebooted host back to untuned; the
	// state is still read back and verified.
	return e.transact(ctx, spec, false)
}

// Revert returns the host to the last-known-good state (used by `revert`).
func (e *Engine) Revert(ctx context.Context) (Outcome, error) { return e.Boot(ctx) }

// Observe reads every item of spec back and compares it with the spec.
func (e *Engine) Observe(spec v1alpha1.NodeNetTuningSpec) []v1alpha1.ItemResult {
	return e.observe(spec, convertRoutes(spec.Routes))
}

// observe is Observe of spec, whose routes are converted.
func (e *Engine) observe(spec v1alpha1.NodeNetTuningSpec, routes []desiredRoute) []v1alpha1.ItemResult {
	items := make([]v1alpha1.ItemResult, 0, len(routes)+len(spec.Sysctls)+len(spec.Interfaces))
	ssthreshEffective, ssErr := e.Host.SsthreshEffective()
	table, tableErr := e.Host.ReadRouteTable()
	for _, d := range routes {
		r, rs := d.route, d.spec
		it := v1alpha1.ItemResult{Kind: "Route", Name: r.Destination}
		if d.err != nil {
			it.State, it.Message = StateFailed, d.err.Error()
			items = append(items, it)
			continue
		}
		it.Desired = rs.Metrics.String()
		var cur *kernel.Route
		if tableErr == nil {
			cur = table.Lookup(rs.Dst)
		}
		switch {
		case tableErr != nil:
			it.State, it.Message = StateFailed, tableErr.Error()
		case cur == nil:
			it.State, it.Message = StateMismatch, "no route to "+r.Destination
		case !kernel.Satisfies(cur.Metrics, rs.Metrics):
			it.State, it.Observed = StateMismatch, cur.Metrics.String()
			it.Message = diffMessage(kernel.DiffMetrics(rs.Metrics, cur.Metrics))
		default:
			it.State, it.Observed = StateVerified, cur.Metrics.String()
			if r.Parameters.Ssthresh == nil {
				break
			}
			// The route's ssthresh holds only where the kernel reads it
			// (no tcp_no_ssthresh_metrics_save, as on 4.9, or set to 0) and
			// the route locks it: unlocked, each close writes the learned
			// ssthresh into tcp_metrics and the next connection starts from
			// that. (Verified implies the lock the spec asks for.)
			switch {
			case ssErr != nil:
				it.State, it.Message = StateNotEffective, "ssthresh is set but whether the kernel uses it is unknown: "+ssErr.Error()
			case !ssthreshEffective:
				it.State, it.Message = StateNotEffective, "ssthresh is set but ignored while net.ipv4.tcp_no_ssthresh_metrics_save=1"
			case !cur.Metrics.Locked(unix.RTAX_SSTHRESH):
				it.State, it.Message = StateNotEffective, "ssthresh is set but not locked: each connection's close overwrites it in tcp_metrics"
			}
		}
		items = append(items, it)
	}
	for _, s := range spec.Sysctls {
		it := v1alpha1.ItemResult{Kind: "Sysctl", Name: s.Name, Desired: kernel.NormalizeSysctlValue(s.Value)}
		v, err := e.Host.ReadSysctl(s.Name)
		switch {
		case err != nil:
			it.State, it.Message = StateFailed, err.Error()
		case kernel.NormalizeSysctlValue(v) != it.Desired:
			it.State, it.Observed, it.Message = StateMismatch, v, "value differs"
		default:
			it.State, it.Observed = StateVerified, v
		}
		items = append(items, it)
	}
	for _, i := range spec.Interfaces {
		it := v1alpha1.ItemResult{Kind: "Interface", Name: i.Name, Desired: interfaceString(i)}
		st, err := e.Host.ReadInterface(i.Name)
		if err != nil {
			it.State, it.Message = StateFailed, err.Error()
			items = append(items, it)
			continue
		}
		observed := interfaceTuning(st)
		it.Observed = interfaceString(observed)
		if interfaceSatisfies(observed, i) {
			it.State = StateVerified
		} else {
			it.State, it.Message = StateMismatch, "interface differs"
		}
		items = append(items, it)
	}
	return items
}

func diffMessage(d []kernel.MetricDiff) string {
	s := ""
	for i, x := range d {
		if i > 0 {
			s += "; "
		}
		s += x.String()
	}
	return s
}

func interfaceString(t v1alpha1.InterfaceTuning) string {
	s := ""
	add := func(k, v string) {
		if s != "" {
			s += " "
		}
		s += k + " " + v
	}
	if t.MTU != nil {
		add("mtu", fmt.Sprint(*t.MTU))
	}
	for _, f := range []struct {
		k string
		v *bool
	}{{"gro", t.GRO}, {"gso", t.GSO}, {"tso", t.TSO}} {
		if f.v != nil {
			add(f.k, map[bool]string{true: "on", false: "off"}[*f.v])
		}
	}
	return s
}

// interfaceSatisfies reports whether observed has every value desired sets.
func interfaceSatisfies(observed, desired v1alpha1.InterfaceTuning) bool {
	eq := func(d, o *bool) bool { return d == nil || (o != nil && *d == *o) }
	if desired.MTU != nil && (observed.MTU == nil || *observed.MTU != *desired.MTU) {
		return false
	}
	return eq(desired.GRO, observed.GRO) && eq(desired.GSO, observed.GSO) && eq(desired.TSO, observed.TSO)
}
