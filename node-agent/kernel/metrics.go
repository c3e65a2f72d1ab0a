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
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// RouteMetrics is the set of metrics of one route (its RTA_METRICS
// attribute). Every field is optional: nil or "" means the metric is absent.
// The kernel does not store a metric whose value is 0, so a 0 value and an
// absent metric are the same thing to it.
type RouteMetrics struct {
	// Cwnd is the congestion window in packets; a clamp only when locked
	// (Locked(unix.RTAX_CWND)).
	Cwnd *uint32
	// Initcwnd is the initial congestion window in packets.
	Initcwnd *uint32
	// Initrwnd is the initial receive window in packets.
	Initrwnd *uint32
	// Ssthresh is the initial slow-start threshold in packets.
	Ssthresh *uint32
	// RTOMin is the minimum retransmission timeout. The kernel keeps whole
	// milliseconds (a value is rounded up) and honors it only when locked.
	RTOMin *time.Duration
	// Quickack disables delayed ACKs when true.
	Quickack *bool
	// CongestionControl is the route's congestion control algorithm
	// ("congctl"), "" when unset.
	CongestionControl string
	// AdvMSS is the MSS advertised to the peer, in bytes.
	AdvMSS *uint32
	// MTU is the route's path MTU in bytes.
	MTU *uint32

	// Locks is the raw RTAX_LOCK mask: bit 1<<RTAX_x locks metric RTAX_x.
	Locks uint32

	// Other holds metrics this package does not model (RTAX_WINDOW,
	// RTAX_RTT, RTAX_FEATURES, ...), keyed by RTAX number with their raw
	// kernel value. They are read and written back unchanged.
	Other map[int]uint32
}

// LockBit returns the RTAX_LOCK mask bit of metric rtax (unix.RTAX_*).
func LockBit(rtax int) uint32 {
	if rtax <= 0 || rtax >= 32 {
		return 0
	}
	return 1 << uint(rtax)
}

// Locked reports whether metric rtax (unix.RTAX_*) is locked.
func (m RouteMetrics) Locked(rtax int) bool { return m.Locks&LockBit(rtax) != 0 }

// SetLocked sets or clears the lock bit of metric rtax (unix.RTAX_*).
func (m *RouteMetrics) SetLocked(rtax int, locked bool) {
	if locked {
		m.Locks |= LockBit(rtax)
	} else {
		m.Locks &^= LockBit(rtax)
	}
}

// IsEmpty reports whether m holds no metric and no lock.
func (m RouteMetrics) IsEmpty() bool {
	r := m.raw()
	return len(r.vals) == 0 && r.cc == "" && r.locks == 0
}

// Clone returns a deep copy of m.
func (m RouteMetrics) Clone() RouteMetrics { return fromRaw(m.raw()) }

// Validate checks that m can be written to the kernel.
func (m RouteMetrics) Validate() error {
	if m.RTOMin != nil && *m.RTOMin <= 0 {
		return fmt.Errorf("rto_min %s: must be positive", *m.RTOMin)
	}
	if m.RTOMin != nil && rtoMillis(*m.RTOMin) > math.MaxUint32 {
		return fmt.Errorf("rto_min %s: too large", *m.RTOMin)
	}
	if len(m.CongestionControl) >= 16 { // TCP_CA_NAME_MAX
		return fmt.Errorf("congestion control %q: name too long", m.CongestionControl)
	}
	for k := range m.Other {
		if k <= unix.RTAX_LOCK || k > 31 || managedMetric(k) || k == unix.RTAX_CC_ALGO {
			return fmt.Errorf("other metric %d: not an unmanaged RTAX number", k)
		}
	}
	return nil
}

// managedMetric reports whether rtax has a typed field in RouteMetrics.
func managedMetric(rtax int) bool {
	switch rtax {
	case unix.RTAX_CWND, unix.RTAX_INITCWND, unix.RTAX_INITRWND, unix.RTAX_SSTHRESH,
		unix.RTAX_RTO_MIN, unix.RTAX_QUICKACK, unix.RTAX_CC_ALGO, unix.RTAX_ADVMSS, unix.RTAX_MTU:
		return true
	}
	return false
}

// rawMetrics is the kernel's view of RouteMetrics: u32 values by RTAX
// number, the congestion control name and the lock mask.
type rawMetrics struct {
	vals  map[int]uint32
	cc    string
	locks uint32
}

func rtoMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// keys are the RTAX_* metrics r sets (congestion control included), in
// display order.
func (r rawMetrics) keys() []int {
	keys := make([]int, 0, len(r.vals)+1)
	for k := range r.vals {
		keys = append(keys, k)
	}
	if r.cc != "" {
		keys = append(keys, unix.RTAX_CC_ALGO)
	}
	sortMetricKeys(keys)
	return keys
}

func (m RouteMetrics) raw() rawMetrics {
	r := rawMetrics{vals: map[int]uint32{}, cc: m.CongestionControl, locks: m.Locks}
	for k, v := range m.Other {
		r.vals[k] = v
	}
	put := func(k int, v *uint32) {
		if v != nil {
			r.vals[k] = *v
		}
	}
	put(unix.RTAX_CWND, m.Cwnd)
	put(unix.RTAX_INITCWND, m.Initcwnd)
	put(unix.RTAX_INITRWND, m.Initrwnd)
	put(unix.RTAX_SSTHRESH, m.Ssthresh)
	put(unix.RTAX_ADVMSS, m.AdvMSS)
	put(unix.RTAX_MTU, m.MTU)
	if m.RTOMin != nil {
		ms := rtoMillis(*m.RTOMin)
		if ms > math.MaxUint32 {
			ms = math.MaxUint32
		}
		r.vals[unix.RTAX_RTO_MIN] = uint32(ms)
	}
	if m.Quickack != nil {
		r.vals[unix.RTAX_QUICKACK] = 0
		if *m.Quickack {
			r.vals[unix.RTAX_QUICKACK] = 1
		}
	}
	return r
}

func fromRaw(r rawMetrics) RouteMetrics {
	m := RouteMetrics{CongestionControl: r.cc, Locks: r.locks}
	for k, v := range r.vals {
		v := v
		switch k {
		case unix.RTAX_CWND:
			m.Cwnd = &v
		case unix.RTAX_INITCWND:
			m.Initcwnd = &v
		case unix.RTAX_INITRWND:
			m.Initrwnd = &v
		case unix.RTAX_SSTHRESH:
			m.Ssthresh = &v
		case unix.RTAX_ADVMSS:
			m.AdvMSS = &v
		case unix.RTAX_MTU:
			m.MTU = &v
		case unix.RTAX_RTO_MIN:
			d := time.Duration(v) * time.Millisecond
			m.RTOMin = &d
		case unix.RTAX_QUICKACK:
			q := v != 0
			m.Quickack = &q
		default:
			if m.Other == nil {
				m.Other = map[int]uint32{}
			}
			m.Other[k] = v
		}
	}
	return m
}

