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

// Package procfs reads processes from /proc: their pid, parent, process
// group, name (comm), state, start time and command line, for the fleet's
// ledger and for tests that look for processes. Linux only.
package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A Proc is a process as /proc/<pid>/stat and /proc/<pid>/cmdline show it.
type Proc struct {
	Pid  int
	PPid int // parent
	Pgrp int // process group
	// Comm is the process's name (at most 15 bytes; it may hold spaces
	// and parentheses).
	Comm string
	// State is the one-letter state: R, S, D, Z (zombie), X (dead), ...
	State byte
	// StartTime is field 22 of /proc/<pid>/stat: when the process started,
	// in clock ticks after boot. With Pid it names one process: a pid used
	// again later has another start time.
	StartTime uint64
	// Cmdline is the arguments: empty for kernel threads and zombies, and
	// for a moment while a process execs (the parent's exec.Cmd.Start can
	// return before the new arguments are in place).
	Cmdline []string
}

func (p Proc) String() string { return fmt.Sprintf("%s (pid %d)", p.Comm, p.Pid) }

// Zombie says the process has exited (state Z or X) and only waits to be
// reaped.
func (p Proc) Zombie() bool { return p.State == 'Z' || p.State == 'X' }

// Running says the process p describes still runs: its pid is alive (not a
// zombie) and has the same start time, so is not a later process that got
// the pid again. Only Pid and StartTime of p are used.
func (p Proc) Running() bool {
	q, err := Stat(p.Pid)
	return err == nil && q.StartTime == p.StartTime && !q.Zombie()
}

// Read reads process pid; an error means it does not exist (any longer).
func Read(pid int) (Proc, error) {
	p, err := Stat(pid)
	if err != nil {
		return Proc{}, err
	}
	if p.Cmdline, err = readCmdline(pid); err != nil {
		return Proc{}, err
	}
	return p, nil
}

// Stat reads process pid as Read does, but for its command line (Cmdline
// is nil): reading a command line waits for the memory lock of its
// process, which a process stuck in the kernel may hold.
func Stat(pid int) (Proc, error) {
	if pid <= 0 {
		return Proc{}, fmt.Errorf("procfs: no process %d", pid)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Proc{}, err
	}
	return parseStat(pid, string(b))
}

// StartTime is pid's start time (Proc.StartTime).
func StartTime(pid int) (uint64, error) {
	p, err := Stat(pid)
	return p.StartTime, err
}

// Alive says pid exists and is not a zombie.
func Alive(pid int) bool {
	p, err := Stat(pid)
	return err == nil && !p.Zombie()
}

// List reads every process, zombies included; a process that exits while
// it is read is left out.
func List() ([]Proc, error) {
	return scan(func(Proc) bool { return true })
}

// Children lists the child processes of pid that are alive (not zombies).
func Children(pid int) ([]Proc, error) {
	return scan(func(p Proc) bool { return p.PPid == pid && !p.Zombie() })
}

// scan reads the stat of every process and the command line of those keep
// accepts (see Stat).
func scan(keep func(Proc) bool) ([]Proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := Stat(pid)
		if err != nil || !keep(p) {
			continue
		}
		if p.Cmdline, err = readCmdline(pid); err != nil {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// parseStat parses the line of /proc/<pid>/stat: "pid (comm) state ppid
// pgrp ...". The comm may hold spaces and ')': it ends at the last ')'.
func parseStat(pid int, s string) (Proc, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return Proc{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	// After the comm: state (field 3), ppid (4), pgrp (5), ... starttime (22).
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return Proc{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	p := Proc{Pid: pid, Comm: s[open+1 : end], State: f[0][0]}
	var err error
	if p.PPid, err = strconv.Atoi(f[1]); err != nil {
		return Proc{}, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	if p.Pgrp, err = strconv.Atoi(f[2]); err != nil {
		return Proc{}, fmt.Errorf("/proc/%d/stat: pgrp: %w", pid, err)
	}
	if p.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Proc{}, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	return p, nil
}

func readCmdline(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	return parseCmdline(b), nil
}

// parseCmdline splits /proc/<pid>/cmdline: arguments each ended by a NUL.
func parseCmdline(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	b = bytes.TrimSuffix(b, []byte{0})
	return strings.Split(string(b), "\x00")
}
