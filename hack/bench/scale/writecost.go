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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/localcp"
)

// The write-cost benchmark (-write-cost): what one write of each object a
// rollout or a heartbeat writes costs this machine's kube-apiserver and
// etcd, object by object, on fresh control planes, with nothing else
// running. It answers what the scale benchmark cannot: whether a rollout's
// time is bound by how many writes it makes or by what each one costs.

// nntCRD is the NodeNetTuning CRD's name.
const nntCRD = "nodenettunings.nettune.io"

// minimalCRD is a custom resource of two spec fields and one status field
// with a status subresource: what any CustomResource write costs here.
const minimalCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"smallobjects.bench.nettune.io"},
"spec":{"group":"bench.nettune.io","scope":"Cluster","names":{"plural":"smallobjects","singular":"smallobject","kind":"SmallObject","listKind":"SmallObjectList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","properties":{"revision":{"type":"string"},"value":{"type":"integer"}}},
"status":{"type":"object","properties":{"lastHeartbeatTime":{"type":"string"}}}}}}}]}}`

// wcVariant is one object to measure.
type wcVariant struct {
	name string
	kind string // "lease", "minimal" or "nnt"
	// routes: NodeNetTuning only, its host-pair routes (a vehicle of
	// routes+1 hosts).
	routes int
	// alter changes the NodeNetTuning CRD before the measurement (nil:
	// as installed); proof fails unless the change is in effect.
	alter func(crd map[string]any) error
	proof func(ctx context.Context, cl client.Client, stored *v1alpha1.NodeNetTuning) error
}

// wcOps are the writes measured per kind, in order.
var wcOps = map[string][]string{
	"lease":   {"create", "renewal (Update of renewTime)"},
	"minimal": {"create", "status merge patch"},
	"nnt":     {"create (controller)", "verified report (agent's status merge patch)", "heartbeat refresh (lastHeartbeatTime only)", "spec merge patch (controller, new revision)"},
}

// wcVariants are the objects measured, side by side.
func wcVariants() []wcVariant {
	return []wcVariant{
		{name: "Lease (built in; the agent's liveness)", kind: "lease"},
		{name: "minimal CustomResource (3 fields)", kind: "minimal"},
		{name: "NodeNetTuning, vehicle of 2 hosts (1 route)", kind: "nnt", routes: 1},
		{name: "NodeNetTuning, vehicle of 5 hosts (4 routes)", kind: "nnt", routes: 4},
		{name: "NodeNetTuning, vehicle of 13 hosts (12 routes)", kind: "nnt", routes: 12},
		{name: "what if: NodeNetTuning, 5 hosts, no CEL rules", kind: "nnt", routes: 4, alter: stripCEL, proof: celGone},
		{name: "what if: NodeNetTuning, 5 hosts, lists map-keyed (the schema before 2026-11-26)", kind: "nnt", routes: 4, alter: mapKeyed, proof: mapKeyedProof},
	}
}

// wcSample is one round's measurement of one write.
type wcSample struct {
	cpu  time.Duration // kube-apiserver + etcd CPU per write
	rate float64       // writes a second, -agent-workers at a time
}

// wcResult is one variant's measurements over every round.
type wcResult struct {
	v        wcVariant
	ops      []string
	samples  [][]wcSample // per op, per round
	bytes    int          // the stored object's JSON, after the last write
	mfBytes  int          // of which metadata.managedFields
	managers int          // managedFields entries
	err      string
}

// writeCost runs the write-cost benchmark and writes its report.
func writeCost(ctx context.Context, c config, w io.Writer) ([]*wcResult, error) {
	env, err := prepare(c)
	if err != nil {
		return nil, err
	}
	ctrllog.SetLogger(logr.Discard()) // as run: what matters is returned as errors
	began := time.Now()
	vs := wcVariants()
	results := make([]*wcResult, len(vs))
	for i, v := range vs {
		results[i] = &wcResult{v: v, ops: wcOps[v.kind], samples: make([][]wcSample, len(wcOps[v.kind]))}
	}
	fmt.Fprintf(w, "bench-scale -write-cost: %d writes per measurement, %d at a time, %d rounds of %d objects; state in %s\n", c.wcWrites, c.workers, c.wcRounds, len(vs), env.stateDir)
	// Rounds go through every variant in turn, so that a change of the
	// machine's load during the run falls on all of them alike.
	for round := range c.wcRounds {
		for i, r := range results {
			if r.err != "" {
				continue
			}
			dir := filepath.Join(env.stateDir, fmt.Sprintf("write-cost-%d-%d", round, i))
			if err := measureWrites(ctx, c, dir, r); err != nil {
				if ctx.Err() != nil {
					return results, ctx.Err()
				}
				r.err = err.Error()
				fmt.Fprintf(w, "  %s: %v\n", r.v.name, err)
				continue
			}
			var cells []string
			for k, op := range r.ops {
				s := r.samples[k][len(r.samples[k])-1]
				cells = append(cells, fmt.Sprintf("%s %.2f ms (%.0f/s)", op, ms(s.cpu), s.rate))
			}
			fmt.Fprintf(w, "[%5s] round %d/%d, %s: %s\n", time.Since(began).Round(time.Second), round+1, c.wcRounds, r.v.name, strings.Join(cells, ", "))
		}
	}
	if c.out != "" {
		path := reportPath(c, env)
		if err := os.WriteFile(path, []byte(writeCostMarkdown(c, results, began)), 0o644); err != nil {
			return results, fmt.Errorf("writing report: %w", err)
		}
		fmt.Fprintf(w, "bench-scale -write-cost: report written to %s (%s)\n", path, time.Since(began).Round(time.Second))
	}
	for _, r := range results {
		if r.err != "" {
			return results, fmt.Errorf("%s: %s", r.v.name, r.err)
		}
	}
	return results, nil
}

// thousands writes n with a comma between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// measureWrites measures one round of one variant on a fresh control plane.
func measureWrites(ctx context.Context, c config, dir string, r *wcResult) (err error) {
	cp, err := localcp.Start(dir)
	if err != nil {
		return err
	}
	defer func() {
		if serr := cp.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		_ = os.RemoveAll(dir)
	}()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	cl, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := benchutil.CreateNamespace(ctx, cl, namespace); err != nil {
		return err
	}
	if r.v.alter != nil {
		if err := alterCRD(ctx, cl, r.v.alter); err != nil {
			return err
		}
	}
	if r.v.kind == "minimal" {
		if err := installMinimal(ctx, cl); err != nil {
			return err
		}
	}
	if err := warm(ctx, cl, r.v.kind); err != nil {
		return err
	}
	pids := append(benchutil.FindProcs("kube-apiserver", cp.Env.ControlPlane.APIServer.CertDir), benchutil.FindProcs("etcd", cp.Env.ControlPlane.Etcd.DataDir)...)
	if len(pids) < 2 {
		return fmt.Errorf("found %d of the kube-apiserver and etcd processes", len(pids))
	}
	n := c.wcWrites
	writes := wcWrites(cl, r.v, n)
	for k, write := range writes {
		c0, t0 := benchutil.TicksOf(pids), time.Now()
		if err := benchutil.Parallel(ctx, n, c.workers, write); err != nil {
			return fmt.Errorf("%s: %w", r.ops[k], err)
		}
		took, cpu := time.Since(t0), benchutil.TicksDuration(benchutil.TicksOf(pids)-c0)
		r.samples[k] = append(r.samples[k], wcSample{cpu: cpu / time.Duration(n), rate: float64(n) / took.Seconds()})
	}
	return r.stored(ctx, cl)
}

// warm waits until a dry-run create of the variant's kind succeeds: the
// first write of a kind on a fresh API server waits for its handler and
// is not what is measured.
func warm(ctx context.Context, cl client.Client, kind string) error {
	obj := wcObject(kind, "warm")
	if nnt, ok := obj.(*v1alpha1.NodeNetTuning); ok {
		nnt.Spec = wcSpec(0, 1, profileName+"-1", 30)
	}
	return waitFor(ctx, "a "+kind+" write to be served", func() bool {
		return cl.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll) == nil
	})
}

// wcObject is an empty object of a variant's kind named name.
func wcObject(kind, name string) client.Object {
	switch kind {
	case "lease":
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	case "minimal":
		return newUnstructured("bench.nettune.io/v1", "SmallObject", "", name)
	}
	return &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// wcName names the i-th object of a measurement.
func wcName(i int) string { return nodeName(vehicleName(i), 0) }

// wcWrites are the variant's writes in wcOps order, each of object i.
func wcWrites(cl client.Client, v wcVariant, n int) []func(int) error {
	ctx := context.Background()
	switch v.kind {
	case "lease":
		// The renewal is the agent's LeaseKeeper's: an Update of the
		// Lease as the previous write returned it.
		leases := make([]*coordinationv1.Lease, n)
		return []func(int) error{
			func(i int) error {
				holder, d, now := wcName(i), int32(120), metav1.NewMicroTime(time.Now())
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: wcName(i), Labels: map[string]string{v1alpha1.AgentLeaseLabel: wcName(i)}},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, AcquireTime: &now, RenewTime: &now}}
				leases[i] = l
				return cl.Create(ctx, l)
			},
			func(i int) error {
				now := metav1.NewMicroTime(time.Now())
				leases[i].Spec.RenewTime = &now
				return cl.Update(ctx, leases[i])
			},
		}
	case "minimal":
		obj := func(i int) *unstructured.Unstructured {
			return newUnstructured("bench.nettune.io/v1", "SmallObject", "", wcName(i))
		}
		return []func(int) error{
			func(i int) error {
				u := obj(i)
				u.Object["spec"] = map[string]any{"revision": "r1", "value": int64(i)}
				return cl.Create(ctx, u)
			},
			func(i int) error {
				return mergePatch(ctx, cl, true, obj(i), map[string]any{"status": map[string]any{"lastHeartbeatTime": time.Now().UTC().Format(time.RFC3339Nano)}})
			},
		}
	}
	nnt := func(i int) *v1alpha1.NodeNetTuning {
		return &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: wcName(i)}}
	}
	return []func(int) error{
		func(i int) error {
			o := nnt(i)
			o.Spec = wcSpec(i, v.routes, profileName+"-1", 30)
			return cl.Create(ctx, o, client.FieldOwner(controllerFieldManager))
		},
		func(i int) error {
			// As the agent reports the generation it applied and verified.
			o := nnt(i)
			o.Generation, o.Spec = 1, wcSpec(i, v.routes, profileName+"-1", 30)
			return mergePatch(ctx, cl, true, o, map[string]any{"status": verifiedStatus(o, metav1.Now())})
		},
		func(i int) error {
			return mergePatch(ctx, cl, true, nnt(i), map[string]any{"status": map[string]any{"lastHeartbeatTime": metav1.NewTime(time.Now().Add(time.Second))}})
		},
		func(i int) error {
			return mergePatch(ctx, cl, false, nnt(i), map[string]any{"spec": wcSpec(i, v.routes, profileName+"-2", 31)}, client.FieldOwner(controllerFieldManager))
		},
	}
}

// mergePatch sends body as a JSON merge patch of obj, or of its status.
func mergePatch(ctx context.Context, cl client.Client, status bool, obj client.Object, body map[string]any, opts ...client.PatchOption) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, raw)
	if status {
		return cl.Status().Patch(ctx, obj, patch)
	}
	return cl.Patch(ctx, obj, patch, opts...)
}

// wcSpec is the spec the controller renders for host 0 of vehicle i with
// routes host-pair routes (cwnd locked, rto_min 10ms, as the scale
// benchmark's profile), one per peer.
func wcSpec(i, routes int, revision string, cwnd int32) v1alpha1.NodeNetTuningSpec {
	lock := true
	rto := metav1.Duration{Duration: 10 * time.Millisecond}
	s := v1alpha1.NodeNetTuningSpec{Revision: revision, Profiles: []v1alpha1.SourceProfile{{Name: profileName, Revision: revision}}}
	for h := 1; h <= routes; h++ {
		addr := nodeAddress(i, h)
		s.Routes = append(s.Routes, v1alpha1.NodeRoute{Destination: addr + "/32", Device: lanDevice, Source: nodeAddress(i, 0), Peer: fmt.Sprintf("h%d", h), Profile: profileName,
			Parameters: v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: cwnd, Lock: &lock}, RTOMin: &rto}})
		s.Peers = append(s.Peers, v1alpha1.Peer{Host: fmt.Sprintf("h%d", h), Address: addr})
	}
	return s
}

// stored records the size of object 0 as stored after the last write and
// proves the variant's CRD change was in effect.
func (r *wcResult) stored(ctx context.Context, cl client.Client) error {
	obj := wcObject(r.v.kind, wcName(0))
	if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return fmt.Errorf("reading %s back: %w", wcName(0), err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	mf, err := json.Marshal(obj.GetManagedFields())
	if err != nil {
		return err
	}
	r.bytes, r.mfBytes, r.managers = len(raw), len(mf), len(obj.GetManagedFields())
	if r.v.proof != nil {
		return r.v.proof(ctx, cl, obj.(*v1alpha1.NodeNetTuning))
	}
	return nil
}

// installMinimal creates the minimal CRD (warm waits until it is served).
func installMinimal(ctx context.Context, cl client.Client) error {
	crd := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(minimalCRD), &crd.Object); err != nil {
		return err
	}
	if err := cl.Create(ctx, crd); err != nil {
		return fmt.Errorf("creating the minimal CRD: %w", err)
	}
	return nil
}

// alterCRD changes the NodeNetTuning CRD's schema with alter and waits
// until the API server serves the new one (its CRD is Established again
// and a dry-run create succeeds).
func alterCRD(ctx context.Context, cl client.Client, alter func(map[string]any) error) error {
	crd := newUnstructured("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", nntCRD)
	if err := cl.Get(ctx, client.ObjectKey{Name: nntCRD}, crd); err != nil {
		return fmt.Errorf("reading the %s CRD: %w", nntCRD, err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		return fmt.Errorf("the %s CRD has %d versions, want 1", nntCRD, len(versions))
	}
	schema, ok, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
	if !ok {
		return fmt.Errorf("the %s CRD has no schema", nntCRD)
	}
	if err := alter(schema); err != nil {
		return err
	}
	if err := unstructured.SetNestedMap(versions[0].(map[string]any), schema, "schema", "openAPIV3Schema"); err != nil {
		return err
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		return err
	}
	if err := cl.Update(ctx, crd); err != nil {
		return fmt.Errorf("updating the %s CRD: %w", nntCRD, err)
	}
	// The handler is rebuilt shortly after the update; the proof after the
	// measurement checks that the writes met the new schema.
	return benchutil.Sleep(ctx, 3*time.Second)
}

// waitFor polls ok every 200 ms for up to a minute.
func waitFor(ctx context.Context, what string, ok func() bool) error {
	for deadline := time.Now().Add(time.Minute); !ok(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: timed out", what)
		}
		if err := benchutil.Sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// stripCEL removes every x-kubernetes-validations rule from a schema.
func stripCEL(schema map[string]any) error {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["x-kubernetes-validations"]; ok {
				delete(x, "x-kubernetes-validations")
				n++
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(schema)
	if n == 0 {
		return errors.New("the NodeNetTuning schema has no CEL rules to remove")
	}
	return nil
}

// celGone proves the CEL rules are gone: a route whose destination has
// host bits set, which a rule rejects, is accepted (dry run).
func celGone(ctx context.Context, cl client.Client, _ *v1alpha1.NodeNetTuning) error {
	o := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: "cel-probe"}, Spec: wcSpec(0, 1, profileName+"-1", 30)}
	o.Spec.Routes[0].Destination = "10.0.0.1/24"
	if err := cl.Create(ctx, o, client.DryRunAll); err != nil {
		return fmt.Errorf("the CEL rules were still in force: %w", err)
	}
	return nil
}

// nntLists are the NodeNetTuning's lists that are atomic with a rule that
// keeps one item per key, by part (spec, status) and key.
var nntLists = []struct{ part, name, key string }{
	{"spec", "profiles", "name"}, {"spec", "routes", "destination"}, {"spec", "sysctls", "name"},
	{"spec", "interfaces", "name"}, {"spec", "peers", "host"}, {"status", "conditions", "type"},
}

// mapKeyed makes the NodeNetTuning's lists map-keyed again, as they were
// before 2026-11-26 (the API server keys every item, managedFields name
// every item's fields, and the uniqueness rules are not needed).
func mapKeyed(schema map[string]any) error {
	for _, l := range nntLists {
		list, ok, _ := unstructured.NestedMap(schema, "properties", l.part, "properties", l.name)
		if !ok {
			return fmt.Errorf("the NodeNetTuning schema has no %s.%s", l.part, l.name)
		}
		if list["x-kubernetes-list-type"] != "atomic" {
			return fmt.Errorf("%s.%s is %v, not atomic, as installed", l.part, l.name, list["x-kubernetes-list-type"])
		}
		list["x-kubernetes-list-type"] = "map"
		list["x-kubernetes-list-map-keys"] = []any{l.key}
		var kept []any
		rules, _, _ := unstructured.NestedSlice(list, "x-kubernetes-validations")
		for _, r := range rules {
			if rule, _ := r.(map[string]any)["rule"].(string); !strings.Contains(rule, "exists_one") {
				kept = append(kept, r)
			}
		}
		if len(rules) == len(kept) {
			return fmt.Errorf("%s.%s has no uniqueness rule", l.part, l.name)
		}
		delete(list, "x-kubernetes-validations")
		if len(kept) > 0 {
			list["x-kubernetes-validations"] = kept
		}
		if err := unstructured.SetNestedMap(schema, list, "properties", l.part, "properties", l.name); err != nil {
			return err
		}
	}
	return nil
}

// mapKeyedProof proves the lists were map-keyed when written: the stored
// object's managedFields name routes by destination and conditions by type.
func mapKeyedProof(_ context.Context, _ client.Client, stored *v1alpha1.NodeNetTuning) error {
	var all strings.Builder
	for _, m := range stored.ManagedFields {
		if m.FieldsV1 != nil {
			all.WriteString(m.FieldsV1.GetRawString())
		}
	}
	for _, key := range []string{`k:{\"destination\"`, `k:{\"type\"`} {
		if !strings.Contains(all.String(), key) {
			return fmt.Errorf("the lists were not map-keyed: no managedFields entry holds %s", key)
		}
	}
	return nil
}

