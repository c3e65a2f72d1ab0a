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
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func ptr[T any](v T) *T { return &v }

// seedMetrics are the seed values of the project as the agent converts
// them: cwnd 30 locked, initcwnd/initrwnd 25, ssthresh 30 (always locked),
// rto_min 10ms (always locked), quickack.
func seedMetrics() RouteMetrics {
	rto := 10 * time.Millisecond
	m := RouteMetrics{
		Cwnd:     ptr(uint32(30)),
		Initcwnd: ptr(uint32(25)),
		Initrwnd: ptr(uint32(25)),
		Ssthresh: ptr(uint32(30)),
		RTOMin:   &rto,
		Quickack: ptr(true),
	}
	m.SetLocked(unix.RTAX_CWND, true)
	m.SetLocked(unix.RTAX_SSTHRESH, true)
	m.SetLocked(unix.RTAX_RTO_MIN, true)
	return m
}

func TestParseDestination(t *testing.T) {
	if d, err := ParseDestination("192.0.2.77/24"); err != nil || d.String() != "192.0.2.0/24" || len(d.IP) != 4 {
		t.Errorf("ParseDestination(v4 with host bits) = %v, %v", d, err)
	}
	if d, err := ParseDestination("2001:db8::1"); err != nil || d.String() != "2001:db8::1/128" {
		t.Errorf("ParseDestination(bare v6) = %v, %v", d, err)
	}
	if _, err := ParseDestination("nope"); err == nil {
		t.Error("bad destination accepted")
	}
}

