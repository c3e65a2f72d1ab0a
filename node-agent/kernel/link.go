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

package kernel

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// ethtool feature names (ethtool -k) of the offloads nettune tunes.
const (
	FeatureGRO = "rx-gro"
	FeatureGSO = "tx-generic-segmentation"
	FeatureTSO = "tx-tcp-segmentation"
)

// tsoGroup are the features `ethtool -K dev tso on|off` switches together
// (NETIF_F_ALL_TSO); setting TSO switches those the device can change.
var tsoGroup = []string{FeatureTSO, "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation"}

// Offloads are the GRO/GSO/TSO states of an interface; nil means unknown or
// (when setting) leave alone.
type Offloads struct {
	GRO *bool // rx-gro
	GSO *bool // tx-generic-segmentation
	TSO *bool // tx-tcp-segmentation (set together with the other TSO features)
}

// InterfaceState is an interface as the kernel reports it.
type InterfaceState struct {
	Name      string
	Index     int
	MTU       int
	Up        bool   // administratively up (IFF_UP)
	Carrier   bool   // lower layer up (IFF_LOWER_UP)
	OperState string // RFC 2863 state: "up", "down", "lowerlayerdown", ...
	Offloads  Offloads
}

// LinkSettings are what ApplyInterface sets on an interface: its MTU and
// offloads; nil fields are left alone.
type LinkSettings struct {
	Name     string
	MTU      *int
	Offloads Offloads
}

// Settings returns the LinkSettings that reproduce s's MTU and offloads, so
// ApplyInterface(before.Settings()) undoes a change.
func (s InterfaceState) Settings() LinkSettings {
	mtu := s.MTU
	return LinkSettings{Name: s.Name, MTU: &mtu, Offloads: s.Offloads}
}

// ReadInterface returns the state of interface name, offloads included.
func (h *Handle) ReadInterface(name string) (InterfaceState, error) {
	s, err := h.readLink(name)
	if err != nil {
		return InterfaceState{}, err
	}
	if s.Offloads, err = h.ReadOffloads(name); err != nil {
		return InterfaceState{}, err
	}
	return s, nil
}

// readLink returns the state of interface name without its offloads (one
// netlink request, no ethtool socket).
func (h *Handle) readLink(name string) (InterfaceState, error) {
	l, err := h.link.LinkByName(name)
	if err != nil {
		return InterfaceState{}, fmt.Errorf("interface %q: %w", name, err)
	}
	a := l.Attrs()
	return InterfaceState{
		Name: a.Name, Index: a.Index, MTU: a.MTU,
		Up:        a.Flags&net.FlagUp != 0,
		Carrier:   a.RawFlags&unix.IFF_LOWER_UP != 0,
		OperState: a.OperState.String(),
	}, nil
}

// Settled reports whether the interface's operational state agrees with its
// flags. The kernel changes the carrier flag (IFF_LOWER_UP) at once, but
// the operational state later, from its link watch work: only then does a
// device that regained carrier transmit again (its qdisc is re-activated by
// the same work) and do routes over it lose their linkdown mark. The work
// waits up to a second for an event the kernel deems not urgent (a NIC's
// carrier is one); 5.10 and 6.1 kernels showed a veth "up" without carrier
// for about 2 s after its peer went down.
func (s InterfaceState) Settled() bool {
	switch s.OperState {
	case "up":
		return s.Up && s.Carrier
	case "down", "lower-layer-down":
		return !s.Up || !s.Carrier
	}
	// No operational state to lag (unknown: lo, tun), or one that is not
	// derived from the carrier alone (dormant, testing, not-present).
	return true
}

// Running reports whether the interface passes traffic: administratively
// up, with carrier, and the kernel has acted on the carrier (operational
// state up, or unknown for a device that keeps none).
func (s InterfaceState) Running() bool {
	return s.Up && s.Carrier && (s.OperState == "up" || s.OperState == "unknown")
}

// linkPoll is how often WaitInterface reads the link.
const linkPoll = 20 * time.Millisecond

// WaitInterface reads interface name until ready holds for its state (e.g.
// InterfaceState.Settled, or InterfaceState.Running) or within has passed,
// and returns the last state read, offloads left unknown: a state read
// right after a change of the link, or of its peer, may not have settled
// (see Settled). It returns early with an error when the interface cannot
// be read or ctx ends.
func (h *Handle) WaitInterface(ctx context.Context, name string, within time.Duration, ready func(InterfaceState) bool) (InterfaceState, error) {
	deadline := time.Now().Add(within)
	for {
		s, err := h.readLink(name)
		if err != nil || ready(s) || !time.Now().Before(deadline) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("interface %q: %w", name, ctx.Err())
		case <-time.After(min(linkPoll, time.Until(deadline))):
		}
	}
}

