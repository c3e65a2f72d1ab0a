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

package noderender_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetcache"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/noderender"
	"github.com/nettune/nettune/controllers/render"
	"github.com/nettune/nettune/test/framework/envtest"
)

// startRenderer runs the node renderer alone: the test plays the profile
// reconciler by writing status.assignments itself.
func startRenderer(e *envtest.Fleet) *noderender.Reports {
	t := e.T()
	t.Helper()
	mgr, err := ctrl.NewManager(rest.CopyConfig(e.CP.Config), ctrl.Options{Scheme: e.CP.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: fleetcache.Options(envtest.Namespace)})
	if err != nil {
		t.Fatal(err)
	}
	reports := noderender.NewReports()
	go func() {
		for range reports.Changes {
		}
	}()
	n := &noderender.Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("nettune-controller"),
		Namespace: envtest.Namespace, Reports: reports, SkipNameValidation: true}
	if err := n.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	e.StartManager(mgr)
	return reports
}

// renderWorld is the test's own record of the revisions it stored.
type renderWorld struct {
	t        *testing.T
	e        *envtest.Fleet
	rnd      *rand.Rand
	contents map[string]*v1alpha1.NetTuningProfileSpec // revision -> content
	serial   int
}

func (w *renderWorld) newRevision(profile string, priority int32) string {
	w.serial++
	rto := metav1.Duration{Duration: time.Duration(5+w.rnd.Intn(20)) * time.Millisecond}
	cw := int32(10 + w.rnd.Intn(30))
	spec := &v1alpha1.NetTuningProfileSpec{
		Priority: priority,
		Defaults: &v1alpha1.TCPParameters{RTOMin: &rto, Cwnd: &v1alpha1.Cwnd{Value: cw}},
	}
	if w.rnd.Intn(2) == 0 {
		one := int32(1 + w.rnd.Intn(4))
		spec.HostPairs = []v1alpha1.HostPair{{From: "*", To: "xavier-a", Parameters: &v1alpha1.TCPParameters{Initcwnd: &one}}}
	}
	if w.rnd.Intn(3) == 0 {
		spec.Sysctls = []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_slow_start_after_idle", Value: fmt.Sprint(w.rnd.Intn(2))}}
	}
	name := fmt.Sprintf("%s-r%d", profile, w.serial)
	raw, err := json.Marshal(spec)
	if err != nil {
		w.t.Fatal(err)
	}
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: envtest.Namespace}, Data: runtime.RawExtension{Raw: raw}}
	if err := w.e.Client.Create(w.e.Ctx, cr); err != nil {
		w.t.Fatal(err)
	}
	w.contents[name] = spec
	return name
}

// assign writes a profile's status.assignments: every vehicle gets one of
// revs or nothing, at random.
func (w *renderWorld) assign(p *v1alpha1.NetTuningProfile, vehicles []string, revs []string) {
	byRev := map[string][]string{}
	for _, v := range vehicles {
		if i := w.rnd.Intn(len(revs) + 1); i < len(revs) {
			byRev[revs[i]] = append(byRev[revs[i]], v)
		}
	}
	cur := &v1alpha1.NetTuningProfile{}
	if err := w.e.Client.Get(w.e.Ctx, client.ObjectKeyFromObject(p), cur); err != nil {
		w.t.Fatal(err)
	}
	cur.Status.Assignments = nil
	for _, rev := range slices.Sorted(maps.Keys(byRev)) {
		cur.Status.Assignments = append(cur.Status.Assignments, v1alpha1.RevisionAssignment{Revision: rev, Vehicles: byRev[rev]})
	}
	if err := w.e.Client.Status().Update(w.e.Ctx, cur); err != nil {
		w.t.Fatal(err)
	}
}

