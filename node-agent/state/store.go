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

// Package state keeps the node agent's durable state: the last-known-good
// (committed) node spec, and the journal of an apply in progress, so that a
// crash at any point leaves the host in either the old or the new state.
//
// Layout of the state directory:
//
//	last-known-good.json  the committed NodeNetTuningSpec (and when)
//	journal.json          present only while an apply is in flight: the
//	                      snapshot of everything the apply touches, taken
//	                      before the first change
//
// Every file is written atomically: temp file, fsync, rename, fsync of the
// directory.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

const (
	lkgFile     = "last-known-good.json"
	prevFile    = "last-known-good.prev.json"
	journalFile = "journal.json"
)

// Committed is the last-known-good state.
type Committed struct {
	// Spec is the node spec that was applied, verified and probed.
	Spec v1alpha1.NodeNetTuningSpec `json:"spec"`
	// Originals is the state every item had before nettune first changed it
	// (opaque to this package): an item a later spec drops goes back to it.
	Originals json.RawMessage `json:"originals,omitempty"`
	// Committed is when it was committed.
	Committed time.Time `json:"committed"`
}

// Journal records an apply in flight. Snapshot is opaque to this package (the
// agent's engine encodes the prior state of every item it touches).
type Journal struct {
	// Target is the spec being applied.
	Target v1alpha1.NodeNetTuningSpec `json:"target"`
	// Snapshot is the state of every touched item before the apply.
	Snapshot json.RawMessage `json:"snapshot"`
	// Started is when the apply began.
	Started time.Time `json:"started"`
}

// Store reads and writes the state directory.
type Store struct {
	dir string

	mu      sync.Mutex
	notices []string
}

// Notices returns, and forgets, what the store had to repair since the last
// call: an unreadable file kept aside, the generation it fell back to.
func (s *Store) Notices() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.notices
	s.notices = nil
	return n
}

func (s *Store) notice(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notices = append(s.notices, fmt.Sprintf(format, args...))
}

// quarantine renames an unreadable file to <name>.corrupt-<unix seconds>,
// so that it is never read again and never lost.
func (s *Store) quarantine(name string) (string, error) {
	aside := fmt.Sprintf("%s.corrupt-%d", name, time.Now().Unix())
	if err := os.Rename(filepath.Join(s.dir, name), filepath.Join(s.dir, aside)); err != nil {
		return "", fmt.Errorf("keeping the unreadable %s aside: %w", name, err)
	}
	return aside, syncDir(s.dir)
}

// Open creates the state directory if needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory %s: %w", dir, err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the state directory.
func (s *Store) Dir() string { return s.dir }

// LastKnownGood returns the committed state, or nil when none was committed.
//
// An unreadable last-known-good file (truncated, garbled) is kept aside and
// the previous commit, which Commit keeps, takes its place; when that is
// unreadable too, it is kept aside as well and nothing counts as committed
// (the next apply records the host's values as they are then). Either is
// said in Notices.
func (s *Store) LastKnownGood() (*Committed, error) {
	c := &Committed{}
	ok, err := s.read(lkgFile, c)
	var decode *decodeError
	if !errors.As(err, &decode) {
		if !ok {
			return nil, err
		}
		return c, nil
	}
	aside, qerr := s.quarantine(lkgFile)
	if qerr != nil {
		return nil, errors.Join(err, qerr)
	}
	prev := &Committed{}
	ok, perr := s.read(prevFile, prev)
	if ok {
		if werr := s.write(lkgFile, prev); werr != nil {
			return nil, werr
		}
		s.notice("%s was unreadable (%v), kept aside as %s: back on the previous commit, revision %s", lkgFile, decode.err, aside, prev.Spec.Revision)
		return prev, nil
	}
	if errors.As(perr, &decode) {
		if paside, qerr := s.quarantine(prevFile); qerr == nil {
			aside += ", " + paside
		}
	}
	s.notice("%s was unreadable (%v), kept aside as %s, and no readable previous commit: nothing counts as committed; the next apply records the host's current values as their originals", lkgFile, err, aside)
	return nil, nil
}

// Commit records spec as the last-known-good state and ends the journal.
// The LKG is written before the journal is removed, so a crash between the
// two leaves a journal whose target equals the LKG: recovery then restores
// the snapshot and re-applies the LKG, ending in the new state either way.
func (s *Store) Commit(spec v1alpha1.NodeNetTuningSpec, originals json.RawMessage, now time.Time) error {
	// The commit before this one stays as the fallback for a damaged file.
	if prev := (&Committed{}); s.readOK(lkgFile, prev) {
		if err := s.write(prevFile, prev); err != nil {
			return err
		}
	}
	if err := s.write(lkgFile, Committed{Spec: spec, Originals: originals, Committed: now}); err != nil {
		return err
	}
	return s.EndJournal()
}

// BeginJournal durably records an apply before its first change.
func (s *Store) BeginJournal(j Journal) error { return s.write(journalFile, j) }

// PendingJournal returns the journal of an apply that did not finish, or nil.
//
// An unreadable journal is kept aside (said in Notices) and nil returned: the
// state before that apply cannot be restored from it, and the last-known-good
// is applied over whatever it left.
func (s *Store) PendingJournal() (*Journal, error) {
	j := &Journal{}
	ok, err := s.read(journalFile, j)
	var decode *decodeError
	if errors.As(err, &decode) {
		aside, qerr := s.quarantine(journalFile)
		if qerr != nil {
			return nil, errors.Join(err, qerr)
		}
		s.notice("%s was unreadable (%v), kept aside as %s: the interrupted apply cannot be undone from it; the last-known-good is applied over it", journalFile, decode.err, aside)
		return nil, nil
	}
	if !ok {
		return nil, err
	}
	return j, nil
}

// EndJournal removes the journal (the apply committed or was rolled back).
func (s *Store) EndJournal() error {
	err := os.Remove(filepath.Join(s.dir, journalFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing journal: %w", err)
	}
	return syncDir(s.dir)
}

// read decodes name into v; ok is false when the file does not exist.
func (s *Store) read(name string, v any) (bool, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", name, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, &decodeError{name: name, err: err}
	}
	return true, nil
}

// readOK is read without its error: true when name exists and decodes.
func (s *Store) readOK(name string, v any) bool {
	ok, err := s.read(name, v)
	return ok && err == nil
}

// decodeError is a state file that exists but does not decode.
type decodeError struct {
	name string
	err  error
}

func (e *decodeError) Error() string { return fmt.Sprintf("decoding %s: %v", e.name, e.err) }
func (e *decodeError) Unwrap() error { return e.err }

// write replaces name atomically with the JSON of v.
func (s *Store) write(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	tmp, err := os.CreateTemp(s.dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("creating temp file for %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(s.dir, name)); err != nil {
		return fmt.Errorf("renaming %s into place: %w", name, err)
	}
	return syncDir(s.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
