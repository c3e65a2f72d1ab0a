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
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Lock is an exclusive flock(2) on a file holding the owner's pid. The
// kernel drops it when the owner exits, however it exits (kill -9
// included), so a lock is never left held by a dead process.
type Lock struct {
	path string
	f    *os.File
}

// BusyError says another process holds the lock.
type BusyError struct {
	Path string
	// PID is the holder's, as it wrote it in the file (0 if unreadable).
	PID int
}

func (e *BusyError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("%s is held by another process", e.Path)
	}
	return fmt.Sprintf("%s is held by pid %d", e.Path, e.PID)
}

// AcquireLock takes the lock at path (creating the file) without waiting:
// a *BusyError when another process holds it.
func AcquireLock(path string) (*Lock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, &BusyError{Path: path, PID: holder(path)}
			}
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		// Release deletes the file before it unlocks: a lock taken on a
		// file already deleted (or deleted and made again) is no lock.
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) != nil || unix.Stat(path, &now) != nil || held.Ino != now.Ino || held.Dev != now.Dev {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
		if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
			f.Close()
			return nil, err
		}
		return &Lock{path: path, f: f}, nil
	}
}

// holder reads the holder's pid, waiting a little for a holder that has
// just taken the lock to write it.
func holder(path string) int {
	for range 20 {
		b, err := os.ReadFile(path)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}

// Release deletes the lock's file and drops the lock; safe to call twice.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(l.path)
	l.f.Close()
	l.f = nil
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return err
}
