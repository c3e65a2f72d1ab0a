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

package fleetmodel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// Commands reads the plugin's annotations on a profile.
func Commands(p *v1alpha1.NetTuningProfile) planner.Commands {
	var c planner.Commands
	a := p.GetAnnotations()
	if rev, step, started, ok := ParsePromote(a[v1alpha1.PromoteAnnotation]); ok {
		c.PromoteRevision, c.PromoteStep, c.PromoteRollout = rev, &step, started
	}
	c.AbortRevision = strings.TrimSpace(a[v1alpha1.AbortAnnotation])
	c.Excluded = SplitList(a[v1alpha1.ExcludeAnnotation])
	return c
}

// PromoteValue is the promote annotation for a step of the revision's
// rollout that began at started ("<revision>@<step>@<unix seconds>"; the
// rollout's start left out when zero).
func PromoteValue(revision string, step int32, started time.Time) string {
	if started.IsZero() {
		return fmt.Sprintf("%s@%d", revision, step)
	}
	return fmt.Sprintf("%s@%d@%d", revision, step, started.Unix())
}

// ParsePromote reads a promote annotation ("<revision>@<step>", or
// "<revision>@<step>@<unix seconds of the rollout's start>"); started is
// zero for the first form.
func ParsePromote(v string) (revision string, step int32, started time.Time, ok bool) {
	parts := strings.Split(strings.TrimSpace(v), "@")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return "", 0, time.Time{}, false
	}
	n, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || n < 0 {
		return "", 0, time.Time{}, false
	}
	if len(parts) == 3 {
		sec, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || sec <= 0 {
			return "", 0, time.Time{}, false
		}
		started = time.Unix(sec, 0)
	}
	return parts[0], int32(n), started, true
}

// SplitList splits a comma-separated annotation into sorted unique names.
func SplitList(s string) []string { return SortedUnique(strings.Split(s, ",")) }

// SortedUnique returns the sorted set of names, trimmed, without empty ones.
func SortedUnique(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range names {
		if v = strings.TrimSpace(v); v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}
