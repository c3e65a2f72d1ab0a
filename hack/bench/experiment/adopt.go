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
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/fleet"
)

// adoption is the adoption trial: the base made worse (cwnd 80, which
// overflows the port under the cwnd set's incast), an experiment with the
// shipped cwnd 30 as its variant, and `kubectl nettune experiment adopt` of
// the winner, watched as the base's canary rollout takes it to the fleet.
type adoption struct {
	baseRev      string // the worse base's revision, the control's
	winner       string
	ranking      string // the experiment's ranking line (shares and effect)
	adoptOut     string // what adopt printed
	adoptErr     string // why adopt refused, if it did
	newRev       string // the base's revision after adopt
	held         int32  // vehicles on newRev while the rollout held at its first pause
	heldOf       int32  // of the profile's vehicles
	heldCanaries []string
	toCanary     time.Duration // from adopt to the canary vehicles verified on newRev
	toFleet      time.Duration // from adopt to every vehicle verified on newRev, Healthy
	took         time.Duration
}

// adoptPause is the canary pause of the base's rollout during the adoption
// trial: long enough to read the fleet while only the canary runs newRev.
const adoptPause = 30 * time.Second

func runAdoption(ctx context.Context, f *fleet.Fleet, c config, judge v1alpha1.AnalysisSpec) (adoption, error) {
	began := time.Now()
	var a adoption
	cl := f.CP.Client
	getBase := func() (*v1alpha1.NetTuningProfile, error) {
		p := &v1alpha1.NetTuningProfile{}
		return p, cl.Get(ctx, client.ObjectKey{Name: "xavier-lan"}, p)
	}
	// A worse base, rolled out canary first (two vehicles, a pause, then
	// the rest): the rollout the adopted winner will follow.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := getBase()
		if err != nil {
			return err
		}
		p.Spec.Defaults.Cwnd = &v1alpha1.Cwnd{Value: 80, Lock: ptr(true)}
		p.Spec.Defaults.Initcwnd, p.Spec.Defaults.Ssthresh = ptr(int32(25)), ptr(int32(80))
		all := intstr.FromString("100%")
		p.Spec.Rollout = &v1alpha1.RolloutSpec{
			Canary:         v1alpha1.CanarySpec{Count: ptr(int32(2))},
			MaxUnavailable: &all,
			Steps: []v1alpha1.RolloutStep{
				{Pause: &v1alpha1.PauseStep{Duration: &metav1.Duration{Duration: adoptPause}}},
				{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}},
			},
		}
		return cl.Update(ctx, p)
	})
	if err != nil {
		return a, fmt.Errorf("making the base cwnd 80: %w", err)
	}
	stable := func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == v1alpha1.PhaseHealthy &&
			p.Status.CurrentRevision == revision.Name(p) && p.Status.StableRevision == p.Status.CurrentRevision &&
			p.Status.Vehicles.Verified == p.Status.Vehicles.Total
	}
	if _, err := waitBase(ctx, getBase, 5*time.Minute, stable); err != nil {
		return a, fmt.Errorf("the cwnd 80 base never turned stable: %w", err)
	}

	stopTraffic := f.StartTrafficWith(ctx, variantSets["cwnd"].traffic)
	j := *judge.DeepCopy()
	j.Judge.Threshold = &metav1.Duration{Duration: c.thresholdOf("cwnd")}
	x := &v1alpha1.NetTuningExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "adopt-cwnd30"},
		Spec: v1alpha1.NetTuningExperimentSpec{
			Profile: "xavier-lan", MaxPercent: ptr(int32(100)), Duration: metav1.Duration{Duration: c.duration}, Analysis: j,
			Variants: []v1alpha1.ExperimentVariant{{Name: "cwnd30", Parameters: v1alpha1.TCPParameters{
				Cwnd: &v1alpha1.Cwnd{Value: 30}, Initcwnd: ptr(int32(25)), Ssthresh: ptr(int32(30))}}},
		},
	}
	if err := cl.Create(ctx, x); err != nil {
		stopTraffic()
		return a, err
	}
	deadline := time.Now().Add(c.duration + 5*time.Minute)
	for {
		if err := cl.Get(ctx, client.ObjectKey{Name: x.Name}, x); err != nil {
			stopTraffic()
			return a, err
		}
		if x.Status.Phase == v1alpha1.ExperimentCompleted || x.Status.Phase == v1alpha1.ExperimentAborted {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stopTraffic()
			return a, errors.New("the adoption experiment did not complete in time")
		}
		time.Sleep(time.Second)
	}
	stopTraffic()
	a.baseRev = x.Status.BaseRevision
	if x.Status.Phase != v1alpha1.ExperimentCompleted {
		return a, fmt.Errorf("the adoption experiment ended %s: %s", x.Status.Phase, x.Status.Message)
	}
	for _, res := range x.Status.Results {
		a.winner = res.Winner
		var parts []string
		for _, r := range res.Ranking {
			s := fmt.Sprintf("%s %s %%", r.Arm, r.Share)
			if r.Effect != "" {
				s += fmt.Sprintf(" (%s pp [%s, %s], P(better than control) %s)", r.Effect, r.EffectLow, r.EffectHigh, r.ProbBetter)
			}
			parts = append(parts, s)
		}
		a.ranking = strings.Join(parts, "; ")
	}

	adopted := time.Now()
	out, err := f.Plugin(ctx, "experiment", "adopt", x.Name)
	a.adoptOut = strings.TrimSpace(out)
	if err != nil {
		a.adoptErr = err.Error()
		a.took = time.Since(began)
		return a, nil
	}
	p, err := getBase()
	if err != nil {
		return a, err
	}
	a.newRev = revision.Name(p)
	// The canary holds for adoptPause: read the fleet then.
	canary, err := waitBase(ctx, getBase, 3*time.Minute, func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentRevision == a.newRev && p.Status.CurrentStep != nil && *p.Status.CurrentStep == 0 &&
			p.Status.Vehicles.Updated > 0 && p.Status.Vehicles.Verified >= p.Status.Vehicles.Updated
	})
	if err != nil {
		return a, fmt.Errorf("the adopted revision's canary: %w", err)
	}
	a.toCanary = time.Since(adopted)
	a.heldOf = canary.Status.Vehicles.Total
	for _, rv := range canary.Status.RevisionVehicles {
		if rv.Revision == a.newRev {
			a.held = rv.Vehicles
		}
	}
	a.heldCanaries = canary.Status.CanaryVehicles
	if _, err := waitBase(ctx, getBase, 5*time.Minute, stable); err != nil {
		return a, fmt.Errorf("the adopted revision never reached the whole fleet: %w", err)
	}
	a.toFleet = time.Since(adopted)
	a.took = time.Since(began)
	return a, nil
}

