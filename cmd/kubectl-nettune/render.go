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
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/planner"
)

// Vehicle roles and states shown by status.
const (
	roleCanary   = "canary"
	roleBaseline = "baseline"
	roleExcluded = "excluded"

	stateVerified    = "Verified"
	stateUpdating    = "Updating"
	stateUnreachable = "Unreachable"
	stateFailed      = "Failed"
	stateDeferred    = "Deferred"
)

// shownConditions are the profile conditions status prints when True, in order.
var shownConditions = []string{
	v1alpha1.ConditionReady,
	v1alpha1.ConditionStalled,
	v1alpha1.ConditionPaused,
	v1alpha1.ConditionConflict,
	v1alpha1.ConditionRolledBack,
}

// Render writes the status view of profile p: p's spec and status, the nodes
// it may select and their NodeNetTunings (matched by name), at time now. It
// is a pure function of its arguments.
func Render(w io.Writer, p *v1alpha1.NetTuningProfile, nodes []corev1.Node, nnts []v1alpha1.NodeNetTuning, now time.Time) {
	render(w, p, nodes, nnts, now, false)
}

// render is Render; wide adds each vehicle's nodes to the vehicle table.
func render(w io.Writer, p *v1alpha1.NetTuningProfile, nodes []corev1.Node, nnts []v1alpha1.NodeNetTuning, now time.Time, wide bool) {
	var b bytes.Buffer
	renderHeader(&b, p, now)
	renderSteps(&b, p, now)
	renderAnalysis(&b, p, now)
	renderConditions(&b, p)
	renderClusters(&b, p)
	renderVehicles(&b, p, nodes, nnts, now, wide)
	_, _ = w.Write(b.Bytes())
}

// statusView is the status view as a document (-o yaml|json).
type statusView struct {
	Profile         string                          `json:"profile"`
	Generation      int64                           `json:"generation"`
	Status          v1alpha1.NetTuningProfileStatus `json:"status"`
	Vehicles        []vehicleRow                    `json:"vehicles"`
	UnlabelledNodes []string                        `json:"unlabelledNodes,omitempty"`
	// VehicleError is why the vehicles could not be listed (a bad selector).
	VehicleError string `json:"vehicleError,omitempty"`
}

// view builds the status view document.
func view(p *v1alpha1.NetTuningProfile, nodes []corev1.Node, nnts []v1alpha1.NodeNetTuning, now time.Time) statusView {
	v := statusView{Profile: p.Name, Generation: p.Generation, Status: p.Status}
	rows, unlabelled, err := vehicleRows(p, nodes, nnts, now)
	if err != nil {
		v.VehicleError = err.Error()
	}
	v.Vehicles, v.UnlabelledNodes = rows, unlabelled
	if v.Vehicles == nil {
		v.Vehicles = []vehicleRow{}
	}
	return v
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age is a kubectl-style age ("45s", "3m10s", "2d").
func age(t, now time.Time) string {
	return duration.HumanDuration(now.Sub(t))
}

// shortDuration prints a spec duration without trailing zero units ("10m", "1h30m").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func steps(p *v1alpha1.NetTuningProfile) []v1alpha1.RolloutStep {
	if p.Spec.Rollout == nil {
		return nil
	}
	return p.Spec.Rollout.Steps
}

// currentStep is status.currentStep, 0 when unset.
func currentStep(p *v1alpha1.NetTuningProfile) int32 {
	if p.Status.CurrentStep == nil {
		return 0
	}
	return *p.Status.CurrentStep
}

// stepText describes step i of p ("setVehicles 25%", "pause until promoted").
func stepText(p *v1alpha1.NetTuningProfile, i int32) string {
	ss := steps(p)
	if int(i) >= len(ss) || i < 0 {
		return "every vehicle, then stable"
	}
	if t := planner.StepText(ss[i], shortDuration, " + "); t != "" {
		return t
	}
	return "(empty step)"
}

// rolloutState classifies the profile's status for the commands and the view.
type rolloutState int

const (
	stateNotReconciled rolloutState = iota // no status yet
	stateInProgress                        // currentRevision is rolling out
	stateStable                            // currentRevision == stableRevision
	stateRolledBack                        // currentRevision was rolled back
)

func classify(p *v1alpha1.NetTuningProfile) rolloutState {
	st := p.Status
	switch {
	case st.CurrentRevision == "":
		return stateNotReconciled
	case st.Phase == v1alpha1.PhaseRolledBack || st.CurrentRevision == st.FailedRevision:
		return stateRolledBack
	case st.CurrentRevision == st.StableRevision:
		return stateStable
	}
	return stateInProgress
}

