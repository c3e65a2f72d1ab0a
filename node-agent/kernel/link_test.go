package kernel

import (
	"testing"
)

// TestInterfaceMTUAndOffloads sets MTU, GRO, GSO and TSO on a veth in a
// test namespace, reads them back, and restores them.
func TestInterfaceMTUAndOffloads(t *testing.T) {
	p := newPair(t)
	h := p.A.h
	before, err := h.ReadInterface(p.devA)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: %+v gro=%s gso=%s tso=%s", before, onOff(before.Offloads.GRO), onOff(before.Offloads.GSO), onOff(before.Offloads.TSO))
	if !before.Up || !before.Carrier || before.OperState != "up" || before.MTU != 1500 {
		t.Fatalf("veth state: %+v", before)
	}
	if before.Offloads.GRO == nil || before.Offloads.GSO == nil || before.Offloads.TSO == nil {
		t.Fatalf("offloads unknown: %+v", before.Offloads)
	}

	mtu, err := h.SetMTU(p.devA, 1400)
	if err != nil || mtu != 1400 {
		t.Fatalf("SetMTU: %d, %v", mtu, err)
	}
	if _, err := h.SetMTU(p.devA, 70000); err == nil {
		t.Error("MTU 70000 accepted on veth")
	}

	// Flip each offload.
	flip := func(b *bool) *bool { v := !*b; return &v }
	want := Offloads{GRO: flip(before.Offloads.GRO), GSO: flip(before.Offloads.GSO), TSO: flip(before.Offloads.TSO)}
	got, err := h.SetOffloads(p.devA, want)
	if err != nil {
		t.Fatalf("SetOffloads: %v", err)
	}
	if *got.GRO != *want.GRO || *got.GSO != *want.GSO || *got.TSO != *want.TSO {
		t.Errorf("offloads read back %s/%s/%s", onOff(got.GRO), onOff(got.GSO), onOff(got.TSO))
	}
	feats, err := h.Features(p.devA)
	if err != nil {
		t.Fatal(err)
	}
	if feats[FeatureGRO] != *want.GRO || feats[FeatureTSO] != *want.TSO {
		t.Errorf("features: %s=%v %s=%v", FeatureGRO, feats[FeatureGRO], FeatureTSO, feats[FeatureTSO])
	}
	if _, ok := feats["tx-tcp6-segmentation"]; ok && feats["tx-tcp6-segmentation"] != *want.TSO {
		t.Errorf("tx-tcp6-segmentation not switched with TSO")
	}
	// The peer in the other namespace is untouched.
	peer, err := p.B.h.ReadInterface(p.devB)
	if err != nil {
		t.Fatal(err)
	}
	if peer.MTU != 1500 || *peer.Offloads.GRO != *before.Offloads.GRO {
		t.Errorf("peer changed: %+v", peer)
	}

	// ApplyInterface, then undo with before.Settings().
	off := false
	m := 1450
	_, after, err := h.ApplyInterface(LinkSettings{Name: p.devA, MTU: &m, Offloads: Offloads{GRO: &off}})
	if err != nil {
		t.Fatal(err)
	}
	if after.MTU != 1450 || *after.Offloads.GRO {
		t.Errorf("after ApplyInterface: %+v", after)
	}
	if _, restored, err := h.ApplyInterface(before.Settings()); err != nil {
		t.Fatal(err)
	} else if restored.MTU != before.MTU || *restored.Offloads.GRO != *before.Offloads.GRO ||
		*restored.Offloads.GSO != *before.Offloads.GSO || *restored.Offloads.TSO != *before.Offloads.TSO {
		t.Errorf("restored %+v, want %+v", restored, before)
	}

	if _, err := h.ReadInterface("nope0"); err == nil {
		t.Error("unknown interface read")
	}
	if _, err := h.SetOffloads("nope0", Offloads{GRO: &off}); err == nil {
		t.Error("unknown interface offloads set")
	}
}

// TestCarrierFollowsPeer: the veth loses carrier when its peer (in the
// other namespace) goes down.
func TestCarrierFollowsPeer(t *testing.T) {
	p := newPair(t)
	l, err := p.B.h.link.LinkByName(p.devB)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.B.h.link.LinkSetDown(l); err != nil {
		t.Fatal(err)
	}
	s, err := p.A.h.ReadInterface(p.devA)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel reports a veth without carrier as "down" (it has no lower
	// device for "lower-layer-down").
	if !s.Up || s.Carrier || (s.OperState != "down" && s.OperState != "lower-layer-down") {
		t.Errorf("with peer down: up %v carrier %v oper %q", s.Up, s.Carrier, s.OperState)
	}
}
