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

package planner

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

// RenderFindings are what the node renderer found for the profile on every
// node, sorted: items an equal-priority profile sets differently (applied
// by neither) and what rendering skipped.
type RenderFindings struct {
	Conflicts []string
	Warnings  []string
}

// renderConditions sets the Conflict and RenderWarnings conditions from f.
func renderConditions(st *v1alpha1.NetTuningProfileStatus, gen int64, f RenderFindings, now time.Time) {
	c := metav1.Condition{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionFalse, Reason: "NoConflict",
		Message: "no item clashes with an equal-priority profile", ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)}
	if len(f.Conflicts) > 0 {
		msg := boundedList(fmt.Sprintf("%d item(s) set differently by an equal-priority profile are applied by neither: ", len(f.Conflicts)), f.Conflicts)
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "EqualPriorityClash", msg
	}
	meta.SetStatusCondition(&st.Conditions, c)

	c = metav1.Condition{Type: v1alpha1.ConditionRenderWarnings, Status: metav1.ConditionFalse, Reason: "RenderedCleanly",
		Message: "every selected node rendered without skipping anything", ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)}
	if len(f.Warnings) > 0 {
		msg := boundedList(fmt.Sprintf("%d warning(s): ", len(f.Warnings)), f.Warnings)
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "SkippedItems", msg
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// AnalysisFindings are the analyses of the rollout that cannot decide on
// the selected fleet, one sentence each naming the analysis and the numbers
// (analysis.Schedule.Problems, analysis.SampleProblems).
type AnalysisFindings struct {
	Warnings []string
}

// analysisConditions sets the AnalysisWarnings condition from f.
func analysisConditions(st *v1alpha1.NetTuningProfileStatus, gen int64, f AnalysisFindings, now time.Time) {
	c := metav1.Condition{Type: v1alpha1.ConditionAnalysisWarnings, Status: metav1.ConditionFalse, Reason: "AnalysesCanDecide",
		Message: "every analysis can collect its minimum samples on the selected fleet", ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)}
	if len(f.Warnings) > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, "AnalysisCannotDecide"
		c.Message = boundedList(fmt.Sprintf("%d analysis warning(s): ", len(f.Warnings)), f.Warnings)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// AnalysisWarningsRaised reports whether the AnalysisWarnings condition
// turned True, or changed its message while True, from before to after,
// with its message: worth one Warning event.
func AnalysisWarningsRaised(before, after []metav1.Condition) (msg string, raised bool) {
	c := meta.FindStatusCondition(after, v1alpha1.ConditionAnalysisWarnings)
	if c == nil || c.Status != metav1.ConditionTrue {
		return "", false
	}
	old := meta.FindStatusCondition(before, v1alpha1.ConditionAnalysisWarnings)
	return c.Message, old == nil || old.Status != metav1.ConditionTrue || old.Message != c.Message
}

// RenderWarningsRaised reports whether the RenderWarnings condition turned
// True from before to after, with its message: worth one Warning event (not
// one per node while the renderer works through the fleet: the condition's
// message keeps the latest).
func RenderWarningsRaised(before, after []metav1.Condition) (msg string, raised bool) {
	c := meta.FindStatusCondition(after, v1alpha1.ConditionRenderWarnings)
	if c == nil || c.Status != metav1.ConditionTrue {
		return "", false
	}
	old := meta.FindStatusCondition(before, v1alpha1.ConditionRenderWarnings)
	return c.Message, old == nil || old.Status != metav1.ConditionTrue
}

// maxConditionMessage is the longest condition message written; a longer
// one ends in "...".
const maxConditionMessage = 1024

// boundedList is prefix followed by items joined with "; ", cut to
// maxConditionMessage bytes (its last three "..."). Only the items that
// show are joined: every node's warning of a 30,000-node fleet was a 4 MB
// string per reconcile, of which 1 KB was kept.
func boundedList(prefix string, items []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i, it := range items {
		if b.Len() > maxConditionMessage {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(it)
	}
	msg := b.String()
	if len(msg) > maxConditionMessage {
		msg = msg[:maxConditionMessage-3] + "..."
	}
	return msg
}

// Stall marks st Stalled and not Ready for reason, observed at generation
// gen: the controller could not plan (reason ReconcileError, msg the
// error). It is the status of a reconcile without a plan; the rest of st
// stays as the last plan wrote it.
func Stall(st *v1alpha1.NetTuningProfileStatus, gen int64, reason, msg string, now time.Time) {
	st.ObservedGeneration = gen
	if len(msg) > maxConditionMessage {
		msg = msg[:maxConditionMessage-3] + "..."
	}
	for _, c := range []metav1.Condition{
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg},
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg},
	} {
		c.ObservedGeneration, c.LastTransitionTime = gen, metav1.NewTime(now)
		meta.SetStatusCondition(&st.Conditions, c)
	}
}
