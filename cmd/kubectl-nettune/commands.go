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
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
)

// getProfile reads a profile, with an error that names it when it is missing.
func (c *cli) getProfile(ctx context.Context, name string) (*v1alpha1.NetTuningProfile, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	p := &v1alpha1.NetTuningProfile{}
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("profile %q not found (list the profiles with: kubectl get nettuningprofiles)", name)
		}
		return nil, fmt.Errorf("reading profile %q: %w", name, err)
	}
	return p, nil
}

// patch sends a JSON merge patch of the profile's metadata or spec.
func (c *cli) patch(ctx context.Context, name string, body map[string]any) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	p := &v1alpha1.NetTuningProfile{}
	p.Name = name
	if err := cl.Patch(ctx, p, client.RawPatch(types.MergePatchType, raw)); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("profile %q not found (list the profiles with: kubectl get nettuningprofiles)", name)
		}
		if apierrors.IsConflict(err) {
			return fmt.Errorf("profile %q changed while this command ran; run it again", name)
		}
		return fmt.Errorf("patching profile %q: %w", name, err)
	}
	return nil
}

// annotationPatch sets (or, with a nil value, removes) one annotation; with a
// resourceVersion the patch fails when the profile changed since it was read.
func annotationPatch(key string, value *string, resourceVersion string) map[string]any {
	md := map[string]any{"annotations": map[string]any{key: value}}
	if resourceVersion != "" {
		md["resourceVersion"] = resourceVersion
	}
	return map[string]any{"metadata": md}
}

// inProgress fails unless a revision is rolling out.
func inProgress(p *v1alpha1.NetTuningProfile) error {
	st := p.Status
	switch classify(p) {
	case stateNotReconciled:
		return fmt.Errorf("profile %s has no rollout in progress: the controller has not reconciled it yet (no status.currentRevision)", p.Name)
	case stateRolledBack:
		return fmt.Errorf("profile %s has no rollout in progress: revision %s was rolled back (phase %s); every vehicle runs the stable revision %s",
			p.Name, st.CurrentRevision, orDash(st.Phase), orDash(st.StableRevision))
	case stateStable:
		return fmt.Errorf("profile %s has no rollout in progress: revision %s is the stable revision (phase %s)", p.Name, st.CurrentRevision, orDash(st.Phase))
	}
	return nil
}

func (c *cli) promote(ctx context.Context, name string) error {
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	if err := inProgress(p); err != nil {
		return err
	}
	step := currentStep(p)
	n := int32(len(steps(p)))
	if step >= n {
		return fmt.Errorf("profile %s: the rollout of %s is past its last step (%d/%d, every vehicle is being updated); there is nothing to promote", name, p.Status.CurrentRevision, step, n)
	}
	desc := stepText(p, step)
	if s := steps(p)[step]; s.SetVehicles != nil {
		return fmt.Errorf("profile %s: step %d (%s) completes by itself once its vehicles verify the revision; promote skips only pause and analysis steps", name, step, desc)
	}
	value := fleetmodel.PromoteValue(p.Status.CurrentRevision, step)
	if p.Annotations[v1alpha1.PromoteAnnotation] == value {
		fmt.Fprintf(c.stdout, "%s: step %d (%s) is already promoted\n", name, step, desc)
		return nil
	}
	if err := c.patch(ctx, name, annotationPatch(v1alpha1.PromoteAnnotation, &value, "")); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s: promoted step %d (%s)\n", name, step, desc)
	return nil
}

func (c *cli) setPaused(ctx context.Context, name string, paused bool) error {
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	if p.Spec.Rollout == nil {
		return fmt.Errorf("profile %s has no spec.rollout: every vehicle gets a new revision at once, there is nothing to pause or resume", name)
	}
	verb := map[bool]string{true: "paused", false: "resumed"}[paused]
	if p.Spec.Rollout.Paused == paused {
		fmt.Fprintf(c.stdout, "%s: rollout is already %s\n", name, map[bool]string{true: "paused", false: "not paused"}[paused])
		return nil
	}
	body := map[string]any{"spec": map[string]any{"rollout": map[string]any{"paused": paused}}}
	if err := c.patch(ctx, name, body); err != nil {
		return err
	}
	where := ""
	if classify(p) == stateInProgress {
		where = fmt.Sprintf(" at step %d/%d (%s)", currentStep(p), len(steps(p)), stepText(p, currentStep(p)))
	}
	fmt.Fprintf(c.stdout, "%s: rollout %s%s\n", name, verb, where)
	return nil
}

