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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/nettest"
)

// These tests run the plugin's entry point against a real etcd +
// kube-apiserver (internal/localcp) and check the API objects it leaves.
// No controller runs: the test writes the statuses the controller and the
// agents would write, and nothing but the plugin changes the objects.

const revisionNS = "nettune-system"

type plugin struct {
	t          *testing.T
	cp         *localcp.ControlPlane
	c          client.Client
	kubeconfig string
}

// result is one run of the plugin.
type result struct {
	code           int
	stdout, stderr string
}

func (p *plugin) run(args ...string) result {
	p.t.Helper()
	var out, errb bytes.Buffer
	code := run(append(args, "--kubeconfig", p.kubeconfig), &out, &errb)
	p.t.Logf("kubectl nettune %s -> %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (p *plugin) ok(args ...string) string {
	p.t.Helper()
	r := p.run(args...)
	if r.code != 0 {
		p.t.Fatalf("kubectl nettune %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// fails runs a command that must fail with exit code 1 and a message
// containing every want, without changing profile name.
func (p *plugin) fails(name string, want []string, args ...string) {
	p.t.Helper()
	before := p.profile(name)
	r := p.run(args...)
	if r.code != exitError {
		p.t.Errorf("kubectl nettune %s: exit %d, want %d", strings.Join(args, " "), r.code, exitError)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			p.t.Errorf("kubectl nettune %s: stderr %q does not mention %q", strings.Join(args, " "), r.stderr, w)
		}
	}
	if before != nil {
		if after := p.profile(name); after.ResourceVersion != before.ResourceVersion {
			p.t.Errorf("kubectl nettune %s failed but changed profile %s:\nbefore %+v\nafter  %+v", strings.Join(args, " "), name, before, after)
		}
	}
}

// profile reads a profile (nil when it does not exist).
func (p *plugin) profile(name string) *v1alpha1.NetTuningProfile {
	p.t.Helper()
	obj := &v1alpha1.NetTuningProfile{}
	if err := p.c.Get(context.Background(), client.ObjectKey{Name: name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		p.t.Fatal(err)
	}
	return obj
}

func startPlugin(t *testing.T) *plugin {
	t.Helper()
	cp, err := localcp.Start(t.TempDir())
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	if err := cp.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: revisionNS}}); err != nil {
		t.Fatal(err)
	}
	return &plugin{t: t, cp: cp, c: cp.Client, kubeconfig: cp.Kubeconfig}
}

// lanSpec is a profile content with the given cwnd clamp.
func lanSpec(cwnd int32, rollout *v1alpha1.RolloutSpec) v1alpha1.NetTuningProfileSpec {
	return v1alpha1.NetTuningProfileSpec{
		NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{v1alpha1.DefaultHardwareLabel: "xavier"}},
		Defaults: &v1alpha1.TCPParameters{
			Cwnd: &v1alpha1.Cwnd{Value: cwnd, Lock: ptr.To(true)}, Initcwnd: ptr.To[int32](25), Initrwnd: ptr.To[int32](25),
			RTOMin: &metav1.Duration{Duration: 10 * time.Millisecond}, Quickack: ptr.To(true),
		},
		Rollout: rollout,
	}
}

func lanRollout() *v1alpha1.RolloutSpec {
	return &v1alpha1.RolloutSpec{
		Canary: v1alpha1.CanarySpec{Vehicles: []string{"car-1"}},
		Steps: []v1alpha1.RolloutStep{
			{SetVehicles: &v1alpha1.SetVehiclesStep{Count: ptr.To[int32](1)}},
			{Pause: &v1alpha1.PauseStep{}},
			{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr.To[int32](100)}},
		},
		UnreachableAfter: &metav1.Duration{Duration: 2 * time.Minute},
	}
}

// storeRevision stores p's current content the way the controller does and
// returns the revision's name.
func (p *plugin) storeRevision(profile *v1alpha1.NetTuningProfile) string {
	p.t.Helper()
	name := revision.Name(profile)
	raw, err := json.Marshal(revision.Content(profile))
	if err != nil {
		p.t.Fatal(err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: revisionNS, Labels: map[string]string{v1alpha1.ProfileLabel: profile.Name}},
		Data:       runtime.RawExtension{Raw: raw},
		Revision:   profile.Generation,
	}
	if err := p.c.Create(context.Background(), cr); err != nil {
		p.t.Fatal(err)
	}
	return name
}

