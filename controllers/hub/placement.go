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
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=placements;placementdecisions;managedclustersetbindings,verbs=get;list;watch

// The taints OCM's registration hub gives a managed cluster that is not
// Available (NoSelect): a Placement that does not tolerate them drops the
// cluster from its decisions.
const (
	TaintUnreachable = "cluster.open-cluster-management.io/unreachable"
	TaintUnavailable = "cluster.open-cluster-management.io/unavailable"
)

// Decision is one managed cluster of a Placement's decisions.
type Decision struct {
	Cluster string
	// Group is the index of its decision group (the PlacementDecision's
	// decision-group-index label; 0 without a decision strategy), GroupName
	// the group's name ("" when the strategy names none).
	Group     int32
	GroupName string
}

// PlacementDecisions reads the decisions of the Placement namespace/name:
// every PlacementDecision labeled with the Placement's name (OCM splits
// the decisions of a Placement over several objects, each of one decision
// group), sorted by cluster. A cluster in two decisions keeps the lower
// group.
func PlacementDecisions(ctx context.Context, c client.Reader, namespace, name string) ([]Decision, error) {
	list := &clusterv1beta1.PlacementDecisionList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1beta1.PlacementLabel: name}); err != nil {
		return nil, fmt.Errorf("list PlacementDecisions of %s/%s: %w", namespace, name, err)
	}
	byCluster := map[string]Decision{}
	for i := range list.Items {
		pd := &list.Items[i]
		group := int32(0)
		if s, ok := pd.Labels[clusterv1beta1.DecisionGroupIndexLabel]; ok {
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("PlacementDecision %s/%s: label %s=%q is not a group index", namespace, pd.Name, clusterv1beta1.DecisionGroupIndexLabel, s)
			}
			group = int32(n)
		}
		for _, d := range pd.Status.Decisions {
			if old, ok := byCluster[d.ClusterName]; ok && old.Group <= group {
				continue
			}
			byCluster[d.ClusterName] = Decision{Cluster: d.ClusterName, Group: group, GroupName: pd.Labels[clusterv1beta1.DecisionGroupNameLabel]}
		}
	}
	out := make([]Decision, 0, len(byCluster))
	for _, d := range byCluster {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cluster < out[j].Cluster })
	return out, nil
}

// PlacementProblem is a Placement a profile cannot be rolled out with: the
// profile's status says Reason and Message (Stalled), and no work is
// written or removed.
type PlacementProblem struct {
	Reason  string
	Message string
}

func (e *PlacementProblem) Error() string { return e.Message }

// CheckPlacement reads the Placement ref names and says what stops a
// rollout with it (a *PlacementProblem): it does not exist; OCM found it
// misconfigured; a ManagedClusterSet it names has no
// ManagedClusterSetBinding in its namespace (or, naming none, the
// namespace has no binding at all); OCM has not scheduled it yet. It
// returns the Placement otherwise.
func CheckPlacement(ctx context.Context, c client.Reader, ref *v1alpha1.PlacementRef) (*clusterv1beta1.Placement, error) {
	pl := &clusterv1beta1.Placement{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, pl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &PlacementProblem{Reason: "PlacementNotFound", Message: fmt.Sprintf("spec.placement: Placement %s not found", ref)}
		}
		return nil, fmt.Errorf("get Placement %s: %w", ref, err)
	}
	if m := meta.FindStatusCondition(pl.Status.Conditions, clusterv1beta1.PlacementConditionMisconfigured); m != nil && m.Status == metav1.ConditionTrue {
		return nil, &PlacementProblem{Reason: "PlacementMisconfigured", Message: fmt.Sprintf("spec.placement: Placement %s is misconfigured: %s", ref, m.Message)}
	}
	bindings := &clusterv1beta2.ManagedClusterSetBindingList{}
	if err := c.List(ctx, bindings, client.InNamespace(ref.Namespace)); err != nil {
		return nil, fmt.Errorf("list ManagedClusterSetBindings in %s: %w", ref.Namespace, err)
	}
	bound := map[string]bool{}
	for _, b := range bindings.Items {
		bound[b.Spec.ClusterSet] = true
	}
	var unbound []string
	for _, set := range pl.Spec.ClusterSets {
		if !bound[set] {
			unbound = append(unbound, set)
		}
	}
	switch {
	case len(unbound) > 0:
		return nil, &PlacementProblem{Reason: "ClusterSetNotBound", Message: fmt.Sprintf(
			"spec.placement: Placement %s names ManagedClusterSet(s) %s, not bound to namespace %s (no ManagedClusterSetBinding there)",
			ref, strings.Join(unbound, ", "), ref.Namespace)}
	case len(bound) == 0:
		return nil, &PlacementProblem{Reason: "ClusterSetNotBound", Message: fmt.Sprintf(
			"spec.placement: namespace %s of Placement %s has no ManagedClusterSetBinding: the Placement can select no cluster", ref.Namespace, ref)}
	}
	if meta.FindStatusCondition(pl.Status.Conditions, clusterv1beta1.PlacementConditionSatisfied) == nil {
		return nil, &PlacementProblem{Reason: "PlacementPending", Message: fmt.Sprintf("spec.placement: Placement %s is not scheduled yet (no %s condition)", ref, clusterv1beta1.PlacementConditionSatisfied)}
	}
	return pl, nil
}

