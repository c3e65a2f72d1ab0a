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

package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

func TestCommitAndJournalRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if lkg, err := s.LastKnownGood(); err != nil || lkg != nil {
		t.Fatalf("fresh store: lkg=%v err=%v, want nil nil", lkg, err)
	}
	target := v1alpha1.NodeNetTuningSpec{Revision: "r2"}
	if err := s.BeginJournal(Journal{Target: target, Snapshot: json.RawMessage(`{"routes":[]}`), Started: time.Unix(10, 0)}); err != nil {
		t.Fatal(err)
	}
	j, err := s.PendingJournal()
	if err != nil || j == nil || j.Target.Revision != "r2" || string(j.Snapshot) != `{"routes":[]}` {
		t.Fatalf("journal not read back: %+v %v", j, err)
	}
	if err := s.Commit(target, json.RawMessage(`{"sysctls":[]}`), time.Unix(20, 0)); err != nil {
		t.Fatal(err)
	}
	if j, _ := s.PendingJournal(); j != nil {
		t.Fatalf("journal survived commit: %+v", j)
	}
	lkg, err := s.LastKnownGood()
	if err != nil || lkg == nil || lkg.Spec.Revision != "r2" || !lkg.Committed.Equal(time.Unix(20, 0)) || string(lkg.Originals) != `{"sysctls":[]}` {
		t.Fatalf("lkg = %+v, %v", lkg, err)
	}
	// No temp files left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != lkgFile {
			t.Errorf("unexpected file left in state dir: %s", e.Name())
		}
	}
}

// A truncated last-known-good falls back to the commit before it, kept
// aside, and says so; the fallback becomes the last-known-good again.
func TestTruncatedLastKnownGoodFallsBack(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	for _, rev := range []string{"r1", "r2"} {
		if err := s.Commit(v1alpha1.NodeNetTuningSpec{Revision: rev}, nil, time.Unix(20, 0)); err != nil {
			t.Fatal(err)
		}
	}
	truncate(t, filepath.Join(dir, lkgFile))
	lkg, err := s.LastKnownGood()
	if err != nil || lkg == nil || lkg.Spec.Revision != "r1" {
		t.Fatalf("lkg = %+v, %v; want the previous commit r1", lkg, err)
	}
	notices := s.Notices()
	if len(notices) != 1 || !strings.Contains(notices[0], "previous commit, revision r1") || !strings.Contains(notices[0], "kept aside as last-known-good.json.corrupt-") {
		t.Errorf("notices %q", notices)
	}
	if again, err := s.LastKnownGood(); err != nil || again == nil || again.Spec.Revision != "r1" || len(s.Notices()) != 0 {
		t.Errorf("read again: %+v %v, want r1 without a notice", again, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, lkgFile+".corrupt-*")); len(m) != 1 {
		t.Errorf("truncated file kept aside: %v", m)
	}
}

// Both generations unreadable: both kept aside, nothing committed, said.
func TestBothGenerationsUnreadable(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	for _, rev := range []string{"r1", "r2"} {
		if err := s.Commit(v1alpha1.NodeNetTuningSpec{Revision: rev}, nil, time.Unix(20, 0)); err != nil {
			t.Fatal(err)
		}
	}
	truncate(t, filepath.Join(dir, lkgFile))
	truncate(t, filepath.Join(dir, prevFile))
	lkg, err := s.LastKnownGood()
	if err != nil || lkg != nil {
		t.Fatalf("lkg = %+v, %v; want nothing committed", lkg, err)
	}
	if n := s.Notices(); len(n) != 1 || !strings.Contains(n[0], "nothing counts as committed") {
		t.Errorf("notices %q", n)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.corrupt-*")); len(m) != 2 {
		t.Errorf("files kept aside: %v, want both", m)
	}
}

// A truncated journal is kept aside and no apply counts as pending.
func TestTruncatedJournal(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	if err := s.BeginJournal(Journal{Target: v1alpha1.NodeNetTuningSpec{Revision: "r2"}, Snapshot: json.RawMessage(`{"routes":[]}`)}); err != nil {
		t.Fatal(err)
	}
	truncate(t, filepath.Join(dir, journalFile))
	j, err := s.PendingJournal()
	if err != nil || j != nil {
		t.Fatalf("journal = %+v, %v; want none", j, err)
	}
	if n := s.Notices(); len(n) != 1 || !strings.Contains(n[0], "cannot be undone") {
		t.Errorf("notices %q", n)
	}
}

// A file that cannot be read (not a decode error) is still an error.
func TestUnreadableFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	if err := os.Mkdir(filepath.Join(dir, lkgFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LastKnownGood(); err == nil {
		t.Fatal("a last-known-good that cannot be read must be reported")
	}
}

func truncate(t *testing.T, path string) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
}
