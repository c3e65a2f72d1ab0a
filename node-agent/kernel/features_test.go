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
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpiField is one field of struct tcp_info as a kernel's
// include/uapi/linux/tcp.h declares it: its name and size in bytes.
type tcpiField struct {
	name string
	size int
}

func u8s(names ...string) []tcpiField  { return fields(1, names) }
func u16s(names ...string) []tcpiField { return fields(2, names) }
func u32s(names ...string) []tcpiField { return fields(4, names) }
func u64s(names ...string) []tcpiField { return fields(8, names) }

func fields(size int, names []string) []tcpiField {
	out := make([]tcpiField, len(names))
	for i, n := range names {
		out[i] = tcpiField{n, size}
	}
	return out
}

// The struct tcp_info of the fleet's kernels, field by field from their
// headers (see docs/kernels-source-notes.md). 4.9: the L4T 4.9 tree and
// the stock 4.9.206 headers, which agree. The bit fields (snd/rcv wscale,
// delivery_rate_app_limited) take one byte each pair.
var tcpInfo49 = slices.Concat(
	u8s("state", "ca_state", "retransmits", "probes", "backoff", "options", "wscale", "app_limited"),
	u32s("rto", "ato", "snd_mss", "rcv_mss", "unacked", "sacked", "lost", "retrans", "fackets",
		"last_data_sent", "last_ack_sent", "last_data_recv", "last_ack_recv",
		"pmtu", "rcv_ssthresh", "rtt", "rttvar", "snd_ssthresh", "snd_cwnd", "advmss", "reordering",
		"rcv_rtt", "rcv_space", "total_retrans"),
	u64s("pacing_rate", "max_pacing_rate", "bytes_acked", "bytes_received"),
	u32s("segs_out", "segs_in", "notsent_bytes", "min_rtt", "data_segs_in", "data_segs_out"),
	u64s("delivery_rate"),
)

// 5.10 (Debian's 5.10.223 headers); 6.1's (6.1.187) are the same.
var tcpInfo510 = slices.Concat(tcpInfo49,
	u64s("busy_time", "rwnd_limited", "sndbuf_limited"),
	u32s("delivered", "delivered_ce"),
	u64s("bytes_sent", "bytes_retrans"),
	u32s("dsack_dups", "reord_seen", "rcv_ooopack", "snd_wnd"),
)

// 6.7 and later (golang.org/x/sys's unix.TCPInfo is this layout).
var tcpInfo67 = slices.Concat(tcpInfo510,
	u32s("rcv_wnd", "rehash"),
	u16s("total_rto", "total_rto_recoveries"),
	u32s("total_rto_time"),
)

// buildTCPInfo lays the fields out as C does (each at a multiple of its
// size, the whole a multiple of 8) and writes each one byte by byte, in the
// machine's byte order, from its value in vals (0 when absent). It returns
// the struct and each field's offset.
func buildTCPInfo(layout []tcpiField, vals map[string]uint64) ([]byte, map[string]int) {
	off := map[string]int{}
	n := 0
	for _, f := range layout {
		n = (n + f.size - 1) / f.size * f.size
		off[f.name] = n
		n += f.size
	}
	n = (n + 7) / 8 * 8
	b := make([]byte, n)
	little := nativeEndian.Uint16([]byte{1, 0}) == 1
	for _, f := range layout {
		v := vals[f.name]
		for i := 0; i < f.size; i++ {
			shift := 8 * i
			if !little {
				shift = 8 * (f.size - 1 - i)
			}
			b[off[f.name]+i] = byte(v >> shift)
		}
	}
	return b, off
}