func renderHeader(b *bytes.Buffer, p *v1alpha1.NetTuningProfile, now time.Time) {
	st := p.Status
	// Fixed label width: frames of --watch stay aligned whatever lines show.
	tw := &labelWriter{b: b}
	phase := st.Phase
	if phase == "" {
		phase = "Pending (not reconciled yet)"
	}
	fmt.Fprintf(tw, "Profile:\t%s\n", p.Name)
	fmt.Fprintf(tw, "Phase:\t%s\n", phase)
	fmt.Fprintf(tw, "Current revision:\t%s\n", orDash(st.CurrentRevision))
	fmt.Fprintf(tw, "Stable revision:\t%s\n", orDash(st.StableRevision))
	fmt.Fprintf(tw, "Failed revision:\t%s\n", orDash(st.FailedRevision))
	if len(st.CanaryVehicles) > 0 {
		fmt.Fprintf(tw, "Canary vehicles:\t%s\n", strings.Join(st.CanaryVehicles, ", "))
	}
	if ex := fleetmodel.SplitList(p.Annotations[v1alpha1.ExcludeAnnotation]); len(ex) > 0 {
		fmt.Fprintf(tw, "Excluded vehicles:\t%s\n", strings.Join(ex, ", "))
	}
	v := st.Vehicles
	fmt.Fprintf(tw, "Vehicles:\t%d total, %d updated, %d verified, %d unreachable, %d failed, %d deferred\n", v.Total, v.Updated, v.Verified, v.Unreachable, v.Failed, v.Deferred)
	if p.Spec.Rollout != nil && p.Spec.Rollout.Paused {
		fmt.Fprintf(tw, "Paused:\tby the user (kubectl nettune resume %s)\n", p.Name)
	}
	if rev, step, started, ok := fleetmodel.ParsePromote(p.Annotations[v1alpha1.PromoteAnnotation]); ok && rev == st.CurrentRevision &&
		(started.IsZero() || started.Unix() == planner.RolloutStarted(&st, rev).Unix()) {
		fmt.Fprintf(tw, "Promoted step:\t%d\n", step)
	}
	if a := strings.TrimSpace(p.Annotations[v1alpha1.AbortAnnotation]); a != "" {
		fmt.Fprintf(tw, "Aborted revision:\t%s\n", a)
	}
	if p.Spec.Rollout == nil {
		fmt.Fprintf(tw, "Step:\t- (no spec.rollout: every vehicle gets a new revision at once)\n")
	} else {
		cur := currentStep(p)
		line := fmt.Sprintf("%d/%d %s", cur, len(steps(p)), stepText(p, cur))
		if classify(p) == stateInProgress && st.StepStarted != nil {
			line += fmt.Sprintf(" (started %s ago)", age(st.StepStarted.Time, now))
		}
		fmt.Fprintf(tw, "Step:\t%s\n", line)
	}
	if st.ObservedGeneration != 0 && st.ObservedGeneration != p.Generation {
		fmt.Fprintf(tw, "Note:\tstatus describes generation %d, the spec is at generation %d (the controller has not caught up)\n", st.ObservedGeneration, p.Generation)
	}
}

// labelWriter writes "Label:\tvalue" lines with the labels padded to one width.
type labelWriter struct{ b *bytes.Buffer }

// labelWidth fits the longest label, "Excluded vehicles:", and a space.
const labelWidth = 19

func (l *labelWriter) Write(p []byte) (int, error) {
	label, value, ok := strings.Cut(string(p), "\t")
	if !ok {
		return l.b.Write(p)
	}
	fmt.Fprintf(l.b, "%-*s%s", labelWidth, label, value)
	return len(p), nil
}

func renderSteps(b *bytes.Buffer, p *v1alpha1.NetTuningProfile, now time.Time) {
	if p.Spec.Rollout == nil {
		return
	}
	n := int32(len(steps(p)))
	cur := currentStep(p)
	state := classify(p)
	for i := int32(0); i <= n; i++ {
		mark := "[ ]"
		switch state {
		case stateStable:
			mark = "[x]"
		case stateInProgress:
			switch {
			case i < cur:
				mark = "[x]"
			case i == cur:
				mark = "[>]"
			}
		case stateRolledBack:
			switch {
			case i < cur:
				mark = "[x]"
			case i == cur:
				mark = "[!]"
			}
		}
		text := stepText(p, i)
		if state == stateInProgress && i == cur {
			text += currentStepNote(p, i, now)
		}
		fmt.Fprintf(b, "  %s %d %s\n", mark, i, text)
	}
}