func TestRoundRTOMin(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		1500 * time.Microsecond: 2 * time.Millisecond,
		10 * time.Millisecond:   10 * time.Millisecond,
		time.Nanosecond:         time.Millisecond,
		0:                       0,
		-time.Millisecond:       0,
	} {
		if got := RoundRTOMin(in); got != want {
			t.Errorf("RoundRTOMin(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestEncodeMetricsSingleLock checks the wire format: exactly one RTAX_LOCK
// attribute carrying the whole mask, congctl as a NUL-terminated string, and
// a lossless decode.
func TestEncodeMetricsSingleLock(t *testing.T) {
	m := seedMetrics()
	m.CongestionControl = "reno"
	m.MTU = ptr(uint32(1400))
	m.SetLocked(unix.RTAX_MTU, true)
	m.Other = map[int]uint32{unix.RTAX_FEATURES: unix.RTAX_FEATURE_ECN, unix.RTAX_WINDOW: 65535}

	b := encodeMetrics(m)
	attrs, err := parseAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	var locks int
	for _, a := range attrs {
		switch a.Type {
		case unix.RTAX_LOCK:
			locks++
			v, _ := u32(a.Value)
			want := LockBit(unix.RTAX_CWND) | LockBit(unix.RTAX_SSTHRESH) | LockBit(unix.RTAX_RTO_MIN) | LockBit(unix.RTAX_MTU)
			if v != want {
				t.Errorf("RTAX_LOCK = %#x, want %#x", v, want)
			}
		case unix.RTAX_CC_ALGO:
			if string(a.Value) != "reno\x00" {
				t.Errorf("RTAX_CC_ALGO = %q", a.Value)
			}
		case unix.RTAX_RTO_MIN:
			if v, _ := u32(a.Value); v != 10 {
				t.Errorf("RTAX_RTO_MIN = %d, want 10 (ms)", v)
			}
		}
	}
	if locks != 1 {
		t.Errorf("%d RTAX_LOCK attributes, want 1", locks)
	}
	got, err := decodeMetrics(b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(m) || !reflect.DeepEqual(got, m) {
		t.Errorf("round trip:\n got %s %+v\nwant %s %+v", got, got, m, m)
	}
	if s := got.String(); !strings.Contains(s, "mtu lock 1400") || !strings.Contains(s, "features ecn") || !strings.Contains(s, "window 65535") {
		t.Errorf("String() = %q", s)
	}
	// Zero values are not sent (the kernel would not store them).
	z := RouteMetrics{Quickack: ptr(false)}
	if b := encodeMetrics(z); len(b) != 0 {
		t.Errorf("quickack 0 encoded as %x", b)
	}
}

func TestMergeRemoveDiff(t *testing.T) {
	cur := RouteMetrics{
		Cwnd:  ptr(uint32(100)),
		MTU:   ptr(uint32(1400)),
		Other: map[int]uint32{unix.RTAX_FEATURES: unix.RTAX_FEATURE_ECN},
	}
	cur.SetLocked(unix.RTAX_MTU, true)
	desired := seedMetrics()

	if d := DiffMetrics(desired, cur); len(d) != 6 {
		t.Errorf("diff before merge: %v", d)
	}
	merged := MergeMetrics(cur, desired)
	want := "cwnd lock 30 initcwnd 25 initrwnd 25 ssthresh lock 30 rto_min lock 10ms quickack 1 mtu lock 1400 features ecn"
	if merged.String() != want {
		t.Errorf("merged = %q, want %q", merged, want)
	}
	if !Satisfies(merged, desired) {
		t.Errorf("merged does not satisfy desired: %v", DiffMetrics(desired, merged))
	}
	// Merging does not alias its inputs.
	if *cur.Cwnd != 100 || cur.Locked(unix.RTAX_CWND) {
		t.Error("MergeMetrics modified its input")
	}

	// An unlocked cwnd in desired unlocks it.
	unl := RouteMetrics{Cwnd: ptr(uint32(30))}
	if m := MergeMetrics(merged, unl); m.Locked(unix.RTAX_CWND) || !m.Locked(unix.RTAX_RTO_MIN) {
		t.Errorf("unlocked merge: %s", m)
	}

	// Lock mismatch is a difference.
	obs := merged.Clone()
	obs.SetLocked(unix.RTAX_RTO_MIN, false)
	d := DiffMetrics(desired, obs)
	if len(d) != 1 || d[0].Metric != "rto_min" || d[0].Desired != "lock 10ms" || d[0].Observed != "10ms" {
		t.Errorf("diff = %v", d)
	}
	if d[0].String() != "rto_min: desired lock 10ms, observed 10ms" {
		t.Errorf("diff string %q", d[0].String())
	}

	// quickack 0 is satisfied by an absent quickack.
	if !Satisfies(RouteMetrics{}, RouteMetrics{Quickack: ptr(false)}) {
		t.Error("quickack 0 vs absent")
	}
	if Satisfies(RouteMetrics{}, RouteMetrics{Quickack: ptr(true)}) {
		t.Error("quickack 1 vs absent")
	}
	if Satisfies(RouteMetrics{CongestionControl: "reno"}, RouteMetrics{CongestionControl: "bbr"}) {
		t.Error("congctl differs")
	}

	rm := RemoveMetrics(merged, desired)
	if rm.String() != "mtu lock 1400 features ecn" || rm.Locks != LockBit(unix.RTAX_MTU) {
		t.Errorf("RemoveMetrics = %q (locks %#x)", rm, rm.Locks)
	}
	if !rm.Equal(RemoveMetrics(cur, RouteMetrics{Cwnd: ptr(uint32(0))})) {
		t.Errorf("Equal: %s vs %s", rm, RemoveMetrics(cur, RouteMetrics{Cwnd: ptr(uint32(0))}))
	}
	if (RouteMetrics{Quickack: ptr(false)}).Equal(RouteMetrics{Quickack: ptr(true)}) {
		t.Error("Equal ignores quickack value")
	}
	if !(RouteMetrics{Quickack: ptr(false)}).Equal(RouteMetrics{}) {
		t.Error("quickack 0 should equal absent")
	}
}

func TestFormatMillis(t *testing.T) {
	for ms, want := range map[uint32]string{10: "10ms", 999: "999ms", 1000: "1s", 1500: "1.5s"} {
		if got := formatMillis(ms); got != want {
			t.Errorf("formatMillis(%d) = %q, want %q", ms, got, want)
		}
	}
}

func TestSysctlNames(t *testing.T) {
	if p, err := SysctlPath("net.ipv4.tcp_rmem"); err != nil || p != "/proc/sys/net/ipv4/tcp_rmem" {
		t.Errorf("SysctlPath = %q, %v", p, err)
	}
	for _, bad := range []string{"", "net..x", "net.ipv4/../../etc", "net.ipv4.tcp rmem", "/etc/passwd"} {
		if _, err := SysctlPath(bad); err == nil {
			t.Errorf("SysctlPath(%q) accepted", bad)
		}
	}
	if got := NormalizeSysctlValue("4096\t131072\t6291456\n"); got != "4096 131072 6291456" {
		t.Errorf("NormalizeSysctlValue = %q", got)
	}
}

func TestParseCounterTable(t *testing.T) {
	in := "Tcp: RtoAlgorithm MaxConn RetransSegs\nTcp: 1 -1 7\nTcpExt: TCPTimeouts TCPLossProbes\nTcpExt: 3 4\n"
	got := map[string]int64{}
	if err := parseCounterTable([]byte(in), got); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"Tcp.RtoAlgorithm": 1, "Tcp.MaxConn": -1, "Tcp.RetransSegs": 7, "TcpExt.TCPTimeouts": 3, "TcpExt.TCPLossProbes": 4}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
	if err := parseCounterTable([]byte("Tcp: A B\nTcp: 1\n"), map[string]int64{}); err == nil {
		t.Error("mismatched table accepted")
	}
}
