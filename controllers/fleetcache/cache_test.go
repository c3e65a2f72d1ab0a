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
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/render"
	"github.com/nettune/nettune/controllers/revision"
)

// TestTrimForCache: the cache keeps of a kubelet's Node only what rendering
// reads (the rendered view is unchanged, the rest is gone), and of a
// NodeNetTuning everything the controllers read (the report is unchanged)
// but the per-item results and managedFields.
func TestTrimForCache(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "av-1-h0", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{v1alpha1.DefaultVehicleLabel: "av-1", "nettune.io/host": "h0"},
			Annotations: map[string]string{v1alpha1.LANDeviceAnnotation: "eth1", "node.alpha.kubernetes.io/ttl": "0",
				"flannel.alpha.coreos.com/backend-data": `{"VNI":1}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.42.0.0/24", ProviderID: "k3s://av-1-h0"},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "av-1-h0"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:     []corev1.ContainerImage{{Names: []string{"docker.io/library/nettune-agent:dev"}, SizeBytes: 1 << 24}},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.36.0+k3s1"},
		},
	}
	before := render.NodeFromCore(node)
	got, err := TrimForCache(node.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := got.(*corev1.Node)
	if after := render.NodeFromCore(trimmed); !reflect.DeepEqual(before, after) {
		t.Fatalf("rendered view changed: %+v -> %+v", before, after)
	}
	if trimmed.Name != node.Name || trimmed.UID != node.UID || trimmed.ResourceVersion != "7" || !reflect.DeepEqual(trimmed.Labels, node.Labels) {
		t.Fatalf("identity or labels lost: %+v", trimmed.ObjectMeta)
	}
	if len(trimmed.Annotations) != 1 || trimmed.ManagedFields != nil || len(trimmed.Status.Images) != 0 ||
		len(trimmed.Status.Conditions) != 0 || trimmed.Status.Capacity != nil || trimmed.Spec.PodCIDR != "" || trimmed.Status.NodeInfo.KubeletVersion != "" ||
		len(trimmed.Status.Addresses) != 1 {
		t.Fatalf("not trimmed: %+v", trimmed)
	}

	now := metav1.Now()
	nnt := &v1alpha1.NodeNetTuning{
		ObjectMeta: metav1.ObjectMeta{Name: "av-1-h0", Generation: 3, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "nettune-agent"}},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "av-1-h0", UID: "u1"}}},
		Spec: v1alpha1.NodeNetTuningSpec{Revision: "r3", Profiles: []v1alpha1.SourceProfile{{Name: "p", Revision: "p-1"}}},
		Status: v1alpha1.NodeNetTuningStatus{ObservedGeneration: 3, AppliedRevision: "r3", LastHeartbeatTime: &now, DriftRepairs: 2,
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionApplied, Status: metav1.ConditionTrue, ObservedGeneration: 3, Reason: "Applied", Message: "revision r3 is in force"},
				{Type: v1alpha1.ConditionVerified, Status: metav1.ConditionTrue, ObservedGeneration: 3, Reason: "Verified", Message: "every item read back as desired",
					LastTransitionTime: now}},
			Items: []v1alpha1.ItemResult{{Kind: "Route", Name: "10.0.0.2/32", State: "Verified"}}},
	}
	v0, f0, s0 := fleetmodel.NodeReport(nnt)
	got, err = TrimForCache(nnt.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	tn := got.(*v1alpha1.NodeNetTuning)
	if v, f, s := fleetmodel.NodeReport(tn); v != v0 || f != f0 || !s.Equal(s0) || !v0 {
		t.Fatalf("report changed: %v %v %v -> %v %v %v", v0, f0, s0, v, f, s)
	}
	if !reflect.DeepEqual(tn.Spec, nnt.Spec) || tn.Status.Items != nil || tn.ManagedFields != nil || tn.OwnerReferences != nil {
		t.Fatalf("NodeNetTuning trimmed wrongly: %+v", tn)
	}
	// A spec as the renderer writes it loses its body in the cache; its
	// revision stands for it.
	rendered := benchNodeNetTuning(1, 0)
	if len(rendered.Spec.Routes) == 0 || len(rendered.Spec.Peers) == 0 {
		t.Fatalf("bench spec has no routes or peers: %+v", rendered.Spec)
	}
	got, err = TrimForCache(rendered.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	tr := got.(*v1alpha1.NodeNetTuning)
	if !specBodyTrimmed(tr) || tr.Spec.Routes != nil || tr.Spec.Peers != nil || tr.Spec.Revision != rendered.Spec.Revision ||
		!reflect.DeepEqual(tr.Spec.Profiles, rendered.Spec.Profiles) {
		t.Fatalf("rendered spec not trimmed to its revision and profiles: %+v", tr.Spec)
	}
	if !SameSpec(tr, rendered.Spec) || SameSpec(tr, benchNodeNetTuning(1, 1).Spec) {
		t.Fatalf("trimmed spec compares wrongly")
	}

	want := []metav1.Condition{{Type: v1alpha1.ConditionVerified, Status: metav1.ConditionTrue, ObservedGeneration: 3, Reason: "Verified"}}
	if !reflect.DeepEqual(tn.Status.Conditions, want) || tn.Status.DriftRepairs != 0 {
		t.Fatalf("conditions kept: %+v, want %+v", tn.Status, want)
	}
}

// trimReader is everything a controller reads from one cached object: the
// inputs of fleetmodel.NodeReport, AssignedRevision and the renderer's spec
// comparison for a NodeNetTuning; of render.NodeFromCore and the owner
// reference for a Node.
type trimReader struct {
	Verified, Failed bool
	Seen             time.Time
	// fleetmodel.NodeDeferred, and the gate's state (canary selection).
	Deferred        bool
	DeferredSince   time.Time
	DeferredReason  string
	GateState       v1alpha1.GateState
	ApplyPolicy     *v1alpha1.NodeApplyPolicy
	Assigned        map[string]string
	Revision        string
	Profiles        []v1alpha1.SourceProfile
	Same            []bool // sameSpec against each of specCandidates
	Generation      int64
	Rendered        *render.Node
	Owner           string
	ResourceVersion string
}

// trimRead is what the controllers read from o; cands are the specs the
// renderer may compare a NodeNetTuning's with (specCandidates).
func trimRead(o any, cands []v1alpha1.NodeNetTuningSpec) trimReader {
	switch o := o.(type) {
	case *v1alpha1.NodeNetTuning:
		var r trimReader
		r.Verified, r.Failed, r.Seen = fleetmodel.NodeReport(o)
		r.Deferred, r.DeferredSince, r.DeferredReason = fleetmodel.NodeDeferred(o)
		if o.Status.Gate != nil {
			r.GateState = o.Status.Gate.State
		}
		r.ApplyPolicy = o.Spec.ApplyPolicy
		r.Assigned = map[string]string{}
		for _, p := range []string{"p", "q", "absent"} {
			r.Assigned[p] = fleetmodel.AssignedRevision(o, p)
		}
		for _, c := range cands {
			r.Same = append(r.Same, SameSpec(o, c))
		}
		r.Revision, r.Profiles, r.Generation, r.ResourceVersion = o.Spec.Revision, o.Spec.Profiles, o.Generation, o.ResourceVersion
		return r
	case *corev1.Node:
		n := render.NodeFromCore(o)
		return trimReader{Rendered: &n, Owner: o.Name + "/" + string(o.UID), ResourceVersion: o.ResourceVersion}
	}
	panic(fmt.Sprintf("no reader of %T", o))
}

// handEdit is the sysctl trimCases adds to a rendered spec, keeping its
// revision, to stand for a NodeNetTuning edited by hand.
var handEdit = v1alpha1.Sysctl{Name: "net.core.edited_by_hand", Value: "1"}

// rehash is spec with its revision set as the renderer sets it (the hash
// of the rest).
func rehash(spec v1alpha1.NodeNetTuningSpec) v1alpha1.NodeNetTuningSpec {
	policy := spec.ApplyPolicy
	spec.Revision, spec.ApplyPolicy = "", nil
	spec.Revision = revision.Hash(spec)
	spec.ApplyPolicy = policy
	return spec
}

// specCandidates are the specs the renderer may hold against o's, as the
// API server sent it: o's spec itself; the spec the renderer wrote before a
// hand edit (same revision, the edit undone), which for an unedited spec is
// the same; and a different rendered spec.
func specCandidates(o any) []v1alpha1.NodeNetTuningSpec {
	nnt, ok := o.(*v1alpha1.NodeNetTuning)
	if !ok {
		return nil
	}
	asSent := *nnt.Spec.DeepCopy()
	written := *nnt.Spec.DeepCopy()
	written.Sysctls = slices.DeleteFunc(written.Sysctls, func(s v1alpha1.Sysctl) bool { return s == handEdit })
	other := *nnt.Spec.DeepCopy()
	other.Sysctls = append(other.Sysctls, v1alpha1.Sysctl{Name: "net.ipv4.tcp_slow_start_after_idle", Value: "0"})
	return []v1alpha1.NodeNetTuningSpec{asSent, written, rehash(other)}
}

// trimCases are objects as the API server sends them, varied in everything
// a reader may look at: every condition of the agent's vocabulary with
// every status, current or stale, environment and revision reasons; the
// heartbeat there or not; Nodes with and without the LAN annotations and
// addresses of every type.
func trimCases(seed int64, n int) []any {
	rng := rand.New(rand.NewSource(seed))
	pick := func(s ...string) string { return s[rng.Intn(len(s))] }
	types := []string{v1alpha1.ConditionApplied, v1alpha1.ConditionVerified, v1alpha1.ConditionDrifted,
		v1alpha1.ConditionRolledBack, v1alpha1.ConditionDegraded, v1alpha1.ConditionDeferred}
	reasons := []string{"Applied", "Verified", "AsDesired", "Committed", "NoDrift", "ProbeFailed", "GateClosed", "OutsideWindow",
		v1alpha1.ReasonStateUnwritable, v1alpha1.ReasonInterrupted}
	var out []any
	for i := range n {
		gen := int64(1 + rng.Intn(3))
		nnt := &v1alpha1.NodeNetTuning{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("av-%d-h%d", i/5, i%5), UID: types2UID(i), ResourceVersion: fmt.Sprint(1000 + i), Generation: gen,
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "nettune-agent"}},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "x", UID: "y"}}},
			Spec: v1alpha1.NodeNetTuningSpec{Revision: pick("r1", "r2"),
				Profiles: []v1alpha1.SourceProfile{{Name: "p", Revision: pick("p-1", "p-2")}, {Name: pick("q", "other"), Revision: "q-1"}},
				Routes:   []v1alpha1.NodeRoute{{Destination: "10.0.0.2/32", Device: "eth1", Peer: "h1", Profile: "p", Parameters: v1alpha1.TCPParameters{Initcwnd: ptrTo(int32(30))}}},
				Peers:    []v1alpha1.Peer{{Host: "h1", Address: "10.0.0.2", ProbePort: 9102}},
				Sysctls:  []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_no_metrics_save", Value: "0"}}},
			Status: v1alpha1.NodeNetTuningStatus{ObservedGeneration: gen - int64(rng.Intn(2)), AppliedRevision: pick("r1", "r2", ""),
				DriftRepairs: int64(rng.Intn(3)),
				Items:        []v1alpha1.ItemResult{{Kind: "Route", Name: "10.0.0.2/32", State: "Verified"}}},
		}
		if rng.Intn(3) == 0 {
			nnt.Spec.ApplyPolicy = &v1alpha1.NodeApplyPolicy{Gate: v1alpha1.ApplyGateRequired, Immediate: pick("", "rollback of profile p to p-1")}
		}
		// A third as the renderer writes them (the revision the hash of the
		// spec; the cache drops the body), a third of those then edited by
		// hand, the rest with revisions of another writer.
		switch rng.Intn(3) {
		case 0:
			if rng.Intn(2) == 0 {
				nnt.Spec.Routes[0].Parameters.Initcwnd = nil
				nnt.Spec.Sysctls = nil
			}
			nnt.Spec = rehash(nnt.Spec)
			nnt.Status.AppliedRevision = pick(nnt.Spec.Revision, "r1", "")
		case 1:
			nnt.Spec = rehash(nnt.Spec)
			nnt.Spec.Sysctls = append(nnt.Spec.Sysctls, handEdit)
		}
		if rng.Intn(4) > 0 {
			hb := metav1.NewTime(time.Unix(1_790_000_000+int64(rng.Intn(1000)), 0))
			nnt.Status.LastHeartbeatTime = &hb
		}
		for _, ct := range rng.Perm(len(types))[:rng.Intn(len(types)+1)] {
			nnt.Status.Conditions = append(nnt.Status.Conditions, metav1.Condition{Type: types[ct],
				Status:             metav1.ConditionStatus(pick("True", "False", "Unknown")),
				ObservedGeneration: gen - int64(rng.Intn(2)), Reason: pick(reasons...), Message: "message " + fmt.Sprint(i),
				LastTransitionTime: metav1.NewTime(time.Unix(1_790_000_000, 0))})
		}
		if rng.Intn(2) == 0 {
			nnt.Status.Gate = &v1alpha1.ApplyGateStatus{State: v1alpha1.GateState(pick("Open", "Closed", "NotConfigured")), Reason: "driving",
				PendingRevision: pick(nnt.Spec.Revision, "r1", ""), Since: &metav1.Time{Time: time.Unix(1_790_000_000, 0)}}
		}
		out = append(out, nnt)

		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nnt.Name, UID: types2UID(i), ResourceVersion: fmt.Sprint(2000 + i),
			Labels: map[string]string{v1alpha1.DefaultVehicleLabel: fmt.Sprintf("av-%d", i/5), v1alpha1.DefaultHostLabel: fmt.Sprintf("h%d", i%5),
				"kubernetes.io/hostname": nnt.Name, "kubernetes.io/os": "linux"}}}
		if rng.Intn(2) == 0 {
			node.Annotations = map[string]string{v1alpha1.LANAddressAnnotation: pick(" 10.1.0.1 ", "10.1.0.2"), "other": "x"}
		}
		if rng.Intn(2) == 0 {
			node.Annotations = map[string]string{v1alpha1.LANDeviceAnnotation: pick("eth1", " eth2"), "k3s.io/node-args": "[]"}
		}
		for range rng.Intn(4) {
			node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{
				Type:    corev1.NodeAddressType(pick(string(corev1.NodeHostName), string(corev1.NodeInternalIP), string(corev1.NodeExternalIP))),
				Address: pick("10.0.0.1", " ", "10.0.0.3", "av-host")})
		}
		out = append(out, node)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

func types2UID(i int) types.UID { return types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)) }

// trimLosses lists the objects whose reader inputs trim changed (each
// trimmed from a JSON round trip, as the cache gets them).
func trimLosses(t *testing.T, trim func(any) (any, error), objs []any) []string {
	t.Helper()
	var lost []string
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		fresh := reflect.New(reflect.TypeOf(o).Elem()).Interface()
		if err := json.Unmarshal(b, fresh); err != nil {
			t.Fatal(err)
		}
		got, err := trim(fresh)
		if err != nil {
			t.Fatal(err)
		}
		cands := specCandidates(o)
		if want, have := trimRead(o, cands), trimRead(got, cands); !reflect.DeepEqual(want, have) {
			lost = append(lost, fmt.Sprintf("%T %s: %+v -> %+v", o, string(b), want, have))
		}
	}
	return lost
}

// TestTrimForCacheKeepsWhatControllersRead: every reader's inputs are the
// same from a trimmed object as from the object as sent, over objects that
// vary in everything those readers look at; and the check fails when the
// trim drops any one of them.
func TestTrimForCacheKeepsWhatControllersRead(t *testing.T) {
	objs := trimCases(1, 400)
	bodies := map[bool]int{} // body dropped -> objects
	for _, o := range objs {
		if n, ok := o.(*v1alpha1.NodeNetTuning); ok {
			got, _ := TrimForCache(n.DeepCopy())
			bodies[specBodyTrimmed(got.(*v1alpha1.NodeNetTuning))]++
		}
	}
	if bodies[true] < 50 || bodies[false] < 50 {
		t.Fatalf("cases do not exercise both comparisons: %d spec bodies dropped, %d kept", bodies[true], bodies[false])
	}
	if lost := trimLosses(t, TrimForCache, objs); len(lost) > 0 {
		t.Fatalf("%d object(s) read differently once trimmed, e.g. %s", len(lost), lost[0])
	}
	// Each over-trim below drops one field a controller reads: the check
	// must see it.
	more := func(drop func(any)) func(any) (any, error) {
		return func(o any) (any, error) {
			o, err := TrimForCache(o)
			drop(o)
			return o, err
		}
	}
	nntDrop := func(f func(*v1alpha1.NodeNetTuning)) func(any) (any, error) {
		return more(func(o any) {
			if n, ok := o.(*v1alpha1.NodeNetTuning); ok {
				f(n)
			}
		})
	}
	conds := func(f func(*metav1.Condition)) func(any) (any, error) {
		return nntDrop(func(n *v1alpha1.NodeNetTuning) {
			for i := range n.Status.Conditions {
				f(&n.Status.Conditions[i])
			}
		})
	}
	onlyType := func(keep string) func(any) (any, error) {
		return nntDrop(func(n *v1alpha1.NodeNetTuning) {
			var cs []metav1.Condition
			for _, c := range n.Status.Conditions {
				if c.Type != keep {
					cs = append(cs, c)
				}
			}
			n.Status.Conditions = cs
		})
	}
	overTrims := map[string]func(any) (any, error){
		"condition reason":             conds(func(c *metav1.Condition) { c.Reason = "" }),
		"condition observedGeneration": conds(func(c *metav1.Condition) { c.ObservedGeneration = 0 }),
		"condition status":             conds(func(c *metav1.Condition) { c.Status = "" }),
		"Verified condition":           onlyType(v1alpha1.ConditionVerified),
		"RolledBack condition":         onlyType(v1alpha1.ConditionRolledBack),
		"Degraded condition":           onlyType(v1alpha1.ConditionDegraded),
		"Deferred condition":           onlyType(v1alpha1.ConditionDeferred),
		"condition transition time":    conds(func(c *metav1.Condition) { c.LastTransitionTime = metav1.Time{} }),
		"status.gate":                  nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Status.Gate = nil }),
		"status.gate.pendingRevision": nntDrop(func(n *v1alpha1.NodeNetTuning) {
			if n.Status.Gate != nil {
				n.Status.Gate.PendingRevision = ""
			}
		}),
		"spec.applyPolicy":          nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Spec.ApplyPolicy = nil }),
		"status.observedGeneration": nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Status.ObservedGeneration = 0 }),
		"status.appliedRevision":    nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Status.AppliedRevision = "" }),
		"status.lastHeartbeatTime":  nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Status.LastHeartbeatTime = nil }),
		"spec.profiles":             nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Spec.Profiles = nil }),
		"spec.routes":               nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Spec.Routes = nil }),
		"spec.peers":                nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Spec.Peers = nil }),
		"spec.sysctls":              nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Spec.Sysctls = nil }),
		"generation":                nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Generation = 0 }),
		"spec.revision":             nntDrop(func(n *v1alpha1.NodeNetTuning) { n.Spec.Revision = "" }),
		"hand-edited spec body (trimmed as if rendered)": nntDrop(func(n *v1alpha1.NodeNetTuning) {
			n.Spec.Routes, n.Spec.Sysctls, n.Spec.Peers = nil, nil, nil
			n.Annotations = trimmedAnnotations
		}),
		"node annotations": more(func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				n.Annotations = nil
			}
		}),
		"node addresses": more(func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				n.Status.Addresses = nil
			}
		}),
		"node labels": more(func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				n.Labels = nil
			}
		}),
		"node uid": more(func(o any) {
			if n, ok := o.(*corev1.Node); ok {
				n.UID = ""
			}
		}),
	}
	for name, trim := range overTrims {
		if lost := trimLosses(t, trim, objs); len(lost) == 0 {
			t.Errorf("dropping the %s went unnoticed", name)
		}
	}
}

// TestTrimForCacheShares: what repeats across the fleet is one string, and
// an interning table stops growing at its cap without changing any string.
func TestTrimForCacheShares(t *testing.T) {
	var nnts []*v1alpha1.NodeNetTuning
	for _, o := range trimCases(2, 20) {
		b, _ := json.Marshal(o)
		switch o.(type) {
		case *v1alpha1.NodeNetTuning:
			n := &v1alpha1.NodeNetTuning{}
			_ = json.Unmarshal(b, n)
			_, _ = TrimForCache(n)
			if len(n.Spec.Routes) > 0 { // body kept (not rendered)
				nnts = append(nnts, n)
			}
		}
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	a, b := nnts[0], nnts[1]
	if !same(a.Spec.Profiles[0].Name, b.Spec.Profiles[0].Name) || !same(a.Spec.Routes[0].Device, b.Spec.Routes[0].Device) {
		t.Errorf("profile names or devices not shared")
	}
	if a.Status.AppliedRevision == a.Spec.Revision && !same(a.Status.AppliedRevision, a.Spec.Revision) {
		t.Errorf("applied revision not shared with spec.revision")
	}
	var revs []*appsv1.ControllerRevision
	for range 2 {
		r := &appsv1.ControllerRevision{}
		_ = json.Unmarshal([]byte(`{"metadata":{"name":"r","namespace":"nettune-system"}}`), r)
		_, _ = TrimForCache(r)
		revs = append(revs, r)
	}
	if !same(revs[0].Namespace, revs[1].Namespace) {
		t.Errorf("namespaces not shared")
	}

	// Nodes with equal nettune.io/ annotations share one map; other
	// annotations do not split them; a different value gets its own map.
	annotated := func(dev string) map[string]string {
		n := benchNode(1, 0)
		n.Annotations = map[string]string{v1alpha1.LANDeviceAnnotation: dev, "node.alpha.kubernetes.io/ttl": "0"}
		b, _ := n.Marshal()
		fresh := &corev1.Node{}
		_ = fresh.Unmarshal(b)
		_, _ = TrimForCache(fresh)
		return fresh.Annotations
	}
	mapOf := func(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }
	e0, e1, lan := annotated("eth0"), annotated("eth0"), annotated("lan1")
	if mapOf(e0) != mapOf(e1) || mapOf(e0) == mapOf(lan) || len(e0) != 1 || lan[v1alpha1.LANDeviceAnnotation] != "lan1" {
		t.Errorf("annotation maps: eth0 %v (%x, %x), lan1 %v (%x)", e0, mapOf(e0), mapOf(e1), lan, mapOf(lan))
	}

	// Nodes that report the same conditions share one slice.
	reported := func(i int) []metav1.Condition {
		b, _ := json.Marshal(benchNodeNetTuning(i, 0))
		n := &v1alpha1.NodeNetTuning{}
		_ = json.Unmarshal(b, n)
		_, _ = TrimForCache(n)
		return n.Status.Conditions
	}
	c0, c1 := reported(1), reported(2)
	if len(c0) != 3 || unsafe.SliceData(c0) != unsafe.SliceData(c1) {
		t.Errorf("equal conditions not shared: %+v, %+v", c0, c1)
	}

	table := &internTable{max: 3}
	for i := range 10 {
		s := fmt.Sprintf("word-%d", i%5)
		if got := table.get(s); got != s {
			t.Fatalf("get(%q) = %q", s, got)
		}
	}
	word := func(i int) string { return fmt.Sprintf("word-%d", i) } // a new string each time
	if len(table.m) != 3 || !same(table.get(word(1)), table.get(word(1))) || same(table.get(word(4)), table.get(word(4))) {
		t.Fatalf("table of %d strings past its cap of 3: %v", len(table.m), table.m)
	}
}

// BenchmarkTrimForCacheHeap reports the heap each cached object takes, as
// the cache gets it (a NodeNetTuning decoded from JSON, a Node from
// protobuf, as the API server sends them) and trimmed, for a node of the
// scale benchmark's fleet (5 hosts a vehicle, the agent's status with five
// conditions and an item per route). Run with
// -benchtime=1x: go test ./controllers/fleetcache -run '^$' -bench TrimForCacheHeap -benchtime 1x.
func BenchmarkTrimForCacheHeap(b *testing.B) {
	const n = 20000
	for _, kind := range []string{"nodenettuning", "node"} {
		for _, trim := range []bool{false, true} {
			name := kind + "/as-sent"
			if trim {
				name = kind + "/trimmed"
			}
			b.Run(name, func(b *testing.B) {
				raw := make([][]byte, n)
				for i := range raw {
					var err error
					switch kind {
					case "nodenettuning":
						raw[i], err = json.Marshal(benchNodeNetTuning(i/5, i%5))
					case "node":
						raw[i], err = benchNode(i/5, i%5).Marshal()
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				for b.Loop() {
					before := heapInUse()
					keep := make([]any, n)
					for i := range raw {
						var o any
						var err error
						switch kind {
						case "nodenettuning":
							nnt := &v1alpha1.NodeNetTuning{}
							err = json.Unmarshal(raw[i], nnt)
							o = nnt
						case "node":
							node := &corev1.Node{}
							err = node.Unmarshal(raw[i])
							o = node
						}
						if err != nil {
							b.Fatal(err)
						}
						if trim {
							o, _ = TrimForCache(o)
						}
						keep[i] = o
					}
					b.ReportMetric(float64(heapInUse()-before)/n, "bytes/object")
					runtime.KeepAlive(keep)
				}
				runtime.KeepAlive(raw)
			})
		}
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// benchNode is host h of vehicle i as the scale benchmark creates it.
func benchNode(i, h int) *corev1.Node {
	v := fmt.Sprintf("av-%05d", i)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-h%d", v, h), UID: types2UID(i*10 + h), ResourceVersion: fmt.Sprint(100000 + i*10 + h),
			CreationTimestamp: metav1.Now(),
			Labels:            map[string]string{v1alpha1.DefaultVehicleLabel: v, v1alpha1.DefaultHostLabel: fmt.Sprintf("h%d", h), v1alpha1.DefaultHardwareLabel: "orin"},
			Annotations:       map[string]string{v1alpha1.LANDeviceAnnotation: "eth0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "scale", Operation: "Update", APIVersion: "v1", FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{".":{},"f:nettune.io/hardware":{},"f:nettune.io/host":{},"f:nettune.io/vehicle":{}}}}`)}}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", (i/256)%256, i%256, h+1)}}},
	}
}