// PlacementWarnings are what of a Placement may cost a rollout its
// clusters: a taint of a silent cluster it does not tolerate, or
// tolerates for a while only (OCM then drops the cluster from the
// decisions, and its vehicles from the rollout).
func PlacementWarnings(pl *clusterv1beta1.Placement) []string {
	var out []string
	for _, taint := range []string{TaintUnreachable, TaintUnavailable} {
		forever, limited := false, int64(-1)
		for _, t := range pl.Spec.Tolerations {
			if !tolerates(t, taint) {
				continue
			}
			if t.TolerationSeconds == nil {
				forever = true
				break
			}
			limited = max(limited, *t.TolerationSeconds)
		}
		switch {
		case forever:
		case limited >= 0:
			out = append(out, fmt.Sprintf("Placement %s/%s tolerates the taint %s for %d s only: a cluster silent longer leaves its decisions and the rollout",
				pl.Namespace, pl.Name, taint, limited))
		default:
			out = append(out, fmt.Sprintf("Placement %s/%s has no toleration of the taint %s (spec.tolerations): a silent cluster leaves its decisions and the rollout instead of counting Unreachable",
				pl.Namespace, pl.Name, taint))
		}
	}
	return out
}

// tolerates reports whether t tolerates the NoSelect taint key (OCM's
// taints of a silent cluster have no value).
func tolerates(t clusterv1beta1.Toleration, key string) bool {
	if t.Key != "" && t.Key != key {
		return false
	}
	if t.Effect != "" && t.Effect != clusterv1.TaintEffectNoSelect {
		return false
	}
	switch t.Operator {
	case clusterv1beta1.TolerationOpExists:
		return true
	case clusterv1beta1.TolerationOpEqual, "":
		return t.Key != "" && t.Value == ""
	}
	return false
}

// selection is the managed clusters a profile's rollout reaches.
type selection struct {
	// clusters are the clusters selected, by name.
	clusters []*clusterv1.ManagedCluster
	// group is each selected cluster's decision group (none with a
	// clusterSelector).
	group map[string]int32
	// silent are the managed clusters (selected or not) that are not
	// Available: a work of one no longer selected is kept until it is.
	silent map[string]bool
	// placement is nil with a clusterSelector.
	placement *planner.PlacementFindings
}

