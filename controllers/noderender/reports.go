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

package noderender

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/render"
)

// Reports carries what the node renderer found (conflicts, warnings)
// to the profiles it concerns: the renderer records each node's latest
// render, and a profile whose findings changed is sent on Changes, so its
// reconciler writes them into its conditions. It is memory only: after a
// restart the renderer's first pass over every node fills it again.
type Reports struct {
	mu     sync.Mutex
	byNode map[string]nodeFindings
	// Changes receives the profiles whose findings changed (buffered; a full
	// buffer drops nothing: the send waits).
	Changes chan event.GenericEvent
}

// nodeFindings is one node's findings. It is kept for every node, so a
// warning is stored once, not once per profile.
type nodeFindings struct {
	conflicts map[string][]string // profile -> "kind item on node with others" (nil: none)
	warnings  []string            // "node: warning", concerning every profile in profiles
	profiles  []string            // the profiles rendered on the node (nil without warnings)
}

// empty reports whether f holds no finding.
func (f *nodeFindings) empty() bool { return len(f.conflicts) == 0 && len(f.warnings) == 0 }

// warningsFor are the node's warnings concerning profile.
func (f nodeFindings) warningsFor(profile string) []string {
	if len(f.warnings) == 0 || !slices.Contains(f.profiles, profile) {
		return nil
	}
	return f.warnings
}

// NewReports returns an empty registry.
func NewReports() *Reports {
	return &Reports{byNode: map[string]nodeFindings{}, Changes: make(chan event.GenericEvent, 1024)}
}

// findingsOf turns a node's render result into per-profile findings:
// a conflict concerns the profiles it names, a warning every profile
// rendered on the node.
func findingsOf(node string, profiles []string, res render.Result) nodeFindings {
	var f nodeFindings
	for _, c := range res.Conflicts {
		for _, p := range c.Profiles {
			if f.conflicts == nil {
				f.conflicts = map[string][]string{}
			}
			f.conflicts[p] = append(f.conflicts[p], fmt.Sprintf("%s %s on %s with %s", c.Kind, c.Item, node, strings.Join(without(c.Profiles, p), ", ")))
		}
	}
	if len(res.Warnings) > 0 && len(profiles) > 0 {
		f.profiles = profiles
		f.warnings = make([]string, len(res.Warnings))
		for i, w := range res.Warnings {
			f.warnings[i] = node + ": " + w
		}
	}
	return f
}

// set records a node's findings (nil: the node renders nothing any more)
// and returns the profiles whose findings changed.
func (r *Reports) set(node string, f *nodeFindings) []string {
	r.mu.Lock()
	old, had := r.byNode[node]
	if f == nil || f.empty() {
		delete(r.byNode, node) // a node with nothing to report takes no entry
	} else {
		r.byNode[node] = *f
	}
	r.mu.Unlock()
	var next nodeFindings
	if f != nil {
		next = *f
	}
	changed := map[string]bool{}
	if had || f != nil {
		diff := func(a, b map[string][]string) {
			for p := range a {
				if !slices.Equal(a[p], b[p]) {
					changed[p] = true
				}
			}
		}
		diff(old.conflicts, next.conflicts)
		diff(next.conflicts, old.conflicts)
		for _, ps := range [][]string{old.profiles, next.profiles} {
			for _, p := range ps {
				if !slices.Equal(old.warningsFor(p), next.warningsFor(p)) {
					changed[p] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(changed))
}

// notify sends the profiles on Changes.
func (r *Reports) notify(profiles []string) {
	for _, p := range profiles {
		o := &v1alpha1.NetTuningProfile{}
		o.Name = p
		r.Changes <- event.GenericEvent{Object: o}
	}
}

// For returns a profile's conflicts and warnings over every node, sorted.
func (r *Reports) For(profile string) (conflicts, warnings []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.byNode {
		conflicts = append(conflicts, f.conflicts[profile]...)
		warnings = append(warnings, f.warningsFor(profile)...)
	}
	slices.Sort(conflicts)
	slices.Sort(warnings)
	return conflicts, warnings
}

// without is list without s.
func without(list []string, s string) []string {
	var out []string
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}
