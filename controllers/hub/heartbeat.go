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

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	workv1 "open-cluster-management.io/api/work/v1"
)

// HeartbeatOnly reports whether a ManifestWork changed only in the time of
// its vehicle report's header: a cluster's controller rewrites its report
// for the time alone every reportInterval, and every work agent forwards
// it. Such a change wakes the profile's reconcile only after
// HeartbeatDelay (workHandler), so that the heartbeats of every cluster in
// that time make one rollout round: at 1,000 clusters they are about 40
// work updates a second, and each used to run a whole round over every
// vehicle. The cache holds the new time for the next round.
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