// median of xs (sorted in place).
func median[T int64 | float64 | time.Duration](xs []T) T {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// cost is op k's median CPU per write and writes a second, with the CPU's
// range over the rounds.
func (r *wcResult) cost(k int) (cpu, lo, hi time.Duration, rate float64) {
	var cpus []time.Duration
	var rates []float64
	for _, s := range r.samples[k] {
		cpus = append(cpus, s.cpu)
		rates = append(rates, s.rate)
	}
	if len(cpus) == 0 {
		return 0, 0, 0, 0
	}
	cpu, rate = median(cpus), median(rates)
	return cpu, cpus[0], cpus[len(cpus)-1], rate
}

// cell shows op k of r: median CPU per write (range), median rate.
func (r *wcResult) cell(k int) string {
	if k >= len(r.ops) {
		return "-"
	}
	if len(r.samples[k]) == 0 {
		return "not measured"
	}
	cpu, lo, hi, rate := r.cost(k)
	if len(r.samples[k]) == 1 {
		return fmt.Sprintf("**%.2f ms**, %.0f/s", ms(cpu), rate)
	}
	return fmt.Sprintf("**%.2f ms** (%.2f-%.2f), %.0f/s", ms(cpu), ms(lo), ms(hi), rate)
}

// writeCostMarkdown renders the write-cost report.
func writeCostMarkdown(c config, results []*wcResult, began time.Time) string {
	var b strings.Builder
	b.WriteString("# Write cost: what one write of each object costs the control plane\n\n")
	fmt.Fprintf(&b, "Produced by `%s` (`make bench-writes`) on %s UTC: %d CPUs (%s), %s, kernel %s. The run took **%s**.\n\n",
		c.command, began.UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), benchutil.CPUModel(), runtime.Version(), benchutil.KernelRelease(), time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "Each object is measured on a fresh kube-apiserver and etcd (`bin/`, `internal/localcp`, the CRDs of `config/crd/bases`) with nothing else running: %d objects, each write made once per object, %d at a time, in the order of the columns; per write the CPU time kube-apiserver and etcd used (utime + stime from /proc, divided by %d) and the writes answered per second. %d rounds go through every object in turn; a cell is the median of the rounds, the CPU's range over them in brackets. The NodeNetTunings are host 0's of a vehicle, as the controller renders the scale benchmark's profile (cwnd locked, rto_min on every host pair: one route and one peer per other host), created and spec-patched with the controller's field manager and reported on as the agent reports a verified apply (`verifiedStatus` of the scale benchmark: conditions Applied, Verified, Degraded, RolledBack, Drifted and one item per route). The \"what if\" rows change the NodeNetTuning CRD in the running API server before the writes; after them the change is proven to have been in force (no CEL rules: a route with host bits set is accepted; map-keyed lists: managedFields name routes by destination and conditions by type).\n\n",
		c.wcWrites, c.workers, c.wcWrites, c.wcRounds)
	b.WriteString("| object | stored size, of which managedFields (entries) | create | status write (the agent's verified report; minimal CR: its status) | heartbeat refresh (status, lastHeartbeatTime only) | spec patch (the controller's, a new revision) / Lease renewal |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		size := "-"
		if r.bytes > 0 {
			size = fmt.Sprintf("%d B, %d B (%d)", r.bytes, r.mfBytes, r.managers)
		}
		cells := []string{r.cell(0), r.cell(1), "-", "-"}
		switch r.v.kind {
		case "lease":
			cells = []string{r.cell(0), "-", "-", r.cell(1)}
		case "nnt":
			cells = []string{r.cell(0), r.cell(1), r.cell(2), r.cell(3)}
		}
		if r.err != "" {
			cells[len(cells)-1] += " (**failed**: " + r.err + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.v.name, size, strings.Join(cells, " | "))
	}
	b.WriteString("\n")
	writeMoveCost(&b, results)
	return b.String()
}

