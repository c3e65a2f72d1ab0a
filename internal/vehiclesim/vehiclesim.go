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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/nettune/nettune/node-agent/kernel"
)

// Defaults of Options.
const (
	DefaultPrefix      = "ntb-"   // namespace name prefix (Sweep argument)
	DefaultRate        = "1gbit"  // switch port and NIC line rate
	DefaultBufferBytes = 131072   // switch port buffer: 128 KB (SJA1105)
	DefaultBurstBytes  = 4 * 1514 // token bucket: four full frames, see package doc
	DefaultHostQueue   = 1000 * 1514
	DefaultMTU         = 1500

	// LANDev is the LAN interface inside every host namespace.
	LANDev = "lan0"
	// MgmtDev is the management interface inside every host namespace
	// (Options.Management).
	MgmtDev = "mgmt0"
	// BridgeDev is the bridge inside the switch namespace.
	BridgeDev = "br0"
	// NoShaping as Options.HostRate leaves the hosts' NIC egress unshaped.
	NoShaping = "none"
)

// DefaultHosts are the host names of a vehicle when Options.Hosts is empty:
// six Xavier units, as in the field reports.
var DefaultHosts = []string{"xavier-a", "xavier-b", "xavier-c", "xavier-d", "xavier-e", "xavier-f"}

// ErrClosed is returned by scenarios and helpers started on a closed vehicle.
var ErrClosed = errors.New("vehiclesim: vehicle closed")

// Options describe a vehicle. The zero value is a six-host vehicle on a
// 1 Gbit/s switch with a 128 KB buffer per port.
type Options struct {
	// Name is the vehicle name, e.g. "av-001" (default "av-NNN", numbered per
	// process). Trailing digits (1-254) pick the default subnet.
	Name string
	// Hosts are the host names (default DefaultHosts). Lower case letters,
	// digits and '-', unique, at most 40 characters, not "sw".
	Hosts []string
	// Rate is the line rate of every switch port, in tc syntax (default "1gbit").
	Rate string
	// BufferBytes is the queue of every switch egress port: the tbf limit
	// (default 131072). Frames arriving at a full queue are dropped.
	BufferBytes int
	// Subnet is the LAN, IPv4, wide enough for .(10+len(Hosts)) (default
	// 10.77.<vehicle number>.0/24). Host i (1-based) gets .(10+i).
	Subnet string
	// Management adds a veth from each host namespace to the root namespace
	// (see Vehicle.MgmtGateway). Default off.
	Management bool

	// BurstBytes is the token bucket of every tbf (default DefaultBurstBytes,
	// at least two full frames).
	BurstBytes int
	// HostRate shapes each host's NIC egress (lan0) like a real 1 Gbit/s port:
	// default Rate; NoShaping ("none") leaves lan0 unshaped, so a host sends
	// as fast as the CPU copies.
	HostRate string
	// HostQueueBytes is the NIC queue behind HostRate (default 1000 full
	// frames, like txqueuelen 1000).
	HostQueueBytes int
	// KeepOffloads leaves TSO/GSO on the hosts' lan0 as veth creates them
	// (on). Only for experiments: see the package doc.
	KeepOffloads bool
	// MgmtSubnet is the management /24 in the root namespace (default a free
	// 10.78.X.0/24). The root side holds .1 on every management veth; host i
	// gets .(10+i).
	MgmtSubnet string
	// Prefix starts every namespace name (default DefaultPrefix).
	Prefix string
}

// Vehicle is a running simulated vehicle: a switch namespace and one namespace per
// host. Close removes it.
type Vehicle struct {
	Name   string
	Switch string // switch netns (holds BridgeDev and the switch ports)
	Hosts  []*Host
	// Subnet is the LAN.
	Subnet netip.Prefix
	// MgmtGateway is the root namespace's address on the management veths
	// (Options.Management): a server listening on it (or on 0.0.0.0) in the
	// root namespace is reachable from every host namespace.
	MgmtGateway netip.Addr
	// MgmtSubnet is the management network (Options.Management).
	MgmtSubnet netip.Prefix
	// ID is the instance id in every name this vehicle made.
	ID string

	opts Options // resolved

	ctx    context.Context // canceled by Close: stops scenarios and commands
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // scenarios and forwarders

	closeOnce sync.Once
	closeErr  error
}

