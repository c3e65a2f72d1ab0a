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

package envtest

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually and Consistently check.
const PollInterval = 100 * time.Millisecond

// Eventually checks cond every PollInterval until it holds, and fails the
// test when it still does not after timeout, with what was awaited and
// cond's report of what it last saw.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, saw string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, saw)
			return
		}
		time.Sleep(PollInterval)
	}
}

// Consistently checks cond every PollInterval for d, first at once: the
// first time it does not hold, it reports an error, with what should have
// held and cond's report of what it saw, and returns false.
func Consistently(t testing.TB, d time.Duration, what string, cond func() (ok bool, saw string)) bool {
	t.Helper()
	began := time.Now()
	for {
		ok, saw := cond()
		if !ok {
			t.Errorf("%s no longer held %s after it began: %s", what, time.Since(began).Round(time.Millisecond), saw)
			return false
		}
		if time.Since(began) >= d {
			return true
		}
		time.Sleep(PollInterval)
	}
}
