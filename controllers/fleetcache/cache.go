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

package fleetcache

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
)

// Options is the controller's informer cache: only its own revisions
// in namespace, and every cached object trimmed to
// what the controllers read (TrimForCache), so that memory grows with the
// fleet by a few hundred bytes a node, not by whole Node objects.
func Options(namespace string) cache.Options {
	return cache.Options{
		DefaultTransform: TrimForCache,
		ByObject: map[client.Object]cache.ByObject{
			// Only the controller's own revisions.
			&appsv1.ControllerRevision{}: {Namespaces: map[string]cache.Config{namespace: {}}, Field: fields.Everything()},
		},
	}
}

// TrimForCache is the cache's transform: it drops what no controller reads,
// and the controllers never write a cached object back whole (they patch
// the fields they own, with merge patches computed between two copies of
// the trimmed object, so what is dropped here is never in a patch). Every
// object keeps its identity (name, namespace, uid, resourceVersion,
// generation, timestamps) and loses metadata.managedFields. Strings that
// repeat across the fleet (label keys and common values, condition types
// and reasons, profile and revision names) are interned: 30,000 objects
// share one copy.
//   - Node: labels (interned); of the annotations only the nettune.io/ ones
//     (one map shared by the nodes that have the same ones);
//     of spec and status only the InternalIP addresses
//     (render.NodeFromCore reads labels, the LAN annotations and the first
//     InternalIP; the owner reference of a NodeNetTuning needs the name and
//     uid). A kubelet's Node carries its images, capacity and conditions,
//     several kilobytes each.
//   - NodeNetTuning: spec.revision and spec.profiles (the planner and
//     finalizer read the profiles); the rest of the spec only when
//     spec.revision is not the hash of the spec (trimSpecBody: the renderer
//     compares revisions, or whole specs when the body is kept); of the
//     status observedGeneration, appliedRevision, lastHeartbeatTime, kernel
//     (one copy shared by the nodes that report the same) and only the
//     conditions fleetmodel.NodeReport and NodeDeferred read (Verified,
//     RolledBack, Degraded, Deferred) with only their type, status,
//     observedGeneration and reason, and a True Deferred's transition time
//     (one slice shared by the nodes that report the same); of status.gate
//     its state and pendingRevision; spec.applyPolicy always. Gone:
//     status.items and the condition messages (read by people and the
//     kubectl plugin, from the API server), the other conditions,
//     driftRepairs, metadata.ownerReferences (the garbage collector's).
//
// A controller that needs more of these objects must read it here first
// (TestTrimForCacheKeepsWhatControllersRead guards the readers of today).
func TrimForCache(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		m.SetNamespace(intern(m.GetNamespace()))
	}
	switch o := obj.(type) {
	case *corev1.Node:
		trimNode(o)
	case *v1alpha1.NodeNetTuning:
		trimNodeNetTuning(o)
	}
	return obj, nil
}

func trimNode(o *corev1.Node) {
	o.Labels = internLabels(o.Labels, o.Name, nil)
	o.Annotations = sharedMap(internLabels(o.Annotations, o.Name, func(k string) bool { return strings.HasPrefix(k, "nettune.io/") }))
	o.OwnerReferences = nil
	var addrs []corev1.NodeAddress
	n := 0
	for _, a := range o.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			n++
		}
	}
	if n > 0 {
		addrs = make([]corev1.NodeAddress, 0, n)
		for _, a := range o.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.Address})
			}
		}
	}
	o.Spec = corev1.NodeSpec{}
	o.Status = corev1.NodeStatus{Addresses: addrs}
}

// readConditions are the NodeNetTuning conditions fleetmodel.NodeReport
// reads.
var readConditions = []string{v1alpha1.ConditionVerified, v1alpha1.ConditionRolledBack, v1alpha1.ConditionDegraded, v1alpha1.ConditionDeferred}

