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
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns` keeps its named namespaces.
const netnsDir = "/run/netns"

func netnsPath(name string) string { return filepath.Join(netnsDir, name) }

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name) // the calling goroutine's thread is in the root namespace
	return err == nil
}

type nsID struct{ dev, ino uint64 }

func statNS(path string) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsID{}, err
	}
	return nsID{uint64(st.Dev), st.Ino}, nil
}

// netnsProcs returns the pids (other than this process) whose network
// namespace is one of the named ones, like `ip netns pids`.
func netnsProcs(names []string) (map[int]string, error) {
	want := map[nsID]string{}
	for _, n := range names {
		id, err := statNS(netnsPath(n))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile (a concurrent Sweep)
		}
		if err != nil {
			return nil, fmt.Errorf("netns %s: %w", n, err)
		}
		want[id] = n
	}
	procs := map[int]string{}
	if len(want) == 0 {
		return procs, nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		id, err := statNS(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			continue // gone, or a zombie (no namespaces left)
		}
		if n, ok := want[id]; ok {
			procs[pid] = n
		}
	}
	return procs, nil
}

// killNetnsProcs SIGKILLs every process in the named namespaces and waits
// until none is left.
func killNetnsProcs(names []string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		procs, err := netnsProcs(names)
		if err != nil {
			return err
		}
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still running in the vehicle's namespaces after SIGKILL: %v", procs)
		}
		for pid := range procs {
			_ = unix.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// removeAll deletes root-namespace links, then namespaces, and checks that
// they are gone.
func removeAll(nss, links []string) error {
	var b strings.Builder
	for _, l := range links {
		fmt.Fprintf(&b, "link del %s\n", l)
	}
	for _, ns := range nss {
		fmt.Fprintf(&b, "netns del %s\n", ns)
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := command(context.Background(), b.String(), "ip", "-force", "-batch", "-")
	var left []string
	for _, l := range links {
		if linkExists(l) {
			left = append(left, "link "+l)
		}
	}
	for _, ns := range nss {
		if _, serr := os.Stat(netnsPath(ns)); serr == nil {
			left = append(left, "netns "+ns)
		}
	}
	if len(left) > 0 {
		return errors.Join(err, fmt.Errorf("left behind: %s", strings.Join(left, ", ")))
	}
	return nil
}

// ownerPID parses the owner pid out of <prefix><pid>-<id>-<role>; 0 when the
// name is not a simulated vehicle's.
func ownerPID(prefix, name string) int {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0
	}
	pidStr, rest, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	id, role, ok := strings.Cut(rest, "-")
	if !ok || len(id) != 6 || role == "" {
		return 0
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Sweep removes leftovers of crashed earlier runs: every namespace named
// <prefix><pid>-<id>-<role> whose owner pid is no longer alive (after
// killing the processes inside it), and every root-namespace link whose
// alias is such a name (the management veths). Namespaces of live owners,
// this process included, are left alone. New calls it best effort.
func Sweep(prefix string) error {
	if prefix == "" {
		return errors.New("sweep: empty prefix")
	}
	var dead []string
	ents, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sweep: %w", err)
	}
	for _, e := range ents {
		if pid := ownerPID(prefix, e.Name()); pid > 0 && !alive(pid) {
			dead = append(dead, e.Name())
		}
	}
	var links []string
	// Aliases from sysfs (this process's sysfs is the root namespace's), not
	// a netlink dump, which concurrent runs could interrupt.
	devs, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	for _, d := range devs {
		alias, err := os.ReadFile(filepath.Join("/sys/class/net", d.Name(), "ifalias"))
		if err != nil {
			continue // gone meanwhile
		}
		if pid := ownerPID(prefix, strings.TrimSpace(string(alias))); pid > 0 && !alive(pid) {
			links = append(links, d.Name())
		}
	}
	if len(dead) == 0 && len(links) == 0 {
		return nil
	}
	err = killNetnsProcs(dead)
	return errors.Join(err, removeAll(dead, links))
}
