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

package procfs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// statLine is a /proc/<pid>/stat line (52 fields) of a process named comm.
func statLine(pid int, comm string, state byte, ppid, pgrp int, start uint64) string {
	f := []string{strconv.Itoa(pid), "(" + comm + ")", string(state), strconv.Itoa(ppid), strconv.Itoa(pgrp)}
	for i := 6; i <= 52; i++ {
		switch i {
		case 22:
			f = append(f, strconv.FormatUint(start, 10))
		case 23: // vsize: a number start time must not be taken from
			f = append(f, "123456789")
		default:
			f = append(f, strconv.Itoa(i*10))
		}
	}
	return strings.Join(f, " ") + "\n"
}

func TestParseStat(t *testing.T) {
	for _, comm := range []string{"sleep", "", "a b", "x) (y", ") S 1 2 3", "(((", ")))"} {
		p, err := parseStat(42, statLine(42, comm, 'S', 7, 42, 98765))
		want := Proc{Pid: 42, PPid: 7, Pgrp: 42, Comm: comm, State: 'S', StartTime: 98765}
		if err != nil || !equal(p, want) || p.State != want.State {
			t.Errorf("comm %q: got %+v, %v; want %+v", comm, p, err, want)
		}
	}
	for _, bad := range []string{
		"",
		"42 sleep S 1 2 3",
		"42 (sleep) S 1 2 3", // too few fields
		strings.Replace(statLine(42, "sleep", 'S', 7, 42, 1), " 7 ", " x ", 1),
		strings.Replace(statLine(42, "sleep", 'S', 7, 42, 1), " 1 123456789 ", " -1 123456789 ", 1),
	} {
		if p, err := parseStat(42, bad); err == nil {
			t.Errorf("parseStat(%q) = %+v, want an error", bad, p)
		}
	}
}

func TestParseCmdline(t *testing.T) {
	for raw, want := range map[string][]string{
		"":                 nil,
		"\x00":             {""},
		"sleep\x00600\x00": {"sleep", "600"},
		"a b\x00\x00c\x00": {"a b", "", "c"},
		"no final nul":     {"no final nul"}, // a process that rewrote its arguments
	} {
		if got := parseCmdline([]byte(raw)); !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("parseCmdline(%q) = %q, want %q", raw, got, want)
		}
	}
}

// equal compares all but Cmdline and State (a process may be running or
// sleeping from one read to the next).
func equal(a, b Proc) bool {
	return a.Pid == b.Pid && a.PPid == b.PPid && a.Pgrp == b.Pgrp && a.Comm == b.Comm && a.StartTime == b.StartTime
}

// start starts bin with args in a process group of its own, waits until
// its command line reads, and kills and reaps it when the test ends (unless
// the test did).
func start(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Start returns once the exec is under way, before the new command
	// line is in place.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := Read(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Cmdline) > 0 {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no command line 10 s after its start", bin)
		}
		time.Sleep(time.Millisecond)
	}
}

