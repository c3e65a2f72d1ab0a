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

package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nettune/nettune/internal/procfs"
)

// A Ledger is the record, in a file, of what a fleet made outside its own
// process, written as it is made: the child processes (pid and start time,
// so that a recycled pid is never taken for one of them), the network
// namespaces (name and inode, so that a namespace made again under the same
// name is not taken for one of them) and the iptables rules. When the
// process that wrote it is killed (kill -9, a crash), ClearLedger removes
// exactly what it lists and is still there, and nothing else.
//
// A nil *Ledger records nothing.
type Ledger struct {
	path string

	mu   sync.Mutex
	f    *os.File
	pids map[int]bool // recorded
}

// ledgerEntry is one line of a ledger (JSON); exactly one field is set.
type ledgerEntry struct {
	// Owner is the process that writes the ledger, and Boot the boot it
	// ran in (/proc/sys/kernel/random/boot_id): after a reboot nothing it
	// lists can still exist.
	Owner    *procID  `json:"owner,omitempty"`
	Boot     string   `json:"boot,omitempty"`
	Process  *procID  `json:"process,omitempty"`
	Netns    *netnsID `json:"netns,omitempty"`
	Iptables []string `json:"iptables,omitempty"` // a rule as `iptables -D` takes it
}

type procID struct {
	PID int `json:"pid"`
	// Start is field 22 of /proc/<pid>/stat: clock ticks after boot.
	Start uint64 `json:"start"`
	What  string `json:"what,omitempty"`
}

