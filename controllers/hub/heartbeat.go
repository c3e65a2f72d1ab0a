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

package hub

import (
	"strings"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

// HeartbeatOnly reports whether a ManifestWork changed only in the time of
// its vehicle report's header: a cluster's controller rewrites its report
// for the time alone every reportInterval, and every work agent forwards
// it. Such a change does not wake the profile's reconcile (workHandler)
// unless it ends a silence (HeartbeatEndsSilence): at 1,000 clusters the
// heartbeats are about 40 work updates a second, and a round over every
// vehicle for each (or for each 15 s of them) kept a core of the hub busy
// doing nothing. The cache holds the new time for the next round, and the
// planner wakes the reconcile when the oldest report would turn stale
// (unreachableAfter after it was written): a controller that stops
// heartbeating is seen then, as before.
func HeartbeatOnly(old, cur *workv1.ManifestWork) bool {
	if old == nil || cur == nil || old.Generation != cur.Generation ||
		!apiequality.Semantic.DeepEqual(old.Annotations, cur.Annotations) || !apiequality.Semantic.DeepEqual(old.Labels, cur.Labels) {
		return false
	}
	o, c := old.Status.DeepCopy(), cur.Status.DeepCopy()
	if !stripReportTimes(o) || !stripReportTimes(c) {
		return false
	}
	return apiequality.Semantic.DeepEqual(o, c)
}

// stripReportTimes removes the written time from every vehicle report of
// st, and reports whether there was at least one.
func stripReportTimes(st *workv1.ManifestWorkStatus) bool {
	found := false
	for i := range st.ResourceStatus.Manifests {
		vals := st.ResourceStatus.Manifests[i].StatusFeedbacks.Values
		for j := range vals {
			if vals[j].Name != FeedbackName || vals[j].Value.String == nil {
				continue
			}
			s := *vals[j].Value.String
			if strings.HasPrefix(s, "@ ") {
				// "@ <written> <generation>\n...": keep the generation.
				rest := s[2:]
				if k := strings.IndexByte(rest, ' '); k >= 0 {
					s = "@ " + rest[k+1:]
				}
			}
			vals[j].Value.String = &s
			found = true
		}
	}
	return found
}

// HeartbeatEndsSilence reports whether a heartbeat (HeartbeatOnly) came
// more than twice the cluster's reportInterval and twice OCM's status sync
// after the report before it (a live controller's reports arrive at most
// reportInterval + 1.9 status syncs apart): the cluster's controller was
// silent (the hub may count its vehicles Unreachable, which takes
// unreachableAfter = 4 x reportInterval + 2 x status sync) and is back,
// which the profile's reconcile must see now. It is true when either time
// or the interval cannot be read. intervals (nil: none) keeps the interval
// read from each generation of a work, so that a heartbeat parses only its
// report's first line.
func HeartbeatEndsSilence(old, cur *workv1.ManifestWork, profile string, statusSync time.Duration, intervals *ReportIntervals) bool {
	was, ok1 := reportWritten(old)
	now, ok2 := reportWritten(cur)
	if !ok1 || !ok2 {
		return true
	}
	interval, ok := intervals.get(cur)
	if !ok {
		share, err := ShareOf(cur, profile)
		if err != nil {
			return true
		}
		interval = share.GetReportInterval()
		intervals.put(cur, interval)
	}
	return now.Sub(was) > 2*interval+2*statusSync
}

// ReportIntervals keeps the reportInterval of each ManifestWork's
// generation (its spec does not change within one).
type ReportIntervals struct {
	mu sync.Mutex
	m  map[types.UID]generationInterval
}

type generationInterval struct {
	generation int64
	interval   time.Duration
}

func (c *ReportIntervals) get(w *workv1.ManifestWork) (time.Duration, bool) {
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gi, ok := c.m[w.UID]
	return gi.interval, ok && gi.generation == w.Generation
}

func (c *ReportIntervals) put(w *workv1.ManifestWork, interval time.Duration) {
	if c == nil || w.UID == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.UID]generationInterval{}
	}
	c.m[w.UID] = generationInterval{w.Generation, interval}
}

// forget drops a deleted work's interval.
func (c *ReportIntervals) forget(uid types.UID) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, uid)
}

// reportWritten is when a work's vehicle report was written: its header,
// the report's first line alone ("@ <written> <generation>").
func reportWritten(w *workv1.ManifestWork) (time.Time, bool) {
	for _, m := range w.Status.ResourceStatus.Manifests {
		for _, v := range m.StatusFeedbacks.Values {
			if v.Name != FeedbackName || v.Value.String == nil {
				continue
			}
			first, _, _ := strings.Cut(*v.Value.String, "\n")
			h, _, err := v1alpha1.ParseVehicleReports(first)
			if err != nil || h.Written.IsZero() {
				return time.Time{}, false
			}
			return h.Written, true
		}
	}
	return time.Time{}, false
}