// SetMTU sets the MTU of interface name (RTM_NEWLINK) and returns the MTU
// read back.
func (h *Handle) SetMTU(name string, mtu int) (int, error) {
	l, err := h.link.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("interface %q: %w", name, err)
	}
	if l.Attrs().MTU != mtu {
		if err := h.link.LinkSetMTU(l, mtu); err != nil {
			return 0, fmt.Errorf("set MTU of %q to %d: %w", name, mtu, err)
		}
	}
	l, err = h.link.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("interface %q: %w", name, err)
	}
	return l.Attrs().MTU, nil
}

// Features returns every ethtool feature of interface name with its active
// state (what `ethtool -k` prints), read in the handle's namespace.
func (h *Handle) Features(name string) (map[string]bool, error) {
	var out map[string]bool
	err := h.withEthtool(func(e *ethtool.Ethtool) error {
		var err error
		out, err = e.Features(name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ethtool features of %q: %w", name, err)
	}
	return out, nil
}

// withEthtool runs fn with an ethtool ioctl socket opened in the handle's
// namespace (the ioctl resolves the interface name there).
func (h *Handle) withEthtool(fn func(e *ethtool.Ethtool) error) error {
	var e *ethtool.Ethtool
	if err := h.Do(func() error {
		var err error
		e, err = ethtool.NewEthtool()
		return err
	}); err != nil {
		return fmt.Errorf("open ethtool socket: %w", err)
	}
	defer e.Close()
	return fn(e)
}

func offloadsOf(f map[string]bool) Offloads {
	var o Offloads
	get := func(name string) *bool {
		if v, ok := f[name]; ok {
			return &v
		}
		return nil
	}
	o.GRO, o.GSO, o.TSO = get(FeatureGRO), get(FeatureGSO), get(FeatureTSO)
	return o
}

// ReadOffloads returns the GRO/GSO/TSO states of interface name.
func (h *Handle) ReadOffloads(name string) (Offloads, error) {
	f, err := h.Features(name)
	if err != nil {
		return Offloads{}, err
	}
	return offloadsOf(f), nil
}

// SetOffloads switches the offloads o sets (non-nil) on interface name and
// returns the states read back. It fails if a requested state did not take
// (a feature the device cannot change, or one that depends on another that
// is off).
func (h *Handle) SetOffloads(name string, o Offloads) (Offloads, error) {
	var got Offloads
	err := h.withEthtool(func(e *ethtool.Ethtool) error {
		states, err := e.FeaturesWithState(name)
		if err != nil {
			return err
		}
		change := map[string]bool{}
		want := func(feature string, v *bool, group []string) error {
			if v == nil {
				return nil
			}
			st, ok := states[feature]
			if !ok {
				return fmt.Errorf("device has no feature %s", feature)
			}
			if st.Active != *v {
				change[feature] = *v
			}
			for _, g := range group {
				if gs, ok := states[g]; ok && gs.Available && gs.Active != *v {
					change[g] = *v
				}
			}
			return nil
		}
		if err := want(FeatureGRO, o.GRO, nil); err != nil {
			return err
		}
		if err := want(FeatureGSO, o.GSO, nil); err != nil {
			return err
		}
		if err := want(FeatureTSO, o.TSO, tsoGroup[1:]); err != nil {
			return err
		}
		if len(change) > 0 {
			if err := e.Change(name, change); err != nil {
				return err
			}
		}
		f, err := e.Features(name)
		if err != nil {
			return err
		}
		got = offloadsOf(f)
		return nil
	})
	if err != nil {
		return Offloads{}, fmt.Errorf("set offloads of %q: %w", name, err)
	}
	var bad []string
	check := func(feature string, want, have *bool) {
		if want != nil && (have == nil || *have != *want) {
			bad = append(bad, fmt.Sprintf("%s stayed %s", feature, onOff(have)))
		}
	}
	check(FeatureGRO, o.GRO, got.GRO)
	check(FeatureGSO, o.GSO, got.GSO)
	check(FeatureTSO, o.TSO, got.TSO)
	if len(bad) > 0 {
		return got, fmt.Errorf("set offloads of %q: %s", name, strings.Join(bad, ", "))
	}
	return got, nil
}

func onOff(b *bool) string {
	switch {
	case b == nil:
		return "unknown"
	case *b:
		return "on"
	default:
		return "off"
	}
}

// ApplyInterface sets the MTU and offloads t asks for (unset fields are left
// alone) and returns the interface state before and after. Undo with
// ApplyInterface(before.Settings()).
func (h *Handle) ApplyInterface(t LinkSettings) (before, after InterfaceState, err error) {
	if before, err = h.ReadInterface(t.Name); err != nil {
		return before, after, err
	}
	if t.MTU != nil {
		if _, err = h.SetMTU(t.Name, *t.MTU); err != nil {
			return before, after, err
		}
	}
	if o := t.Offloads; o.GRO != nil || o.GSO != nil || o.TSO != nil {
		if _, err = h.SetOffloads(t.Name, o); err != nil {
			return before, after, err
		}
	}
	after, err = h.ReadInterface(t.Name)
	return before, after, err
}
