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

package testnode

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const cgroupFS = "/sys/fs/cgroup"

// Cleanup removes everything a node in dir may have left, whether it
// stopped cleanly or was killed: its processes (containers by the kubelet's
// cgroups, then anything whose command line names dir: kubelet,
// containerd, shims, etcd, kube-apiserver), the mounts under dir, the
// cgroups, the network namespace (with the veth pair and the namespace's
// iptables rules) and dir itself. It is safe to call when nothing is left.
func Cleanup(dir string) error {
	if dir == "" || dir == "/" {
		return fmt.Errorf("refusing to clean up %q", dir)
	}
	var errs []error
	if err := killCgroup(CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	if err := killShims(filepath.Join(dir, "containerd", "containerd.sock")); err != nil {
		errs = append(errs, err)
	}
	if err := killMatching(dir); err != nil {
		errs = append(errs, err)
	}
	if err := killCgroup(CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	if _, err := os.Stat(NetNSPath); err == nil {
		if err := run("ip", "netns", "delete", NetNSName); err != nil {
			errs = append(errs, err)
		}
	}
	// The host end goes with its peer; a half-made pair may remain.
	if _, err := os.Stat("/sys/class/net/" + HostVeth); err == nil {
		if err := run("ip", "link", "delete", HostVeth); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

// cgroupControllers lists the mounted cgroup v1 hierarchies.
func cgroupControllers() []string {
	entries, err := os.ReadDir(cgroupFS)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if fi, err := os.Lstat(filepath.Join(cgroupFS, e.Name())); err == nil && fi.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// makeCgroupRoot creates the kubelet's cgroup root in every hierarchy (the
// kubelet refuses a root that does not exist); cpuset needs its CPUs and
// memory nodes copied from the parent.
func makeCgroupRoot() error {
	for _, c := range cgroupControllers() {
		dir := filepath.Join(cgroupFS, c, CgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		if c != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(cgroupFS, c, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				return fmt.Errorf("writing %s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// cgroupPids lists the processes in a cgroup tree (the pids hierarchy,
// else any).
func cgroupPids(root string) []int {
	seen := map[int]bool{}
	for _, c := range cgroupControllers() {
		_ = filepath.WalkDir(filepath.Join(cgroupFS, c, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	return out
}

// killCgroup kills every process in the cgroup tree and waits for them.
func killCgroup(root string) error {
	return killAndWait(func() []int { return cgroupPids(root) }, "the processes of cgroup "+root)
}

// killMatching kills every process whose command line contains s.
func killMatching(s string) error {
	self := os.Getpid()
	return killAndWait(func() []int {
		var out []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			if strings.Contains(string(b), s) {
				out = append(out, pid)
			}
		}
		return out
	}, "the processes naming "+s)
}

// killShims kills the containerd shims of the containerd at address and
// removes their sockets, which containerd 1.6 keeps outside its state
// directory (/run/containerd/s/<sha256 of address/namespace/id>) and a
// killed shim leaves behind.
func killShims(address string) error {
	var sockets []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(filepath.Base(strings.SplitN(string(b), "\x00", 2)[0]), "containerd-shim") {
			continue
		}
		args := map[string]string{}
		argv := strings.Split(string(b), "\x00")
		for i := 0; i+1 < len(argv); i++ {
			if strings.HasPrefix(argv[i], "-") {
				args[strings.TrimLeft(argv[i], "-")] = argv[i+1]
			}
		}
		if args["address"] != address || args["namespace"] == "" || args["id"] == "" {
			continue
		}
		sum := sha256.Sum256([]byte(filepath.Join(address, args["namespace"], args["id"])))
		sockets = append(sockets, filepath.Join("/run/containerd/s", hex.EncodeToString(sum[:])))
	}
	err := killMatching(address)
	for _, s := range sockets {
		if rerr := os.Remove(s); rerr != nil && !os.IsNotExist(rerr) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

func killAndWait(list func() []int, what string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := list()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s survive SIGKILL: %v", what, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroups removes the cgroup tree in every hierarchy, deepest first.
func removeCgroups(root string) error {
	var errs []error
	for _, c := range cgroupControllers() {
		top := filepath.Join(cgroupFS, c, root)
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// NodeReady returns nil when the node's Ready condition is True.
func NodeReady(ctx context.Context, cs kubernetes.Interface) error {
	node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s Ready=%s: %s: %s", NodeName, c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", NodeName)
}