// Host is one compute unit: a network namespace joined to the switch.
type Host struct {
	Name       string
	Netns      string
	Addr       netip.Addr // LAN address
	Dev        string     // LAN device inside Netns (LANDev)
	SwitchPort string     // switch-side veth in Vehicle.Switch
	// Management (Options.Management): MgmtAddr on MgmtDev inside Netns,
	// joined to RootDev in the root namespace.
	MgmtDev  string
	MgmtAddr netip.Addr
	RootDev  string

	v *Vehicle
}

var (
	vehicleSeq  atomic.Int64
	hostNameRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	trailingNum = regexp.MustCompile(`([0-9]+)$`)
)

func (o *Options) resolve() (vehicleNo int, err error) {
	seq := int(vehicleSeq.Add(1))
	if o.Name == "" {
		o.Name = fmt.Sprintf("av-%03d", seq)
	}
	vehicleNo = (seq-1)%254 + 1
	if m := trailingNum.FindString(o.Name); m != "" {
		if n, err := strconv.Atoi(m); err == nil && n >= 1 && n <= 254 {
			vehicleNo = n
		}
	}
	if len(o.Hosts) == 0 {
		o.Hosts = append([]string(nil), DefaultHosts...)
	}
	seen := map[string]bool{}
	for _, h := range o.Hosts {
		if !hostNameRE.MatchString(h) || len(h) > 40 || h == "sw" {
			return 0, fmt.Errorf("host name %q: want lower case letters, digits and '-', at most 40 characters, not \"sw\"", h)
		}
		if seen[h] {
			return 0, fmt.Errorf("host name %q given twice", h)
		}
		seen[h] = true
	}
	if o.Rate == "" {
		o.Rate = DefaultRate
	}
	if o.HostRate == "" {
		o.HostRate = o.Rate
	}
	if o.BufferBytes == 0 {
		o.BufferBytes = DefaultBufferBytes
	}
	if o.BurstBytes == 0 {
		o.BurstBytes = DefaultBurstBytes
	}
	if o.HostQueueBytes == 0 {
		o.HostQueueBytes = DefaultHostQueue
	}
	if o.BurstBytes < 2*1514 {
		return 0, fmt.Errorf("burst %d bytes: want at least two full frames (3028)", o.BurstBytes)
	}
	if o.BufferBytes < 1514 || o.HostQueueBytes < 1514 {
		return 0, fmt.Errorf("buffer %d / host queue %d bytes: want at least one full frame (1514)", o.BufferBytes, o.HostQueueBytes)
	}
	if o.Subnet == "" {
		o.Subnet = fmt.Sprintf("10.77.%d.0/24", vehicleNo)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if !regexp.MustCompile(`^[a-z][a-z0-9]*-$`).MatchString(o.Prefix) || len(o.Prefix) > 8 {
		return 0, fmt.Errorf("prefix %q: want lower case letters and digits ending in '-', at most 8 characters", o.Prefix)
	}
	return vehicleNo, nil
}

// hostAddr returns address .(10+i) of p (i 1-based).
func hostAddr(p netip.Prefix, i int) (netip.Addr, error) {
	a := p.Masked().Addr()
	for range 10 + i {
		a = a.Next()
	}
	if !p.Contains(a) || !p.Contains(a.Next()) { // keep the broadcast address free
		return netip.Addr{}, fmt.Errorf("subnet %s too small for host %d (.%d)", p, i, 10+i)
	}
	return a, nil
}

func parseSubnet(s string, hosts int) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("subnet: %w", err)
	}
	if !p.Addr().Is4() {
		return p, fmt.Errorf("subnet %s: want IPv4", s)
	}
	p = p.Masked()
	if _, err := hostAddr(p, hosts); err != nil {
		return p, err
	}
	return p, nil
}

func randomID() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// nsName is <prefix><owner pid>-<id>-<role>: Sweep finds the owner in it.
func nsName(prefix, id, role string) string {
	return fmt.Sprintf("%s%d-%s-%s", prefix, os.Getpid(), id, role)
}