// TestParseTCPInfoPerKernel feeds parseTCPInfo the struct tcp_info of 4.9,
// 5.10, 6.1 and 6.7+, built field by field from their headers, and checks
// the struct's size, the values read, which counters are present, and that
// TCPInfoCounters says the same of the struct's length.
func TestParseTCPInfoPerKernel(t *testing.T) {
	vals := map[string]uint64{
		"retransmits": 3, "rto": 201000, "snd_mss": 1448, "rtt": 250, "snd_ssthresh": 30, "snd_cwnd": 25,
		"advmss": 1448, "total_retrans": 7, "bytes_acked": 1 << 33, "segs_out": 4242, "segs_in": 99,
		"dsack_dups": 5, "reord_seen": 77, "total_rto": 4, "total_rto_recoveries": 88,
	}
	all := []string{"tcpi_total_retrans", "tcpi_segs_out", "tcpi_dsack_dups", "tcpi_total_rto"}
	for _, k := range []struct {
		kernel   string
		layout   []tcpiField
		size     int
		counters []string
	}{
		{"4.9 (JetPack 4)", tcpInfo49, 168, all[:2]},
		{"5.10 (JetPack 5) and 6.1", tcpInfo510, 232, all[:3]},
		{"6.7 and later", tcpInfo67, 248, all},
	} {
		t.Run(k.kernel, func(t *testing.T) {
			b, off := buildTCPInfo(k.layout, vals)
			if len(b) != k.size {
				t.Fatalf("struct tcp_info of %d bytes, want %d", len(b), k.size)
			}
			var s TCPSocketInfo
			parseTCPInfo(b, &s)
			if !s.HasInfo || s.Retransmits != 3 || s.RTO.Microseconds() != 201000 || s.SndMSS != 1448 ||
				s.RTT.Microseconds() != 250 || s.SndSsthresh != 30 || s.SndCwnd != 25 || s.AdvMSS != 1448 ||
				s.TotalRetrans != 7 || s.BytesAcked != 1<<33 || s.SegsOut != 4242 || !s.HasSegsOut {
				t.Errorf("fields every fleet kernel has: %+v", s)
			}
			has := map[string]bool{
				"tcpi_total_retrans": s.HasInfo, "tcpi_segs_out": s.HasSegsOut,
				"tcpi_dsack_dups": s.HasDSACK, "tcpi_total_rto": s.HasTotalRTO,
			}
			for _, c := range all {
				if want := slices.Contains(k.counters, c); has[c] != want {
					t.Errorf("%s present %v, want %v", c, has[c], want)
				}
			}
			if _, ok := off["dsack_dups"]; ok != s.HasDSACK || (ok && s.DSACKDups != 5) {
				t.Errorf("dsack_dups %d (present %v)", s.DSACKDups, s.HasDSACK)
			}
			if _, ok := off["total_rto"]; ok != s.HasTotalRTO || (ok && s.TotalRTO != 4) {
				t.Errorf("total_rto %d (present %v)", s.TotalRTO, s.HasTotalRTO)
			}
			if got := TCPInfoCounters(len(b)); !slices.Equal(got, k.counters) {
				t.Errorf("TCPInfoCounters(%d) = %v, want %v", len(b), got, k.counters)
			}
		})
	}

	// The 6.7 layout is golang.org/x/sys's unix.TCPInfo, generated from
	// the kernel's own header: a second reading of the offsets.
	_, off := buildTCPInfo(tcpInfo67, nil)
	var x unix.TCPInfo
	for name, want := range map[string]uintptr{
		"total_retrans": unsafe.Offsetof(x.Total_retrans), "bytes_acked": unsafe.Offsetof(x.Bytes_acked),
		"segs_out": unsafe.Offsetof(x.Segs_out), "dsack_dups": unsafe.Offsetof(x.Dsack_dups),
		"total_rto": unsafe.Offsetof(x.Total_rto),
	} {
		if off[name] != int(want) {
			t.Errorf("offset of %s: %d here, %d in unix.TCPInfo", name, off[name], want)
		}
	}
	if n := len(TCPInfoCounters(unix.SizeofTCPInfo)); n != 4 {
		t.Errorf("a tcp_info of unix.SizeofTCPInfo (%d) bytes has %d counters, want 4", unix.SizeofTCPInfo, n)
	}
}

