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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/scheme"
)

func decision(name, placement string, group string, clusters ...string) *clusterv1beta1.PlacementDecision {
	pd := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name,
		Labels: map[string]string{clusterv1beta1.PlacementLabel: placement}}}
	if group != "" {
		pd.Labels[clusterv1beta1.DecisionGroupIndexLabel] = group
	}
	for _, c := range clusters {
		pd.Status.Decisions = append(pd.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: c})
	}
	return pd
}

// TestPlacementDecisions: the decisions of one Placement, over several
// PlacementDecisions, each cluster with its group (the lower when in two);
// another Placement's decisions are not read.
func TestPlacementDecisions(t *testing.T) {
	s, err := scheme.NewHub()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&clusterv1beta1.PlacementDecision{}).WithObjects(
		decision("depots-decision-1", "depots", "0", "depot-a"),
		decision("depots-decision-2", "depots", "1", "depot-c", "depot-b", "depot-a"),
		decision("other-decision-1", "other", "", "depot-x"),
	).Build()
	got, err := PlacementDecisions(context.Background(), c, "fleet", "depots")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[{depot-a 0 } {depot-b 1 } {depot-c 1 }]"; fmt.Sprint(got) != want {
		t.Errorf("decisions %v, want %s", got, want)
	}
	got, err = PlacementDecisions(context.Background(), c, "fleet", "other")
	if err != nil || fmt.Sprint(got) != "[{depot-x 0 }]" {
		t.Errorf("a Placement without decision groups: %v %v, want depot-x in group 0", got, err)
	}
}

// TestCheckPlacement: each way a Placement cannot be used is named.
func TestCheckPlacement(t *testing.T) {
	s, err := scheme.NewHub()
	if err != nil {
		t.Fatal(err)
	}
	ref := &v1alpha1.PlacementRef{Namespace: "fleet", Name: "depots"}
	scheduled := []metav1.Condition{{Type: clusterv1beta1.PlacementConditionSatisfied, Status: metav1.ConditionTrue, Reason: "AllDecisionsScheduled"}}
	placement := func(sets []string, conds []metav1.Condition) *clusterv1beta1.Placement {
		return &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "depots"},
			Spec: clusterv1beta1.PlacementSpec{ClusterSets: sets}, Status: clusterv1beta1.PlacementStatus{Conditions: conds}}
	}
	binding := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "first"},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "first"}}
	for _, tc := range []struct {
		name   string
		pl     *clusterv1beta1.Placement
		bind   bool
		reason string
		says   string
	}{
		{"missing", nil, true, "PlacementNotFound", "Placement fleet/depots not found"},
		{"set not bound", placement([]string{"first", "rest"}, scheduled), true, "ClusterSetNotBound", "ManagedClusterSet(s) rest, not bound to namespace fleet"},
		{"no binding", placement(nil, scheduled), false, "ClusterSetNotBound", "namespace fleet of Placement fleet/depots has no ManagedClusterSetBinding"},
		{"misconfigured", placement(nil, []metav1.Condition{{Type: clusterv1beta1.PlacementConditionMisconfigured, Status: metav1.ConditionTrue, Message: "bad prioritizer"}}), true,
			"PlacementMisconfigured", "bad prioritizer"},
		{"not scheduled", placement([]string{"first"}, nil), true, "PlacementPending", "not scheduled yet"},
		{"usable", placement([]string{"first"}, scheduled), true, "", ""},
	} {
		b := fake.NewClientBuilder().WithScheme(s)
		if tc.pl != nil {
			b = b.WithObjects(tc.pl)
		}
		if tc.bind {
			b = b.WithObjects(binding)
		}
		pl, err := CheckPlacement(context.Background(), b.Build(), ref)
		pp, isProblem := isPlacementProblem(err)
		switch {
		case tc.reason == "" && (err != nil || pl == nil):
			t.Errorf("%s: %v, want the Placement", tc.name, err)
		case tc.reason != "" && (!isProblem || pp.Reason != tc.reason || !strings.Contains(pp.Message, tc.says) || !strings.HasPrefix(pp.Message, "spec.placement: ")):
			t.Errorf("%s: %v, want %s saying %q", tc.name, err, tc.reason, tc.says)
		}
	}
}

// TestPlacementWarnings: a Placement tolerating both taints of a silent
// cluster forever has no warning; one tolerating neither, or one for a
// while, is told which.
func TestPlacementWarnings(t *testing.T) {
	secs := int64(300)
	pl := func(ts ...clusterv1beta1.Toleration) *clusterv1beta1.Placement {
		return &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "depots"}, Spec: clusterv1beta1.PlacementSpec{Tolerations: ts}}
	}
	exists := func(key string) clusterv1beta1.Toleration {
		return clusterv1beta1.Toleration{Key: key, Operator: clusterv1beta1.TolerationOpExists}
	}
	if w := PlacementWarnings(pl(exists(TaintUnreachable), exists(TaintUnavailable))); len(w) != 0 {
		t.Errorf("both tolerated: %v", w)
	}
	if w := PlacementWarnings(pl(clusterv1beta1.Toleration{Operator: clusterv1beta1.TolerationOpExists})); len(w) != 0 {
		t.Errorf("every taint tolerated: %v", w)
	}
	w := PlacementWarnings(pl(exists(TaintUnreachable)))
	if len(w) != 1 || !strings.Contains(w[0], "no toleration of the taint "+TaintUnavailable) {
		t.Errorf("unavailable not tolerated: %v", w)
	}
	limited := exists(TaintUnavailable)
	limited.TolerationSeconds = &secs
	w = PlacementWarnings(pl(limited))
	if len(w) != 2 || !strings.Contains(w[0], TaintUnreachable) || !strings.Contains(w[1], "for 300 s only") {
		t.Errorf("unreachable missing, unavailable for 300 s: %v", w)
	}
}

// TestDecisionsSettled: decisions read while OCM rewrites them (fewer than
// the Placement's status counts, or another group's) are not taken.
func TestDecisionsSettled(t *testing.T) {
	pl := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "depots"}, Status: clusterv1beta1.PlacementStatus{
		NumberOfSelectedClusters: 3,
		DecisionGroups:           []clusterv1beta1.DecisionGroupStatus{{DecisionGroupIndex: 0, ClustersCount: 1}, {DecisionGroupIndex: 1, ClustersCount: 2}}}}
	whole := []Decision{{Cluster: "a"}, {Cluster: "b", Group: 1}, {Cluster: "c", Group: 1}}
	if why := DecisionsSettled(pl, whole); why != "" {
		t.Errorf("whole decisions: %s", why)
	}
	if why := DecisionsSettled(pl, whole[1:]); !strings.Contains(why, "2 cluster(s) in its PlacementDecisions, 3 in its status") {
		t.Errorf("one group gone: %q", why)
	}
	moved := []Decision{{Cluster: "a"}, {Cluster: "b"}, {Cluster: "c", Group: 1}}
	if why := DecisionsSettled(pl, moved); !strings.Contains(why, "decision group 0") {
		t.Errorf("a cluster in another group: %q", why)
	}
}