// fullRender is what every node's NodeNetTuning must hold: each node
// rendered from scratch from the current nodes and profiles.
func (w *renderWorld) fullRender() (map[string]v1alpha1.NodeNetTuningSpec, error) {
	ctx := w.e.Ctx
	nodes := &corev1.NodeList{}
	if err := w.e.Client.List(ctx, nodes); err != nil {
		return nil, err
	}
	profiles := &v1alpha1.NetTuningProfileList{}
	if err := w.e.Client.List(ctx, profiles); err != nil {
		return nil, err
	}
	var all []render.Node
	for i := range nodes.Items {
		all = append(all, render.NodeFromCore(&nodes.Items[i]))
	}
	out := map[string]v1alpha1.NodeNetTuningSpec{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		var inputs []render.Input
		for _, p := range profiles.Items {
			if !p.DeletionTimestamp.IsZero() {
				continue
			}
			sel := labels.Everything()
			if p.Spec.NodeSelector != nil {
				s, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector.AsMetav1())
				if err != nil {
					return nil, err
				}
				sel = s
			}
			v := n.Labels[v1alpha1.DefaultVehicleLabel]
			if v == "" || !sel.Matches(labels.Set(n.Labels)) {
				continue
			}
			if rev := fleetmodel.AssignmentsByVehicle(p.Status.Assignments)[v]; rev != "" {
				inputs = append(inputs, render.Input{Profile: p.Name, Revision: rev, Spec: w.contents[rev]})
			}
		}
		out[n.Name] = render.Render(render.NodeFromCore(n), all, inputs).Spec
	}
	return out, nil
}

// converged compares every node's NodeNetTuning with the full render; a node
// that renders to nothing may have no NodeNetTuning.
func (w *renderWorld) converged() []string {
	want, err := w.fullRender()
	if err != nil {
		return []string{err.Error()}
	}
	var diffs []string
	for node, spec := range want {
		nnt := &v1alpha1.NodeNetTuning{}
		err := w.e.Client.Get(w.e.Ctx, client.ObjectKey{Name: node}, nnt)
		switch {
		case apierrors.IsNotFound(err):
			if len(spec.Profiles) > 0 {
				diffs = append(diffs, node+": no NodeNetTuning, want profiles "+fmt.Sprint(spec.Profiles))
			}
		case err != nil:
			diffs = append(diffs, node+": "+err.Error())
		case !apiequality.Semantic.DeepEqual(nnt.Spec, spec):
			diffs = append(diffs, fmt.Sprintf("%s: rendered revision %s profiles %v, full render %s profiles %v", node, nnt.Spec.Revision, nnt.Spec.Profiles, spec.Revision, spec.Profiles))
		}
	}
	slices.Sort(diffs)
	return diffs
}