// New builds a vehicle. On any error it removes everything it made. It first
// sweeps leftovers of dead earlier runs (Sweep, best effort).
func New(ctx context.Context, o Options) (*Vehicle, error) {
	if _, err := o.resolve(); err != nil {
		return nil, err
	}
	subnet, err := parseSubnet(o.Subnet, len(o.Hosts))
	if err != nil {
		return nil, err
	}
	for _, bin := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s (iproute2) not found: %w", bin, err)
		}
	}
	_ = Sweep(o.Prefix)

	id, err := randomID()
	if err != nil {
		return nil, err
	}
	vctx, cancel := context.WithCancel(context.Background())
	v := &Vehicle{
		Name:   o.Name,
		Switch: nsName(o.Prefix, id, "sw"),
		Subnet: subnet,
		ID:     id,
		opts:   o,
		ctx:    vctx,
		cancel: cancel,
	}
	for i, name := range o.Hosts {
		addr, err := hostAddr(subnet, i+1)
		if err != nil {
			cancel()
			return nil, err
		}
		port := "p-" + name
		if len(port) > 15 {
			port = fmt.Sprintf("port%d", i+1)
		}
		h := &Host{Name: name, Netns: nsName(o.Prefix, id, name), Addr: addr, Dev: LANDev, SwitchPort: port, v: v}
		v.Hosts = append(v.Hosts, h)
	}
	if o.Management {
		if err := v.planManagement(); err != nil {
			cancel()
			return nil, err
		}
	}
	if err := v.build(ctx); err != nil {
		if cerr := v.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", cerr))
		}
		return nil, err
	}
	return v, nil
}

func (v *Vehicle) planManagement() error {
	var err error
	if v.opts.MgmtSubnet != "" {
		v.MgmtSubnet, err = parseSubnet(v.opts.MgmtSubnet, len(v.Hosts))
		if err != nil {
			return fmt.Errorf("management %w", err)
		}
	} else if v.MgmtSubnet, err = freeMgmtSubnet(len(v.Hosts)); err != nil {
		return err
	}
	v.MgmtGateway = v.MgmtSubnet.Addr().Next()
	for i, h := range v.Hosts {
		h.MgmtDev = MgmtDev
		if h.MgmtAddr, err = hostAddr(v.MgmtSubnet, i+1); err != nil {
			return fmt.Errorf("management %w", err)
		}
		h.RootDev = fmt.Sprintf("tb%s%d", v.ID, i+1) // <= 11 characters, unique per instance
	}
	return nil
}

// freeMgmtSubnet picks a 10.78.X.0/24 that no address or route of the root
// namespace overlaps.
func freeMgmtSubnet(hosts int) (netip.Prefix, error) {
	out, err := command(context.Background(), "", "ip", "-4", "-o", "addr", "show")
	if err != nil {
		return netip.Prefix{}, err
	}
	routes, err := command(context.Background(), "", "ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return netip.Prefix{}, err
	}
	var used []netip.Prefix
	for _, f := range strings.Fields(out + " " + routes) {
		if p, err := netip.ParsePrefix(f); err == nil {
			used = append(used, p.Masked())
		} else if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
			used = append(used, netip.PrefixFrom(a, 32))
		}
	}
	b := make([]byte, 1)
	for range 64 {
		if _, err := rand.Read(b); err != nil {
			return netip.Prefix{}, err
		}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 78, b[0], 0}), 24)
		free := true
		for _, u := range used {
			if u.Bits() > 0 && u.Overlaps(p) {
				free = false
				break
			}
		}
		if free {
			return parseSubnet(p.String(), hosts)
		}
	}
	return netip.Prefix{}, errors.New("no free management subnet in 10.78.0.0/16")
}

// namespaces returns every namespace of the vehicle, the switch first.
func (v *Vehicle) namespaces() []string {
	ns := []string{v.Switch}
	for _, h := range v.Hosts {
		ns = append(ns, h.Netns)
	}
	return ns
}