// waitBase polls the base profile until cond holds.
func waitBase(ctx context.Context, get func() (*v1alpha1.NetTuningProfile, error), timeout time.Duration, cond func(*v1alpha1.NetTuningProfile) bool) (*v1alpha1.NetTuningProfile, error) {
	deadline := time.Now().Add(timeout)
	for {
		p, err := get()
		if err == nil && cond(p) {
			return p, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("not within %s: phase %s, current %s, stable %s, step %v, vehicles %+v",
					timeout, p.Status.Phase, p.Status.CurrentRevision, p.Status.StableRevision, p.Status.CurrentStep, p.Status.Vehicles)
			}
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// writeAdoption is the report's adoption section.
func writeAdoption(s *strings.Builder, a *adoption) {
	fmt.Fprintf(s, "\n## Adopting the winner\n\n")
	fmt.Fprintf(s, "After the trials the base is made worse — cwnd 80 (locked), initcwnd 25, ssthresh 80, with a canary rollout: 2 canary vehicles, a %s pause, then every vehicle — and one experiment runs the shipped cwnd 30 as its variant under the cwnd set's incast, judged at %s. Then `kubectl nettune experiment adopt` writes the winner into the base, and the base's rollout is watched.\n\n",
		adoptPause, variantSets["cwnd"].threshold)
	fmt.Fprintf(s, "- Experiment (control: the cwnd 80 base, revision `%s`): winner **%s**; %s.\n", a.baseRev, a.winner, a.ranking)
	if a.adoptErr != "" {
		fmt.Fprintf(s, "- `kubectl nettune experiment adopt` refused: %s\n", a.adoptErr)
		return
	}
	fmt.Fprintf(s, "- `kubectl nettune experiment adopt adopt-cwnd30`: %s\n", a.adoptOut)
	fmt.Fprintf(s, "- The base's new revision `%s`: the canary vehicles (%s) verified it %s after the adopt; while the rollout held at its pause, **%d of %d** vehicles had it; every vehicle verified it and the profile was Healthy %s after the adopt.\n",
		a.newRev, strings.Join(a.heldCanaries, ", "), a.toCanary.Round(time.Second), a.held, a.heldOf, a.toFleet.Round(time.Second))
	fmt.Fprintf(s, "- The adoption trial took %s.\n", a.took.Round(time.Second))
}