func (w *renderWorld) waitConverged(what string) {
	t := w.t
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var diffs []string
	for time.Now().Before(deadline) {
		if diffs = w.converged(); len(diffs) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("after %s, %d node(s) differ from a full render after 60s:\n  %s", what, len(diffs), strings.Join(diffs, "\n  "))
}

// TestIncrementalRenderMatchesFullRender: the node renderer re-renders only
// the nodes an event can change; after random fleets and random edits
// (assignments moved, addresses and devices changed, hosts moved between
// vehicles, profiles added and deleted, NodeNetTunings deleted or their
// specs edited by hand, nodes added), every NodeNetTuning equals what
// rendering every node from scratch gives.
func TestIncrementalRenderMatchesFullRender(t *testing.T) {
	e := envtest.NewFleet(t)
	startRenderer(e)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	w := &renderWorld{t: t, e: e, rnd: rand.New(rand.NewSource(seed)), contents: map[string]*v1alpha1.NetTuningProfileSpec{}}
	ctx := e.Ctx

	vehicles := []string{"pv-1", "pv-2", "pv-3", "pv-4", "pv-5"}
	for vi, v := range vehicles {
		for hi, host := range []string{"xavier-a", "xavier-b", "xavier-c"}[:2+w.rnd.Intn(2)] {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v + "-" + host,
				Labels:      map[string]string{v1alpha1.DefaultVehicleLabel: v, v1alpha1.DefaultHostLabel: host, v1alpha1.DefaultHardwareLabel: "xavier"},
				Annotations: map[string]string{v1alpha1.LANAddressAnnotation: fmt.Sprintf("10.60.%d.%d", vi+1, hi+11), v1alpha1.LANDeviceAnnotation: "eth0"}}}
			if err := e.Client.Create(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	type prof struct {
		obj  *v1alpha1.NetTuningProfile
		revs []string
	}
	var profiles []*prof
	addProfile := func(name string) {
		prio := int32(w.rnd.Intn(2))
		p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NetTuningProfileSpec{
			Priority: prio, Defaults: &v1alpha1.TCPParameters{RTOMin: &metav1.Duration{Duration: 10 * time.Millisecond}}}}
		if w.rnd.Intn(3) == 0 {
			p.Spec.NodeSelector = &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{v1alpha1.DefaultHostLabel: "xavier-a"}}
		}
		if err := e.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		pr := &prof{obj: p, revs: []string{w.newRevision(name, prio), w.newRevision(name, prio)}}
		w.assign(p, vehicles, pr.revs)
		profiles = append(profiles, pr)
	}
	addProfile("alpha")
	addProfile("beta")
	w.waitConverged("the first assignments")

	nodeNames := func() []string {
		list := &corev1.NodeList{}
		if err := e.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range list.Items {
			out = append(out, n.Name)
		}
		slices.Sort(out)
		return out
	}
	// editByHand edits node's NodeNetTuning spec as a person might, its
	// revision kept: a sysctl added (the renderer must take it out again)
	// or the routes cleared (it must put them back). "": no NodeNetTuning.
	editByHand := func(node string, clearRoutes bool) string {
		nnt := &v1alpha1.NodeNetTuning{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: node}, nnt); err != nil {
			if apierrors.IsNotFound(err) {
				return ""
			}
			t.Fatal(err)
		}
		base := client.MergeFrom(nnt.DeepCopy())
		edit := "sysctl added to"
		if clearRoutes {
			nnt.Spec.Routes, edit = nil, "routes cleared from"
		} else {
			nnt.Spec.Sysctls = append(nnt.Spec.Sysctls, v1alpha1.Sysctl{Name: "net.core.busy_poll", Value: "50"})
		}
		if err := e.Client.Patch(ctx, nnt, base); err != nil {
			t.Fatal(err)
		}
		return edit + " the NodeNetTuning of " + node + " by hand"
	}
	extra := 0
	for round := 1; round <= 12; round++ {
		var did []string
		for range 1 + w.rnd.Intn(3) {
			names := nodeNames()
			node := names[w.rnd.Intn(len(names))]
			switch k := w.rnd.Intn(9); k {
			case 0, 1:
				if len(profiles) == 0 {
					continue
				}
				p := profiles[w.rnd.Intn(len(profiles))]
				if w.rnd.Intn(2) == 0 {
					p.revs = append(p.revs, w.newRevision(p.obj.Name, p.obj.Spec.Priority))
				}
				w.assign(p.obj, vehicles, p.revs)
				did = append(did, "assignments of "+p.obj.Name)
			case 2:
				editNode(t, e, node, func(n *corev1.Node) {
					n.Annotations[v1alpha1.LANAddressAnnotation] = fmt.Sprintf("10.61.%d.%d", w.rnd.Intn(200), 1+w.rnd.Intn(250))
				})
				did = append(did, "address of "+node)
			case 3:
				editNode(t, e, node, func(n *corev1.Node) {
					n.Annotations[v1alpha1.LANDeviceAnnotation] = fmt.Sprintf("lan%d", w.rnd.Intn(3))
				})
				did = append(did, "lan-device of "+node)
			case 4:
				v := vehicles[w.rnd.Intn(len(vehicles))]
				editNode(t, e, node, func(n *corev1.Node) { n.Labels[v1alpha1.DefaultVehicleLabel] = v })
				did = append(did, node+" moved to "+v)
			case 5:
				if len(profiles) > 1 {
					i := w.rnd.Intn(len(profiles))
					if err := e.Client.Delete(ctx, profiles[i].obj); err != nil {
						t.Fatal(err)
					}
					did = append(did, "deleted "+profiles[i].obj.Name)
					profiles = slices.Delete(profiles, i, i+1)
				} else {
					extra++
					name := fmt.Sprintf("gamma-%d", extra)
					addProfile(name)
					did = append(did, "added "+name)
				}
			case 6:
				nnt := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: node}}
				if err := e.Client.Delete(ctx, nnt); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				did = append(did, "deleted the NodeNetTuning of "+node)
			case 7:
				extra++
				v := vehicles[w.rnd.Intn(len(vehicles))]
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-extra-%d", v, extra),
					Labels:      map[string]string{v1alpha1.DefaultVehicleLabel: v, v1alpha1.DefaultHostLabel: fmt.Sprintf("orin-%d", extra)},
					Annotations: map[string]string{v1alpha1.LANAddressAnnotation: fmt.Sprintf("10.62.0.%d", extra)}}}
				if err := e.Client.Create(ctx, n); err != nil {
					t.Fatal(err)
				}
				did = append(did, "added node "+n.Name)
			case 8:
				if edit := editByHand(node, w.rnd.Intn(2) == 0); edit != "" {
					did = append(did, edit)
				}
			}
		}
		w.waitConverged(fmt.Sprintf("round %d (%s)", round, strings.Join(did, "; ")))
	}
	// Both hand edits, whatever the rounds drew.
	for _, clearRoutes := range []bool{false, true} {
		names := nodeNames()
		if edit := editByHand(names[0], clearRoutes); edit != "" {
			w.waitConverged(edit)
		}
	}
}

