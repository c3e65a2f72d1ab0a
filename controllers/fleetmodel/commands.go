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

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// Commands reads the plugin's annotations on a profile.
func Commands(p *v1alpha1.NetTuningProfile) planner.Commands {
	var c planner.Commands
	a := p.GetAnnotations()
	if rev, step, ok := ParsePromote(a[v1alpha1.PromoteAnnotation]); ok {
		c.PromoteRevision, c.PromoteStep = rev, &step
	}
	c.AbortRevision = strings.TrimSpace(a[v1alpha1.AbortAnnotation])
	c.Excluded = SplitList(a[v1alpha1.ExcludeAnnotation])
	return c
}

// PromoteValue is the promote annotation for a revision's step.
func PromoteValue(revision string, step int32) string {
	return fmt.Sprintf("%s@%d", revision, step)
}

// ParsePromote reads a promote annotation ("<revision>@<step>").
func ParsePromote(v string) (revision string, step int32, ok bool) {
	rev, s, found := strings.Cut(strings.TrimSpace(v), "@")
	if !found || rev == "" {
		return "", 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rev, int32(n), true
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
