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
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

const (
	lkgFile     = "last-known-good.json"
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
func (s *Store) LastKnownGood() (*Committed, error) {
	c := &Committed{}
	ok, err := s.read(lkgFile, c)
	if !ok {
		return nil, err
	}
	return c, nil
}

// Commit records spec as the last-known-good state and ends the journal.
// The LKG is written before the journal is removed, so a crash between the
// two leaves a journal whose target equals the LKG: recovery then restores
// the snapshot and re-applies the LKG, ending in the new state either way.
func (s *Store) Commit(spec v1alpha1.NodeNetTuningSpec, originals json.RawMessage, now time.Time) error {
	if err := s.write(lkgFile, Committed{Spec: spec, Originals: originals, Committed: now}); err != nil {
		return err
	}
	return s.EndJournal()
}

// BeginJournal durably records an apply before its first change.
func (s *Store) BeginJournal(j Journal) error { return s.write(journalFile, j) }

// PendingJournal returns the journal of an apply that did not finish, or nil.
func (s *Store) PendingJournal() (*Journal, error) {
	j := &Journal{}
	ok, err := s.read(journalFile, j)
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
		return false, fmt.Errorf("decoding %s: %w", name, err)
	}
	return true, nil
}

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