type netnsID struct {
	Name string `json:"name"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// netnsDir is where `ip netns` keeps its named namespaces.
const netnsDir = "/run/netns"

// CreateLedger starts a ledger at path (replacing any file there) owned by
// this process.
func CreateLedger(path string) (*Ledger, error) {
	self, err := procfs.Stat(os.Getpid())
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l := &Ledger{path: path, f: f, pids: map[int]bool{}}
	if err := l.write(ledgerEntry{Owner: &procID{PID: os.Getpid(), Start: self.StartTime, What: self.Comm}, Boot: bootID()}); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// Path is the ledger's file.
func (l *Ledger) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

func (l *Ledger) write(e ledgerEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("ledger closed")
	}
	// One write(2) per entry: a kill never leaves half an entry behind.
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	return nil
}

// Process records a process (what names it); one already gone is skipped.
func (l *Ledger) Process(pid int, what string) error {
	if l == nil {
		return nil
	}
	st, err := procfs.Stat(pid)
	if err != nil {
		return nil // gone already
	}
	if what == "" {
		what = st.Comm
	}
	l.mu.Lock()
	l.pids[pid] = true
	l.mu.Unlock()
	return l.write(ledgerEntry{Process: &procID{PID: pid, Start: st.StartTime, What: what}})
}

// Children records every child process of this one not recorded yet: the
// processes a library started without saying their pids (envtest's etcd
// and kube-apiserver, Loki, Prometheus).
func (l *Ledger) Children() error {
	if l == nil {
		return nil
	}
	kids, err := procfs.Children(os.Getpid())
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range kids {
		l.mu.Lock()
		seen := l.pids[k.Pid]
		l.mu.Unlock()
		if !seen {
			errs = append(errs, l.Process(k.Pid, ""))
		}
	}
	return errors.Join(errs...)
}

// Netns records network namespaces named in /run/netns.
func (l *Ledger) Netns(names ...string) error {
	if l == nil {
		return nil
	}
	var errs []error
	for _, n := range names {
		dev, ino, err := netnsInode(n)
		if err != nil {
			errs = append(errs, fmt.Errorf("ledger: netns %s: %w", n, err))
			continue
		}
		errs = append(errs, l.write(ledgerEntry{Netns: &netnsID{Name: n, Dev: dev, Ino: ino}}))
	}
	return errors.Join(errs...)
}

// IptablesRule records an iptables rule (as `iptables -D` takes it), before
// it is inserted: a kill between the two leaves a rule that is not there,
// which clearing skips.
func (l *Ledger) IptablesRule(rule []string) error {
	if l == nil {
		return nil
	}
	return l.write(ledgerEntry{Iptables: rule})
}

// Clear removes what the ledger lists and is still there (its owner is this
// process: at the end of a run, after Fleet.Close, it finds what Close
// missed) and says what it removed.
func (l *Ledger) Clear() (Cleared, error) {
	if l == nil {
		return Cleared{}, nil
	}
	entries, err := readLedger(l.path)
	if err != nil {
		return Cleared{}, err
	}
	return clearEntries(entries)
}

// Remove closes the ledger and deletes its file.
func (l *Ledger) Remove() error {
	if l == nil {
		return nil
	}
	l.Close()
	if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Close closes the ledger's file and keeps it.
func (l *Ledger) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// Cleared is what clearing a ledger removed.
type Cleared struct {
	// Owner is the pid that wrote the ledger (0 when unknown).
	Owner                        int
	Processes, Namespaces, Rules int
}

// Empty says nothing was left.
func (c Cleared) Empty() bool { return c.Processes+c.Namespaces+c.Rules == 0 }

func (c Cleared) String() string {
	count := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	return count(c.Processes, "process", "processes") + ", " + count(c.Namespaces, "network namespace", "network namespaces") + ", " +
		count(c.Rules, "iptables rule", "iptables rules")
}

// ErrOwnerAlive means a ledger's owner is still running: what it lists is
// in use.
var ErrOwnerAlive = errors.New("the ledger's owner is still running")

// ClearLedger removes what the ledger at path lists and is still there — it
// kills the processes whose pid and start time both match, deletes the
// iptables rules and the network namespaces that still hold the recorded
// inode — then deletes the file. Nothing else is touched. A missing file
// clears nothing. It refuses (ErrOwnerAlive) while the ledger's owner runs;
// a ledger from an earlier boot is deleted unread. When something cannot be
// removed the file is kept, for the next attempt.
func ClearLedger(path string) (Cleared, error) {
	entries, err := readLedger(path)
	if errors.Is(err, os.ErrNotExist) {
		return Cleared{}, nil
	}
	if err != nil {
		return Cleared{}, err
	}
	var owner *ledgerEntry
	if len(entries) > 0 && entries[0].Owner != nil {
		owner = &entries[0]
	}
	if owner != nil && owner.Boot != "" && owner.Boot != bootID() {
		return Cleared{Owner: owner.Owner.PID}, os.Remove(path)
	}
	if owner != nil && sameProcess(*owner.Owner) {
		return Cleared{Owner: owner.Owner.PID}, fmt.Errorf("%s: %w (pid %d)", path, ErrOwnerAlive, owner.Owner.PID)
	}
	c, err := clearEntries(entries)
	if owner != nil {
		c.Owner = owner.Owner.PID
	}
	if err != nil {
		return c, err
	}
	return c, os.Remove(path)
}

func readLedger(path string) ([]ledgerEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ledgerEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e ledgerEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// clearEntries kills the listed processes still running, then deletes the
// rules and namespaces still there.
func clearEntries(entries []ledgerEntry) (Cleared, error) {
	var c Cleared
	var errs []error
	var killed []procID
	seen := map[procID]bool{}
	for _, e := range entries {
		if e.Process == nil {
			continue
		}
		p := procID{PID: e.Process.PID, Start: e.Process.Start}
		if seen[p] || p.PID == os.Getpid() || !sameProcess(p) {
			continue
		}
		seen[p] = true
		pid := p.PID
		// Our children lead their own process groups: take the group
		// (anything they forked) while the leader proves it is the one.
		if st, err := procfs.Stat(pid); err == nil && st.Pgrp == pid {
			pid = -pid
		}
		if err := unix.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d (%s): %w", p.PID, e.Process.What, err))
			continue
		}
		killed = append(killed, p)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range killed {
		for sameProcess(p) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if sameProcess(p) {
			errs = append(errs, fmt.Errorf("pid %d still running 10 s after SIGKILL", p.PID))
		}
	}
	c.Processes = len(killed)

	for _, e := range entries {
		if len(e.Iptables) == 0 {
			continue
		}
		if iptables(append([]string{"-C"}, e.Iptables...)...) != nil {
			continue // not there (removed, or never inserted)
		}
		if err := iptables(append([]string{"-D"}, e.Iptables...)...); err != nil {
			errs = append(errs, err)
			continue
		}
		c.Rules++
	}

	for _, e := range entries {
		if e.Netns == nil {
			continue
		}
		dev, ino, err := netnsInode(e.Netns.Name)
		if err != nil || dev != e.Netns.Dev || ino != e.Netns.Ino {
			continue // gone, or another namespace under the same name
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, "ip", "netns", "del", e.Netns.Name).CombinedOutput()
		cancel()
		if _, serr := os.Stat(filepath.Join(netnsDir, e.Netns.Name)); serr == nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", e.Netns.Name, err, strings.TrimSpace(string(out))))
			continue
		}
		c.Namespaces++
	}
	return c, errors.Join(errs...)
}

func iptables(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// sameProcess says p still runs: its pid is alive (not a zombie) with the
// recorded start time.
func sameProcess(p procID) bool {
	return procfs.Proc{Pid: p.PID, StartTime: p.Start}.Running()
}

func netnsInode(name string) (dev, ino uint64, err error) {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(netnsDir, name), &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Dev), st.Ino, nil
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}