func (v *Vehicle) build(ctx context.Context) error {
	o := v.opts
	var b strings.Builder
	for _, ns := range v.namespaces() {
		fmt.Fprintf(&b, "netns add %s\n", ns)
	}
	if _, err := command(ctx, b.String(), "ip", "-batch", "-"); err != nil {
		return fmt.Errorf("creating namespaces: %w", err)
	}
	// No IPv6 on the vehicle LAN: no DAD, router or MLD chatter in the
	// switch counters. Set before any interface exists.
	for _, ns := range v.namespaces() {
		if err := v.sysctls(ns, map[string]string{
			"net.ipv6.conf.all.disable_ipv6":     "1",
			"net.ipv6.conf.default.disable_ipv6": "1",
		}, nil); err != nil {
			return err
		}
	}
	// The switch does not filter bridged frames (br_netfilter is built in).
	_ = v.sysctls(v.Switch, nil, map[string]string{
		"net.bridge.bridge-nf-call-iptables":  "0",
		"net.bridge.bridge-nf-call-ip6tables": "0",
		"net.bridge.bridge-nf-call-arptables": "0",
	})

	b.Reset()
	b.WriteString("link set lo up\n")
	fmt.Fprintf(&b, "link add %s type bridge stp_state 0 mcast_snooping 0\n", BridgeDev)
	fmt.Fprintf(&b, "link set %s up\n", BridgeDev)
	for _, h := range v.Hosts {
		fmt.Fprintf(&b, "link add %s mtu %d type veth peer name %s mtu %d netns %s\n", h.SwitchPort, DefaultMTU, h.Dev, DefaultMTU, h.Netns)
		fmt.Fprintf(&b, "link set %s master %s\n", h.SwitchPort, BridgeDev)
		fmt.Fprintf(&b, "link set %s up\n", h.SwitchPort)
	}
	if _, err := command(ctx, b.String(), "ip", "-n", v.Switch, "-batch", "-"); err != nil {
		return fmt.Errorf("building the switch: %w", err)
	}
	b.Reset()
	for _, h := range v.Hosts {
		fmt.Fprintf(&b, "%s\n", strings.Join(tbfArgs(h.SwitchPort, o.Rate, o.BurstBytes, o.BufferBytes), " "))
	}
	if _, err := command(ctx, b.String(), "tc", "-n", v.Switch, "-batch", "-"); err != nil {
		return fmt.Errorf("switch port queues (tbf rate %s limit %d): %w", o.Rate, o.BufferBytes, err)
	}

	if o.Management {
		b.Reset()
		for _, h := range v.Hosts {
			fmt.Fprintf(&b, "link add %s type veth peer name %s netns %s\n", h.RootDev, h.MgmtDev, h.Netns)
			fmt.Fprintf(&b, "link set %s alias %s up\n", h.RootDev, h.Netns)
			fmt.Fprintf(&b, "addr add %s/32 dev %s\n", v.MgmtGateway, h.RootDev)
			fmt.Fprintf(&b, "route add %s/32 dev %s src %s\n", h.MgmtAddr, h.RootDev, v.MgmtGateway)
		}
		if _, err := command(ctx, b.String(), "ip", "-batch", "-"); err != nil {
			return fmt.Errorf("management veths: %w", err)
		}
	}

	errs := make(chan error, len(v.Hosts))
	for _, h := range v.Hosts {
		go func() { errs <- h.build(ctx) }()
	}
	var err error
	for range v.Hosts {
		err = errors.Join(err, <-errs)
	}
	return err
}

// tbfArgs is the tc command (without "tc -n NS") of a tbf root qdisc.
func tbfArgs(dev, rate string, burst, limit int) []string {
	return []string{"qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
		"burst", strconv.Itoa(burst), "limit", strconv.Itoa(limit)}
}

