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
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/experiment"
	"github.com/nettune/nettune/controllers/revision"
)

// AdoptedAnnotation (on a profile, written by experiment adopt) records the
// experiment and variant its parameters came from.
const AdoptedAnnotation = "nettune.io/adopted-from"

// experimentCommand is `kubectl nettune experiment status|adopt`.
func (c *cli) experimentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiment",
		Short: "Show a NetTuningExperiment's arms and ranking, or adopt its winner",
	}
	status := &cobra.Command{
		Use:   "status EXPERIMENT",
		Short: "Show the experiment: phase, arms with their vehicles and analyses, and the ranking per hardware model",
		Example: `  kubectl nettune experiment status cwnd-sweep
  kubectl nettune experiment status cwnd-sweep -o yaml`,
		Args:              args("EXPERIMENT", 1, 1),
		ValidArgsFunction: c.completeExperiments,
	}
	out := outputFlag(status.Flags(), "yaml", "json")
	status.RunE = func(cmd *cobra.Command, pos []string) error {
		o, err := out.get()
		if err != nil {
			return err
		}
		x, err := c.getExperiment(cmd.Context(), pos[0])
		if err != nil {
			return err
		}
		if o != "" {
			return printDoc(c.stdout, o, x)
		}
		printExperiment(c.stdout, x, c.now())
		return nil
	}
	adopt := &cobra.Command{
		Use:   "adopt EXPERIMENT",
		Short: "Write the winning variant's parameters into the base profile, which then rolls out as its spec.rollout says (canary first)",
		Long: `Write the winning variant's parameters into the experiment's base profile.

The experiment must be Completed and the base profile still on the revision
the experiment measured against. The winner is the results' winner for every
hardware model; when the models disagree, --hardware chooses whose. A winner
of "control" (no variant beat the base with the confidence asked) adopts
nothing. The change is an ordinary edit of the profile: it rolls out through
its spec.rollout, canary first, with its analyses.`,
		Example:           "  kubectl nettune experiment adopt cwnd-sweep\n  kubectl nettune experiment adopt cwnd-sweep --hardware orin",
		Args:              args("EXPERIMENT", 1, 1),
		ValidArgsFunction: c.completeExperiments,
	}
	hardware := adopt.Flags().String("hardware", "", "adopt the winner of this hardware model (when the models' winners differ)")
	adopt.RunE = func(cmd *cobra.Command, pos []string) error { return c.adopt(cmd.Context(), pos[0], *hardware) }
	cmd.AddCommand(status, adopt)
	return cmd
}

func (c *cli) completeExperiments(cmd *cobra.Command, pos []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(pos) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cl, err := c.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var l v1alpha1.NetTuningExperimentList
	if err := cl.List(cmd.Context(), &l); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, x := range l.Items {
		names = append(names, x.Name)
	}
	sort.Strings(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

func (c *cli) getExperiment(ctx context.Context, name string) (*v1alpha1.NetTuningExperiment, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	x := &v1alpha1.NetTuningExperiment{}
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, x); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("experiment %q not found", name)
		}
		return nil, fmt.Errorf("reading experiment %s: %w", name, err)
	}
	return x, nil
}