// writeMoveCost states what moving a fleet costs at these prices: a node's
// move is the controller's spec patch and the agent's verified report of
// its NodeNetTuning.
func writeMoveCost(b *strings.Builder, results []*wcResult) {
	find := func(name string) *wcResult {
		for _, r := range results {
			if r.v.name == name && r.err == "" && len(r.samples[0]) > 0 {
				return r
			}
		}
		return nil
	}
	nnt, lease := find("NodeNetTuning, vehicle of 5 hosts (4 routes)"), find("Lease (built in; the agent's liveness)")
	if nnt == nil || lease == nil {
		return
	}
	spec, _, _, _ := nnt.cost(3)
	report, _, _, _ := nnt.cost(1)
	renew, _, _, _ := lease.cost(1)
	move := spec + report
	b.WriteString("## What moving a fleet costs at these prices\n\n")
	fmt.Fprintf(b, "Moving a node of a 5-host vehicle to a new revision is the controller's spec patch (%.2f ms) and the agent's verified report (%.2f ms): **%.2f ms of control-plane CPU per node**, %.1f Lease renewals' worth (%.2f ms each). ", ms(spec), ms(report), ms(move), float64(move)/float64(renew), ms(renew))
	for _, n := range []int{5000, 30000} {
		cpu := time.Duration(n) * move
		fmt.Fprintf(b, "%s nodes: %s of CPU, so at least %s on %d CPUs even if the control plane had every CPU to itself and the controller, the agents and the Lease renewals cost nothing. ",
			thousands(n), cpu.Round(100*time.Millisecond), (cpu / time.Duration(runtime.NumCPU())).Round(100*time.Millisecond), runtime.NumCPU())
	}
	b.WriteString("\n")
}