func (c *cli) abort(ctx context.Context, name string) error {
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	if err := inProgress(p); err != nil {
		return err
	}
	rev := p.Status.CurrentRevision
	if p.Annotations[v1alpha1.AbortAnnotation] == rev {
		fmt.Fprintf(c.stdout, "%s: revision %s is already aborted\n", name, rev)
		return nil
	}
	if err := c.patch(ctx, name, annotationPatch(v1alpha1.AbortAnnotation, &rev, "")); err != nil {
		return err
	}
	back := "the stable revision " + p.Status.StableRevision
	if p.Status.StableRevision == "" {
		back = "no revision (there is no stable revision: the profile's items are removed)"
	}
	fmt.Fprintf(c.stdout, "%s: aborted revision %s; every vehicle returns to %s\n", name, rev, back)
	return nil
}

// knownRevisions lists status.revisions for error messages.
func knownRevisions(p *v1alpha1.NetTuningProfile) string {
	if len(p.Status.Revisions) == 0 {
		return "status.revisions is empty"
	}
	names := make([]string, 0, len(p.Status.Revisions))
	for _, r := range p.Status.Revisions {
		n := r.Name
		if r.Outcome != "" {
			n += " (" + r.Outcome + ")"
		}
		names = append(names, n)
	}
	return "available: " + strings.Join(names, ", ")
}

func (c *cli) undo(ctx context.Context, name, to string) error {
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	if to == "" {
		to = p.Status.StableRevision
		if to == "" {
			return fmt.Errorf("profile %s has no stable revision to go back to; pass --to-revision (%s)", name, knownRevisions(p))
		}
	}
	if to == p.Status.FailedRevision && to != p.Status.StableRevision {
		return fmt.Errorf("profile %s: revision %s was rolled back; the controller does not roll it out again until the content changes", name, to)
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	cr := &appsv1.ControllerRevision{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: to}, cr); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("profile %s: revision %q not found in namespace %s (%s; --namespace selects the controller's namespace)", name, to, c.namespace, knownRevisions(p))
		}
		return fmt.Errorf("profile %s: reading revision %s/%s: %w", name, c.namespace, to, err)
	}
	if !strings.HasPrefix(cr.Name, name+"-") && cr.Labels[v1alpha1.ProfileLabel] != name {
		return fmt.Errorf("revision %s/%s does not belong to profile %s (label %s=%q)", c.namespace, to, name, v1alpha1.ProfileLabel, cr.Labels[v1alpha1.ProfileLabel])
	}
	spec, err := mergeRevision(cr.Data.Raw, p.Spec.Rollout)
	if err != nil {
		return fmt.Errorf("profile %s: revision %s: %w", name, to, err)
	}
	from := fleetmodel.RevisionName(p)
	if from == to {
		fmt.Fprintf(c.stdout, "%s: the content is already revision %s; nothing to undo\n", name, to)
		return nil
	}
	p.Spec = *spec
	// Update carries the resourceVersion read above: it fails if the
	// profile changed in between rather than overwrite that change.
	if err := cl.Update(ctx, p); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("profile %s changed while undo ran; run it again", name)
		}
		return fmt.Errorf("profile %s: restoring revision %s: %w", name, to, err)
	}
	fmt.Fprintf(c.stdout, "%s: reverted content from revision %s to %s (spec.rollout kept)\n", name, from, to)
	return nil
}

// mergeRevision is the stored content of a revision (a profile spec without
// rollout, as JSON) with the given rollout put back.
func mergeRevision(raw []byte, rollout *v1alpha1.RolloutSpec) (*v1alpha1.NetTuningProfileSpec, error) {
	content := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &content); err != nil {
		return nil, fmt.Errorf("decoding stored content: %w", err)
	}
	delete(content, "rollout")
	if rollout != nil {
		r, err := json.Marshal(rollout)
		if err != nil {
			return nil, fmt.Errorf("encoding rollout: %w", err)
		}
		content["rollout"] = r
	}
	merged, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("encoding spec: %w", err)
	}
	spec := &v1alpha1.NetTuningProfileSpec{}
	if err := json.Unmarshal(merged, spec); err != nil {
		return nil, fmt.Errorf("decoding spec: %w", err)
	}
	return spec, nil
}

