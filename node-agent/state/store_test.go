package state

import (
	"encoding/json"
	"os"
	"path/filepath"
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

func TestCorruptFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	if err := os.WriteFile(filepath.Join(dir, lkgFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LastKnownGood(); err == nil {
		t.Fatal("a corrupt last-known-good file must be reported, not ignored")
	}
}