// printExperiment is the table view of an experiment.
func printExperiment(w io.Writer, x *v1alpha1.NetTuningExperiment, now time.Time) {
	st := x.Status
	phase := st.Phase
	if phase == "" {
		phase = "(not started)"
	}
	fmt.Fprintf(w, "Experiment: %s   Profile: %s   Phase: %s\n", x.Name, x.Spec.Profile, phase)
	if st.BaseRevision != "" {
		fmt.Fprintf(w, "Base revision: %s\n", st.BaseRevision)
	}
	if st.MeasuringSince != nil {
		end := st.MeasuringSince.Add(x.Spec.Duration.Duration)
		left := ""
		if st.Finished == nil && end.After(now) {
			left = fmt.Sprintf(" (%s left)", end.Sub(now).Round(time.Second))
		}
		fmt.Fprintf(w, "Measuring since: %s, for %s%s\n", st.MeasuringSince.UTC().Format(time.RFC3339), x.Spec.Duration.Duration, left)
	}
	if st.Message != "" {
		fmt.Fprintf(w, "Message: %s\n", st.Message)
	}
	for _, cnd := range st.Conditions {
		if cnd.Type == v1alpha1.ConditionStalled && cnd.Status == "True" {
			fmt.Fprintf(w, "Stalled (%s): %s\n", cnd.Reason, cnd.Message)
		}
	}
	variants := map[string]string{v1alpha1.ControlArm: "base revision"}
	for _, v := range x.Spec.Variants {
		variants[v.Name] = experiment.Describe(v.Parameters)
	}
	if len(st.Arms) > 0 {
		fmt.Fprintln(w, "\nArms:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ARM\tPARAMETERS\tPHASE\tVEHICLES\tANALYSES")
		for _, a := range st.Arms {
			var vs, an []string
			for _, co := range a.Cohorts {
				vs = append(vs, fmt.Sprintf("%s:%d", co.Hardware, len(co.Vehicles)))
				for _, r := range co.Analysis {
					an = append(an, fmt.Sprintf("%s/%s %s", r.Name, co.Hardware, r.Verdict))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Name, variants[a.Name], a.Phase, strings.Join(vs, " "), strings.Join(an, ", "))
		}
		tw.Flush()
		for _, a := range st.Arms {
			if a.StopReason != "" {
				fmt.Fprintf(w, "  %s stopped: %s\n", a.Name, a.StopReason)
			}
		}
	}
	for _, res := range st.Results {
		fmt.Fprintf(w, "\nRanking on %s (winner: %s):\n", res.Hardware, res.Winner)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RANK\tARM\tSLOW/TOTAL\tSLOW %\tEFFECT pp [interval]\tP(BETTER THAN CONTROL)\tP(ABOVE NEXT)")
		for _, r := range res.Ranking {
			rank := "-"
			if r.Rank > 0 {
				rank = fmt.Sprint(r.Rank)
			}
			effect := ""
			if r.Effect != "" {
				effect = fmt.Sprintf("%s [%s, %s]", r.Effect, r.EffectLow, r.EffectHigh)
			}
			arm := r.Arm
			if r.Stopped {
				arm += " (stopped)"
			}
			if r.Unguarded != "" {
				arm += " (unguarded)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", rank, arm, r.Slow, r.Total, r.Share, effect, r.ProbBetter, r.ProbAboveNext)
		}
		tw.Flush()
		for _, r := range res.Ranking {
			if r.Unguarded != "" {
				fmt.Fprintf(w, "  %s is not recommended on %s: %s\n", r.Arm, res.Hardware, r.Unguarded)
			}
		}
	}
}

// winnerOf picks the variant to adopt: the winner of the hardware model
// asked for, or the one winner of every model.
func winnerOf(x *v1alpha1.NetTuningExperiment, hardware string) (string, error) {
	if len(x.Status.Results) == 0 {
		return "", fmt.Errorf("experiment %s has no results", x.Name)
	}
	byModel := map[string]string{}
	var models []string
	for _, r := range x.Status.Results {
		byModel[r.Hardware] = r.Winner
		models = append(models, fmt.Sprintf("%s: %s", r.Hardware, r.Winner))
	}
	if hardware != "" {
		w, ok := byModel[hardware]
		if !ok {
			return "", fmt.Errorf("experiment %s has no result for hardware %q (winners %s)", x.Name, hardware, strings.Join(models, ", "))
		}
		return w, nil
	}
	winner := ""
	for _, w := range byModel {
		if winner != "" && w != winner {
			return "", fmt.Errorf("experiment %s: the hardware models' winners differ (%s); choose one with --hardware", x.Name, strings.Join(models, ", "))
		}
		winner = w
	}
	return winner, nil
}

// adopt writes the winner's parameters into the base profile.
func (c *cli) adopt(ctx context.Context, name, hardware string) error {
	x, err := c.getExperiment(ctx, name)
	if err != nil {
		return err
	}
	if x.Status.Phase != v1alpha1.ExperimentCompleted {
		return fmt.Errorf("experiment %s is %s: only a Completed experiment's winner can be adopted", name, orNone(x.Status.Phase))
	}
	winner, err := winnerOf(x, hardware)
	if err != nil {
		return err
	}
	if winner == v1alpha1.ControlArm {
		return fmt.Errorf("experiment %s: no variant beat the control with the confidence asked (winner: control); nothing to adopt", name)
	}
	var variant *v1alpha1.ExperimentVariant
	for i := range x.Spec.Variants {
		if x.Spec.Variants[i].Name == winner {
			variant = &x.Spec.Variants[i]
		}
	}
	if variant == nil {
		return fmt.Errorf("experiment %s: winner %q is not among its variants", name, winner)
	}
	from := x.Status.BaseRevision
	moved := func(now string) error {
		return fmt.Errorf("profile %s changed since experiment %s measured against revision %s (its content is now %s): run the experiment again",
			x.Spec.Profile, name, from, now)
	}
	p, err := c.updateContent(ctx, nil, x.Spec.Profile, from, "adopt", "adopting variant "+winner, moved, func(p *v1alpha1.NetTuningProfile) error {
		p.Spec = *experiment.Overlay(&p.Spec, variant.Parameters)
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AdoptedAnnotation] = name + "/" + winner
		return nil
	})
	if err != nil {
		return err
	}
	how := "every selected vehicle at once (the profile has no spec.rollout)"
	if p.Spec.Rollout != nil {
		how = "canary first, as its spec.rollout says"
	}
	fmt.Fprintf(c.stdout, "%s: adopted variant %s (%s) from experiment %s; revision %s -> %s rolls out %s (kubectl nettune status %s -w)\n",
		p.Name, winner, experiment.Describe(variant.Parameters), name, from, revision.Name(p), how, p.Name)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "not started"
	}
	return s
}
