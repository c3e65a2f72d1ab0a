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
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
)

// ProfileAnnotation names, on a ManifestWork, the hub profile it carries.
const ProfileAnnotation = "nettune.io/profile"

// ManagedByLabel marks the profiles and works a hub places.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ManagedBy is ManagedByLabel's value.
const ManagedBy = "nettune-hub"

// WorkName is the name of a profile's ManifestWork in every cluster namespace.
func WorkName(profile string) string {
	name := "nettune-" + profile
	if len(name) > 253 {
		name = name[:240] + "-" + revision.Hash(profile)[:12]
	}
	return name
}

// Share is one cluster's part of a hub decision: the revision of every
// vehicle not named, and per other revision the vehicles named for it.
func Share(assign map[string]string, cluster map[string]string, name, stable string) *v1alpha1.HubAssignment {
	return Shares(assign, cluster, stable)(name)
}

// Shares splits a hub decision into every cluster's Share in one pass over
// its vehicles (a Share per cluster, each reading the whole decision, cost
// clusters x vehicles: 10^8 map reads a reconcile at 1,000 clusters of 100
// vehicles, docs/bench-hub.md). A cluster none of whose vehicles is named
// gets the stable revision only.
func Shares(assign map[string]string, cluster map[string]string, stable string) func(name string) *v1alpha1.HubAssignment {
	byCluster := map[string]map[string][]string{}
	for v, rev := range assign {
		c, ok := cluster[v]
		if !ok || rev == stable {
			continue
		}
		byRev := byCluster[c]
		if byRev == nil {
			byRev = map[string][]string{}
			byCluster[c] = byRev
		}
		byRev[rev] = append(byRev[rev], v)
	}
	return func(name string) *v1alpha1.HubAssignment {
		h := &v1alpha1.HubAssignment{Stable: stable}
		byRev := byCluster[name]
		revs := make([]string, 0, len(byRev))
		for rev := range byRev {
			revs = append(revs, rev)
		}
		sort.Strings(revs)
		for _, rev := range revs {
			vs := slices.Clone(byRev[rev])
			sort.Strings(vs)
			h.Assignments = append(h.Assignments, v1alpha1.RevisionAssignment{Revision: rev, Vehicles: vs})
		}
		return h
	}
}

// Contents looks a revision's content up ("" is no revision).
type Contents func(name string) (*v1alpha1.NetTuningProfileSpec, error)

// Work is the ManifestWork that places profile p in cluster with its share
// of the decision: the ControllerRevisions of the revisions the share names
// (in the cluster's nettune namespace), then the profile's copy, whose
// status.vehicleReport comes back as status feedback.
func Work(p *v1alpha1.NetTuningProfile, cluster, namespace string, share *v1alpha1.HubAssignment, contents Contents) (*workv1.ManifestWork, error) {
	// Every revision the share names, the profile's own content too: the
	// cluster's controller may have stored any of them already under the
	// same content-addressed name (its data immutable, in another key
	// order), so each is created only if missing (CreateOnly), and stays
	// placed while the share names it.
	names := map[string]bool{}
	if share.Stable != "" {
		names[share.Stable] = true
	}
	for _, a := range share.Assignments {
		names[a.Revision] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var manifests []workv1.Manifest
	configs := []workv1.ManifestConfigOption{{
		ResourceIdentifier: workv1.ResourceIdentifier{Group: v1alpha1.GroupVersion.Group, Resource: "nettuningprofiles", Name: p.Name},
		FeedbackRules: []workv1.FeedbackRule{{Type: workv1.JSONPathsType,
			JsonPaths: []workv1.JsonPath{{Name: FeedbackName, Path: ".status.vehicleReport"},
				{Name: GenerationFeedbackName, Path: ".metadata.generation"}}}},
	}}
	for _, n := range sorted {
		content, err := contents(n)
		if err != nil {
			return nil, err
		}
		if content == nil {
			return nil, fmt.Errorf("revision %s: no content at the hub (pruned?)", n)
		}
		cr, err := revision.Object(namespace, p.Name, n, content, 0)
		if err != nil {
			return nil, err
		}
		cr.Labels[ManagedByLabel] = ManagedBy
		m, err := manifest(cr)
		if err != nil {
			return nil, err
		}
		manifests = append(manifests, m)
		configs = append(configs, workv1.ManifestConfigOption{
			ResourceIdentifier: workv1.ResourceIdentifier{Group: "apps", Resource: "controllerrevisions", Name: n, Namespace: namespace},
			UpdateStrategy:     &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeCreateOnly},
		})
	}
	// The copy carries the content its vehicles move to (the newest
	// revision the share names), else its stable revision's: an edit does
	// not touch the work of a cluster none of whose vehicles moves yet (one
	// write per cluster when its first vehicle moves, not one per cluster
	// per edit).
	content := revision.Content(p)
	if base := CopyRevision(share, revision.Name(p)); base != revision.Name(p) {
		c, err := contents(base)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, fmt.Errorf("revision %s: no content at the hub (pruned?)", base)
		}
		content = c.DeepCopy()
	}
	cp := &v1alpha1.NetTuningProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NetTuningProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: map[string]string{ManagedByLabel: ManagedBy}},
		Spec:       *content,
	}
	// The cluster reports a vehicle Unreachable by the profile's own
	// measure (its default too: a rollout added or removed by an edit does
	// not rewrite every cluster's work); nothing else of the rollout
	// applies there.
	share = share.DeepCopy()
	share.UnreachableAfter = &metav1.Duration{Duration: p.Spec.Rollout.GetUnreachableAfter()}
	// The apply policy goes with it: the cluster's nodes wait for their
	// gates and windows as the hub profile says (an edit of the policy
	// rewrites every cluster's work).
	if p.Spec.Rollout != nil && p.Spec.Rollout.Apply != nil {
		share.Apply = p.Spec.Rollout.Apply.DeepCopy()
	}
	cp.Spec.HubAssignment = share
	m, err := manifest(cp)
	if err != nil {
		return nil, err
	}
	manifests = append(manifests, m)
	return &workv1.ManifestWork{
		TypeMeta: metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWork"},
		ObjectMeta: metav1.ObjectMeta{Name: WorkName(p.Name), Namespace: cluster,
			Labels:      map[string]string{ManagedByLabel: ManagedBy},
			Annotations: map[string]string{ProfileAnnotation: p.Name}},
		Spec: workv1.ManifestWorkSpec{
			Workload:        workv1.ManifestsTemplate{Manifests: manifests},
			ManifestConfigs: configs,
		},
	}, nil
}