// fleet creates vehicles car-1..car-3 of two xavier nodes each, with
// NodeNetTunings: car-1 verified on rev2, car-2 on rev2 but silent (never
// reported), car-3 verified on rev1.
func (p *plugin) fleet(profile, rev1, rev2 string) {
	p.t.Helper()
	ctx := context.Background()
	now := time.Now()
	for v, rev := range map[string]string{"car-1": rev2, "car-2": rev2, "car-3": rev1} {
		for _, host := range []string{"xavier-a", "xavier-b"} {
			name := v + "-" + host
			n := testNode(name, v, host, "xavier")
			if err := p.c.Create(ctx, &n); err != nil {
				p.t.Fatal(err)
			}
			report := nntReport{verified: true, seenAgo: 5 * time.Second}
			if v == "car-2" {
				report = nntReport{seenAgo: -1}
			}
			want := testNNT(name, profile, rev, report, now)
			nnt := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: want.Spec}
			if err := p.c.Create(ctx, nnt); err != nil {
				p.t.Fatal(err)
			}
			want.Status.ObservedGeneration = nnt.Generation
			for i := range want.Status.Conditions {
				want.Status.Conditions[i].ObservedGeneration = nnt.Generation
			}
			nnt.Status = want.Status
			if err := p.c.Status().Update(ctx, nnt); err != nil {
				p.t.Fatal(err)
			}
		}
	}
}

// setStatus writes a profile's status as the controller would.
func (p *plugin) setStatus(name string, mutate func(*v1alpha1.NetTuningProfileStatus)) {
	p.t.Helper()
	obj := p.profile(name)
	mutate(&obj.Status)
	obj.Status.ObservedGeneration = obj.Generation
	if err := p.c.Status().Update(context.Background(), obj); err != nil {
		p.t.Fatal(err)
	}
}

func condition(t, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
}

