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

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CongestionControl names a TCP congestion control algorithm. The node agent
// refuses a value the host kernel does not offer
// (/proc/sys/net/ipv4/tcp_available_congestion_control).
// +kubebuilder:validation:Enum=reno;cubic;bbr;dctcp;htcp;hybla;illinois;vegas;veno;westwood;yeah;bic;cdg;highspeed;lp;nv;scalable
type CongestionControl string

// Cwnd is a congestion window clamp for a route (iproute2 `cwnd [lock] N`).
type Cwnd struct {
	// value is the congestion window in packets (MSS-sized segments).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Value int32 `json:"value"`

	// lock makes the value a hard clamp: without the RTAX_LOCK bit the kernel
	// treats cwnd as a hint that congestion control may grow past. Defaults to true.
	// +optional
	// +kubebuilder:default=true
	Lock *bool `json:"lock,omitempty"`
}

// TCPParameters are the per-route TCP metrics nettune sets, each optional: an
// unset parameter leaves the kernel default (or a less specific setting) in place.
// +kubebuilder:validation:XValidation:rule="!has(self.cwnd) || !has(self.initcwnd) || self.initcwnd <= self.cwnd.value",message="initcwnd must not exceed cwnd.value",fieldPath=".initcwnd"
// +kubebuilder:validation:XValidation:rule="!has(self.cwnd) || !has(self.ssthresh) || self.ssthresh <= self.cwnd.value",message="ssthresh must not exceed cwnd.value",fieldPath=".ssthresh"
type TCPParameters struct {
	// cwnd clamps the congestion window of every connection on the route, so the
	// packets one flow has in flight never exceed the switch buffer. Seed value 30.
	// +optional
	Cwnd *Cwnd `json:"cwnd,omitempty"`

	// initcwnd is the initial congestion window in packets (kernel default 10).
	// Must not exceed cwnd.value when both are set. Seed value 25.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Initcwnd *int32 `json:"initcwnd,omitempty"`

	// initrwnd is the initial receive window advertised, in packets (kernel
	// default 10). Seed value 25.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Initrwnd *int32 `json:"initrwnd,omitempty"`

	// ssthresh is the initial slow-start threshold in packets. Must not exceed
	// cwnd.value when both are set. The agent locks it on the route, so that a
	// closing connection does not write the ssthresh it learned back into the
	// tcp_metrics cache for the next one (4.9 does, and later kernels with
	// net.ipv4.tcp_no_ssthresh_metrics_save=0). The kernel ignores it while
	// net.ipv4.tcp_no_ssthresh_metrics_save=1; the agent reports it as not
	// effective then (docs/kernels.md).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Ssthresh *int32 `json:"ssthresh,omitempty"`

	// rtoMin is the floor of the retransmission timeout, a duration between 1ms
	// and 2s such as "10ms" (kernel default 200ms). Always set locked, as the
	// kernel uses a route's rto_min only when locked.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) >= duration('1ms') && duration(self) <= duration('2s'))",message="rtoMin must be between 1ms and 2s"
	RTOMin *metav1.Duration `json:"rtoMin,omitempty"`

	// quickack disables delayed ACKs on the route when true, so a 40ms delayed
	// ACK does not fight a short rtoMin. False sets quickack 0 explicitly.
	// +optional
	Quickack *bool `json:"quickack,omitempty"`

	// congestionControl sets the route's congestion control algorithm.
	// +optional
	CongestionControl *CongestionControl `json:"congestionControl,omitempty"`

	// advmss is the maximum segment size advertised to the peer, in bytes.
	// +optional
	// +kubebuilder:validation:Minimum=88
	// +kubebuilder:validation:Maximum=65495
	AdvMSS *int32 `json:"advmss,omitempty"`

	// mtu is the path MTU of the route in bytes (not the interface MTU).
	// +optional
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=65535
	MTU *int32 `json:"mtu,omitempty"`
}

// Sysctl is one kernel parameter set through /proc/sys. Only an allow-list of
// networking parameters is accepted: net.ipv4.tcp_*, net.ipv4.udp_rmem_min,
// net.ipv4.udp_wmem_min, net.ipv4.udp_mem and the net.core socket buffer and
// backlog limits. Global sysctls hit every service on a host: prefer per-route
// parameters where one exists.
type Sysctl struct {
	// name is the sysctl in dotted form, e.g. net.core.rmem_max.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self != 'net.core.default_qdisc'",message="net.core.default_qdisc is not set by nettune: it is global to the host (not per network namespace) and changes only interfaces created after it; for fq pacing beside a cwnd clamp set the interface's root qdisc at boot (tc qdisc replace dev <if> root fq, or the distribution's network configuration) and keep tcp_congestion_control/cwnd in the profile"
	// +kubebuilder:validation:XValidation:rule="self.matches('^net[.]ipv4[.]tcp_[a-z0-9_]+$') || self in ['net.ipv4.udp_rmem_min', 'net.ipv4.udp_wmem_min', 'net.ipv4.udp_mem', 'net.core.rmem_max', 'net.core.wmem_max', 'net.core.rmem_default', 'net.core.wmem_default', 'net.core.optmem_max', 'net.core.netdev_max_backlog', 'net.core.netdev_budget', 'net.core.netdev_budget_usecs', 'net.core.somaxconn', 'net.core.busy_poll', 'net.core.busy_read']",message="sysctl is not on the allow-list (net.ipv4.tcp_*, net.ipv4.udp_rmem_min/udp_wmem_min/udp_mem, net.core socket buffer and backlog limits)"
	Name string `json:"name"`

	// value is written as-is; several numbers are separated by spaces
	// (e.g. "4096 131072 6291456" for net.ipv4.tcp_rmem).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+( [A-Za-z0-9_.-]+)*$`
	Value string `json:"value"`
}

// InterfaceTuning sets an interface's MTU and offloads.
type InterfaceTuning struct {
	// name is the interface name on the host, e.g. eth0.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="the kernel refuses the interface names . and .."
	Name string `json:"name"`

	// mtu is the interface MTU in bytes.
	// +optional
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=65535
	MTU *int32 `json:"mtu,omitempty"`

	// gro turns generic receive offload on or off.
	// +optional
	GRO *bool `json:"gro,omitempty"`

	// gso turns generic segmentation offload on or off.
	// +optional
	GSO *bool `json:"gso,omitempty"`

	// tso turns TCP segmentation offload on or off.
	// +optional
	TSO *bool `json:"tso,omitempty"`
}
