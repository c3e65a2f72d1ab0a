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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/controllers/revision"
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
	value := fleetmodel.PromoteValue(p.Status.CurrentRevision, step, planner.RolloutStarted(&p.Status, p.Status.CurrentRevision))
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
	from := revision.Name(p)
	if from == to {
		fmt.Fprintf(c.stdout, "%s: the content is already revision %s; nothing to undo\n", name, to)
		return nil
	}
	moved := func(now string) error {
		return fmt.Errorf("profile %s changed while undo ran (its content moved from revision %s to %s); run it again", name, from, now)
	}
	restore := func(p *v1alpha1.NetTuningProfile) error {
		spec, err := mergeRevision(cr.Data.Raw, p.Spec.Rollout)
		if err != nil {
			return fmt.Errorf("profile %s: revision %s: %w", name, to, err)
		}
		p.Spec = *spec
		return nil
	}
	if _, err := c.updateContent(ctx, p, name, from, "undo", "restoring revision "+to, moved, restore); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s: reverted content from revision %s to %s (spec.rollout kept)\n", name, from, to)
	return nil
}

// updateContent edits profile name and writes it with an Update. The
// controller writes the profile's status all the time, and every write
// moves its resourceVersion: an Update that conflicts is tried again on a
// fresh read as long as the content is still revision content; a spec
// changed in between is never overwritten, and moved says so. p is the
// profile as already read (nil: read it first); verb names the command and
// what the change, in errors. It returns the profile as written.
func (c *cli) updateContent(ctx context.Context, p *v1alpha1.NetTuningProfile, name, content, verb, what string,
	moved func(now string) error, edit func(*v1alpha1.NetTuningProfile) error) (*v1alpha1.NetTuningProfile, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	attempt := 0
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt++; p == nil || attempt > 1 {
			fresh, err := c.getProfile(ctx, name)
			if err != nil {
				return err
			}
			p = fresh
		}
		if now := revision.Name(p); now != content {
			return moved(now)
		}
		if err := edit(p); err != nil {
			return err
		}
		if beforeProfileUpdate != nil {
			beforeProfileUpdate(attempt)
		}
		return cl.Update(ctx, p)
	})
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, fmt.Errorf("profile %s kept changing while %s ran; run it again", name, verb)
		}
		var se *apierrors.StatusError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("profile %s: %s: %w", name, what, err)
		}
		return nil, err
	}
	return p, nil
}

// beforeProfileUpdate, when set (by a test), runs before each of
// updateContent's Updates: attempt counts from 1.
var beforeProfileUpdate func(attempt int)

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
	vehicles = fleetmodel.SortedUnique(vehicles)
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
	after = fleetmodel.SortedUnique(after)
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
	f, err := c.selectFleet(ctx, p)
	if err != nil {
		return
	}
	for _, v := range vehicles {
		if f.Vehicles[v] == nil {
			fmt.Fprintf(c.stderr, "warning: profile %s selects no vehicle %q (yet); excluding it anyway\n", p.Name, v)
		}
	}
}

// selectFleet groups the nodes p selects into vehicles, as the controller
// does.
func (c *cli) selectFleet(ctx context.Context, p *v1alpha1.NetTuningProfile) (*fleetmodel.Fleet, error) {
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	if err := cl.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return fleetmodel.Select(p, nodes.Items)
}

// revisionRow is one revision of the history.
type revisionRow struct {
	Name       string      `json:"name"`
	Generation int64       `json:"generation"`
	Created    metav1.Time `json:"created,omitzero"`
	Outcome    string      `json:"outcome,omitempty"`
	// Stored: "yes", "no" (the ControllerRevision is gone: undo cannot
	// restore it) or "?" (it could not be read).
	Stored string   `json:"stored"`
	Notes  []string `json:"notes,omitempty"` // current, stable, failed
}

