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
	"runtime"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// socketTimeout bounds every netlink round trip, so a lost reply cannot hang
// the agent.
var socketTimeout = unix.NsecToTimeval((10 * time.Second).Nanoseconds())

// Handle runs kernel operations against one network namespace. It owns
// netlink sockets opened in that namespace and a duplicate of the namespace
// file descriptor; it is safe for concurrent use. Close releases it.
type Handle struct {
	// SysctlRoot is the directory sysctls are read and written under
	// (default /proc/sys). In a container /proc/sys is mounted read-only;
	// the agent's DaemonSet mounts the host's /proc/sys/net writable
	// elsewhere (e.g. /host/proc/sys/net) and sets this to /host/proc/sys.
	// Files under it still resolve against the opening thread's namespace.
	SysctlRoot string

	ns  netns.NsHandle // owned duplicate
	own bool           // ns is the namespace the handle was created in: no setns needed

	link  *netlink.Handle  // links (LinkByName, LinkSetMTU)
	route *nl.SocketHandle // NETLINK_ROUTE, raw route messages
	genl  *nl.SocketHandle // NETLINK_GENERIC, tcp_metrics
	diag  *nl.SocketHandle // NETLINK_SOCK_DIAG
	mu    sync.Mutex       // guards tmFam
	tmFam uint16           // resolved tcp_metrics family id, 0 until looked up
}

// NewHandle returns a Handle for the network namespace of the calling thread
// (normally the agent's own namespace).
func NewHandle() (*Handle, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("get current network namespace: %w", err)
	}
	defer ns.Close()
	return NewHandleAt(ns)
}

// NewHandleAt returns a Handle for the network namespace ns. The handle keeps
// its own duplicate of ns: the caller may close ns afterwards.
func NewHandleAt(ns netns.NsHandle) (*Handle, error) {
	if !ns.IsOpen() {
		return nil, fmt.Errorf("network namespace handle is not open")
	}
	fd, err := unix.FcntlInt(uintptr(ns), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("duplicate network namespace handle: %w", err)
	}
	h := &Handle{ns: netns.NsHandle(fd)}
	if cur, err := netns.Get(); err == nil {
		h.own = cur.Equal(h.ns)
		cur.Close()
	}
	if err := h.open(); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *Handle) open() error {
	var err error
	// In its own namespace the handle never calls setns, which needs
	// CAP_SYS_ADMIN: the agent's DaemonSet has CAP_NET_ADMIN only.
	if h.own {
		h.link, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		h.link, err = netlink.NewHandleAt(h.ns, unix.NETLINK_ROUTE)
	}
	if err != nil {
		return fmt.Errorf("open rtnetlink handle: %w", err)
	}
	if err := h.link.SetSocketTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("set rtnetlink handle timeout: %w", err)
	}
	for _, s := range []struct {
		dst   **nl.SocketHandle
		proto int
	}{
		{&h.route, unix.NETLINK_ROUTE},
		{&h.genl, unix.NETLINK_GENERIC},
		{&h.diag, unix.NETLINK_SOCK_DIAG},
	} {
		var sock *nl.NetlinkSocket
		err := h.Do(func() error {
			var err error
			sock, err = nl.GetNetlinkSocketAt(netns.None(), netns.None(), s.proto)
			return err
		})
		if err != nil {
			return fmt.Errorf("open netlink socket (protocol %d): %w", s.proto, err)
		}
		*s.dst = &nl.SocketHandle{Socket: sock}
		if err := sock.SetSendTimeout(&socketTimeout); err != nil {
			return fmt.Errorf("set netlink send timeout: %w", err)
		}
		if err := sock.SetReceiveTimeout(&socketTimeout); err != nil {
			return fmt.Errorf("set netlink receive timeout: %w", err)
		}
		// Extended acks carry the kernel's error text ("Unknown congestion
		// control algorithm"); best effort, older kernels lack it.
		_ = sock.SetExtAck(true)
	}
	return nil
}

// Close releases the handle's sockets and namespace descriptor.
func (h *Handle) Close() error {
	if h.link != nil {
		h.link.Close()
	}
	for _, s := range []*nl.SocketHandle{h.route, h.genl, h.diag} {
		if s != nil {
			s.Close()
		}
	}
	return h.ns.Close()
}

// Namespace returns the handle's namespace descriptor. It stays owned by the
// handle: do not close it.
func (h *Handle) Namespace() netns.NsHandle { return h.ns }

// Foreign reports whether the handle's namespace is another one than the
// process's own (reaching it takes setns, hence CAP_SYS_ADMIN).
func (h *Handle) Foreign() bool { return !h.own }

// Do runs fn on an OS thread inside the handle's network namespace; see
// DoInNetns. A handle on the process's own namespace runs fn where it is:
// every thread of the process is there already (DoInNetns never returns a
// moved thread to the runtime), and setns, even to the same namespace,
// needs CAP_SYS_ADMIN, which the agent's DaemonSet does not have.
func (h *Handle) Do(fn func() error) error {
	if h.own {
		return fn()
	}
	return DoInNetns(h.ns, fn)
}

// DoInNetns runs fn on a fresh goroutine locked to its OS thread, after moving
// that thread into the network namespace ns, and returns fn's error. The
// thread is never moved back: the goroutine exits still locked, so the Go
// runtime destroys the thread instead of reusing it elsewhere, and no other
// goroutine can ever run in the wrong namespace even if fn fails halfway.
//
// Only fn's own thread is in ns: goroutines it starts are not. Sockets and
// files opened inside fn stay bound to ns and may be used from anywhere
// afterwards. A panic in fn is re-raised in the caller.
func DoInNetns(ns netns.NsHandle, fn func() error) error {
	type result struct {
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: see above.
		var res result
		defer func() {
			if p := recover(); p != nil {
				res.panic = p
			}
			done <- res
		}()
		if err := netns.Set(ns); err != nil {
			res.err = fmt.Errorf("enter network namespace %s: %w", ns, err)
			return
		}
		res.err = fn()
	}()
	res := <-done
	if res.panic != nil {
		panic(res.panic)
	}
	return res.err
}