func (h *Host) build(ctx context.Context) error {
	o := h.v.opts
	var b strings.Builder
	b.WriteString("link set lo up\n")
	fmt.Fprintf(&b, "addr add %s/%d dev %s\n", h.Addr, h.v.Subnet.Bits(), h.Dev)
	fmt.Fprintf(&b, "link set %s mtu %d up\n", h.Dev, DefaultMTU)
	if o.Management {
		fmt.Fprintf(&b, "addr add %s/%d dev %s\n", h.MgmtAddr, h.v.MgmtSubnet.Bits(), h.MgmtDev)
		fmt.Fprintf(&b, "link set %s up\n", h.MgmtDev)
	}
	if _, err := command(ctx, b.String(), "ip", "-n", h.Netns, "-batch", "-"); err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	if o.HostRate != NoShaping {
		args := append([]string{"-n", h.Netns}, tbfArgs(h.Dev, o.HostRate, o.BurstBytes, o.HostQueueBytes)...)
		if _, err := command(ctx, "", "tc", args...); err != nil {
			return fmt.Errorf("host %s NIC queue (tbf rate %s): %w", h.Name, o.HostRate, err)
		}
	}
	kh, err := h.handle()
	if err != nil {
		return err
	}
	defer kh.Close()
	if !o.KeepOffloads {
		off := false
		if _, err := kh.SetOffloads(h.Dev, kernel.Offloads{TSO: &off, GSO: &off}); err != nil {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
	}
	// Carrier: both ends are up once the switch port and lan0 are.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := kh.ReadInterface(h.Dev)
		if err == nil && st.Carrier {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("host %s: no carrier on %s (%v)", h.Name, h.Dev, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// handle opens a node-agent kernel handle in the host namespace; the caller
// closes it.
func (h *Host) handle() (*kernel.Handle, error) { return handleAt(h.Netns) }

func handleAt(name string) (*kernel.Handle, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	defer ns.Close()
	return kernel.NewHandleAt(ns)
}

// sysctls writes must (failing on error) and try (ignoring errors) in ns.
func (v *Vehicle) sysctls(ns string, must, try map[string]string) error {
	kh, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer kh.Close()
	for k, val := range must {
		if _, err := kh.WriteSysctl(k, val); err != nil {
			return fmt.Errorf("netns %s: %w", ns, err)
		}
	}
	for k, val := range try {
		_, _ = kh.WriteSysctl(k, val)
	}
	return nil
}

// command runs name args with stdin and returns its trimmed standard output;
// the error carries standard error. A netlink dump interrupted by a
// concurrent change ("Dump was interrupted") is retried.
func command(ctx context.Context, stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		cmd := exec.CommandContext(ctx, name, args...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if strings.Contains(stderr.String(), "Dump was interrupted") && attempt < 5 && stdin == "" {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
		}
		return strings.TrimSpace(stdout.String()), nil
	}
}

// Host returns the host called name, or nil.
func (v *Vehicle) Host(name string) *Host {
	for _, h := range v.Hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Options returns the options the vehicle was built with, defaults filled in.
func (v *Vehicle) Options() Options {
	o := v.opts
	o.Hosts = append([]string(nil), o.Hosts...)
	return o
}

// Vehicle returns the vehicle of h.
func (h *Host) Vehicle() *Vehicle { return h.v }

// Run returns a command that runs inside the host namespace (through `ip
// netns exec`), not yet started. It is killed when ctx ends or the vehicle
// closes (the caller still Waits for it), and by the kernel if the test
// process dies (Pdeathsig: start it from an ordinary goroutine, not inside
// Do). Close also kills anything else left running in the namespace.
func (h *Host) Run(ctx context.Context, name string, args ...string) *exec.Cmd {
	cctx, cancel := context.WithCancel(ctx)
	context.AfterFunc(h.v.ctx, cancel)
	cmd := exec.CommandContext(cctx, "ip", append([]string{"netns", "exec", h.Netns, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Do runs fn on an OS thread inside the host namespace and returns its error
// (node-agent/kernel.DoInNetns: fn runs on a fresh goroutine locked to a
// thread that is discarded afterwards instead of being moved back, so no
// other goroutine can ever run in the wrong namespace). Sockets opened in fn
// stay in the host namespace and may be used from any goroutine.
func (h *Host) Do(fn func() error) error {
	ns, err := netns.GetFromName(h.Netns)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", h.Netns, err)
	}
	defer ns.Close()
	return kernel.DoInNetns(ns, fn)
}

// begin registers a scenario or forwarder: the returned context ends with
// ctx or when the vehicle closes; done must be called when it has stopped.
func (v *Vehicle) begin(ctx context.Context) (context.Context, func(), error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, nil, ErrClosed
	}
	v.wg.Add(1)
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(v.ctx, cancel)
	return cctx, func() { stop(); cancel(); v.wg.Done() }, nil
}

// Close stops every scenario and forwarder, kills every process left in the
// vehicle's namespaces, and removes the management veths and namespaces. It
// is idempotent: later calls return the first call's result.
func (v *Vehicle) Close() error {
	v.closeOnce.Do(func() { v.closeErr = v.close() })
	return v.closeErr
}

func (v *Vehicle) close() error {
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	v.cancel()

	var errs []error
	stopped := make(chan struct{})
	go func() { v.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		errs = append(errs, errors.New("scenarios did not stop within 15s"))
	}

	var nss []string
	for _, ns := range v.namespaces() {
		if _, err := os.Stat(netnsPath(ns)); err == nil {
			nss = append(nss, ns)
		}
	}
	if err := killNetnsProcs(nss); err != nil {
		errs = append(errs, err)
	}
	var links []string
	for _, h := range v.Hosts {
		if h.RootDev != "" && linkExists(h.RootDev) {
			links = append(links, h.RootDev)
		}
	}
	if err := removeAll(nss, links); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