func TestPluginAgainstAPIServer(t *testing.T) {
	p := startPlugin(t)
	ctx := context.Background()
	const name = "xavier-lan"

	// History: the profile was created with cwnd 40 (rev1, now stable), then
	// edited to cwnd 30 (rev2, rolling out, paused at step 1).
	prof := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lanSpec(40, lanRollout())}
	if err := p.c.Create(ctx, prof); err != nil {
		t.Fatal(err)
	}
	rev1 := p.storeRevision(prof)
	prof.Spec = lanSpec(30, lanRollout())
	if err := p.c.Update(ctx, prof); err != nil {
		t.Fatal(err)
	}
	rev2 := p.storeRevision(prof)
	if rev1 == rev2 {
		t.Fatalf("revisions of different contents share the name %s", rev1)
	}
	created := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	p.setStatus(name, func(st *v1alpha1.NetTuningProfileStatus) {
		st.CurrentRevision, st.StableRevision = rev2, rev1
		st.CurrentStep = ptr.To[int32](1)
		st.StepStarted = ptr.To(metav1.Now())
		st.Phase = "Paused"
		st.CanaryVehicles = []string{"car-1"}
		st.Vehicles = v1alpha1.VehicleCounts{Total: 3, Updated: 2, Verified: 1, Unreachable: 1}
		st.Revisions = []v1alpha1.Revision{
			{Name: rev1, Generation: 1, Created: created, Outcome: "Stable"},
			{Name: rev2, Generation: 2, Created: created, Outcome: "Progressing"},
		}
		st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionPaused, "PauseStep", "revision "+rev2+" step 1/3 (pause until promoted)")}
	})
	p.fleet(name, rev1, rev2)

	// A profile whose rollout is finished, and one without a rollout.
	steady := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "steady"}, Spec: lanSpec(30, lanRollout())}
	if err := p.c.Create(ctx, steady); err != nil {
		t.Fatal(err)
	}
	p.setStatus("steady", func(st *v1alpha1.NetTuningProfileStatus) {
		st.CurrentRevision, st.StableRevision = "steady-0123456789", "steady-0123456789"
		st.CurrentStep = ptr.To[int32](3)
		st.Phase = "Healthy"
	})
	norollout := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "no-rollout"}, Spec: lanSpec(30, nil)}
	if err := p.c.Create(ctx, norollout); err != nil {
		t.Fatal(err)
	}

	t.Run("help and usage", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run([]string{"--help"}, &out, &errb); code != exitOK {
			t.Errorf("--help: exit %d", code)
		}
		for _, c := range []string{"status", "promote", "pause", "resume", "abort", "undo", "exclude", "include", "revisions"} {
			if !strings.Contains(out.String(), "\n  "+c+" ") {
				t.Errorf("--help does not list %s:\n%s", c, out.String())
			}
		}
		out.Reset()
		if code := run([]string{"undo", "--help"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "-to-revision") {
			t.Errorf("undo --help: exit %d\n%s", code, out.String())
		}
		errb.Reset()
		if code := run([]string{"promote"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "expected PROFILE") {
			t.Errorf("promote without a profile: exit %d: %s", code, errb.String())
		}
		errb.Reset()
		if code := run([]string{"frobnicate", "x"}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
			t.Errorf("unknown command: exit %d: %s", code, errb.String())
		}
	})

	t.Run("status", func(t *testing.T) {
		out := p.ok("status", name)
		for _, want := range []string{
			"Profile:           xavier-lan\n",
			"Phase:             Paused\n",
			"Current revision:  " + rev2 + "\n",
			"Stable revision:   " + rev1 + "\n",
			"Step:              1/3 pause until promoted",
			"  [x] 0 setVehicles 1\n",
			"  [>] 1 pause until promoted (waiting: kubectl nettune promote xavier-lan)\n",
			"  [ ] 2 setVehicles 100%\n",
			"  [ ] 3 every vehicle, then stable\n",
			"  Paused (PauseStep): revision " + rev2,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("status does not show %q:\n%s", want, out)
			}
		}
		rows := map[string][]string{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 6 && strings.HasPrefix(f[0], "car-") {
				rows[f[0]] = f[1:]
			}
		}
		want := map[string][]string{
			"car-1": {"xavier", "canary", rev2, "2/2", "Verified"},
			"car-2": {"xavier", "baseline", rev2, "0/2", "Unreachable", "never"},
			"car-3": {"xavier", "baseline", rev1, "2/2", "Verified"},
		}
		for v, w := range want {
			if got := rows[v]; len(got) < len(w) || !equalPrefix(got, w) {
				t.Errorf("row %s = %q, want %q...", v, got, w)
			}
		}
	})

	t.Run("status --watch", func(t *testing.T) {
		// A real watch: a change made while it runs shows in a later view.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var out nettest.SyncBuffer
		var errb bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- runContext(ctx, []string{"status", name, "--watch", "--min-interval", "200ms", "--kubeconfig", p.kubeconfig}, &out, &errb)
		}()
		header := "kubectl nettune status xavier-lan --watch"
		nettest.WaitFor(t, 10*time.Second, func() error {
			if !strings.Contains(out.String(), header) {
				return errors.New("no first view yet")
			}
			return nil
		})
		time.Sleep(500 * time.Millisecond) // let the watches' first events pass
		before := strings.Count(out.String(), header)
		pr := p.profile(name)
		patch := client.MergeFrom(pr.DeepCopy())
		if pr.Annotations == nil {
			pr.Annotations = map[string]string{}
		}
		pr.Annotations[v1alpha1.ExcludeAnnotation] = "car-3"
		if err := p.c.Patch(context.Background(), pr, patch); err != nil {
			t.Fatal(err)
		}
		nettest.WaitFor(t, 10*time.Second, func() error {
			if !regexp.MustCompile(`car-3 +xavier +excluded`).MatchString(out.String()) {
				return fmt.Errorf("the exclusion has not shown (%d views)", strings.Count(out.String(), header))
			}
			return nil
		})
		cancel()
		if code := <-done; code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		frames := strings.Count(out.String(), header)
		t.Logf("%d views, %d before the change", frames, before)
		if frames <= before || strings.Count(out.String(), "Profile:           xavier-lan") != frames {
			t.Errorf("%d views, %d before the change:\n%s", frames, before, out.String())
		}
		if strings.Contains(out.String(), "\033[") {
			t.Errorf("clear-screen escape written to a non-terminal")
		}
		if !strings.Contains(out.String(), "\n\n"+header) {
			t.Errorf("views not separated by a blank line:\n%s", out.String())
		}
		// Undo the exclusion for the subtests below.
		pr = p.profile(name)
		patch = client.MergeFrom(pr.DeepCopy())
		delete(pr.Annotations, v1alpha1.ExcludeAnnotation)
		if err := p.c.Patch(context.Background(), pr, patch); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("status -o yaml and json", func(t *testing.T) {
		var doc statusView
		if err := yaml.Unmarshal([]byte(p.ok("status", name, "-o", "yaml")), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Profile != name || doc.Status.CurrentRevision != rev2 || doc.Status.StableRevision != rev1 || len(doc.Vehicles) != 3 {
			t.Fatalf("yaml view %+v", doc)
		}
		if v := doc.Vehicles[1]; v.Name != "car-2" || v.State != "Unreachable" || v.Nodes != 2 || v.Verified != 0 || len(v.NodeNames) != 2 {
			t.Errorf("car-2 in yaml: %+v", v)
		}
		var js statusView
		if err := json.Unmarshal([]byte(p.ok("status", name, "-o", "json")), &js); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(js.Vehicles, doc.Vehicles) {
			t.Errorf("json and yaml differ:\n%+v\n%+v", js.Vehicles, doc.Vehicles)
		}
		if wide := p.ok("status", name, "-o", "wide"); !strings.Contains(wide, "NODE NAMES") || !strings.Contains(wide, doc.Vehicles[0].NodeNames[0]) {
			t.Errorf("-o wide has no node names:\n%s", wide)
		}
	})

	t.Run("promote", func(t *testing.T) {
		out := p.ok("promote", name)
		if want := "xavier-lan: promoted step 1 (pause until promoted)\n"; out != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
		if got, want := p.profile(name).Annotations[v1alpha1.PromoteAnnotation], fleetmodel.PromoteValue(rev2, 1, planner.RolloutStarted(&p.profile(name).Status, rev2)); got != want {
			t.Errorf("%s = %q, want %q", v1alpha1.PromoteAnnotation, got, want)
		}
		// Promoting the same step again changes nothing.
		rv := p.profile(name).ResourceVersion
		if out := p.ok("promote", name); !strings.Contains(out, "already promoted") {
			t.Errorf("second promote: %q", out)
		}
		if p.profile(name).ResourceVersion != rv {
			t.Error("second promote wrote the profile")
		}
		// A setVehicles step is not promotable.
		p.setStatus(name, func(st *v1alpha1.NetTuningProfileStatus) { st.CurrentStep = ptr.To[int32](2) })
		p.fails(name, []string{"xavier-lan", "step 2 (setVehicles 100%)", "promote skips only pause and analysis steps"}, "promote", name)
		p.setStatus(name, func(st *v1alpha1.NetTuningProfileStatus) { st.CurrentStep = ptr.To[int32](1) })
	})

	t.Run("pause and resume", func(t *testing.T) {
		before := p.profile(name)
		if out := p.ok("pause", name); out != "xavier-lan: rollout paused at step 1/3 (pause until promoted)\n" {
			t.Errorf("pause: %q", out)
		}
		after := p.profile(name)
		if after.Spec.Rollout == nil || !after.Spec.Rollout.Paused {
			t.Fatalf("spec.rollout.paused not set: %+v", after.Spec.Rollout)
		}
		// Nothing but paused changed.
		want := before.Spec.DeepCopy()
		want.Rollout.Paused = true
		if !equality.Semantic.DeepEqual(*want, after.Spec) {
			t.Errorf("pause changed more than spec.rollout.paused:\nwant %+v\n got %+v", *want, after.Spec)
		}
		if out := p.ok("pause", name); !strings.Contains(out, "already paused") {
			t.Errorf("second pause: %q", out)
		}
		if out := p.ok("resume", name); out != "xavier-lan: rollout resumed at step 1/3 (pause until promoted)\n" {
			t.Errorf("resume: %q", out)
		}
		if after := p.profile(name); after.Spec.Rollout.Paused || !equality.Semantic.DeepEqual(before.Spec, after.Spec) {
			t.Errorf("resume did not restore the spec:\nbefore %+v\nafter  %+v", before.Spec, after.Spec)
		}
		p.fails("no-rollout", []string{"no-rollout", "has no spec.rollout"}, "pause", "no-rollout")
		p.fails("no-rollout", []string{"no-rollout", "has no spec.rollout"}, "resume", "no-rollout")
	})

	t.Run("exclude and include", func(t *testing.T) {
		excluded := func() (string, bool) {
			v, ok := p.profile(name).Annotations[v1alpha1.ExcludeAnnotation]
			return v, ok
		}
		r := p.run("exclude", name, "car-3", "car-2", "car-3")
		if r.code != 0 || r.stdout != "xavier-lan: excluded car-2, car-3 (excluded: car-2, car-3)\n" || r.stderr != "" {
			t.Errorf("exclude: %+v", r)
		}
		if v, _ := excluded(); v != "car-2,car-3" {
			t.Errorf("annotation %q, want car-2,car-3", v)
		}
		// An unknown vehicle is excluded with a warning.
		r = p.run("exclude", name, "car-1", "car-2", "car-9")
		if r.code != 0 || !strings.Contains(r.stdout, "excluded car-1, car-9 (excluded: car-1, car-2, car-3, car-9); car-2 already excluded") ||
			!strings.Contains(r.stderr, `selects no vehicle "car-9"`) {
			t.Errorf("exclude: %+v", r)
		}
		if v, _ := excluded(); v != "car-1,car-2,car-3,car-9" {
			t.Errorf("annotation %q", v)
		}
		if out := p.ok("status", name); !strings.Contains(out, "Excluded vehicles: car-1, car-2, car-3, car-9") ||
			!regexpLine(out, "car-1", "excluded") {
			t.Errorf("status after exclude:\n%s", out)
		}
		if out := p.ok("include", name, "car-2", "car-9"); out != "xavier-lan: included car-2, car-9 (excluded: car-1, car-3)\n" {
			t.Errorf("include: %q", out)
		}
		if v, _ := excluded(); v != "car-1,car-3" {
			t.Errorf("annotation %q, want car-1,car-3", v)
		}
		rv := p.profile(name).ResourceVersion
		if out := p.ok("include", name, "car-2"); !strings.Contains(out, "car-2 not excluded; nothing changed") {
			t.Errorf("include of an included vehicle: %q", out)
		}
		if p.profile(name).ResourceVersion != rv {
			t.Error("a no-op include wrote the profile")
		}
		p.ok("include", name, "car-3", "car-1")
		if v, ok := excluded(); ok {
			t.Errorf("annotation still present (%q) with no vehicle excluded", v)
		}
		p.fails("nope", []string{`profile "nope" not found`}, "exclude", "nope", "car-1")
	})

	t.Run("revisions", func(t *testing.T) {
		out := p.ok("revisions", name)
		stamp := created.UTC().Format(time.RFC3339)
		for _, want := range []string{
			"NAME", rev1 + "  1           " + stamp + "  Stable       yes     stable",
			rev2 + "  2           " + stamp + "  Progressing  yes     current",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("revisions does not show %q:\n%s", want, out)
			}
		}
	})

	t.Run("errors change nothing", func(t *testing.T) {
		for _, cmd := range []string{"status", "promote", "pause", "resume", "abort", "undo", "revisions"} {
			p.fails("nope", []string{`profile "nope" not found`}, cmd, "nope")
		}
		p.fails("steady", []string{"steady", "no rollout in progress", "steady-0123456789 is the stable revision"}, "promote", "steady")
		p.fails("steady", []string{"steady", "no rollout in progress"}, "abort", "steady")
		p.fails(name, []string{"xavier-lan", `revision "xavier-lan-doesnotexist" not found in namespace nettune-system`, rev1 + " (Stable)", rev2 + " (Progressing)"},
			"undo", name, "--to-revision", "xavier-lan-doesnotexist")
		p.fails(name, []string{`revision "` + rev1 + `" not found in namespace elsewhere`}, "undo", name, "--namespace", "elsewhere")
	})

	t.Run("undo", func(t *testing.T) {
		before := p.profile(name)
		// The controller writes the profile all the time: a write between
		// undo's read and its Update (here an annotation, as a status
		// write would) moves the resourceVersion; undo reads again and
		// succeeds, keeping that write.
		attempts := 0
		beforeProfileUpdate = func(attempt int) {
			attempts = attempt
			if attempt == 1 {
				cur := p.profile(name)
				patch := client.MergeFrom(cur.DeepCopy())
				metav1.SetMetaDataAnnotation(&cur.ObjectMeta, "example.com/touched", "1")
				if err := p.c.Patch(ctx, cur, patch); err != nil {
					t.Error(err)
				}
			}
		}
		defer func() { beforeProfileUpdate = nil }()
		out := p.ok("undo", name)
		beforeProfileUpdate = nil
		if attempts != 2 {
			t.Errorf("undo wrote in %d attempt(s), want 2 (a conflict, then a fresh read)", attempts)
		}
		if got := p.profile(name).Annotations["example.com/touched"]; got != "1" {
			t.Errorf("the write made while undo ran was lost: annotation %q", got)
		}
		if want := "xavier-lan: reverted content from revision " + rev2 + " to " + rev1 + " (spec.rollout kept)\n"; out != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
		after := p.profile(name)
		cr := &appsv1.ControllerRevision{}
		if err := p.c.Get(ctx, client.ObjectKey{Namespace: revisionNS, Name: rev1}, cr); err != nil {
			t.Fatal(err)
		}
		stored := &v1alpha1.NetTuningProfileSpec{}
		if err := json.Unmarshal(cr.Data.Raw, stored); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(revision.Content(after), stored) {
			t.Errorf("content after undo differs from revision %s:\n got %+v\nwant %+v", rev1, revision.Content(after), stored)
		}
		if !equality.Semantic.DeepEqual(after.Spec.Rollout, before.Spec.Rollout) {
			t.Errorf("undo changed spec.rollout:\nbefore %+v\nafter  %+v", before.Spec.Rollout, after.Spec.Rollout)
		}
		if got := revision.Name(after); got != rev1 {
			t.Errorf("revision of the restored content is %s, want %s", got, rev1)
		}
		if after.Spec.Defaults.Cwnd.Value != 40 {
			t.Errorf("cwnd %d after undo, want 40", after.Spec.Defaults.Cwnd.Value)
		}
		// Undo again: already there.
		if out := p.ok("undo", name); !strings.Contains(out, "already revision "+rev1) {
			t.Errorf("second undo: %q", out)
		}
		// A spec edited between undo's read and its Update is never
		// overwritten: undo fails and says so.
		beforeProfileUpdate = func(attempt int) {
			if attempt == 1 {
				cur := p.profile(name)
				cur.Spec.Defaults.Cwnd.Value = 41
				if err := p.c.Update(ctx, cur); err != nil {
					t.Error(err)
				}
			}
		}
		r := p.run("undo", name, "--to-revision", rev2)
		beforeProfileUpdate = nil
		if r.code != exitError || !strings.Contains(r.stderr, "changed while undo ran") {
			t.Errorf("undo over a concurrent spec edit: exit %d, stderr %q", r.code, r.stderr)
		}
		if got := p.profile(name).Spec.Defaults.Cwnd.Value; got != 41 {
			t.Errorf("cwnd %d after the failed undo, want the concurrent edit's 41", got)
		}
		cur := p.profile(name)
		cur.Spec.Defaults.Cwnd.Value = 40
		if err := p.c.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if got := revision.Name(p.profile(name)); got != rev1 {
			t.Fatalf("content %s after restoring cwnd 40, want %s", got, rev1)
		}
		// Forward again by name.
		if out := p.ok("undo", name, "--to-revision", rev2); !strings.Contains(out, "from revision "+rev1+" to "+rev2) {
			t.Errorf("undo --to-revision: %q", out)
		}
		if got := revision.Name(p.profile(name)); got != rev2 {
			t.Errorf("revision after undo --to-revision is %s, want %s", got, rev2)
		}
	})

	t.Run("abort", func(t *testing.T) {
		out := p.ok("abort", name)
		if want := "xavier-lan: aborted revision " + rev2 + "; every vehicle returns to the stable revision " + rev1 + "\n"; out != want {
			t.Errorf("stdout %q, want %q", out, want)
		}
		if got := p.profile(name).Annotations[v1alpha1.AbortAnnotation]; got != rev2 {
			t.Errorf("%s = %q, want %s", v1alpha1.AbortAnnotation, got, rev2)
		}
		// Once the controller rolled it back, there is nothing to promote or abort.
		p.setStatus(name, func(st *v1alpha1.NetTuningProfileStatus) {
			st.FailedRevision = rev2
			st.Phase = "RolledBack"
			st.Conditions = []metav1.Condition{condition(v1alpha1.ConditionRolledBack, "Aborted", "rollout of "+rev2+" aborted by the user")}
		})
		p.fails(name, []string{"xavier-lan", "no rollout in progress", rev2 + " was rolled back"}, "promote", name)
		p.fails(name, []string{"xavier-lan", "no rollout in progress"}, "abort", name)
		p.fails(name, []string{"xavier-lan", rev2 + " was rolled back"}, "undo", name, "--to-revision", rev2)
		out = p.ok("status", name)
		for _, want := range []string{"Phase:             RolledBack", "  [!] 1 pause until promoted\n", "  RolledBack (Aborted): rollout of " + rev2 + " aborted by the user"} {
			if !strings.Contains(out, want) {
				t.Errorf("status after rollback does not show %q:\n%s", want, out)
			}
		}
	})
}

func equalPrefix(got, want []string) bool {
	for i := range want {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// regexpLine reports whether a line starts with first and has field second.
func regexpLine(out, first, second string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && f[0] == first && f[2] == second {
			return true
		}
	}
	return false
}