// TestRenderWarningsReachTheProfile: a peer without a LAN address is skipped
// by the renderer; the profile says so in its RenderWarnings condition and in
// one Warning event, and the condition clears once the address is given.
func TestRenderWarningsReachTheProfile(t *testing.T) {
	e := envtest.StartFleet(t, "", "")
	e.AddVehicles("xavier", "av-01")
	// A third host with no address annotation and no InternalIP.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "av-01-xavier-c", Labels: map[string]string{
		v1alpha1.DefaultVehicleLabel: "av-01", v1alpha1.DefaultHostLabel: "xavier-c", v1alpha1.DefaultHardwareLabel: "xavier"}}}
	if err := e.Client.Create(e.Ctx, n); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: v1alpha1.NetTuningProfileSpec{
		Defaults: &v1alpha1.TCPParameters{RTOMin: envtest.Dur(10 * time.Millisecond)}}}
	if err := e.Client.Create(e.Ctx, p); err != nil {
		t.Fatal(err)
	}
	got := e.WaitProfile("lan", 30*time.Second, "RenderWarnings True", func(p *v1alpha1.NetTuningProfile) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRenderWarnings)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionRenderWarnings)
	if !strings.Contains(c.Message, "xavier-c") {
		t.Errorf("RenderWarnings message %q does not name the skipped peer", c.Message)
	}
	// The route to the other peer is still rendered.
	nnt := &v1alpha1.NodeNetTuning{}
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: "av-01-xavier-a"}, nnt); err != nil {
		t.Fatal(err)
	}
	if len(nnt.Spec.Routes) != 1 {
		t.Errorf("av-01-xavier-a routes %+v, want the one to xavier-b", nnt.Spec.Routes)
	}
	countWarnings := func() int {
		k := 0
		for _, ev := range e.Events("lan") {
			if strings.HasPrefix(ev, "RenderWarnings: ") {
				k++
			}
		}
		return k
	}
	deadline := time.Now().Add(10 * time.Second)
	for countWarnings() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if k := countWarnings(); k != 1 {
		t.Errorf("%d RenderWarnings events, want 1: %v", k, e.Events("lan"))
	}
	editNode(t, e, "av-01-xavier-c", func(n *corev1.Node) {
		n.Annotations = map[string]string{v1alpha1.LANAddressAnnotation: "10.30.1.13", v1alpha1.LANDeviceAnnotation: "eth0"}
	})
	e.WaitProfile("lan", 30*time.Second, "RenderWarnings cleared", func(p *v1alpha1.NetTuningProfile) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRenderWarnings)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	// Settling produced no second warning event.
	if k := countWarnings(); k != 1 {
		t.Errorf("%d RenderWarnings events after the fix, want still 1: %v", k, e.Events("lan"))
	}
}

// TestLanDeviceEditReRenders: editing a node's nettune.io/lan-device alone
// re-renders that node's routes with the new device.
func TestLanDeviceEditReRenders(t *testing.T) {
	e := envtest.StartFleet(t, "", "")
	e.AddVehicles("xavier", "av-01")
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: v1alpha1.NetTuningProfileSpec{
		Defaults: &v1alpha1.TCPParameters{RTOMin: envtest.Dur(10 * time.Millisecond)}}}
	if err := e.Client.Create(e.Ctx, p); err != nil {
		t.Fatal(err)
	}
	device := func() string {
		nnt := &v1alpha1.NodeNetTuning{}
		if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: "av-01-xavier-a"}, nnt); err != nil || len(nnt.Spec.Routes) == 0 {
			return ""
		}
		return nnt.Spec.Routes[0].Device
	}
	waitDevice := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for device() != want {
			if time.Now().After(deadline) {
				t.Fatalf("route device %q, want %q", device(), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitDevice("eth0")
	editNode(t, e, "av-01-xavier-a", func(n *corev1.Node) { n.Annotations[v1alpha1.LANDeviceAnnotation] = "lan1" })
	waitDevice("lan1")
}

func editNode(t *testing.T, e *envtest.Fleet, name string, f func(*corev1.Node)) {
	t.Helper()
	n := &corev1.Node{}
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	f(n)
	if err := e.Client.Update(e.Ctx, n); err != nil {
		t.Fatal(err)
	}
}