func (c *cli) editExcluded(ctx context.Context, name string, vehicles []string, exclude bool) error {
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	vehicles = sortedUnique(vehicles)
	before := fleetmodel.SplitList(p.Annotations[v1alpha1.ExcludeAnnotation])
	set := map[string]bool{}
	for _, v := range before {
		set[v] = true
	}
	var changed, unchanged []string
	for _, v := range vehicles {
		if set[v] == exclude {
			unchanged = append(unchanged, v)
			continue
		}
		set[v] = exclude
		changed = append(changed, v)
	}
	if exclude {
		c.warnUnknownVehicles(ctx, p, changed)
	}
	verb, already := "excluded", "already excluded"
	if !exclude {
		verb, already = "included", "not excluded"
	}
	var after []string
	for v, in := range set {
		if in {
			after = append(after, v)
		}
	}
	after = sortedUnique(after)
	summary := "none"
	if len(after) > 0 {
		summary = strings.Join(after, ", ")
	}
	if len(changed) == 0 {
		fmt.Fprintf(c.stdout, "%s: %s %s; nothing changed (excluded: %s)\n", name, strings.Join(unchanged, ", "), already, summary)
		return nil
	}
	var value *string
	if len(after) > 0 {
		v := strings.Join(after, ",")
		value = &v
	}
	if err := c.patch(ctx, name, annotationPatch(v1alpha1.ExcludeAnnotation, value, p.ResourceVersion)); err != nil {
		return err
	}
	note := ""
	if len(unchanged) > 0 {
		note = fmt.Sprintf("; %s %s", strings.Join(unchanged, ", "), already)
	}
	fmt.Fprintf(c.stdout, "%s: %s %s (excluded: %s)%s\n", name, verb, strings.Join(changed, ", "), summary, note)
	return nil
}

// warnUnknownVehicles warns about excluded vehicles the profile does not
// select (yet): a typo, or a vehicle not registered yet.
func (c *cli) warnUnknownVehicles(ctx context.Context, p *v1alpha1.NetTuningProfile, vehicles []string) {
	if len(vehicles) == 0 {
		return
	}
	cl, err := c.client()
	if err != nil {
		return
	}
	nodes := &corev1.NodeList{}
	if err := cl.List(ctx, nodes); err != nil {
		return
	}
	rows, _, err := vehicleRows(p, nodes.Items, nil, time.Time{})
	if err != nil {
		return
	}
	known := map[string]bool{}
	for _, r := range rows {
		known[r.Name] = true
	}
	for _, v := range vehicles {
		if !known[v] {
			fmt.Fprintf(c.stderr, "warning: profile %s selects no vehicle %q (yet); excluding it anyway\n", p.Name, v)
		}
	}
}

func (c *cli) revisions(ctx context.Context, name string) error {
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	if len(p.Status.Revisions) == 0 {
		fmt.Fprintf(c.stdout, "%s: no revisions in status yet\n", name)
		return nil
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGENERATION\tCREATED\tOUTCOME\tSTORED\tNOTE")
	for _, r := range p.Status.Revisions {
		created := "-"
		if !r.Created.IsZero() {
			created = r.Created.UTC().Format(time.RFC3339)
		}
		stored := "yes"
		if err := cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: r.Name}, &appsv1.ControllerRevision{}); err != nil {
			stored = "?"
			if apierrors.IsNotFound(err) {
				stored = "no"
			}
		}
		var notes []string
		if r.Name == p.Status.CurrentRevision {
			notes = append(notes, "current")
		}
		if r.Name == p.Status.StableRevision {
			notes = append(notes, "stable")
		}
		if r.Name == p.Status.FailedRevision {
			notes = append(notes, "failed")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.Generation, created, orDash(r.Outcome), stored, orDash(strings.Join(notes, ",")))
	}
	return tw.Flush()
}

// status prints the view once, or every interval until ctx ends.
func (c *cli) status(ctx context.Context, name string, watch bool, interval time.Duration) error {
	if !watch {
		return c.statusOnce(ctx, c.stdout, name)
	}
	if interval <= 0 {
		return errors.New("--interval must be positive")
	}
	clear := isTerminal(c.stdout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for frame := 0; ; frame++ {
		// Build the whole frame first: an interrupt mid-fetch prints nothing.
		var b bytes.Buffer
		fmt.Fprintf(&b, "Every %s: kubectl nettune status %s    %s\n\n", interval, name, c.now().Format(time.RFC3339))
		if err := c.statusOnce(ctx, &b, name); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Keep watching: the profile may come (back), the API server
			// may return.
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		switch {
		case clear:
			fmt.Fprint(c.stdout, "\033[H\033[2J")
		case frame > 0:
			fmt.Fprintln(c.stdout)
		}
		_, _ = c.stdout.Write(b.Bytes())
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (c *cli) statusOnce(ctx context.Context, w io.Writer, name string) error {
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	nodes := &corev1.NodeList{}
	if err := cl.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	nnts := &v1alpha1.NodeNetTuningList{}
	if err := cl.List(ctx, nnts); err != nil {
		return fmt.Errorf("listing NodeNetTunings: %w", err)
	}
	Render(w, p, nodes.Items, nnts.Items, c.now())
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
