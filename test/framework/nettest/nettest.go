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

// Package nettest holds the helpers the kernel-facing tests share: skip
// unless root with iproute2, random names, and running the real `ip`.
package nettest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// IPBin is iproute2's ip.
const IPBin = "/usr/sbin/ip"

// RequireRoot skips the test unless it runs as root with iproute2 (network
// namespaces, netlink writes).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, netlink writes)")
	}
	if _, err := os.Stat(IPBin); err != nil {
		t.Skipf("iproute2 not found at %s", IPBin)
	}
}

// RandHex returns n random bytes in hex (unique namespace and link names).
func RandHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// RandInt returns a random int in [0, n).
func RandInt(t testing.TB, n int) int {
	t.Helper()
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		t.Fatal(err)
	}
	return int(v.Int64())
}

// IPTry runs the real `ip` with args and returns its trimmed output.
func IPTry(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, IPBin, args...).CombinedOutput()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// IP runs the real `ip` and fails the test on error.
func IP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := IPTry(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// NewNetns creates the named network namespace prefix-<random> with lo up
// and deletes it when the test ends; it returns the name.
func NewNetns(t testing.TB, prefix string) string {
	t.Helper()
	name := prefix + "-" + RandHex(t, 4)
	IP(t, "netns", "add", name)
	t.Cleanup(func() {
		if _, err := IPTry("netns", "del", name); err != nil {
			t.Errorf("deleting netns %s: %v", name, err)
		}
	})
	IP(t, "-n", name, "link", "set", "lo", "up")
	return name
}

// WaitFor polls f until it returns nil, and fails the test with f's last
// error once d has passed. It polls every d/1000, between 5 ms and 100 ms.
func WaitFor(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	every := min(max(d/1000, 5*time.Millisecond), 100*time.Millisecond)
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %v", d, err)
		}
		time.Sleep(every)
	}
}

// Busy reports the 1-minute load average and whether it exceeds the number of
// CPUs: a test whose claim needs a quiet machine (a rate kept, a deadline
// met) checks it and says so instead of failing on luck.
func Busy() (load float64, busy bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	if _, err := fmt.Sscanf(string(b), "%g", &load); err != nil {
		return 0, false
	}
	return load, load > float64(runtime.NumCPU())
}

// DialTCP connects to host:port from inside a network namespace, entered by
// in (a kernel.Handle's Do), with a 5 s timeout; the connection is closed in
// cleanup. what names the namespace in the failure.
func DialTCP(t testing.TB, in func(func() error) error, what, host string, port int) *net.TCPConn {
	t.Helper()
	var c net.Conn
	err := in(func() error {
		var err error
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err = d.Dial("tcp4", net.JoinHostPort(host, strconv.Itoa(port)))
		return err
	})
	if err != nil {
		t.Fatalf("dial from %s: %v", what, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}
