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

package kernel

import (
	"errors"
	"testing"

	"github.com/vishvananda/netns"
)

// TestDoInNetns: fn runs in the target namespace, the caller's thread never
// leaves its own, errors and panics come back.
func TestDoInNetns(t *testing.T) {
	a := newTestNS(t)
	self, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()

	for i := 0; i < 20; i++ { // many threads: none may leak back into the pool in a
		var inside netns.NsHandle
		if err := DoInNetns(a.ns, func() error {
			var err error
			inside, err = netns.Get()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !inside.Equal(a.ns) {
			t.Fatalf("fn ran in %s, want %s", inside, a.ns)
		}
		inside.Close()
	}
	// Other goroutines (on whatever threads) are still in the host namespace.
	done := make(chan bool)
	for i := 0; i < 20; i++ {
		go func() {
			cur, err := netns.Get()
			if err != nil {
				done <- false
				return
			}
			defer cur.Close()
			done <- cur.Equal(self)
		}()
	}
	for i := 0; i < 20; i++ {
		if !<-done {
			t.Error("a goroutine ran outside the host namespace after DoInNetns")
		}
	}

	sentinel := errors.New("boom")
	if err := a.h.Do(func() error { return sentinel }); !errors.Is(err, sentinel) {
		t.Errorf("error = %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Errorf("recovered %v", r)
			}
		}()
		_ = a.h.Do(func() error { panic("kaboom") })
	}()
	if err := DoInNetns(netns.None(), func() error { return nil }); err == nil {
		t.Error("closed namespace handle accepted")
	}
	if _, err := NewHandleAt(netns.None()); err == nil {
		t.Error("NewHandleAt(None) succeeded")
	}
}
