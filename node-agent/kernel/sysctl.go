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
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SysctlPath maps a dotted sysctl name (net.ipv4.tcp_rmem) to its file under
// /proc/sys. Only letters, digits, '_' and '-' are accepted in a component.
func SysctlPath(name string) (string, error) {
	return sysctlPathUnder(DefaultSysctlRoot, name)
}

// DefaultSysctlRoot is where sysctls are read and written unless the handle's
// SysctlRoot says otherwise.
const DefaultSysctlRoot = "/proc/sys"

func sysctlPathUnder(root, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty sysctl name")
	}
	parts := strings.Split(name, ".")
	for _, p := range parts {
		if p == "" {
			return "", fmt.Errorf("sysctl %q: empty component", name)
		}
		for _, c := range p {
			if !sysctlNameChar(c) {
				return "", fmt.Errorf("sysctl %q: invalid character %q", name, c)
			}
		}
	}
	return strings.TrimSuffix(root, "/") + "/" + strings.Join(parts, "/"), nil
}

// NormalizeSysctlValue collapses runs of white space (the kernel separates
// numbers with tabs, e.g. in tcp_rmem) into single spaces and trims the
// value, so "4096\t131072\t6291456\n" becomes "4096 131072 6291456".
func NormalizeSysctlValue(v string) string { return strings.Join(strings.Fields(v), " ") }

// sysctlPath is SysctlPath under the handle's SysctlRoot.
func (h *Handle) sysctlPath(name string) (string, error) {
	root := h.SysctlRoot
	if root == "" {
		root = DefaultSysctlRoot
	}
	return sysctlPathUnder(root, name)
}

