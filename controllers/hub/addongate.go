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
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/nettune/nettune/api/v1alpha1"
)

// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=managedclusteraddons,verbs=get;list;watch

// ConditionAddOnUnavailable on a hub profile names the selected clusters
// that get no work because nettune's add-on is missing there, not
// Available, or at an incompatible version.
const ConditionAddOnUnavailable = "AddOnUnavailable"

// AddOnGate places a profile only in clusters where nettune's add-on runs:
// the ManagedClusterAddOn Name exists, is Available, and its installed
// chart version (label VersionLabel, written by the add-on manager from
// the work's feedback) is at least MinVersion.
type AddOnGate struct {
	Name         string
	VersionLabel string
	MinVersion   string
}

// watchAddOns re-plans every profile when a cluster's add-on changes
// (with the gate on).
func (r *Reconciler) watchAddOns(b *builder.Builder) *builder.Builder {
	if r.AddOn == nil {
		return b
	}
	return b.Watches(&addonv1alpha1.ManagedClusterAddOn{}, handler.EnqueueRequestsFromMapFunc(r.allProfiles))
}

// admit splits the clusters a profile selects into those the add-on
// admits and those it skips, with why; the skipped clusters' works are
// taken out of existing (neither rewritten nor withdrawn: a cluster whose
// add-on is briefly unavailable, e.g. while it upgrades, keeps the profile
// it has). The admitted are judged ByAddOn (liveness AddOnLease); among
// them, a cluster whose add-on stopped being Available after its
// controller reported (AddOnDown) stays in the rollout, its vehicles
// Unreachable, and its work is taken out of existing too (not placed).
func (g *AddOnGate) admit(ctx context.Context, c client.Reader, clusters []Cluster, existing map[string]*workv1.ManifestWork, now time.Time) ([]Cluster, map[string]string, error) {
	if g == nil {
		return clusters, nil, nil
	}
	list := &addonv1alpha1.ManagedClusterAddOnList{}
	if err := c.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("list ManagedClusterAddOns: %w", err)
	}
	byCluster := map[string]*addonv1alpha1.ManagedClusterAddOn{}
	for i := range list.Items {
		if list.Items[i].Name == g.Name {
			byCluster[list.Items[i].Namespace] = &list.Items[i]
		}
	}
	ok := make([]Cluster, 0, len(clusters))
	skipped := map[string]string{}
	for _, cl := range clusters {
		a := byCluster[cl.Name]
		if c := g.down(a); c != nil && existing[cl.Name] != nil && cl.Reports != nil {
			// The profile runs there and the add-on was admitted before:
			// its controller stopped (OCM's health check of its Lease).
			// The cluster stays, its vehicles Unreachable from when OCM
			// said so; its work is neither rewritten nor withdrawn.
			cl.ByAddOn, cl.AddOnDown = true, string(c.Status)+" ("+c.Reason+": "+c.Message+")"
			if cl.Since.IsZero() {
				cl.Since = c.LastTransitionTime.Time
				if cl.Since.IsZero() {
					cl.Since = now
				}
			}
			ok = append(ok, cl)
			delete(existing, cl.Name)
			continue
		}
		if why := g.why(a); why != "" {
			skipped[cl.Name] = why
			delete(existing, cl.Name)
			continue
		}
		cl.ByAddOn = true
		ok = append(ok, cl)
	}
	return ok, skipped, nil
}

// down is the add-on's Available condition when the add-on is installed
// at a compatible version but not Available (nil otherwise).
func (g *AddOnGate) down(a *addonv1alpha1.ManagedClusterAddOn) *metav1.Condition {
	if a == nil || g.versionWhy(a) != "" {
		return nil
	}
	c := meta.FindStatusCondition(a.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable)
	if c == nil || c.Status == metav1.ConditionTrue {
		return nil
	}
	return c
}

// why a cluster's add-on does not admit a profile ("" when it does).
func (g *AddOnGate) why(a *addonv1alpha1.ManagedClusterAddOn) string {
	if a == nil {
		return "add-on " + g.Name + " is not installed (no ManagedClusterAddOn)"
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable); c == nil || c.Status != metav1.ConditionTrue {
		status := "not reported"
		if c != nil {
			status = string(c.Status) + " (" + c.Reason + ")"
		}
		return "add-on " + g.Name + " is not Available: " + status
	}
	return g.versionWhy(a)
}

// versionWhy a cluster's add-on runs no version a profile may be placed on
// ("" when it does).
func (g *AddOnGate) versionWhy(a *addonv1alpha1.ManagedClusterAddOn) string {
	v := a.Labels[g.VersionLabel]
	if v == "" {
		return "add-on " + g.Name + " has not reported its version"
	}
	if g.MinVersion != "" && compareVersions(v, g.MinVersion) < 0 {
		return "add-on " + g.Name + " runs " + v + ", older than " + g.MinVersion
	}
	return ""
}

// skippedClusters is the profile's condition and its status.clusters
// lines for the clusters the gate skipped (none: the condition False).
func skippedClusters(st *v1alpha1.NetTuningProfileStatus, generation int64, skipped map[string]string, now metav1.Time) {
	names := make([]string, 0, len(skipped))
	for n := range skipped {
		names = append(names, n)
	}
	sort.Strings(names)
	cond := metav1.Condition{Type: ConditionAddOnUnavailable, Status: metav1.ConditionFalse, Reason: "AllAdmitted",
		Message: "every selected cluster runs the add-on", ObservedGeneration: generation, LastTransitionTime: now}
	if len(names) > 0 {
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + ": " + skipped[n]
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, "ClustersSkipped"
		cond.Message = "no work placed in " + strings.Join(parts, "; ")
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

// compareVersions compares dotted numeric versions (a leading v and any
// -pre or +build part ignored): -1, 0 or 1.
func compareVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	for i := 0; i < 3; i++ {
		switch {
		case pa[i] < pb[i]:
			return -1
		case pa[i] > pb[i]:
			return 1
		}
	}
	return 0
}

func versionParts(v string) [3]int {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	var out [3]int
	for i, p := range strings.SplitN(v, ".", 3) {
		n, err := strconv.Atoi(p)
		if err != nil {
			n = -1
		}
		out[i] = n
	}
	return out
}