// encodeMetrics returns the payload of an RTA_METRICS attribute for m: one
// RTAX_LOCK attribute with the whole lock mask (when not 0), then every
// metric in RTAX order. Zero values are left out (the kernel would drop
// them anyway).
func encodeMetrics(m RouteMetrics) []byte {
	r := m.raw()
	var b []byte
	if r.locks != 0 {
		b = append(b, encodeAttr(unix.RTAX_LOCK, u32bytes(r.locks))...)
	}
	keys := make([]int, 0, len(r.vals)+1)
	for k, v := range r.vals {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	if r.cc != "" {
		keys = append(keys, unix.RTAX_CC_ALGO)
	}
	sort.Ints(keys)
	for _, k := range keys {
		if k == unix.RTAX_CC_ALGO {
			b = append(b, encodeAttr(unix.RTAX_CC_ALGO, append([]byte(r.cc), 0))...)
			continue
		}
		b = append(b, encodeAttr(uint16(k), u32bytes(r.vals[k]))...)
	}
	return b
}

func u32bytes(v uint32) []byte {
	b := make([]byte, 4)
	nativeEndian.PutUint32(b, v)
	return b
}

// decodeMetrics parses the payload of an RTA_METRICS attribute.
func decodeMetrics(b []byte) (RouteMetrics, error) {
	attrs, err := parseAttrs(b)
	if err != nil {
		return RouteMetrics{}, fmt.Errorf("parse RTA_METRICS: %w", err)
	}
	r := rawMetrics{vals: map[int]uint32{}}
	for _, a := range attrs {
		switch int(a.Type) {
		case unix.RTAX_UNSPEC:
			continue
		case unix.RTAX_CC_ALGO:
			r.cc = strings.TrimRight(string(a.Value), "\x00")
		case unix.RTAX_LOCK:
			v, ok := u32(a.Value)
			if !ok {
				return RouteMetrics{}, fmt.Errorf("RTAX_LOCK: %d bytes, want 4", len(a.Value))
			}
			r.locks |= v
		default:
			v, ok := u32(a.Value)
			if !ok {
				return RouteMetrics{}, fmt.Errorf("metric %d: %d bytes, want 4", a.Type, len(a.Value))
			}
			r.vals[int(a.Type)] = v
		}
	}
	return fromRaw(r), nil
}

// MergeMetrics returns current with every metric that desired sets written
// over it. For each metric desired sets, the lock bit comes from
// desired.Locks; all other metrics of current, and their lock bits, are kept.
// Lock bits of desired for metrics it does not set are ignored.
func MergeMetrics(current, desired RouteMetrics) RouteMetrics {
	out := current.raw()
	d := desired.raw()
	for k, v := range d.vals {
		out.vals[k] = v
		out.locks = out.locks&^LockBit(k) | d.locks&LockBit(k)
	}
	if d.cc != "" {
		out.cc = d.cc
		out.locks = out.locks&^LockBit(unix.RTAX_CC_ALGO) | d.locks&LockBit(unix.RTAX_CC_ALGO)
	}
	return fromRaw(out)
}

// RemoveMetrics returns current without the metrics that remove sets (the
// values in remove are not looked at) and without their lock bits.
func RemoveMetrics(current, remove RouteMetrics) RouteMetrics {
	out := current.raw()
	rm := remove.raw()
	for k := range rm.vals {
		delete(out.vals, k)
		out.locks &^= LockBit(k)
	}
	if rm.cc != "" {
		out.cc = ""
		out.locks &^= LockBit(unix.RTAX_CC_ALGO)
	}
	return fromRaw(out)
}

// normalized drops what the kernel would not store: zero values. (The lock
// mask is stored as sent, bits of absent metrics included.)
func (r rawMetrics) normalized() rawMetrics {
	out := rawMetrics{vals: map[int]uint32{}, cc: r.cc}
	for k, v := range r.vals {
		if v != 0 {
			out.vals[k] = v
		}
	}
	out.locks = r.locks
	return out
}

// Equal reports whether m and o describe the same kernel metric set (a
// metric of value 0 equals an absent one).
func (m RouteMetrics) Equal(o RouteMetrics) bool {
	a, b := m.raw().normalized(), o.raw().normalized()
	if a.cc != b.cc || a.locks != b.locks || len(a.vals) != len(b.vals) {
		return false
	}
	for k, v := range a.vals {
		if b.vals[k] != v {
			return false
		}
	}
	return true
}

// MetricDiff is one metric whose observed value differs from the desired
// one, both in iproute2 notation ("" when absent).
type MetricDiff struct {
	Metric   string // iproute2 name, e.g. "cwnd"
	Desired  string // e.g. "lock 30"
	Observed string // e.g. "30"
}

func (d MetricDiff) String() string {
	obs := d.Observed
	if obs == "" {
		obs = "unset"
	}
	des := d.Desired
	if des == "" {
		des = "unset"
	}
	return fmt.Sprintf("%s: desired %s, observed %s", d.Metric, des, obs)
}

// DiffMetrics compares the metrics that desired sets (value and lock bit)
// with observed and returns the differences, nil when observed satisfies
// desired. Metrics desired does not set are not compared. A desired value of
// 0 (e.g. quickack false) matches an absent metric, as the kernel stores no
// zero metric.
func DiffMetrics(desired, observed RouteMetrics) []MetricDiff {
	d, o := desired.raw(), observed.raw()
	var diffs []MetricDiff
	for _, k := range d.keys() {
		dl, ol := d.locks&LockBit(k) != 0, o.locks&LockBit(k) != 0
		var same bool
		if k == unix.RTAX_CC_ALGO {
			same = d.cc == o.cc && dl == ol
		} else {
			dv, ov := d.vals[k], o.vals[k]
			same = dv == ov && (dl == ol || dv == 0)
		}
		if !same {
			diffs = append(diffs, MetricDiff{
				Metric:   metricName(k),
				Desired:  formatOne(k, d),
				Observed: formatOne(k, o),
			})
		}
	}
	return diffs
}

// Satisfies reports whether observed has every metric desired sets; see
// DiffMetrics.
func Satisfies(observed, desired RouteMetrics) bool {
	return len(DiffMetrics(desired, observed)) == 0
}

// metricOrder is the order String prints metrics in: the ones nettune
// manages first, then the rest as iproute2 numbers them.
var metricOrder = []int{
	unix.RTAX_CWND, unix.RTAX_INITCWND, unix.RTAX_INITRWND, unix.RTAX_SSTHRESH,
	unix.RTAX_RTO_MIN, unix.RTAX_QUICKACK, unix.RTAX_CC_ALGO, unix.RTAX_ADVMSS,
	unix.RTAX_MTU, unix.RTAX_WINDOW, unix.RTAX_RTT, unix.RTAX_RTTVAR,
	unix.RTAX_REORDERING, unix.RTAX_HOPLIMIT, unix.RTAX_FEATURES,
	unix.RTAX_FASTOPEN_NO_COOKIE,
}

func sortMetricKeys(keys []int) {
	rank := func(k int) int {
		for i, o := range metricOrder {
			if o == k {
				return i
			}
		}
		return len(metricOrder) + k
	}
	sort.Slice(keys, func(i, j int) bool { return rank(keys[i]) < rank(keys[j]) })
}

var metricNames = map[int]string{
	unix.RTAX_MTU:                "mtu",
	unix.RTAX_WINDOW:             "window",
	unix.RTAX_RTT:                "rtt",
	unix.RTAX_RTTVAR:             "rttvar",
	unix.RTAX_SSTHRESH:           "ssthresh",
	unix.RTAX_CWND:               "cwnd",
	unix.RTAX_ADVMSS:             "advmss",
	unix.RTAX_REORDERING:         "reordering",
	unix.RTAX_HOPLIMIT:           "hoplimit",
	unix.RTAX_INITCWND:           "initcwnd",
	unix.RTAX_FEATURES:           "features",
	unix.RTAX_RTO_MIN:            "rto_min",
	unix.RTAX_INITRWND:           "initrwnd",
	unix.RTAX_QUICKACK:           "quickack",
	unix.RTAX_CC_ALGO:            "congctl",
	unix.RTAX_FASTOPEN_NO_COOKIE: "fastopen_no_cookie",
}

func metricName(k int) string {
	if n, ok := metricNames[k]; ok {
		return n
	}
	return "metric" + strconv.Itoa(k)
}

// formatMillis prints a millisecond count as iproute2 does ("10ms", "1.5s").
func formatMillis(ms uint32) string {
	if ms >= 1000 {
		return strconv.FormatFloat(float64(ms)/1000, 'g', -1, 64) + "s"
	}
	return strconv.FormatUint(uint64(ms), 10) + "ms"
}

// formatOne prints the value of metric k in r without its name ("lock 30"),
// "" when absent.
func formatOne(k int, r rawMetrics) string {
	var v string
	if k == unix.RTAX_CC_ALGO {
		if r.cc == "" {
			return ""
		}
		v = r.cc
	} else {
		x, ok := r.vals[k]
		if !ok || x == 0 {
			return ""
		}
		switch k {
		case unix.RTAX_RTO_MIN:
			v = formatMillis(x)
		case unix.RTAX_RTT:
			v = formatMillis(x / 8)
		case unix.RTAX_RTTVAR:
			v = formatMillis(x / 4)
		case unix.RTAX_FEATURES:
			var parts []string
			if x&unix.RTAX_FEATURE_ECN != 0 {
				parts = append(parts, "ecn")
				x &^= unix.RTAX_FEATURE_ECN
			}
			if x != 0 {
				parts = append(parts, fmt.Sprintf("0x%x", x))
			}
			v = strings.Join(parts, " ")
		default:
			v = strconv.FormatUint(uint64(x), 10)
		}
	}
	if r.locks&LockBit(k) != 0 {
		v = "lock " + v
	}
	return v
}

// String formats m like iproute2 prints route metrics, e.g.
// "cwnd lock 30 initcwnd 25 initrwnd 25 ssthresh 30 rto_min lock 10ms quickack 1".
// Metrics nettune manages come first, in that order; "" when m is empty.
// A metric of value 0 is printed only for quickack ("quickack 0"), as that is
// a meaningful desired value.
func (m RouteMetrics) String() string {
	r := m.raw()
	var parts []string
	for _, k := range r.keys() {
		s := formatOne(k, r)
		if s == "" && k == unix.RTAX_QUICKACK {
			s = "0"
		}
		if s != "" {
			parts = append(parts, metricName(k)+" "+s)
		}
	}
	return strings.Join(parts, " ")
}

// RoundRTOMin is d as the kernel stores a route's rto_min: rounded up to
// whole milliseconds (0 for d <= 0).
func RoundRTOMin(d time.Duration) time.Duration {
	return time.Duration(rtoMillis(d)) * time.Millisecond
}