// benchNodeNetTuning is the NodeNetTuning of host h of vehicle i as the
// renderer writes it for the scale benchmark's profile and its simulated
// agent reports it.
func benchNodeNetTuning(i, h int) *v1alpha1.NodeNetTuning {
	lock := true
	spec := &v1alpha1.NetTuningProfileSpec{Defaults: &v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 30, Lock: &lock}, RTOMin: &metav1.Duration{Duration: 10 * time.Millisecond}}}
	var nodes []render.Node
	for k := range 5 {
		nodes = append(nodes, render.NodeFromCore(benchNode(i, k)))
	}
	res := render.Render(nodes[h], nodes, []render.Input{{Profile: "fleet-scale", Revision: "fleet-scale-745d0378df", Spec: spec}})
	node := benchNode(i, h)
	nnt := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: types2UID(1_000_000 + i*10 + h), ResourceVersion: fmt.Sprint(200000 + i*10 + h),
		Generation: 2, CreationTimestamp: metav1.Now(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: &lock, BlockOwnerDeletion: &lock}},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "nettune-controller", Operation: "Update", APIVersion: "nettune.io/v1alpha1", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:ownerReferences":{}},"f:spec":{".":{},"f:peers":{},"f:profiles":{},"f:revision":{},"f:routes":{}}}`)},
			{Manager: "scale", Operation: "Update", APIVersion: "nettune.io/v1alpha1", Subresource: "status", FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:status":{".":{},"f:appliedRevision":{},"f:conditions":{},"f:items":{},"f:lastHeartbeatTime":{},"f:observedGeneration":{}}}`)}}},
		Spec: res.Spec}
	st := &nnt.Status
	st.ObservedGeneration, st.AppliedRevision = 2, nnt.Spec.Revision
	now := metav1.Now()
	st.LastHeartbeatTime = &now
	for _, r := range nnt.Spec.Routes {
		st.Items = append(st.Items, v1alpha1.ItemResult{Kind: "Route", Name: r.Destination, State: "Verified"})
	}
	for _, c := range []metav1.Condition{
		{Type: v1alpha1.ConditionApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "revision " + nnt.Spec.Revision + " is in force"},
		{Type: v1alpha1.ConditionVerified, Status: metav1.ConditionTrue, Reason: "Verified", Message: "every item read back as desired and the local probes passed"},
		{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "AsDesired"},
		{Type: v1alpha1.ConditionRolledBack, Status: metav1.ConditionFalse, Reason: "Committed"},
		{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: "NoDrift", Message: "0 drift repair(s) since the agent started"},
	} {
		c.ObservedGeneration, c.LastTransitionTime = 2, now
		st.Conditions = append(st.Conditions, c)
	}
	return nnt
}