// revisions prints the revision history (status.revisions), as a table or
// as a document (output yaml or json).
func (c *cli) revisions(ctx context.Context, name, output string) error {
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	rows := []revisionRow{}
	for _, r := range p.Status.Revisions {
		row := revisionRow{Name: r.Name, Generation: r.Generation, Created: r.Created, Outcome: r.Outcome, Stored: "yes"}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: r.Name}, &appsv1.ControllerRevision{}); err != nil {
			row.Stored = "?"
			if apierrors.IsNotFound(err) {
				row.Stored = "no"
			}
		}
		if r.Name == p.Status.CurrentRevision {
			row.Notes = append(row.Notes, "current")
		}
		if r.Name == p.Status.StableRevision {
			row.Notes = append(row.Notes, "stable")
		}
		if r.Name == p.Status.FailedRevision {
			row.Notes = append(row.Notes, "failed")
		}
		rows = append(rows, row)
	}
	if output != "" {
		return printDoc(c.stdout, output, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(c.stdout, "%s: no revisions in status yet\n", name)
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGENERATION\tCREATED\tOUTCOME\tSTORED\tNOTE")
	for _, r := range rows {
		created := "-"
		if !r.Created.IsZero() {
			created = r.Created.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.Generation, created, orDash(r.Outcome), r.Stored, orDash(strings.Join(r.Notes, ",")))
	}
	return tw.Flush()
}

// printDoc writes v as YAML or indented JSON.
func printDoc(w io.Writer, output string, v any) error {
	var b []byte
	var err error
	if output == "json" {
		b, err = json.MarshalIndent(v, "", "    ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("encoding %s: %w", output, err)
	}
	_, err = w.Write(b)
	return err
}

// status prints the view once, or with watch again on every change of the
// profile or of a NodeNetTuning (a watch on the API server; at least
// minInterval apart, and every 30 s anyway so that ages move on).
func (c *cli) status(ctx context.Context, name, output string, watch bool, minInterval time.Duration) error {
	if !watch {
		return c.statusOnce(ctx, c.stdout, name, output)
	}
	if minInterval <= 0 {
		return usageError{errors.New("--min-interval must be positive")}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	changes := make(chan struct{}, 1)
	notify := func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchForever(wctx, cl, &v1alpha1.NetTuningProfileList{}, notify, client.MatchingFields{"metadata.name": name})
	go watchForever(wctx, cl, &v1alpha1.NodeNetTuningList{}, notify)

	table := output == "" || output == "wide"
	clearScreen := table && isTerminal(c.stdout)
	for frame := 0; ; frame++ {
		// Build the whole frame first: an interrupt mid-fetch prints nothing.
		var b bytes.Buffer
		if table {
			fmt.Fprintf(&b, "kubectl nettune status %s --watch    %s\n\n", name, c.now().Format(time.RFC3339))
		}
		if err := c.statusOnce(ctx, &b, name, output); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// Keep watching: the profile may come (back), the API server
			// may return.
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		switch {
		case clearScreen:
			fmt.Fprint(c.stdout, "\033[H\033[2J")
		case frame > 0 && output == "yaml":
			fmt.Fprintln(c.stdout, "---")
		case frame > 0:
			fmt.Fprintln(c.stdout)
		}
		_, _ = c.stdout.Write(b.Bytes())
		printed := time.Now()
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		case <-time.After(30 * time.Second):
		}
		if wait := minInterval - time.Since(printed); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}
}

// watchForever calls notify on every event of a watch of list, re-opening
// the watch when the server ends it, until ctx ends.
func watchForever(ctx context.Context, cl client.WithWatch, list client.ObjectList, notify func(), opts ...client.ListOption) {
	for ctx.Err() == nil {
		w, err := cl.Watch(ctx, list, opts...)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		func() {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case _, ok := <-w.ResultChan():
					if !ok {
						return
					}
					notify()
				}
			}
		}()
	}
}

// statusOnce writes the status view of profile name: the table (output ""
// or "wide") or the document (yaml, json).
func (c *cli) statusOnce(ctx context.Context, w io.Writer, name, output string) error {
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
	switch output {
	case "yaml", "json":
		return printDoc(w, output, view(p, nodes.Items, nnts.Items, c.now()))
	default:
		render(w, p, nodes.Items, nnts.Items, c.now(), output == "wide")
		return nil
	}
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