// selectClusters reads the managed clusters the profile selects: the
// decisions of its Placement (a *PlacementProblem when the Placement
// cannot be used, or decides no cluster) or the clusters its
// clusterSelector matches (empty: every one).
func (r *Reconciler) selectClusters(ctx context.Context, p *v1alpha1.NetTuningProfile) (*selection, error) {
	all := &clusterv1.ManagedClusterList{}
	if err := r.List(ctx, all); err != nil {
		return nil, fmt.Errorf("list ManagedClusters: %w", err)
	}
	sel := &selection{silent: map[string]bool{}, group: map[string]int32{}}
	byName := map[string]*clusterv1.ManagedCluster{}
	for i := range all.Items {
		mc := &all.Items[i]
		if !meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable) {
			sel.silent[mc.Name] = true
		}
		if mc.DeletionTimestamp.IsZero() {
			byName[mc.Name] = mc
		}
	}
	if ref := p.Spec.Placement; ref != nil {
		pl, err := CheckPlacement(ctx, r.Client, ref)
		if err != nil {
			return nil, err
		}
		decisions, err := PlacementDecisions(ctx, r.Client, ref.Namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		if why := DecisionsSettled(pl, decisions); why != "" {
			return nil, &decisionsChanging{msg: why}
		}
		for _, d := range decisions {
			if mc := byName[d.Cluster]; mc != nil {
				sel.clusters = append(sel.clusters, mc)
				sel.group[d.Cluster] = d.Group
			}
		}
		if len(sel.clusters) == 0 {
			why := ""
			if c := meta.FindStatusCondition(pl.Status.Conditions, clusterv1beta1.PlacementConditionSatisfied); c != nil && c.Status != metav1.ConditionTrue {
				why = fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
			}
			return nil, &PlacementProblem{Reason: "PlacementSelectsNoCluster", Message: fmt.Sprintf("spec.placement: Placement %s decides no managed cluster%s", ref, why)}
		}
		sel.placement = &planner.PlacementFindings{Warnings: PlacementWarnings(pl)}
		return sel, nil
	}
	match := labels.Everything()
	if p.Spec.ClusterSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Spec.ClusterSelector.AsMetav1())
		if err != nil {
			return nil, fmt.Errorf("spec.clusterSelector: %w", err)
		}
		match = s
	}
	for _, mc := range byName {
		if match.Matches(labels.Set(mc.Labels)) {
			sel.clusters = append(sel.clusters, mc)
		}
	}
	sort.Slice(sel.clusters, func(i, j int) bool { return sel.clusters[i].Name < sel.clusters[j].Name })
	return sel, nil
}

// DecisionsSettled says why decisions, read from a Placement's
// PlacementDecisions, are not the whole of what its status says it decided
// ("" when they are). OCM rewrites a Placement's decisions one
// PlacementDecision after the other, and its status last: read in
// between, they are a mix of the old decision and the new (a Placement
// emptied showed one group gone and another still there), and a work
// removed on such a read would be removed for nothing.
func DecisionsSettled(pl *clusterv1beta1.Placement, decisions []Decision) string {
	if int(pl.Status.NumberOfSelectedClusters) != len(decisions) {
		return fmt.Sprintf("Placement %s/%s: %d cluster(s) in its PlacementDecisions, %d in its status", pl.Namespace, pl.Name, len(decisions), pl.Status.NumberOfSelectedClusters)
	}
	byGroup := map[int32]int32{}
	for _, d := range decisions {
		byGroup[d.Group]++
	}
	for _, g := range pl.Status.DecisionGroups {
		if byGroup[g.DecisionGroupIndex] != g.ClustersCount {
			return fmt.Sprintf("Placement %s/%s: %d cluster(s) of decision group %d in its PlacementDecisions, %d in its status",
				pl.Namespace, pl.Name, byGroup[g.DecisionGroupIndex], g.DecisionGroupIndex, g.ClustersCount)
		}
	}
	return ""
}

// decisionsChanging: the Placement's decisions are being rewritten; the
// reconcile waits for them (and writes or removes no work).
type decisionsChanging struct{ msg string }

func (e *decisionsChanging) Error() string { return e.msg }

// isPlacementProblem returns err's *PlacementProblem.
func isPlacementProblem(err error) (*PlacementProblem, bool) {
	var pp *PlacementProblem
	ok := errors.As(err, &pp)
	return pp, ok
}