func trimNodeNetTuning(o *v1alpha1.NodeNetTuning) {
	o.OwnerReferences = nil
	o.Labels = internLabels(o.Labels, o.Name, nil)
	o.Annotations = nil
	trimSpecBody(o) // first: a dropped body's strings need no interning

	spec := &o.Spec
	for i := range spec.Profiles {
		p := &spec.Profiles[i]
		p.Name, p.Revision = intern(p.Name), intern(p.Revision)
	}
	for i := range spec.Routes {
		r := &spec.Routes[i]
		r.Device, r.Peer, r.Profile = intern(r.Device), intern(r.Peer), intern(r.Profile)
	}
	for i := range spec.Peers {
		spec.Peers[i].Host = intern(spec.Peers[i].Host)
	}
	for i := range spec.Sysctls {
		s := &spec.Sysctls[i]
		s.Name, s.Value = intern(s.Name), intern(s.Value)
	}
	for i := range spec.Interfaces {
		spec.Interfaces[i].Name = intern(spec.Interfaces[i].Name)
	}

	st := &o.Status
	st.Items = nil
	st.DriftRepairs = 0
	if st.AppliedRevision == spec.Revision {
		st.AppliedRevision = spec.Revision // one string, not two
	}
	n := 0
	for _, c := range st.Conditions {
		if conditionType(c.Type) != "" {
			n++
		}
	}
	var conds []metav1.Condition
	if n > 0 {
		conds = make([]metav1.Condition, 0, n)
		for _, c := range st.Conditions {
			if t := conditionType(c.Type); t != "" {
				cc := metav1.Condition{Type: t, Status: conditionStatus(c.Status),
					ObservedGeneration: c.ObservedGeneration, Reason: intern(c.Reason)}
				if t == v1alpha1.ConditionDeferred && c.Status == metav1.ConditionTrue {
					// fleetmodel.NodeDeferred: since when a vehicle waits
					// (only then: the slice stays shared otherwise).
					cc.LastTransitionTime = c.LastTransitionTime
				}
				conds = append(conds, cc)
			}
		}
	}
	st.Conditions = sharedConditions(conds)
	st.Kernel = sharedKernel(st.Kernel)
	if g := st.Gate; g != nil {
		// The gate's state and what waits (fleetmodel.NodeDeferred, canary
		// selection); not its reason or times.
		st.Gate = &v1alpha1.ApplyGateStatus{State: g.State, PendingRevision: g.PendingRevision}
		if g.PendingRevision == spec.Revision {
			st.Gate.PendingRevision = spec.Revision
		}
	}
}

// specBodyTrimmedAnnotation marks, in the cache only, a NodeNetTuning whose
// spec body (routes, sysctls, interfaces, peers) was dropped because its
// spec.revision is the content hash of its spec (revision.Hash, the
// renderer's own): that revision then stands for the body, and comparing
// revisions is comparing bodies. It is never written: the renderer replaces
// a spec whole (specReplace), it does not patch the cached object's
// metadata.
const specBodyTrimmedAnnotation = "nettune.io/cached-spec-body-trimmed"

// trimmedAnnotations is the one annotation map every trimmed NodeNetTuning
// in the cache shares (cached objects are read only).
var trimmedAnnotations = map[string]string{specBodyTrimmedAnnotation: "true"}

// trimSpecBody drops o's spec body when its revision is the hash of its
// spec, as every spec the renderer wrote is: at 30,000 nodes the bodies were
// about a third of the cache. A spec edited by hand (its revision no longer
// its hash) is kept whole, so the renderer's comparison sees the edit and
// writes the spec back.
func trimSpecBody(o *v1alpha1.NodeNetTuning) {
	spec := o.Spec
	want := spec.Revision
	spec.Revision, spec.ApplyPolicy = "", nil // the renderer hashes without the policy; it stays in the cache
	if want == "" || revision.Hash(spec) != want {
		return
	}
	o.Spec.Routes, o.Spec.Sysctls, o.Spec.Interfaces, o.Spec.Peers = nil, nil, nil, nil
	o.Annotations = trimmedAnnotations
}

// specBodyTrimmed reports whether the cache dropped nnt's spec body
// (trimSpecBody): its spec.revision then stands for the body.
func specBodyTrimmed(nnt *v1alpha1.NodeNetTuning) bool {
	return nnt.Annotations[specBodyTrimmedAnnotation] == "true"
}

// conditionType is t as the constant of a condition NodeReport reads ("":
// another condition).
func conditionType(t string) string {
	for _, c := range readConditions {
		if t == c {
			return c
		}
	}
	return ""
}

// conditionStatus is s as the constant of a condition status (interned when
// it is none of them).
func conditionStatus(s metav1.ConditionStatus) metav1.ConditionStatus {
	for _, c := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
		if s == c {
			return c
		}
	}
	return metav1.ConditionStatus(intern(string(s)))
}