// ReadSysctl reads a sysctl as seen from the handle's namespace, normalized
// (NormalizeSysctlValue). The file is opened on a thread inside the
// namespace: /proc/sys/net resolves against the opening thread's namespace.
func (h *Handle) ReadSysctl(name string) (string, error) {
	path, err := h.sysctlPath(name)
	if err != nil {
		return "", err
	}
	var b []byte
	err = h.Do(func() error {
		var err error
		b, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", name, err)
	}
	return NormalizeSysctlValue(string(b)), nil
}

// ErrNotPerNamespace is wrapped by CheckSysctlWritable's error for a sysctl
// the kernel keeps once for every namespace, which a namespace other than
// the initial one therefore cannot set: such a namespace lacks it
// (net.core.rmem_max, wmem_max, rmem_default, wmem_default on 5.10 and 6.1;
// net.ipv4.tcp_rmem and most tcp_* on 4.9) or shows the initial namespace's
// value read-only (net.core.rmem_max & co on 6.18).
var ErrNotPerNamespace = errors.New("not per-namespace on this kernel")

// CheckSysctlWritable opens a sysctl for writing, as seen from the handle's
// namespace, and closes it without writing: it fails as a write would for a
// read-only mount (/proc/sys in a container), a global sysctl that a
// non-initial namespace lacks or shows read-only (the error wraps
// ErrNotPerNamespace), or missing permission, and changes nothing.
func (h *Handle) CheckSysctlWritable(name string) error {
	path, err := h.sysctlPath(name)
	if err != nil {
		return err
	}
	err = h.Do(func() error {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return f.Close()
	})
	if err == nil {
		return nil
	}
	if why := h.notPerNamespace(path, err); why != "" {
		return fmt.Errorf("sysctl %s is %w: %s", name, ErrNotPerNamespace, why)
	}
	return fmt.Errorf("sysctl %s is not writable: %w", name, err)
}

// notPerNamespace explains why the sysctl file at path, which the handle's
// namespace could not open for writing (openErr), is global, or returns ""
// when it is not known to be. The kernel registers a per-namespace sysctl in
// every namespace alike, so one that the agent's own namespace (the host's,
// normally the initial one) has writable while the handle's namespace lacks
// it, in a directory it does have, or shows it without any write permission
// bit, is global. Only a handle on another namespace than the agent's own
// can compare; the directory check keeps a sysctl of a device the namespace
// lacks (net.ipv4.conf.eth0.*) from being taken for a global one.
func (h *Handle) notPerNamespace(path string, openErr error) string {
	if h.own {
		return ""
	}
	own, err := os.Stat(path) // on this thread: in the agent's own namespace
	if err != nil || own.Mode().Perm()&0o200 == 0 {
		return ""
	}
	var here os.FileInfo
	var dirHere bool
	if err := h.Do(func() error {
		here, _ = os.Stat(path)
		_, derr := os.Stat(filepath.Dir(path))
		dirHere = derr == nil
		return nil
	}); err != nil {
		return ""
	}
	switch {
	case errors.Is(openErr, fs.ErrNotExist) && dirHere:
		return "this network namespace lacks it; the agent's own namespace has it"
	case errors.Is(openErr, fs.ErrPermission) && here != nil && here.Mode().Perm()&0o222 == 0:
		return "this network namespace shows the initial namespace's value read-only"
	}
	return ""
}

// WriteSysctl writes value to a sysctl in the handle's namespace and returns
// the value read back, normalized. The kernel may store something else than
// was written (clamped or reformatted): compare the result with
// NormalizeSysctlValue(value). A sysctl that is global fails in a
// non-initial namespace: with a permission error where the namespace shows
// it read-only, "no such file" where it lacks it (CheckSysctlWritable tells
// which, before anything is written).
func (h *Handle) WriteSysctl(name, value string) (string, error) {
	path, err := h.sysctlPath(name)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(value, "\n\x00") {
		return "", fmt.Errorf("sysctl %s: value %q contains a newline or NUL", name, value)
	}
	var b []byte
	err = h.Do(func() error {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		// One write: the kernel parses a sysctl write as a whole.
		_, werr := f.Write([]byte(value + "\n"))
		cerr := f.Close()
		if werr != nil {
			return werr
		}
		if cerr != nil {
			return cerr
		}
		b, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("write sysctl %s=%q: %w", name, value, err)
	}
	return NormalizeSysctlValue(string(b)), nil
}

// SsthreshEffective reports whether the kernel uses a route's ssthresh
// metric in this namespace: it ignores it while
// net.ipv4.tcp_no_ssthresh_metrics_save is 1 (the default), in which case a
// caller reports ssthresh as not effective. A kernel without that sysctl
// (4.9: tcp_init_metrics takes the cached ssthresh unconditionally) always
// uses it. Where the kernel uses it, it holds only if the route locks
// RTAX_SSTHRESH: tcp_update_metrics writes the ssthresh a connection learned
// back into the tcp_metrics entry at its close unless the metric is locked,
// and the next connection to the peer starts from that.
func (h *Handle) SsthreshEffective() (bool, error) {
	v, err := h.ReadSysctl("net.ipv4.tcp_no_ssthresh_metrics_save")
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return v == "0", nil
}

// AvailableCongestionControls lists the congestion control algorithms the
// kernel offers (net.ipv4.tcp_available_congestion_control).
func (h *Handle) AvailableCongestionControls() ([]string, error) {
	v, err := h.ReadSysctl("net.ipv4.tcp_available_congestion_control")
	if err != nil {
		return nil, err
	}
	return strings.Fields(v), nil
}

// TCPCounters are the namespace's TCP counters from /proc/net/snmp and
// /proc/net/netstat.
type TCPCounters struct {
	RetransSegs uint64 // Tcp: RetransSegs
	Timeouts    uint64 // TcpExt: TCPTimeouts (RTO expiries)
	LossProbes  uint64 // TcpExt: TCPLossProbes (tail loss probes)
	// All holds every counter of both files as "Section.Name", e.g.
	// "Tcp.RetransSegs", "TcpExt.TCPTimeouts", "IpExt.InOctets".
	All map[string]int64
}

// ReadTCPCounters reads the namespace's SNMP and netstat counters, from
// /proc/thread-self/net/{snmp,netstat} on a thread inside the namespace
// (/proc/net is /proc/self/net, named after the process rather than the
// thread, so thread-self is the unambiguous choice).
func (h *Handle) ReadTCPCounters() (TCPCounters, error) {
	c := TCPCounters{All: map[string]int64{}}
	err := h.Do(func() error {
		for _, f := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"} {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := parseCounterTable(b, c.All); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
		return nil
	})
	if err != nil {
		return TCPCounters{}, fmt.Errorf("read TCP counters: %w", err)
	}
	get := func(k string) uint64 {
		if v := c.All[k]; v > 0 {
			return uint64(v)
		}
		return 0
	}
	c.RetransSegs = get("Tcp.RetransSegs")
	c.Timeouts = get("TcpExt.TCPTimeouts")
	c.LossProbes = get("TcpExt.TCPLossProbes")
	return c, nil
}

// parseCounterTable parses the /proc/net/snmp format: pairs of lines, a
// header "Section: Name1 Name2" and values "Section: 1 2".
func parseCounterTable(b []byte, into map[string]int64) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var lines []string
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(lines)%2 != 0 {
		return errors.New("odd number of lines")
	}
	for i := 0; i < len(lines); i += 2 {
		hs, vs := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(hs) != len(vs) || hs[0] != vs[0] {
			return fmt.Errorf("mismatched lines %q / %q", lines[i], lines[i+1])
		}
		sec := strings.TrimSuffix(hs[0], ":")
		for j := 1; j < len(hs); j++ {
			v, err := strconv.ParseInt(vs[j], 10, 64)
			if err != nil {
				// Some counters exceed int64 in theory; keep going.
				u, uerr := strconv.ParseUint(vs[j], 10, 64)
				if uerr != nil {
					return fmt.Errorf("%s.%s: %w", sec, hs[j], err)
				}
				v = int64(u)
			}
			into[sec+"."+hs[j]] = v
		}
	}
	return nil
}

// sysctlNameChar reports whether c may appear in a sysctl name component.
func sysctlNameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