// CopyRevision is the revision whose content a cluster's copy carries:
// current when the share names it (a vehicle of the cluster moves to it),
// else the share's other revision named last, else its stable revision,
// else (nothing placed yet) current.
func CopyRevision(share *v1alpha1.HubAssignment, current string) string {
	for _, a := range share.Assignments {
		if a.Revision == current {
			return current
		}
	}
	if n := len(share.Assignments); n > 0 {
		return share.Assignments[n-1].Revision
	}
	if share.Stable != "" {
		return share.Stable
	}
	return current
}

// EquivalentWork reports whether the cluster's work w, written for an
// earlier share, gives every vehicle of the cluster the hub knows
// (vehicles, at least one) the revision share gives it, and is otherwise
// the work share would make (content, revisions carried, unreachableAfter,
// apply, liveness): the same share said another way, e.g. the rollout's
// revision named for every vehicle against the same revision made stable
// at the end of a rollout. Keeping it changes nothing a known vehicle
// renders; a vehicle the cluster has not reported yet gets w's stable
// revision until its first report, which makes the work differ.
func EquivalentWork(p *v1alpha1.NetTuningProfile, cluster, namespace string, share *v1alpha1.HubAssignment, contents Contents,
	w *workv1.ManifestWork, vehicles []string) bool {
	if len(vehicles) == 0 || w == nil {
		return false
	}
	old, err := ShareOf(w, p.Name)
	if err != nil {
		return false
	}
	was, is := old.RevisionFor(), share.RevisionFor()
	for _, v := range vehicles {
		if was(v) != is(v) {
			return false
		}
	}
	kept := *share
	kept.Stable, kept.Assignments = old.Stable, old.Assignments
	alt, err := Work(p, cluster, namespace, &kept, contents)
	if err != nil {
		return false
	}
	return SameSpec(alt, w)
}

// ShareOf reads the cluster's share of the hub's decision back from the
// profile's copy that work w carries (its spec.hubAssignment): where the
// hub keeps which vehicle of the cluster has which revision (the hub
// profile's status names no vehicle).
func ShareOf(w *workv1.ManifestWork, profile string) (*v1alpha1.HubAssignment, error) {
	for _, m := range w.Spec.Workload.Manifests {
		var cp v1alpha1.NetTuningProfile
		if err := json.Unmarshal(m.Raw, &cp); err != nil {
			return nil, fmt.Errorf("work %s/%s: %w", w.Namespace, w.Name, err)
		}
		if cp.Kind == "NetTuningProfile" && cp.Name == profile && cp.Spec.HubAssignment != nil {
			return cp.Spec.HubAssignment, nil
		}
	}
	return nil, fmt.Errorf("work %s/%s carries no copy of profile %s with a hubAssignment", w.Namespace, w.Name, profile)
}

func manifest(o runtime.Object) (workv1.Manifest, error) {
	raw, err := json.Marshal(o)
	if err != nil {
		return workv1.Manifest{}, err
	}
	return workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}}, nil
}

// SameSpec reports whether two works place the same manifests with the same
// configuration and delete option, comparing the manifests as JSON values
// (the API server hands them back with their keys in another order). The
// add-on manager's works are compared alike.
func SameSpec(a, b *workv1.ManifestWork) bool {
	if len(a.Spec.Workload.Manifests) != len(b.Spec.Workload.Manifests) ||
		!reflect.DeepEqual(a.Spec.ManifestConfigs, b.Spec.ManifestConfigs) ||
		!reflect.DeepEqual(a.Spec.DeleteOption, b.Spec.DeleteOption) {
		return false
	}
	for i := range a.Spec.Workload.Manifests {
		var x, y any
		if json.Unmarshal(a.Spec.Workload.Manifests[i].Raw, &x) != nil || json.Unmarshal(b.Spec.Workload.Manifests[i].Raw, &y) != nil {
			return false
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
