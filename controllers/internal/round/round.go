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

// Package round is one rollout round of a NetTuningProfile, the sequence a
// cluster's profile reconciler (controllers/profile) and the hub's
// (controllers/hub) share: store the profile's revision, observe the
// fleet, plan, take the measurements the plan asks for (measure), plan
// again on their results, carry the decision out (the hub's
// ManifestWorks), and prune the revisions the status no longer names.
//
// The planner writes the whole status (planner.Output.Status); the
// reconciler patches it once, then announces what the round did (the
// planner's events, the measurements taken).
package round

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/internal/measure"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/controllers/revision"
)

// Round is what a reconciler brings to a round besides the profile.
type Round struct {
	// Revisions stores the profile's ControllerRevisions, owned by the
	// profile through Scheme.
	Revisions *revision.Store
	Scheme    *runtime.Scheme
	// Backends says where analyses query and with which credentials.
	Backends measure.Config
	// Observe completes the planner's input once the profile's revision
	// (in.Revision) is stored: the round has set what comes from the
	// profile (Profile, Revision, Generation, Status, Commands), Observe
	// sets Now and what the reconciler observes (Rollout, Vehicles, and
	// LivenessTimer, Render, Hub or Clusters), and returns the vehicles'
	// kernels for the measurements.
	Observe func(ctx context.Context, in *planner.Input) (measure.Kernels, error)
	// MeasureClock, when set, is read for the time the measurements are
	// taken at; they are taken at the input's Now when nil.
	MeasureClock func() time.Time
	// Replan, when set, updates the input of the plan that records the
	// measurements taken (a cluster reads the renderer's findings again).
	Replan func(in *planner.Input)
	// Apply, when set, carries the decision out before the revisions are
	// pruned (the hub writes its ManifestWorks); the round fails with its
	// error, after pruning all the same.
	Apply func(ctx context.Context, out planner.Output) error
}

// Result is a round's decision, and the measurements it took, to announce
// once the status that records them is written.
type Result struct {
	planner.Output
	Taken []measure.Taken
}

// Run runs one round for p, which it does not modify.
func (r Round) Run(ctx context.Context, p *v1alpha1.NetTuningProfile) (Result, error) {
	rev := revision.Name(p)
	if err := r.Revisions.Ensure(ctx, p, rev, r.Scheme); err != nil {
		return Result{}, err
	}
	in := planner.Input{Profile: p.Name, Revision: rev, Generation: p.Generation, Status: p.Status, Commands: fleetmodel.Commands(p)}
	kernels, err := r.Observe(ctx, &in)
	if err != nil {
		return Result{}, err
	}
	out := planner.Plan(in)
	var taken []measure.Taken
	if len(out.Measures) > 0 {
		at := in.Now
		if r.MeasureClock != nil {
			at = r.MeasureClock()
		}
		var results []v1alpha1.AnalysisResult
		results, taken = measure.Due(ctx, r.Backends, p.Name, out, at, kernels)
		if len(results) > 0 {
			in.Status, in.Results = out.Status, results
			if r.Replan != nil {
				r.Replan(&in)
			}
			out = planner.Plan(in)
		}
	}

	var errs []error
	if r.Apply != nil {
		if err := r.Apply(ctx, out); err != nil {
			errs = append(errs, err)
		}
	}
	// The revisions the status names stay (a hub's works name no others).
	keep := map[string]bool{rev: true}
	for _, rv := range out.Status.Revisions {
		keep[rv.Name] = true
	}
	if err := r.Revisions.Prune(ctx, p, keep); err != nil {
		errs = append(errs, err)
	}
	switch len(errs) {
	case 0:
		return Result{Output: out, Taken: taken}, nil
	case 1:
		return Result{}, errs[0]
	}
	return Result{}, errors.Join(errs...)
}