// TestTCPInfoCountersByLength: the counters of every tcp_info length a
// kernel sends, each from the first length that holds it.
func TestTCPInfoCountersByLength(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []string
	}{
		{0, nil},
		{103, nil},
		{104, []string{"tcpi_total_retrans"}}, // 3.x
		{139, []string{"tcpi_total_retrans"}},
		{140, []string{"tcpi_total_retrans", "tcpi_segs_out"}},
		{168, []string{"tcpi_total_retrans", "tcpi_segs_out"}}, // 4.9
		{192, []string{"tcpi_total_retrans", "tcpi_segs_out"}}, // 4.10 to 4.17
		{219, []string{"tcpi_total_retrans", "tcpi_segs_out"}},
		{220, []string{"tcpi_total_retrans", "tcpi_segs_out", "tcpi_dsack_dups"}},
		{224, []string{"tcpi_total_retrans", "tcpi_segs_out", "tcpi_dsack_dups"}}, // 4.19
		{232, []string{"tcpi_total_retrans", "tcpi_segs_out", "tcpi_dsack_dups"}}, // 5.4 to 6.1
		{240, []string{"tcpi_total_retrans", "tcpi_segs_out", "tcpi_dsack_dups"}}, // 6.2 to 6.6
		{241, []string{"tcpi_total_retrans", "tcpi_segs_out", "tcpi_dsack_dups"}},
		{242, []string{"tcpi_total_retrans", "tcpi_segs_out", "tcpi_dsack_dups", "tcpi_total_rto"}},
		{280, []string{"tcpi_total_retrans", "tcpi_segs_out", "tcpi_dsack_dups", "tcpi_total_rto"}}, // 6.18
	} {
		if got := TCPInfoCounters(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("TCPInfoCounters(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// tcpInfoLenOf is the length of the tcp_info getsockopt(TCP_INFO) gives for
// c: the kernel copies at most its own struct, so with a larger buffer the
// length is the struct's size. Independent of sock_diag.
func tcpInfoLenOf(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	n := uint32(len(buf))
	var errno unix.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
	}); err != nil {
		t.Fatal(err)
	}
	if errno != 0 {
		t.Fatalf("getsockopt TCP_INFO: %v", errno)
	}
	return int(n)
}

// TestProbeFeatures checks the probe against independent readings of this
// kernel: uname, the tcp_info length getsockopt gives for a connection of
// the test's own (mapped to counters through golang.org/x/sys's
// unix.TCPInfo offsets), the counters a sock_diag dump of that connection
// carries, and the congestion controls read from /proc.
func TestProbeFeatures(t *testing.T) {
	ns := newTestNS(t)
	f, err := ns.h.ProbeFeatures()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("features: %+v", f)

	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if f.Release != unix.ByteSliceToString(u.Release[:]) || f.Machine != unix.ByteSliceToString(u.Machine[:]) || f.Release == "" {
		t.Errorf("release %q machine %q, uname says %q %q", f.Release, f.Machine, u.Release[:], u.Machine[:])
	}

	lo := net.IPv4(127, 0, 0, 1).To4()
	srv := startServer(t, ns, lo)
	c := dial(t, ns, lo, srv.port())
	n := tcpInfoLenOf(t, c)
	if f.TCPInfoBytes != n {
		t.Errorf("probe: tcp_info of %d bytes, getsockopt: %d", f.TCPInfoBytes, n)
	}
	var x unix.TCPInfo
	var want []string
	for _, fld := range []struct {
		name     string
		off, len uintptr
	}{
		{"tcpi_total_retrans", unsafe.Offsetof(x.Total_retrans), unsafe.Sizeof(x.Total_retrans)},
		{"tcpi_segs_out", unsafe.Offsetof(x.Segs_out), unsafe.Sizeof(x.Segs_out)},
		{"tcpi_dsack_dups", unsafe.Offsetof(x.Dsack_dups), unsafe.Sizeof(x.Dsack_dups)},
		{"tcpi_total_rto", unsafe.Offsetof(x.Total_rto), unsafe.Sizeof(x.Total_rto)},
	} {
		if n >= int(fld.off+fld.len) {
			want = append(want, fld.name)
		}
	}
	if !slices.Equal(f.TCPInfoCounters, want) {
		t.Errorf("probe: counters %v; a %d-byte tcp_info holds %v", f.TCPInfoCounters, n, want)
	}
	if len(want) < 2 {
		t.Errorf("this kernel's tcp_info (%d bytes) lacks tcpi_segs_out, which every fleet kernel (4.9+) has", n)
	}
	info := sockInfo(t, ns, c)
	for name, has := range map[string]bool{
		"tcpi_total_retrans": info.HasInfo, "tcpi_segs_out": info.HasSegsOut,
		"tcpi_dsack_dups": info.HasDSACK, "tcpi_total_rto": info.HasTotalRTO,
	} {
		if slices.Contains(f.TCPInfoCounters, name) != has {
			t.Errorf("probe says %s present %v, a sock_diag dump of a live socket %v", name, !has, has)
		}
	}

	var raw []byte
	if err := ns.h.Do(func() error {
		var err error
		raw, err = os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if cc := strings.Fields(string(raw)); !slices.Equal(f.CongestionControls, cc) || len(cc) == 0 {
		t.Errorf("congestion controls %v, /proc says %v", f.CongestionControls, cc)
	}
}

// TestProbeFeaturesWithoutLoopback: with lo down the tcp_info part fails
// and says so; what could be learned is still returned.
func TestProbeFeaturesWithoutLoopback(t *testing.T) {
	ns := newTestNS(t)
	lo, err := ns.h.link.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.h.link.LinkSetDown(lo); err != nil {
		t.Fatal(err)
	}
	f, err := ns.h.ProbeFeatures()
	t.Logf("features %+v, error: %v", f, err)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("error %v, want one about the loopback connection", err)
	}
	if f.Release == "" || f.Machine == "" || len(f.CongestionControls) == 0 || f.TCPInfoBytes != 0 || f.TCPInfoCounters != nil {
		t.Errorf("features %+v: want uname and congestion controls, no tcp_info", f)
	}
}