// currentStepNote says what the current step waits for.
func currentStepNote(p *v1alpha1.NetTuningProfile, i int32, now time.Time) string {
	ss := steps(p)
	if int(i) >= len(ss) {
		return ""
	}
	s := ss[i]
	switch {
	case s.Pause != nil && s.Pause.Duration == nil:
		return fmt.Sprintf(" (waiting: kubectl nettune promote %s)", p.Name)
	case s.Pause != nil && p.Status.StepStarted != nil:
		left := p.Status.StepStarted.Add(s.Pause.Duration.Duration).Sub(now)
		if left > 0 {
			return fmt.Sprintf(" (%s left)", duration.HumanDuration(left))
		}
	case s.Analysis != nil:
		var phases []string
		for _, name := range s.Analysis.Names() {
			for _, a := range p.Status.Analysis {
				if a.Name == name && a.Step == i && a.Phase != "" {
					phases = append(phases, a.Phase)
				}
			}
		}
		if len(phases) > 0 {
			return fmt.Sprintf(" (%s)", strings.Join(phases, ", "))
		}
	}
	return ""
}

func renderAnalysis(b *bytes.Buffer, p *v1alpha1.NetTuningProfile, now time.Time) {
	res := p.Status.Analysis
	if len(res) == 0 {
		return
	}
	fmt.Fprintf(b, "\nAnalysis:\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSTEP\tPHASE\tCANARY\tBASELINE\tTHRESHOLD\tOK\tFAILED\tINCONCLUSIVE\tERRORS\tMEASURED\tMESSAGE")
	for _, a := range res {
		measured := "-"
		if a.LastMeasured != nil {
			measured = age(a.LastMeasured.Time, now) + " ago"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n",
			a.Name, a.Step, orDash(a.Phase), orDash(a.CanaryValue), orDash(a.BaselineValue), orDash(a.Threshold),
			a.Successful, a.Failed, a.Inconclusive, a.Errors, measured, oneLine(a.Message))
	}
	_ = tw.Flush()
	for _, a := range res {
		renderVerdict(b, a)
	}
}

// renderVerdict shows a judge's latest verdict per host pair: slow messages
// (beyond the threshold) of the canary and the baseline, the posterior
// probability that the canary is worse, and the rank test's p-value.
func renderVerdict(b *bytes.Buffer, a v1alpha1.AnalysisResult) {
	if a.Verdict == "" {
		return
	}
	fmt.Fprintf(b, "\nJudge %s (step %d): %s", a.Name, a.Step, a.Verdict)
	if a.Pair != "" {
		fmt.Fprintf(b, " on %s", a.Pair)
	}
	if a.Confidence != "" {
		fmt.Fprintf(b, ", each pair judged at confidence %s", a.Confidence)
	}
	b.WriteString("\n")
	if len(a.Pairs) == 0 {
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PAIR\tVERDICT\tCANARY SLOW\tBASELINE SLOW\tP(WORSE)\tRANK P")
	share := func(k, n int64) string {
		if n == 0 {
			return "0/0"
		}
		return fmt.Sprintf("%d/%d (%.2f%%)", k, n, 100*float64(k)/float64(n))
	}
	for _, p := range a.Pairs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", p.Pair, p.Verdict, share(p.CanarySlow, p.CanaryTotal),
			share(p.BaselineSlow, p.BaselineTotal), orDash(p.Probability), orDash(p.RankP))
	}
	_ = tw.Flush()
}

// oneLine keeps a message on one table row.
func oneLine(s string) string {
	return orDash(strings.Join(strings.Fields(s), " "))
}

func renderConditions(b *bytes.Buffer, p *v1alpha1.NetTuningProfile) {
	var lines []string
	for _, t := range shownConditions {
		c := meta.FindStatusCondition(p.Status.Conditions, t)
		if c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		l := fmt.Sprintf("  %s (%s)", c.Type, orDash(c.Reason))
		if m := strings.TrimSpace(c.Message); m != "" {
			l += ": " + strings.Join(strings.Fields(m), " ")
		}
		lines = append(lines, l)
	}
	b.WriteString("\nConditions:\n")
	if len(lines) == 0 {
		b.WriteString("  none of Ready, Stalled, Paused, Conflict, RolledBack is True\n")
		return
	}
	b.WriteString(strings.Join(lines, "\n") + "\n")
}

// vehicleRow is one line of the vehicle table.
type vehicleRow struct {
	Name      string    `json:"name"`
	Hardware  string    `json:"hardware,omitempty"`
	Role      string    `json:"role"`
	Revision  string    `json:"revision"`
	Verified  int       `json:"verifiedNodes"`
	Nodes     int       `json:"nodes"`
	State     string    `json:"state"`
	LastSeen  time.Time `json:"lastSeen,omitzero"` // zero: some node never reported
	NodeNames []string  `json:"nodeNames"`
}

