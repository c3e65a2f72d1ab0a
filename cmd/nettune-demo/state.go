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

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nettune/nettune/internal/fleet"
)

// What a run keeps in its state directory besides the fleet's own files.
const (
	// ledgerFile lists what the run made outside its process (fleet.Ledger).
	ledgerFile = "ledger"
	// logsDir is the only part of the state directory kept at exit.
	logsDir = "logs"
	// tmpDir is the run's TMPDIR (envtest's etcd data and certificates,
	// anything its children write to a temporary file).
	tmpDir = "tmp"
	// kubeCacheDir is kubectl's discovery and HTTP cache (KUBECACHEDIR),
	// which would otherwise grow ~/.kube/cache by one API server per run.
	kubeCacheDir = "kube-cache"
)

// claim makes stateDir this run's. It takes the lock beside it
// (<stateDir>.lock, held until release or until this process dies, kill -9
// included) or refuses at once, touching nothing; clears what a killed
// earlier run left, as its ledger lists it, and says so in one line; empties
// stateDir and starts this run's ledger there. release, deferred by the
// caller after the fleet is closed, removes what the ledger lists and
// Close missed, then the state directory but its logs, the ledger and the
// lock; when something cannot be removed it keeps the ledger for the next
// run to clear.
func claim(out io.Writer, stateDir string) (_ *fleet.Ledger, release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(stateDir), 0o755); err != nil {
		return nil, nil, err
	}
	lock, err := fleet.AcquireLock(stateDir + ".lock")
	var busy *fleet.BusyError
	if errors.As(err, &busy) {
		if busy.PID == 0 {
			return nil, nil, fmt.Errorf("another nettune-demo is running with its state in %s (it holds %s): stop it first (Ctrl-C in its terminal)", stateDir, busy.Path)
		}
		return nil, nil, fmt.Errorf("another nettune-demo (pid %d) is running with its state in %s: stop it first with Ctrl-C in its terminal or `kill %d` (either takes its fleet down), then run this again", busy.PID, stateDir, busy.PID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("locking %s: %w", stateDir, err)
	}
	defer func() {
		if err != nil {
			_ = lock.Release()
		}
	}()

	ledgerPath := filepath.Join(stateDir, ledgerFile)
	cleared, err := fleet.ClearLedger(ledgerPath)
	if err != nil {
		return nil, nil, fmt.Errorf("clearing what the last run left (as %s lists it): %w", ledgerPath, err)
	}
	if !cleared.Empty() {
		fmt.Fprintf(out, "\n==> cleared what the last run (pid %d, stopped before it could clean up) left: %s\n", cleared.Owner, cleared)
	}
	if err := os.RemoveAll(stateDir); err != nil {
		return nil, nil, err
	}
	for _, d := range []string{tmpDir, kubeCacheDir} {
		if err := os.MkdirAll(filepath.Join(stateDir, d), 0o755); err != nil {
			return nil, nil, err
		}
	}
	ledger, err := fleet.CreateLedger(ledgerPath)
	if err != nil {
		return nil, nil, err
	}
	// Every temporary file of this process and its children in the state
	// directory: nothing of the run outside it.
	if err := os.Setenv("TMPDIR", filepath.Join(stateDir, tmpDir)); err != nil {
		return nil, nil, err
	}
	if err := os.Setenv("KUBECACHEDIR", filepath.Join(stateDir, kubeCacheDir)); err != nil {
		return nil, nil, err
	}

	return ledger, func() {
		left, err := ledger.Clear()
		if !left.Empty() {
			fmt.Fprintf(out, "    removed what the fleet left: %s\n", left)
		}
		if err != nil {
			ledger.Close()
			fmt.Fprintf(out, "    could not remove everything (%v): the next run clears what %s lists\n", err, ledgerPath)
			_ = lock.Release()
			return
		}
		if err := ledger.Remove(); err != nil {
			fmt.Fprintf(out, "    %v\n", err)
		}
		if err := tidy(stateDir); err != nil {
			fmt.Fprintf(out, "    %v\n", err)
		}
		if err := lock.Release(); err != nil {
			fmt.Fprintf(out, "    %v\n", err)
		}
	}, nil
}

// tidy removes the state directory but its logs (and the directory itself
// when there are none).
func tidy(stateDir string) error {
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.Name() != logsDir {
			errs = append(errs, os.RemoveAll(filepath.Join(stateDir, e.Name())))
		}
	}
	_ = os.Remove(stateDir) // only when empty
	return errors.Join(errs...)
}
