package kernel

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func ptr[T any](v T) *T { return &v }

// seedParams are the seed values of the project: cwnd 30 (locked by
// default), initcwnd/initrwnd 25, ssthresh 30, rto_min 10ms, quickack.
func seedParams() v1alpha1.TCPParameters {
	return v1alpha1.TCPParameters{
		Cwnd:     &v1alpha1.Cwnd{Value: 30},
		Initcwnd: ptr(int32(25)),
		Initrwnd: ptr(int32(25)),
		Ssthresh: ptr(int32(30)),
		RTOMin:   &metav1.Duration{Duration: 10 * time.Millisecond},
		Quickack: ptr(true),
	}
}

func TestMetricsFromTCPParameters(t *testing.T) {
	m, err := MetricsFromTCPParameters(seedParams())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.String(), "cwnd lock 30 initcwnd 25 initrwnd 25 ssthresh 30 rto_min lock 10ms quickack 1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if m.Locks != LockBit(unix.RTAX_CWND)|LockBit(unix.RTAX_RTO_MIN) {
		t.Errorf("lock mask %#x, want cwnd|rto_min", m.Locks)
	}

	p := seedParams()
	p.Cwnd.Lock = ptr(false)
	p.RTOMin.Duration = 1500 * time.Microsecond // rounded up to 2ms
	p.Quickack = ptr(false)
	p.CongestionControl = ptr(v1alpha1.CongestionControl("bbr"))
	p.AdvMSS = ptr(int32(1400))
	p.MTU = ptr(int32(1450))
	m, err = MetricsFromTCPParameters(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.String(), "cwnd 30 initcwnd 25 initrwnd 25 ssthresh 30 rto_min lock 2ms quickack 0 congctl bbr advmss 1400 mtu 1450"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}

	for _, bad := range []v1alpha1.TCPParameters{
		{Cwnd: &v1alpha1.Cwnd{Value: 0}},
		{Initcwnd: ptr(int32(-1))},
		{RTOMin: &metav1.Duration{Duration: -time.Millisecond}},
		{CongestionControl: ptr(v1alpha1.CongestionControl("a-very-long-algorithm-name"))},
	} {
		if _, err := MetricsFromTCPParameters(bad); err == nil {
			t.Errorf("MetricsFromTCPParameters(%+v): no error", bad)
		}
	}

	if m, err := MetricsFromTCPParameters(v1alpha1.TCPParameters{}); err != nil || !m.IsEmpty() || m.String() != "" {
		t.Errorf("empty parameters: %v %q", err, m.String())
	}
}

func TestRouteSpecFromNodeRoute(t *testing.T) {
	spec, err := RouteSpecFromNodeRoute(v1alpha1.NodeRoute{
		Destination: "192.0.2.77/24", Device: "eth0", Source: "192.0.2.1", Parameters: seedParams(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Dst.String() != "192.0.2.0/24" || len(spec.Dst.IP) != 4 || spec.Device != "eth0" || !spec.Source.Equal([]byte{192, 0, 2, 1}) {
		t.Errorf("spec = %+v", spec)
	}
	if _, err := RouteSpecFromNodeRoute(v1alpha1.NodeRoute{Destination: "2001:db8::1/128", Source: "192.0.2.1"}); err == nil {
		t.Error("mixed families accepted")
	}
	if _, err := RouteSpecFromNodeRoute(v1alpha1.NodeRoute{Destination: "nope"}); err == nil {
		t.Error("bad destination accepted")
	}
	if d, err := ParseDestination("2001:db8::1"); err != nil || d.String() != "2001:db8::1/128" {
		t.Errorf("ParseDestination(bare v6) = %v, %v", d, err)
	}
}

// TestEncodeMetricsSingleLock checks the wire format: exactly one RTAX_LOCK
// attribute carrying the whole mask, congctl as a NUL-terminated string, and
// a lossless decode.
func TestEncodeMetricsSingleLock(t *testing.T) {
	m, err := MetricsFromTCPParameters(seedParams())
	if err != nil {
		t.Fatal(err)
	}
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
			want := LockBit(unix.RTAX_CWND) | LockBit(unix.RTAX_RTO_MIN) | LockBit(unix.RTAX_MTU)
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
	desired, err := MetricsFromTCPParameters(seedParams())
	if err != nil {
		t.Fatal(err)
	}

	if d := DiffMetrics(desired, cur); len(d) != 6 {
		t.Errorf("diff before merge: %v", d)
	}
	merged := MergeMetrics(cur, desired)
	want := "cwnd lock 30 initcwnd 25 initrwnd 25 ssthresh 30 rto_min lock 10ms quickack 1 mtu lock 1400 features ecn"
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