// vehicleRows groups the nodes p selects into vehicles and summarizes each
// from its nodes' NodeNetTunings, with the controller's own model
// (fleetmodel.Select and Observe). It also returns the selected nodes that
// carry no vehicle label.
func vehicleRows(p *v1alpha1.NetTuningProfile, nodes []corev1.Node, nnts []v1alpha1.NodeNetTuning, now time.Time) ([]vehicleRow, []string, error) {
	f, err := fleetmodel.Select(p, nodes)
	if err != nil {
		return nil, nil, err
	}
	byNode := map[string]*v1alpha1.NodeNetTuning{}
	for i := range nnts {
		byNode[nnts[i].Name] = &nnts[i]
	}
	canary := map[string]bool{}
	for _, v := range p.Status.CanaryVehicles {
		canary[v] = true
	}
	excluded := map[string]bool{}
	for _, v := range fleetmodel.SplitList(p.Annotations[v1alpha1.ExcludeAnnotation]) {
		excluded[v] = true
	}
	after := p.Spec.Rollout.GetUnreachableAfter()
	var rows []vehicleRow
	for _, v := range f.Observe(p.Name, byNode, nil) {
		r := vehicleRow{Name: v.Name, Role: roleBaseline, Nodes: v.Nodes, Verified: v.VerifiedNodes, LastSeen: v.LastSeen,
			Hardware: strings.Join(v.Hardware, "+"), Revision: orDash(v.Assigned)}
		for _, n := range f.Vehicles[v.Name] {
			r.NodeNames = append(r.NodeNames, n.Name)
		}
		switch {
		case excluded[v.Name]:
			r.Role = roleExcluded
		case canary[v.Name]:
			r.Role = roleCanary
		}
		if v.Mixed {
			r.Revision = "mixed"
		}
		switch {
		case v.Failed:
			r.State = stateFailed
		case !planner.Reachable(v, now, after):
			r.State = stateUnreachable
		case v.Verified:
			r.State = stateVerified
		case v.Deferred:
			// Held back by the vehicle (gate closed, no window open).
			r.State = stateDeferred + " (" + v.DeferredReason + ")"
		default:
			r.State = stateUpdating
		}
		rows = append(rows, r)
	}
	return rows, f.Unlabelled, nil
}

// renderClusters lists a hub profile's clusters (status.clusters): their
// decision group, their state in the rollout in Open Cluster Management's
// words, their vehicles and what the hub saw. Nothing for a cluster's
// profile.
func renderClusters(b *bytes.Buffer, p *v1alpha1.NetTuningProfile) {
	st := p.Status
	if st.Clusters == nil && p.Spec.Placement == nil && p.Spec.ClusterSelector == nil {
		return
	}
	b.WriteString("\n")
	switch {
	case p.Spec.Placement != nil:
		fmt.Fprintf(b, "Clusters (Placement %s):\n", p.Spec.Placement)
	default:
		b.WriteString("Clusters (clusterSelector):\n")
	}
	if len(st.Clusters) == 0 {
		b.WriteString("  none selected\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tGROUP\tROLLOUT\tVEHICLES\tVERIFIED\tREACHABLE\tMESSAGE")
	for _, c := range st.Clusters {
		reachable := "yes"
		if !c.Reachable {
			reachable = "no"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%d\t%s\t%s\n", c.Name, c.DecisionGroup, orDash(string(c.RolloutStatus)), c.Vehicles, c.Verified, reachable, orDash(oneLine(c.Message)))
	}
	_ = tw.Flush()
}

func renderVehicles(b *bytes.Buffer, p *v1alpha1.NetTuningProfile, nodes []corev1.Node, nnts []v1alpha1.NodeNetTuning, now time.Time, wide bool) {
	rows, unlabelled, err := vehicleRows(p, nodes, nnts, now)
	b.WriteString("\n")
	if err != nil {
		fmt.Fprintf(b, "Vehicles: cannot select nodes: %v\n", err)
		return
	}
	vehicleLabel := p.Spec.GetVehicleLabel()
	if len(rows) == 0 {
		fmt.Fprintf(b, "No vehicles: no node selected by the profile carries the label %s.\n", vehicleLabel)
	} else {
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		head := "VEHICLE\tHARDWARE\tROLE\tREVISION\tNODES\tSTATE\tLAST SEEN"
		if wide {
			head += "\tNODE NAMES"
		}
		fmt.Fprintln(tw, head)
		for _, r := range rows {
			seen := "never"
			if !r.LastSeen.IsZero() {
				seen = age(r.LastSeen, now) + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s", r.Name, orDash(r.Hardware), r.Role, r.Revision, r.Verified, r.Nodes, r.State, seen)
			if wide {
				fmt.Fprintf(tw, "\t%s", strings.Join(r.NodeNames, ","))
			}
			fmt.Fprintln(tw)
		}
		_ = tw.Flush()
	}
	if len(unlabelled) > 0 {
		fmt.Fprintf(b, "Selected nodes without the label %s (not tuned): %s\n", vehicleLabel, strings.Join(unlabelled, ", "))
	}
}
