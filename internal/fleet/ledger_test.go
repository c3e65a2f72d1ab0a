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
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nettune/nettune/internal/procfs"
	"github.com/nettune/nettune/test/framework/nettest"
)

func TestLockRefusesASecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.lock")
	l, err := AcquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	// flock(2) locks an open file, not a process: a second open conflicts
	// as another process would.
	_, err = AcquireLock(path)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.PID != os.Getpid() {
		t.Fatalf("second AcquireLock: %v, want a BusyError naming pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the lock file outlived Release: %v", err)
	}
	l2, err := AcquireLock(path)
	if err != nil {
		t.Fatalf("AcquireLock after Release: %v", err)
	}
	_ = l2.Release()
}

// sleeper starts `sleep 600` in its own process group, without a
// parent-death signal (as a process of a killed run outlives it), and kills
// it when the test ends.
func sleeper(t *testing.T) procID {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	start, err := procfs.StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return procID{PID: cmd.Process.Pid, Start: start, What: "sleep"}
}

// rule inserts an iptables rule that matches nothing and deletes it when the
// test ends.
func rule(t *testing.T, comment string) []string {
	t.Helper()
	r := []string{"OUTPUT", "-d", "127.0.0.254/32", "-p", "tcp", "--dport", "9", "-m", "comment", "--comment", comment, "-j", "ACCEPT"}
	if err := iptables(append([]string{"-I"}, r...)...); err != nil {
		t.Skipf("iptables: %v", err)
	}
	t.Cleanup(func() { _ = iptables(append([]string{"-D"}, r...)...) })
	return r
}

func ruleThere(r []string) bool { return iptables(append([]string{"-C"}, r...)...) == nil }

func netnsThere(name string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, name))
	return err == nil
}

func writeLedger(t *testing.T, path string, entries ...ledgerEntry) {
	t.Helper()
	var b strings.Builder
	for _, e := range entries {
		j, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(j, '\n'))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// deadOwner is the ledger's first entry for a run that is gone: a process
// that ran and was reaped.
func deadOwner(t *testing.T) ledgerEntry {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return ledgerEntry{Owner: &procID{PID: cmd.Process.Pid, Start: 1, What: "nettune-demo"}, Boot: bootID()}
}

// TestClearLedgerRemovesExactlyWhatItLists: of a killed run's ledger, the
// processes whose pid and start time match are killed, the namespaces that
// still hold the recorded inode and the rules still there are deleted; a
// process of the same pid but another start time (a recycled pid), a
// namespace of the same name but another inode, and whatever the ledger
// does not list stay.
func TestClearLedgerRemovesExactlyWhatItLists(t *testing.T) {
	nettest.RequireRoot(t)
	stray, recycled, unrelated := sleeper(t), sleeper(t), sleeper(t)
	ours := nettest.NewNetns(t, "ntledger")
	renamed := nettest.NewNetns(t, "ntledger")
	other := nettest.NewNetns(t, "ntledger")
	tag := nettest.RandHex(t, 4)
	ourRule, otherRule := rule(t, "nettune-ledger-test ours "+tag), rule(t, "nettune-ledger-test other "+tag)
	missingRule := []string{"OUTPUT", "-d", "127.0.0.254/32", "-m", "comment", "--comment", "nettune-ledger-test never inserted " + tag, "-j", "ACCEPT"}

	netns := func(name string, inoDelta uint64) ledgerEntry {
		dev, ino, err := netnsInode(name)
		if err != nil {
			t.Fatal(err)
		}
		return ledgerEntry{Netns: &netnsID{Name: name, Dev: dev, Ino: ino + inoDelta}}
	}
	wrongStart := recycled
	wrongStart.Start++
	path := filepath.Join(t.TempDir(), "ledger")
	writeLedger(t, path, deadOwner(t),
		ledgerEntry{Process: &stray},
		ledgerEntry{Process: &stray}, // recorded twice (Children after Process)
		ledgerEntry{Process: &wrongStart},
		netns(ours, 0),
		netns(renamed, 1),
		ledgerEntry{Iptables: ourRule},
		ledgerEntry{Iptables: missingRule},
		ledgerEntry{Process: &procID{PID: 1 << 22, Start: 7}}, // no such pid
	)

	c, err := ClearLedger(path)
	if err != nil {
		t.Fatalf("ClearLedger: %v", err)
	}
	if c.Processes != 1 || c.Namespaces != 1 || c.Rules != 1 {
		t.Errorf("cleared %s, want 1 process, 1 network namespace, 1 iptables rule", c)
	}
	if sameProcess(stray) {
		t.Errorf("the listed process (pid %d) still runs", stray.PID)
	}
	if netnsThere(ours) {
		t.Errorf("the listed namespace %s is still there", ours)
	}
	if ruleThere(ourRule) {
		t.Errorf("the listed rule is still there")
	}
	for _, p := range []procID{recycled, unrelated} {
		if !sameProcess(p) {
			t.Errorf("pid %d, not listed with its start time, was killed", p.PID)
		}
	}
	for _, n := range []string{renamed, other} {
		if !netnsThere(n) {
			t.Errorf("namespace %s, not listed with its inode, was deleted", n)
		}
	}
	if !ruleThere(otherRule) {
		t.Errorf("an iptables rule the ledger does not list was deleted")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ledger outlived a complete clear: %v", err)
	}
	// nettest.NewNetns's cleanup fails on a namespace already gone.
	if _, err := nettest.IPTry("netns", "add", ours); err != nil {
		t.Fatal(err)
	}

	// Cleared again, nothing is left to do.
	if c, err := ClearLedger(path); err != nil || !c.Empty() {
		t.Errorf("ClearLedger of a missing ledger: %s, %v", c, err)
	}
}

// A ledger whose owner still runs is in use: ClearLedger refuses it and
// touches nothing; one written before the last boot is dropped unread.
func TestClearLedgerRefusesALiveOwnerAndDropsAnEarlierBoot(t *testing.T) {
	nettest.RequireRoot(t)
	stray := sleeper(t)
	path := filepath.Join(t.TempDir(), "ledger")
	l, err := CreateLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Process(stray.PID, "sleep"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := ClearLedger(path); !errors.Is(err, ErrOwnerAlive) {
		t.Fatalf("ClearLedger of this process's ledger: %v, want ErrOwnerAlive", err)
	}
	if !sameProcess(stray) {
		t.Fatal("ClearLedger killed a process of a live owner")
	}

	owner := deadOwner(t)
	owner.Boot = "an-earlier-boot"
	writeLedger(t, path, owner, ledgerEntry{Process: &stray})
	if c, err := ClearLedger(path); err != nil || !c.Empty() {
		t.Fatalf("ClearLedger of an earlier boot's ledger: %s, %v", c, err)
	}
	if !sameProcess(stray) {
		t.Fatal("ClearLedger acted on a ledger from an earlier boot")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier boot's ledger was kept: %v", err)
	}
}