func uptime(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func find(ps []Proc, pid int) (Proc, bool) {
	for _, p := range ps {
		if p.Pid == pid {
			return p, true
		}
	}
	return Proc{}, false
}

// TestAChildNamedWithParentheses: a copy of sleep named "s) (l e) p" is
// found by Read, List and Children as it is, and stops being alive once
// killed.
func TestAChildNamedWithParentheses(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	const name = "s) (l e) p"
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	before := uptime(t)
	cmd := start(t, bin, "600")
	after := uptime(t)
	pid := cmd.Process.Pid

	p, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid != pid || p.PPid != os.Getpid() || p.Pgrp != pid || p.Comm != name || p.Zombie() {
		t.Errorf("Read(%d) = %+v; want ppid %d, pgrp %d, comm %q, not a zombie", pid, p, os.Getpid(), pid, name)
	}
	if want := []string{bin, "600"}; !slices.Equal(p.Cmdline, want) {
		t.Errorf("Cmdline %q, want %q", p.Cmdline, want)
	}
	// Field 22, counted past the known "pid (comm) " rather than from the
	// last ')'.
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("%d (%s) ", pid, name)
	if !strings.HasPrefix(string(raw), prefix) {
		t.Fatalf("/proc/%d/stat = %q, does not start with %q", pid, raw, prefix)
	}
	if f := strings.Fields(strings.TrimPrefix(string(raw), prefix)); f[22-3] != strconv.FormatUint(p.StartTime, 10) {
		t.Errorf("StartTime %d, field 22 of /proc/%d/stat is %s", p.StartTime, pid, f[22-3])
	}
	// Clock ticks after boot are 1/100 s for user space (USER_HZ).
	if s := float64(p.StartTime) / 100; s < before-1 || s > after+1 {
		t.Errorf("StartTime %d (%.2f s after boot), the child started between %.2f and %.2f s", p.StartTime, s, before, after)
	}
	if st, err := StartTime(pid); err != nil || st != p.StartTime {
		t.Errorf("StartTime(%d) = %d, %v; want %d", pid, st, err, p.StartTime)
	}

	all, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := find(all, pid); !ok || !equal(q, p) || !slices.Equal(q.Cmdline, p.Cmdline) {
		t.Errorf("List has %+v (%v), want %+v", q, ok, p)
	}
	if _, ok := find(all, os.Getpid()); !ok {
		t.Errorf("List lacks this process (%d)", os.Getpid())
	}
	kids, err := Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := find(kids, pid); !ok || !equal(q, p) {
		t.Errorf("Children(%d) = %v, want %+v among them", os.Getpid(), kids, p)
	}
	for _, k := range kids {
		if k.PPid != os.Getpid() {
			t.Errorf("Children(%d) holds %+v", os.Getpid(), k)
		}
	}

	if !Alive(pid) || !p.Running() {
		t.Errorf("Alive %v, Running %v; want both true", Alive(pid), p.Running())
	}
	recycled := p
	recycled.StartTime++
	if recycled.Running() {
		t.Errorf("Running true for pid %d with another start time", pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if Alive(pid) || p.Running() {
		t.Errorf("after kill and wait: Alive %v, Running %v; want both false", Alive(pid), p.Running())
	}
	if q, err := Read(pid); err == nil {
		t.Errorf("after kill and wait, Read(%d) = %+v", pid, q)
	}
	if kids, err := Children(os.Getpid()); err != nil {
		t.Fatal(err)
	} else if _, ok := find(kids, pid); ok {
		t.Errorf("after kill and wait, Children(%d) still holds %d", os.Getpid(), pid)
	}
}

// TestAZombieIsNotAlive: a child killed but not yet reaped is listed, as a
// zombie, and is neither Alive, Running nor among the Children.
func TestAZombieIsNotAlive(t *testing.T) {
	cmd := start(t, "sleep", "600")
	pid := cmd.Process.Pid
	p, err := Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		z, err := Read(pid)
		if err != nil {
			t.Fatalf("Read(%d) of an unreaped child: %v", pid, err)
		}
		if z.State == 'Z' {
			if !z.Zombie() || len(z.Cmdline) != 0 || z.StartTime != p.StartTime {
				t.Errorf("the zombie reads %+v", z)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d not a zombie 10 s after SIGKILL: %+v", pid, z)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if Alive(pid) || p.Running() {
		t.Errorf("zombie: Alive %v, Running %v; want both false", Alive(pid), p.Running())
	}
	kids, err := Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := find(kids, pid); ok {
		t.Errorf("Children(%d) holds the zombie %d", os.Getpid(), pid)
	}
	all, err := List()
	if err != nil {
		t.Fatal(err)
	}
	if z, ok := find(all, pid); !ok || z.State != 'Z' {
		t.Errorf("List has %+v (%v), want the zombie", z, ok)
	}
	_ = cmd.Wait()
	if _, err := Read(pid); err == nil {
		t.Errorf("Read(%d) after the zombie was reaped succeeded", pid)
	}
}

// TestCmdlineKeepsEmptyAndSpacedArguments: arguments come back as they
// were given, empty ones and ones with spaces included.
func TestCmdlineKeepsEmptyAndSpacedArguments(t *testing.T) {
	args := []string{"-c", "sleep 600; :", "name", "", "x y", " "}
	cmd := start(t, "sh", args...)
	p, err := Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]string{"sh"}, args...); !slices.Equal(p.Cmdline, want) {
		t.Errorf("Cmdline %q, want %q", p.Cmdline, want)
	}
}

func TestNoSuchProcess(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Errorf("Alive(%d), this process, is false", os.Getpid())
	}
	// Pids are below pid_max, at most 1<<22.
	for _, pid := range []int{0, -1, 1 << 22} {
		if Alive(pid) {
			t.Errorf("Alive(%d) is true", pid)
		}
		if p, err := Read(pid); err == nil {
			t.Errorf("Read(%d) = %+v", pid, p)
		}
		if (Proc{Pid: pid}).Running() {
			t.Errorf("pid %d Running", pid)
		}
	}
}