// internLabels is m with only the keys keep passes (nil: every key), keys
// and values interned (a value equal to the object's name shares its
// string); nil when nothing is left.
func internLabels(m map[string]string, name string, keep func(string) bool) map[string]string {
	n := 0
	for k := range m {
		if keep == nil || keep(k) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for k, v := range m {
		if keep != nil && !keep(k) {
			continue
		}
		if v == name {
			v = name
		} else {
			v = intern(v)
		}
		out[intern(k)] = v
	}
	return out
}

// internTable holds one copy of each string it was given, up to max of
// them. Past max, strings are kept as they come (no sharing, no growth);
// it is never emptied, since a string no object holds any more costs only
// its entry.
type internTable struct {
	mu  sync.Mutex
	m   map[string]string
	max int
}

// get returns the table's copy of s.
func (t *internTable) get(s string) string {
	if s == "" {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[s]; ok {
		return c
	}
	if len(t.m) >= t.max {
		return s
	}
	if t.m == nil {
		t.m = map[string]string{}
	}
	s = strings.Clone(s)
	t.m[s] = s
	return s
}

// shareTable holds one value per key, up to max of them (past max, values
// are kept as they come). The cache uses it for small maps and slices that
// repeat across the fleet: the values it returns are shared, read only as
// every cached object is.
type shareTable[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

// get returns the table's value for key, v when key is new.
func (t *shareTable[V]) get(key string, v V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[key]; ok {
		return c
	}
	if len(t.m) >= t.max {
		return v
	}
	if t.m == nil {
		t.m = map[string]V{}
	}
	t.m[key] = v
	return v
}

// sharedMap is the cache's copy of m, a Node's nettune.io/ annotations: a
// one-entry map takes about 300 bytes, and nettune.io/lan-device is the same
// on most of a fleet's nodes (m itself when empty or over 4 entries).
func sharedMap(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > 4 {
		return m
	}
	var key strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		key.WriteString(k)
		key.WriteByte(0)
		key.WriteString(m[k])
		key.WriteByte(0)
	}
	return sharedMaps.get(key.String(), m)
}

// sharedConditions is the cache's copy of conds, a NodeNetTuning's trimmed
// conditions (type, status, observedGeneration, reason): most of a fleet's
// nodes report the same ones, about 400 bytes each.
func sharedConditions(conds []metav1.Condition) []metav1.Condition {
	if len(conds) == 0 {
		return conds
	}
	var key strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&key, "%s\x00%s\x00%d\x00%s\x00", c.Type, c.Status, c.ObservedGeneration, c.Reason)
	}
	return sharedConds.get(key.String(), conds)
}

// sharedKernel is the cache's copy of k, a NodeNetTuning's reported kernel:
// a fleet runs a few kernel builds, about 200 bytes each per node otherwise.
func sharedKernel(k *v1alpha1.KernelFeatures) *v1alpha1.KernelFeatures {
	if k == nil {
		return nil
	}
	key := strings.Join([]string{k.Release, k.Machine, strings.Join(k.TCPInfoCounters, ","), strings.Join(k.CongestionControls, ",")}, "\x00")
	return sharedKernels.get(key, k)
}

// sharedMaps, sharedConds and sharedKernels are the cache's tables of Node
// annotation maps, NodeNetTuning conditions and reported kernels.
var (
	sharedMaps    = &shareTable[map[string]string]{max: 1 << 10}
	sharedConds   = &shareTable[[]metav1.Condition]{max: 1 << 12}
	sharedKernels = &shareTable[*v1alpha1.KernelFeatures]{max: 1 << 8}
)

// interned is the cache's table: the vocabulary of a fleet (label keys,
// vehicle and host names, hardware, profile and revision names, condition
// reasons) is a few thousand strings at 30,000 nodes (the per-node revision
// hashes are not interned); 16,384 entries take at most about 2 MB.
var interned = &internTable{max: 1 << 14}

// intern returns the cache table's copy of s.
func intern(s string) string { return interned.get(s) }

// SameSpec reports whether the cached nnt already holds spec, a rendered
// spec (its revision the hash of its content). When the cache dropped the
// body (specBodyTrimmed), the cached revision was the hash of the body
// stored, so equal revisions are equal specs; otherwise the specs are
// compared whole.
func SameSpec(nnt *v1alpha1.NodeNetTuning, spec v1alpha1.NodeNetTuningSpec) bool {
	if specBodyTrimmed(nnt) {
		return nnt.Spec.Revision == spec.Revision && apiequality.Semantic.DeepEqual(nnt.Spec.ApplyPolicy, spec.ApplyPolicy)
	}
	return apiequality.Semantic.DeepEqual(nnt.Spec, spec)
}
