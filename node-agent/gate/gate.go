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

// Package gate is the node agent's apply gate: the vehicle's own say on
// when a new revision may be applied. The autonomy stack writes one line to
// a file the agent is configured with (--apply-gate-file): "open", or
// "closed" followed by a reason ("closed driving"). A file, because every
// part of a vehicle's software can write one (a ROS node, a systemd unit, a
// shell script) without a protocol or a library; it outlives the agent, so
// an agent that restarts while the vehicle drives finds the gate closed
// before it does anything; and it needs no network, so it works while the
// vehicle is cut off from its API server. Write it atomically (write a
// temporary file, rename it over the gate). A gate file missing, unreadable
// or saying anything else reads as closed: the vehicle has not said it is
// safe.
package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// State is what the gate says.
type State struct {
	State  v1alpha1.GateState
	Reason string
	// Since is when the agent first saw this state.
	Since time.Time
}

// Open says whether the gate lets an apply start.
func (s State) Open() bool { return s.State == v1alpha1.GateOpen }

// NotConfigured is the state of an agent without a gate.
var NotConfigured = State{State: v1alpha1.GateNotConfigured}

// maxReason bounds the reason kept from the file.
const maxReason = 200

// Parse reads a gate file's content.
func Parse(content []byte) State {
	line, _, _ := bytes.Cut(content, []byte("\n"))
	word, rest, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
	rest = strings.TrimSpace(rest)
	if len(rest) > maxReason {
		rest = rest[:maxReason]
	}
	switch strings.ToLower(word) {
	case "open":
		return State{State: v1alpha1.GateOpen, Reason: rest}
	case "closed":
		if rest == "" {
			rest = "closed by the vehicle"
		}
		return State{State: v1alpha1.GateClosed, Reason: rest}
	}
	shown := strings.TrimSpace(string(line))
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	return State{State: v1alpha1.GateClosed, Reason: fmt.Sprintf("gate file says %q, neither open nor closed: read as closed", shown)}
}

// File is a gate the vehicle controls through a file.
type File struct {
	Path string
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu   sync.Mutex
	last State
}

// Read reads the file now; Since carries over while the state stays.
func (f *File) Read() State {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	var s State
	b, err := os.ReadFile(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s = State{State: v1alpha1.GateClosed, Reason: fmt.Sprintf("no gate file %s: the vehicle has not said it is safe", f.Path)}
	case err != nil:
		s = State{State: v1alpha1.GateClosed, Reason: fmt.Sprintf("gate file unreadable: %v", err)}
	default:
		s = Parse(b)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last.State == s.State && f.last.Reason == s.Reason {
		return f.last
	}
	s.Since = now()
	f.last = s
	return s
}

// Watch reads the file every interval until ctx ends and calls changed
// with every new state (the first read included).
func (f *File) Watch(ctx context.Context, interval time.Duration, changed func(State)) {
	var last State
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s := f.Read()
		if s.State != last.State || s.Reason != last.Reason {
			last = s
			changed(s)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
