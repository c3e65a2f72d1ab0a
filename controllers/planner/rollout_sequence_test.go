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

// TestRolloutSequence drives the planner through whole rollouts over a
// simulated fleet and checks the rollout's invariants after every plan, in
// the manner of cluster-api's machinedeployment rollout sequence tests.
//
// The simulation: a tick is one reconcile at a simulated time (two plans when
// an analysis is measured, as in the controller: the first asks for the
// measurement, the second decides on its result), then the controller renders
// the assignments and the agents act. Agents lag (each takes 0..maxLag ticks
// to apply and verify a revision), vehicles go offline and come back (an
// offline vehicle's rendered revision changes, its agents report nothing),
// vehicles fail to apply a revision, the user aborts, promotes, pauses and
// excludes vehicles, the content is edited mid-rollout (also back to the
// stable, a superseded or the rolled-back revision), and analyses pass, fail
// or are inconclusive: the simulated result is what the planner reads in
// status.analysis. There is no wall clock anywhere.
//
// It runs a fixed list of scenarios, the planner's former bugs (scenarios
// that once broke an invariant, kept so that they never come back) and 100
// seeded-random runs (seeds 1 to 100, math/rand: a seed
// always makes the same run), each ending with a calm period (vehicles back
// online, pauses promoted) in which the rollout must finish.
//
// The invariants, checked after every plan against what the test fed the
// planner (the stable revision, the rolled-back one, the canary cohort and the
// analyses' verdicts are tracked by the test, not read back from the status):
//
//   - revisions: every vehicle is assigned the stable revision or the spec's;
//   - rolled back stays back: a revision rolled back is not assigned again,
//     neither without an edit nor after an edit back to it (the planner
//     remembers the last one rolled back: it may return once another was);
//   - excluded stay on stable: an excluded vehicle is assigned the stable
//     revision the plan started from (the tick a rollout completes they keep
//     the previous one; from the next they follow the new stable one, all at
//     once: they are outside the rollout);
//   - maxUnavailable, resolved as the planner does (a count, or a percentage
//     of the vehicles not excluded rounded down; at least 1). In flight: a
//     vehicle assigned the revision rolling out that has not verified it nor
//     failed it (a failed vehicle counts against failureBudget instead). No
//     vehicle starts while the reachable vehicles in flight before the plan
//     fill the limit, and those in flight never exceed it, with two
//     exceptions by design: a vehicle that was Unreachable during its flight
//     is not counted (the planner stops counting it, so that an offline
//     vehicle does not hold the rollout, and fills its place; when it returns
//     the count may exceed the limit until it verifies, and no vehicle starts
//     meanwhile); and a limit that fell mid-rollout (a percentage of fewer
//     vehicles after an exclusion) takes nothing back, so the count may stay
//     above it, never grow;
//   - canaries first: the canary cohort is the spec's (names, selector; for a
//     count, the size and hardware models are checked), picked once per
//     rollout. No other vehicle starts before every canary has the revision;
//     and when steps run on the canaries alone (those before the first
//     setVehicles), no other vehicle has it before every canary settled
//     (verified, failed within the budget, or Unreachable past
//     unreachableTimeout counted as docs/rollout.md says) and those steps are
//     done (analyses passed, pauses over, or promoted). A rollout whose first
//     step is setVehicles (or that has none) updates the canaries first in
//     its order only: the planner's documented target of such a step;
//   - stable after the whole fleet: a revision becomes stable only once every
//     vehicle has settled on it and every step is done;
//   - rollback: an abort of the revision rolling out, a failed (or
//     inconclusive, with onInconclusive Abort) analysis and a failure budget
//     exceeded roll back in the plan that sees them, and nothing else does.
//
// A failure names the tick, the seed (or scenario) and the invariant, and
// dumps the spec, the commands, the status in and out, every vehicle and the
// last ticks.
//
// Reproducing a seed: the failure prints the command; for seed 42,
//
//	go test ./controllers/planner -run 'TestRolloutSequence/random/seed=42$' -count=1 -v -args -sequence.trace
//
// replays it alone with a line per tick. A longer search is
// -args -sequence.seeds=5000 (seeds 1..5000), and a seed beyond the default
// 100 is replayed with -args -sequence.seed=4321 -sequence.trace.

package planner_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

var (
	sequenceSeeds = flag.Int("sequence.seeds", 100, "TestRolloutSequence: how many seeded-random runs (seeds 1..N)")
	sequenceSeed  = flag.Int64("sequence.seed", 0, "TestRolloutSequence: make only the random run of this seed")
	sequenceTrace = flag.Bool("sequence.trace", false, "TestRolloutSequence: log every tick of every run")
)

const (
	seqProfile   = "xavier-lan"
	seqRingLabel = "nettune.io/ring" // the label the selector canaries are chosen by
)

// seqVehicle is one simulated vehicle: what the planner observes of it, and
// what only the simulation knows.
type seqVehicle struct {
	planner.Vehicle
	model  string
	ring   bool // labeled for the selector canary
	online bool
	// lag is how many more ticks the agents take to apply and verify (or
	// fail) the assigned revision.
	lag int
	// silent: the vehicle was Unreachable at some tick of its current flight
	// (the planner then stops counting it against maxUnavailable).
	silent bool
}

// seqEpoch is one rollout: from an edit of the content to the next.
type seqEpoch struct {
	revision string
	start    time.Time
	// canaries is the cohort the rollout picked (nil before its first plan).
	canaries   []string
	canaryDone bool
	promoted   map[int32]bool
	// done: steps the rollout may be past (latched: their analyses
	// passed, their pause ended, or they were promoted); skipped: those
	// done by a promote (a promoted pause may last no time).
	done, skipped map[int32]bool
	// verdicts are the terminal phases the simulated analyses reached in
	// this rollout, by step and analysis.
	verdicts map[int32]map[string]string
	fates    map[string]string
	// fresh are analyses that failed (or were inconclusive with Abort) at
	// this tick: the plan that reads them rolls back.
	fresh    []string
	maxLimit int
}

type seqWorld struct {
	t      *testing.T
	name   string // "scenario <name>" or "seed <n>"
	replay string
	rng    *rand.Rand
	random bool

	tick       int
	start, now time.Time
	tickLen    func() time.Duration
	maxLag     int

	revision string // the profile's content, as a revision name
	revs     int    // revisions r1..r<revs> exist
	gen      int64
	rollout  *v1alpha1.RolloutSpec
	status   v1alpha1.NetTuningProfileStatus
	commands planner.Commands
	fleet    []*seqVehicle
	byName   map[string]*seqVehicle
	failOn   map[string]bool // "vehicle/revision": its agents report RolledBack
	// fate decides the outcome of an analysis of the rollout in progress:
	// Successful, Failed or Inconclusive (at its last measurement).
	fate func(w *seqWorld, step int32, analysis string) string

	// Bookkeeping of the invariants, from what the test fed the planner.
	stable           string
	lastRolledBack   string
	lastRolledBackAt time.Time
	ep               *seqEpoch
	// promoteEpoch is the rollout the promote annotation was written in.
	promoteEpoch *seqEpoch
	prevCounted  int
	prevPhase    string
	prevAssign   map[string]string
	last         planner.Output

	notes []string
	trace []string
	seen  map[string]int
}

func newSeqWorld(t *testing.T, rng *rand.Rand, models map[string]int, stable string, rollout *v1alpha1.RolloutSpec) *seqWorld {
	w := &seqWorld{
		t: t, rng: rng, rollout: rollout,
		now:     time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC),
		tickLen: func() time.Duration { return 30 * time.Second },
		byName:  map[string]*seqVehicle{}, failOn: map[string]bool{}, seen: map[string]int{},
		fate: func(*seqWorld, int32, string) string { return v1alpha1.AnalysisSuccessful },
	}
	w.start = w.now
	n := 0
	for _, m := range []string{"xavier", "orin", "thor"} {
		for range models[m] {
			n++
			v := &seqVehicle{Vehicle: planner.Vehicle{
				Name: fmt.Sprintf("av-%02d", n), Hardware: []string{m},
				Labels:   labels.Set{v1alpha1.DefaultHardwareLabel: m},
				Assigned: stable, Verified: true, LastSeen: w.now, Nodes: 2, VerifiedNodes: 2,
			}, model: m, online: true}
			w.fleet = append(w.fleet, v)
			w.byName[v.Name] = v
		}
	}
	w.revision, w.stable = stable, stable
	if stable != "" {
		w.revs, w.gen = 1, 1
		w.status = v1alpha1.NetTuningProfileStatus{
			CurrentRevision: stable, StableRevision: stable, CurrentStep: ptr(int32(len(rollout.Steps))),
			Phase:     v1alpha1.PhaseHealthy,
			Revisions: []v1alpha1.Revision{{Name: stable, Generation: 1, Outcome: v1alpha1.OutcomeStable, Created: metav1.NewTime(w.now.Add(-time.Hour))}},
		}
	}
	w.ep = w.newEpoch(stable)
	return w
}

func (w *seqWorld) newEpoch(rev string) *seqEpoch {
	return &seqEpoch{revision: rev, start: w.now, promoted: map[int32]bool{}, done: map[int32]bool{}, skipped: map[int32]bool{},
		verdicts: map[int32]map[string]string{}, fates: map[string]string{}}
}

// rolling: the spec's revision is being rolled out (it is neither the stable
// revision nor the one last rolled back).
func (w *seqWorld) rolling() bool {
	return w.revision != w.stable && w.revision != w.lastRolledBack
}

func (w *seqWorld) note(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

// --- what the user and the fleet do -----------------------------------------

// edit changes the profile's content to rev ("" = a new revision).
func (w *seqWorld) edit(rev string) string {
	if rev == "" {
		w.revs++
		rev = fmt.Sprintf("r%d", w.revs)
	}
	switch rev {
	case w.stable:
		w.seen["edit back to the stable revision"]++
	case w.lastRolledBack:
		w.seen["edit back to the rolled-back revision"]++
	}
	if w.rolling() && w.ep.revision != rev {
		w.seen["edit mid-rollout"]++
	}
	w.note("edit %s", rev)
	w.revision = rev
	w.gen++
	w.ep = w.newEpoch(rev)
	return rev
}

// abort is kubectl nettune abort: the annotation names the current revision.
func (w *seqWorld) abort() {
	w.commands.AbortRevision = w.status.CurrentRevision
	w.note("abort %s", w.commands.AbortRevision)
}

// promote is kubectl nettune promote: the current pause or analysis step of
// the rollout in progress.
func (w *seqWorld) promote() bool {
	st := w.status
	if !w.rolling() || st.CurrentRevision != w.revision || st.CurrentStep == nil || int(*st.CurrentStep) >= len(w.rollout.Steps) ||
		w.rollout.Steps[*st.CurrentStep].SetVehicles != nil {
		return false
	}
	i := *st.CurrentStep
	w.commands.PromoteStep, w.commands.PromoteRevision = ptr(i), st.CurrentRevision
	w.commands.PromoteRollout = planner.RolloutStarted(&st, st.CurrentRevision)
	w.ep.promoted[i] = true
	w.promoteEpoch = w.ep
	w.seen["promote"]++
	w.note("promote %s@%d", st.CurrentRevision, i)
	return true
}

func (w *seqWorld) offline(names ...string) {
	for _, n := range names {
		w.byName[n].online = false
		w.seen["offline"]++
		w.note("offline %s", n)
	}
}

// online brings vehicles back: their agents report at once and finish an
// apply they owe a tick later at the soonest.
func (w *seqWorld) online(names ...string) {
	for _, n := range names {
		v := w.byName[n]
		v.online, v.lag = true, max(v.lag, 1)
		w.note("online %s", n)
	}
}

func (w *seqWorld) exclude(names ...string) {
	for _, n := range names {
		if !slices.Contains(w.commands.Excluded, n) {
			w.commands.Excluded = append(w.commands.Excluded, n)
			if w.rolling() && w.status.CurrentRevision == w.revision {
				w.seen["exclude mid-rollout"]++
			}
			w.note("exclude %s", n)
		}
	}
}

func (w *seqWorld) include(names ...string) {
	for _, n := range names {
		if i := slices.Index(w.commands.Excluded, n); i >= 0 {
			w.commands.Excluded = slices.Delete(slices.Clone(w.commands.Excluded), i, i+1)
			w.note("include %s", n)
		}
	}
}

func (w *seqWorld) setPaused(paused bool) {
	w.rollout.Paused = paused
	if paused {
		w.seen["spec paused"]++
	}
	w.note("paused=%v", paused)
}

// --- one tick -------------------------------------------------------------

func (w *seqWorld) input() planner.Input {
	vs := make([]planner.Vehicle, 0, len(w.fleet))
	for _, v := range w.fleet {
		vs = append(vs, v.Vehicle)
	}
	if w.random {
		// The controller's order of vehicles is no promise of anything.
		w.rng.Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
	}
	cmd := w.commands
	cmd.Excluded = slices.Clone(cmd.Excluded)
	return planner.Input{
		Now: w.now, Profile: seqProfile, Revision: w.revision, Generation: w.gen,
		Rollout: w.rollout, Status: *w.status.DeepCopy(), Vehicles: vs, Commands: cmd,
	}
}

// step runs one reconcile, checks it, carries it out, lets the agents act and
// advances the clock.
func (w *seqWorld) step() planner.Output {
	w.tick++
	w.ep.fresh = nil
	in := w.input()
	out := planner.Plan(in)
	w.check(in, out, false)
	var measured []string
	if len(out.Measures) > 0 {
		// As the controller: measure what is due, then one plan decides on
		// every result.
		st := *out.Status.DeepCopy()
		for _, m := range out.Measures {
			if r, ok := w.measure(&st, m); ok {
				measured = append(measured, fmt.Sprintf("%s@%d=%s", m.Analysis, m.Step, r))
			}
		}
		if len(measured) > 0 {
			in.Status = st
			out = planner.Plan(in)
			w.check(in, out, true)
		}
	}
	if len(measured) == 0 {
		w.check(in, out, true)
	}
	w.commit(in, out)
	w.status = out.Status
	w.record(out, measured)
	w.carryOut(out)
	w.now = w.now.Add(w.tickLen())
	return out
}

// measure takes the measurement m asks for, if due, into st as the
// controller's analysis does (failureLimit and inconclusiveLimit are 0 in
// every spec here).
func (w *seqWorld) measure(st *v1alpha1.NetTuningProfileStatus, m *planner.Measure) (string, bool) {
	spec := seqAnalysisSpec(w.rollout, m.Analysis)
	idx := slices.IndexFunc(st.Analysis, func(a v1alpha1.AnalysisResult) bool { return a.Name == m.Analysis && a.Step == m.Step })
	r := v1alpha1.AnalysisResult{Name: m.Analysis, Step: m.Step}
	if idx >= 0 {
		r = st.Analysis[idx]
	}
	if v1alpha1.AnalysisTerminal(r.Phase) || (r.LastMeasured != nil && w.now.Before(r.LastMeasured.Add(spec.GetInterval()))) {
		return "", false
	}
	need := int32(1)
	if spec.Measurements != nil {
		need = *spec.Measurements
	}
	phase := v1alpha1.AnalysisSuccessful
	if r.Successful+1 >= need {
		key := fmt.Sprintf("%d/%s", m.Step, m.Analysis)
		if _, ok := w.ep.fates[key]; !ok {
			w.ep.fates[key] = w.fate(w, m.Step, m.Analysis)
		}
		phase = w.ep.fates[key]
	}
	switch phase {
	case v1alpha1.AnalysisSuccessful:
		r.Successful++
		r.Phase = v1alpha1.AnalysisRunning
		if r.Successful >= need {
			r.Phase = v1alpha1.AnalysisSuccessful
		}
	case v1alpha1.AnalysisFailed:
		r.Failed++
		r.Phase = v1alpha1.AnalysisFailed
	default:
		r.Inconclusive++
		r.Phase = v1alpha1.AnalysisInconclusive
	}
	at := metav1.NewTime(w.now)
	r.LastMeasured = &at
	if r.Started == nil {
		r.Started = &at
	}
	r.Message = fmt.Sprintf("simulated %s on canaries [%s]", phase, strings.Join(m.Canary, " "))
	if idx >= 0 {
		st.Analysis[idx] = r
	} else {
		st.Analysis = append(st.Analysis, r)
	}
	if v1alpha1.AnalysisTerminal(r.Phase) && m.CanaryRevision == w.ep.revision {
		if w.ep.verdicts[m.Step] == nil {
			w.ep.verdicts[m.Step] = map[string]string{}
		}
		w.ep.verdicts[m.Step][m.Analysis] = r.Phase
		if seqActsOn(spec, r.Phase) && !w.promotedNow(m.Step) {
			w.ep.fresh = append(w.ep.fresh, fmt.Sprintf("%s@%d %s", m.Analysis, m.Step, r.Phase))
		}
		w.seen["analysis "+r.Phase]++
	}
	return r.Phase, true
}

// seqActsOn: a verdict that rolls the rollout back.
func seqActsOn(spec *v1alpha1.AnalysisSpec, phase string) bool {
	return !spec.DryRun && (phase == v1alpha1.AnalysisFailed ||
		phase == v1alpha1.AnalysisInconclusive && spec.OnInconclusive == v1alpha1.InconclusiveAbort)
}

// promotedNow: the promote annotation names step of the rollout in
// progress (one written in an earlier rollout of the same revision does not
// promote this one).
func (w *seqWorld) promotedNow(step int32) bool {
	return w.commands.PromoteStep != nil && *w.commands.PromoteStep == step && w.commands.PromoteRevision == w.revision && w.promoteEpoch == w.ep
}

// carryOut renders the assignments (every node of a vehicle at once, online
// or not) and lets every online vehicle's agents report and make progress.
func (w *seqWorld) carryOut(out planner.Output) {
	for _, v := range w.fleet {
		if want := out.Assign[v.Name]; v.Assigned != want {
			v.Assigned, v.Verified, v.Failed, v.VerifiedNodes = want, false, false, 0
			v.lag = 0
			if w.maxLag > 0 {
				v.lag = w.rng.Intn(w.maxLag + 1)
			}
		}
		if !v.online {
			continue
		}
		v.LastSeen = w.now
		if v.Verified || v.Failed {
			continue
		}
		if v.lag > 0 {
			v.lag--
			continue
		}
		v.Failed = v.Assigned != "" && w.failOn[v.Name+"/"+v.Assigned]
		v.Verified = !v.Failed
		if v.Verified {
			v.VerifiedNodes = v.Nodes
		}
	}
}

// --- invariants -------------------------------------------------------------

func (w *seqWorld) reachable(v *seqVehicle) bool {
	return !v.LastSeen.IsZero() && w.now.Sub(v.LastSeen) < w.rollout.GetUnreachableAfter()
}

// giveUp is when a step stops waiting for an Unreachable vehicle, as
// docs/rollout.md states it: unreachableTimeout after it became Unreachable
// or after the rollout began, whichever is later.
func (w *seqWorld) giveUp(v *seqVehicle) time.Time {
	at := func(began time.Time) time.Time {
		since := v.LastSeen.Add(w.rollout.GetUnreachableAfter())
		if began.After(since) {
			since = began
		}
		return since.Add(w.rollout.GetUnreachableTimeout())
	}
	return at(w.ep.start)
}

// settled: the vehicle verified (or failed) the rolling revision, or the
// rollout gave up waiting for it.
func (w *seqWorld) settled(v *seqVehicle) bool {
	if v.Assigned == w.revision && !v.Mixed && (v.Verified || v.Failed) {
		return true
	}
	return !w.reachable(v) && !w.now.Before(w.giveUp(v))
}

func seqExcluded(in planner.Input) map[string]bool {
	ex := map[string]bool{}
	for _, n := range in.Commands.Excluded {
		ex[n] = true
	}
	return ex
}

func (w *seqWorld) active(in planner.Input) []*seqVehicle {
	ex := seqExcluded(in)
	var out []*seqVehicle
	for _, v := range w.fleet {
		if !ex[v.Name] {
			out = append(out, v)
		}
	}
	return out
}

// seqScaled resolves a count or percentage of n vehicles, rounded down.
func seqScaled(v *intstr.IntOrString, n, def int) int {
	if v == nil {
		return def
	}
	if v.Type == intstr.Int {
		return v.IntValue()
	}
	p, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil {
		panic(err)
	}
	return p * n / 100
}

func (w *seqWorld) limit(active int) int {
	return max(1, seqScaled(w.rollout.MaxUnavailable, active, 1))
}

// flight is the in-flight accounting of an output: vehicles assigned the
// rolling revision that have not verified (or failed) it.
type seqFlight struct {
	inFlight []string // every vehicle in flight after this plan
	counted  []string // those reachable and not silent during their flight
	starts   []string // vehicles this plan newly assigns the revision
	before   []string // reachable vehicles in flight before this plan
	limit    int
}

func (w *seqWorld) flight(in planner.Input, out planner.Output) seqFlight {
	act := w.active(in)
	f := seqFlight{limit: w.limit(len(act))}
	for _, v := range act {
		onIt := v.Assigned == w.revision && !v.Mixed
		if onIt && (v.Verified || v.Failed) {
			continue
		}
		if onIt && w.reachable(v) {
			f.before = append(f.before, v.Name)
		}
		if out.Assign[v.Name] != w.revision {
			continue
		}
		silent := !w.reachable(v)
		if onIt {
			silent = silent || v.silent
		} else {
			f.starts = append(f.starts, v.Name)
		}
		f.inFlight = append(f.inFlight, v.Name)
		if !silent {
			f.counted = append(f.counted, v.Name)
		}
	}
	return f
}

// cohort is the rollout's canary cohort: from the spec where it names the
// vehicles or a selector, and checked against the spec where it is a count.
func (w *seqWorld) cohort(in planner.Input, out planner.Output) ([]string, string) {
	if w.ep.canaries != nil {
		if !slices.Equal(out.Status.CanaryVehicles, w.ep.canaries) {
			return nil, fmt.Sprintf("the canary cohort changed mid-rollout: %v, picked %v at its start", out.Status.CanaryVehicles, w.ep.canaries)
		}
		return w.ep.canaries, ""
	}
	act := w.active(in)
	c := w.rollout.Canary
	var want []string
	switch {
	case len(c.Vehicles) > 0:
		for _, v := range act {
			if slices.Contains(c.Vehicles, v.Name) {
				want = append(want, v.Name)
			}
		}
	case c.Selector != nil:
		for _, v := range act {
			if v.ring {
				want = append(want, v.Name)
			}
		}
	default:
		got := out.Status.CanaryVehicles
		models := map[string]bool{}
		names := map[string]*seqVehicle{}
		for _, v := range act {
			models[v.model] = true
			names[v.Name] = v
		}
		n := min(max(int(*c.Count), len(models)), len(act))
		covered := map[string]bool{}
		for _, name := range got {
			v, ok := names[name]
			if !ok {
				return nil, fmt.Sprintf("canary %s is not an active vehicle (canaries %v)", name, got)
			}
			covered[v.model] = true
		}
		if len(got) != n || len(covered) != len(models) {
			return nil, fmt.Sprintf("canaries %v: want %d vehicles covering the models %v", got, n, slices.Sorted(maps.Keys(models)))
		}
		want = slices.Clone(got)
	}
	slices.Sort(want)
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(out.Status.CanaryVehicles, want) && (len(want) != 0 || len(out.Status.CanaryVehicles) != 0) {
		return nil, fmt.Sprintf("canaries %v, want %v from the spec's canary", out.Status.CanaryVehicles, want)
	}
	return want, ""
}

func seqFirstSetVehicles(steps []v1alpha1.RolloutStep) int {
	for i, s := range steps {
		if s.SetVehicles != nil {
			return i
		}
	}
	return len(steps)
}

// stepDone says whether the rollout may be past step i: its analyses passed
// (a dry run's verdict does not count), or it was promoted; a pause lasted at
// least its duration (and those of the pauses before it that were not
// promoted) since the rollout began. promoted: done by a promote.
func (w *seqWorld) stepDone(i int) (done, promoted bool, why string) {
	steps := w.rollout.Steps
	s, k := steps[i], int32(i)
	switch {
	case w.ep.done[k]:
		return true, w.ep.skipped[k], ""
	case w.ep.promoted[k]:
		return true, true, ""
	case s.Analysis != nil:
		for _, name := range s.Analysis.Names() {
			verdict := w.ep.verdicts[k][name]
			spec := seqAnalysisSpec(w.rollout, name)
			if verdict != v1alpha1.AnalysisSuccessful && (!spec.DryRun || !v1alpha1.AnalysisTerminal(verdict)) {
				return false, false, fmt.Sprintf("analysis %s of step %d has not passed (verdict %q) nor was the step promoted", name, i, verdict)
			}
		}
	case s.Pause != nil && s.Pause.Duration == nil:
		return false, false, fmt.Sprintf("step %d (pause until promoted) was not promoted", i)
	case s.Pause != nil:
		var d time.Duration
		for j, p := range steps[:i+1] {
			if p.Pause != nil && p.Pause.Duration != nil && (j == i || !w.ep.skipped[int32(j)]) {
				d += p.Pause.Duration.Duration
			}
		}
		if elapsed := w.now.Sub(w.ep.start); elapsed < d {
			return false, false, fmt.Sprintf("the pauses up to step %d last %s, only %s passed since the rollout began", i, d, elapsed)
		}
	}
	return true, false, ""
}

// canaryPhaseDone: every canary settled and every step before the first
// setVehicles is done.
func (w *seqWorld) canaryPhaseDone(in planner.Input, canaries []string) (bool, string) {
	ex := seqExcluded(in)
	for _, c := range canaries {
		v := w.byName[c]
		if !ex[c] && !w.settled(v) {
			return false, fmt.Sprintf("canary %s has not settled on %s (%s)", c, w.revision, w.describe(v))
		}
	}
	for i := range seqFirstSetVehicles(w.rollout.Steps) {
		if ok, _, why := w.stepDone(i); !ok {
			return false, why
		}
	}
	return true, ""
}

// check checks one plan's output against the invariants. final is the plan
// the controller carries out (the second of a tick that measured).
func (w *seqWorld) check(in planner.Input, out planner.Output, final bool) {
	rev, stable := w.revision, w.stable
	ex := seqExcluded(in)
	fail := func(invariant, format string, args ...any) {
		w.fail(in, out, invariant+": "+fmt.Sprintf(format, args...))
	}

	// The planner rolls the spec's content out.
	if out.Status.CurrentRevision != rev {
		fail("revisions", "status.currentRevision %q, the spec's revision is %q", out.Status.CurrentRevision, rev)
	}
	for _, v := range w.fleet {
		got, ok := out.Assign[v.Name]
		switch {
		case !ok:
			fail("revisions", "%s has no assignment", v.Name)
		// No vehicle gets a revision other than the stable or the current one.
		case got != stable && got != rev:
			fail("revisions", "%s assigned %q, which is neither the stable revision %q nor the current %q", v.Name, got, stable, rev)
		// A rolled-back revision does not come back (until another one is
		// rolled back after it: the planner remembers the last).
		case got == w.lastRolledBack && got != stable:
			fail("rolled back stays back", "%s assigned %s, which was rolled back at t+%s", v.Name, got, w.lastRolledBackAt.Sub(w.start))
		// Excluded vehicles stay on the stable revision.
		case ex[v.Name] && got != stable:
			fail("excluded stay on stable", "excluded %s assigned %q, the stable revision is %q", v.Name, got, stable)
		}
	}

	rolling := w.rolling()
	act := w.active(in)
	failed := 0
	for _, v := range act {
		if v.Failed && v.Assigned == rev {
			failed++
		}
	}
	budget := seqScaled(w.rollout.FailureBudget, len(act), 0)
	rolledBack := rolling && out.Status.Phase == v1alpha1.PhaseRolledBack

	// A rollback happens at once when it is due, and only then.
	if rolling {
		var due []string
		if in.Commands.AbortRevision == rev {
			due = append(due, "abort "+rev)
		}
		if failed > budget {
			due = append(due, fmt.Sprintf("%d failed vehicles > failure budget %d", failed, budget))
		}
		if final {
			due = append(due, w.ep.fresh...)
		}
		if len(due) > 0 && (!rolledBack || out.Status.FailedRevision != rev) {
			fail("rollback", "due (%s) but phase %s, failedRevision %q", strings.Join(due, "; "), out.Status.Phase, out.Status.FailedRevision)
		}
		if rolledBack && len(due) == 0 {
			cause := false
			for i, vs := range w.ep.verdicts {
				for name, phase := range vs {
					cause = cause || seqActsOn(seqAnalysisSpec(w.rollout, name), phase) && !w.ep.promoted[i]
				}
			}
			if !cause {
				fail("rollback", "%s rolled back without an abort, a failing analysis or the failure budget exceeded", rev)
			}
		}
	}
	if !rolling || rolledBack {
		return
	}

	// maxUnavailable: no vehicle starts on the revision while the reachable
	// vehicles in flight fill maxUnavailable, and those in flight never
	// exceed it, but for vehicles that were Unreachable during their flight
	// (the planner stops counting those, and they count again when they
	// return) and a limit that fell mid-rollout (exclusions change the
	// fleet a percentage resolves against; nothing is taken back for it).
	f := w.flight(in, out)
	if len(f.starts) > 0 && len(f.before)+len(f.starts) > f.limit {
		fail("maxUnavailable", "%d vehicle(s) start %s (%s) while %d reachable vehicle(s) are in flight (%s): %d > maxUnavailable %d (%s of %d active vehicles)",
			len(f.starts), rev, strings.Join(f.starts, " "), len(f.before), strings.Join(f.before, " "), len(f.before)+len(f.starts), f.limit, seqIntOrString(w.rollout.MaxUnavailable), len(act))
	}
	if len(f.counted) > f.limit && (w.ep.maxLimit <= f.limit || len(f.starts) != 0 || len(f.counted) > w.prevCounted) {
		fail("maxUnavailable", "%d reachable vehicles in flight on %s (%s) > maxUnavailable %d (%s of %d active vehicles)",
			len(f.counted), rev, strings.Join(f.counted, " "), f.limit, seqIntOrString(w.rollout.MaxUnavailable), len(act))
	}

	// Canaries go first.
	canaries, bad := w.cohort(in, out)
	if bad != "" {
		fail("canary cohort", "%s", bad)
	}
	isCanary := map[string]bool{}
	for _, c := range canaries {
		isCanary[c] = true
	}
	// No vehicle starts before every canary has the revision ...
	for _, s := range f.starts {
		if isCanary[s] {
			continue
		}
		for _, c := range canaries {
			if !ex[c] && out.Assign[c] != rev {
				fail("canaries first", "non-canary %s starts %s while canary %s is assigned %q", s, rev, c, out.Assign[c])
			}
		}
	}
	// ... and, when steps run on the canaries alone (those before the
	// first setVehicles), none has it before the canaries settled and those
	// steps are done: analyses passed, pauses over or promoted.
	steps := w.rollout.Steps
	if len(steps) > 0 && steps[0].SetVehicles == nil && !w.ep.canaryDone {
		if done, why := w.canaryPhaseDone(in, canaries); !done {
			for _, v := range act {
				if !isCanary[v.Name] && out.Assign[v.Name] == rev {
					fail("canaries first", "non-canary %s assigned %s before the canary steps are done: %s", v.Name, rev, why)
				}
			}
		}
	}

	// A revision becomes stable once every vehicle has settled on it and
	// every step is done.
	if out.Status.StableRevision != stable {
		if out.Status.StableRevision != rev {
			fail("stable after the whole fleet", "stable revision %q, neither the previous %q nor the one rolling out, %q", out.Status.StableRevision, stable, rev)
		}
		for _, v := range act {
			if out.Assign[v.Name] != rev || !w.settled(v) {
				fail("stable after the whole fleet", "%s became stable while %s is assigned %q (%s)", rev, v.Name, out.Assign[v.Name], w.describe(v))
			}
		}
		for i := range steps {
			if ok, _, why := w.stepDone(i); !ok {
				fail("stable after the whole fleet", "%s became stable but %s", rev, why)
			}
		}
	}
}

// commit keeps the bookkeeping of the plan carried out.
func (w *seqWorld) commit(in planner.Input, out planner.Output) {
	rev := w.revision
	if w.rolling() {
		if w.ep.canaries == nil {
			w.ep.canaries, _ = w.cohort(in, out)
			if w.ep.canaries == nil {
				w.ep.canaries = []string{}
			}
		}
		f := w.flight(in, out)
		w.ep.maxLimit = max(w.ep.maxLimit, f.limit)
		if len(f.inFlight) > len(f.counted) && len(f.before)+len(f.starts) > f.limit {
			w.seen["returned vehicles over maxUnavailable"]++
		}
		if len(f.counted) == f.limit {
			w.seen["maxUnavailable reached"]++
		}
		if len(f.counted) > f.limit {
			w.seen["limit fell below the vehicles in flight"]++
		}
		w.prevCounted = len(f.counted)
		steps := w.rollout.Steps
		for i := range steps {
			if done, promoted, _ := w.stepDone(i); done && !w.ep.done[int32(i)] {
				w.ep.done[int32(i)], w.ep.skipped[int32(i)] = true, promoted
			}
		}
		if !w.ep.canaryDone && len(steps) > 0 && steps[0].SetVehicles == nil {
			w.ep.canaryDone, _ = w.canaryPhaseDone(in, w.ep.canaries)
		}
		if len(steps) == 0 || steps[0].SetVehicles != nil {
			w.seen["no canary steps"]++
		}
		for _, v := range w.active(in) {
			if !w.reachable(v) && out.Assign[v.Name] == rev && v.Assigned == rev && !v.Verified && !v.Failed && !w.now.Before(w.giveUp(v)) {
				w.seen["gave up on an unreachable vehicle"]++
			}
		}
	}
	for _, v := range w.fleet {
		if out.Assign[v.Name] != rev || !w.rolling() {
			v.silent = false
			continue
		}
		if v.Assigned != rev {
			v.silent = !w.reachable(v)
		} else {
			v.silent = v.silent || !w.reachable(v)
		}
	}
	if w.rolling() && out.Status.Phase == v1alpha1.PhaseRolledBack {
		w.lastRolledBack, w.lastRolledBackAt = rev, w.now
		reason := "?"
		if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionRolledBack); c != nil {
			reason = c.Reason
		}
		w.seen["rollback "+reason]++
		w.note("ROLLED BACK (%s)", reason)
	}
	if out.Status.StableRevision != w.stable {
		w.stable = out.Status.StableRevision
		w.seen["rollout complete"]++
		w.note("STABLE %s", w.stable)
	}
	w.ep.fresh = nil
}

// --- reporting ----------------------------------------------------------------

func (w *seqWorld) describe(v *seqVehicle) string {
	rev := v.Assigned
	if rev == "" {
		rev = "none"
	}
	state := "applying"
	switch {
	case v.Verified:
		state = "verified"
	case v.Failed:
		state = "FAILED"
	case v.lag > 0:
		state = fmt.Sprintf("applying, %d tick(s) to go", v.lag)
	}
	reach := "reachable"
	if !w.reachable(v) {
		reach = fmt.Sprintf("UNREACHABLE (silent %s, given up at t+%s)", w.now.Sub(v.LastSeen), w.giveUp(v).Sub(w.start))
	}
	if !v.online {
		reach += ", offline"
	}
	return fmt.Sprintf("observed %s %s, %s", rev, state, reach)
}

func (w *seqWorld) record(out planner.Output, measured []string) {
	st := out.Status
	step := "-"
	if st.CurrentStep != nil {
		step = fmt.Sprintf("%d/%d", *st.CurrentStep, len(w.rollout.Steps))
	}
	byRev := map[string]int{}
	for _, v := range w.fleet {
		byRev[or(out.Assign[v.Name], "none")]++
	}
	var revs []string
	for r, n := range byRev {
		revs = append(revs, fmt.Sprintf("%s:%d", r, n))
	}
	slices.Sort(revs)
	var flying []string
	for _, v := range w.fleet {
		if out.Assign[v.Name] == w.revision && w.rolling() && (v.Assigned != w.revision || !v.Verified && !v.Failed) {
			flying = append(flying, v.Name)
		}
	}
	line := fmt.Sprintf("#%-3d t+%-7s %-11s step=%-4s stable=%-3s current=%-3s failed=%-3s %s flight=[%s]",
		w.tick, w.now.Sub(w.start), st.Phase, step, or(st.StableRevision, "-"), or(st.CurrentRevision, "-"), or(st.FailedRevision, "-"),
		strings.Join(revs, " "), strings.Join(flying, " "))
	if len(measured) > 0 {
		line += " measured " + strings.Join(measured, " ")
	}
	if len(w.notes) > 0 {
		line += " <- " + strings.Join(w.notes, ", ")
	}
	w.notes = nil
	w.trace = append(w.trace, line)
	if *sequenceTrace {
		w.t.Log(line)
	}
}

func (w *seqWorld) fail(in planner.Input, out planner.Output, msg string) {
	w.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "tick %d (t+%s), %s: %s\n", w.tick, w.now.Sub(w.start), w.name, msg)
	fmt.Fprintf(&b, "replay: %s\n", w.replay)
	r := w.rollout
	fmt.Fprintf(&b, "spec: revision %s, canary %s, steps [%s], maxUnavailable %s, failureBudget %s, unreachableTimeout %s, paused %v\n",
		w.revision, seqCanaryText(r.Canary), seqStepsText(r.Steps), seqIntOrString(r.MaxUnavailable), seqIntOrString(r.FailureBudget), r.GetUnreachableTimeout(), r.Paused)
	promote := "-"
	if in.Commands.PromoteStep != nil {
		promote = fmt.Sprintf("%s@%d", in.Commands.PromoteRevision, *in.Commands.PromoteStep)
	}
	fmt.Fprintf(&b, "commands: abort %q, promote %s, excluded %v\n", in.Commands.AbortRevision, promote, in.Commands.Excluded)
	fmt.Fprintf(&b, "test's view: stable %q, last rolled back %q, rollout of %s began t+%s, canaries %v, canary steps done %v\n",
		w.stable, w.lastRolledBack, w.ep.revision, w.ep.start.Sub(w.start), w.ep.canaries, w.ep.canaryDone)
	for _, s := range []struct {
		name string
		st   v1alpha1.NetTuningProfileStatus
	}{{"status in ", in.Status}, {"status out", out.Status}} {
		step := "-"
		if s.st.CurrentStep != nil {
			step = fmt.Sprint(*s.st.CurrentStep)
		}
		var an []string
		for _, a := range s.st.Analysis {
			an = append(an, fmt.Sprintf("%s@%d=%s", a.Name, a.Step, a.Phase))
		}
		fmt.Fprintf(&b, "%s: phase %s, step %s, stable %q, current %q, failed %q, canaries %v, analysis [%s]\n",
			s.name, s.st.Phase, step, s.st.StableRevision, s.st.CurrentRevision, s.st.FailedRevision, s.st.CanaryVehicles, strings.Join(an, " "))
	}
	ex := seqExcluded(in)
	canary := map[string]bool{}
	for _, c := range out.Status.CanaryVehicles {
		canary[c] = true
	}
	b.WriteString("vehicles (role, assigned by this plan, observed state):\n")
	for _, v := range w.fleet {
		role := ""
		switch {
		case ex[v.Name]:
			role = "excluded"
		case canary[v.Name]:
			role = "canary"
		}
		fmt.Fprintf(&b, "  %s %-6s %-8s -> %-4s %s\n", v.Name, v.model, role, or(out.Assign[v.Name], "none"), w.describe(v))
	}
	for _, e := range out.Events {
		fmt.Fprintf(&b, "event %s: %s\n", e.Reason, e.Message)
	}
	b.WriteString("last ticks:\n")
	for _, l := range w.trace[max(0, len(w.trace)-20):] {
		b.WriteString("  " + l + "\n")
	}
	if len(w.notes) > 0 {
		fmt.Fprintf(&b, "  (this tick: %s)\n", strings.Join(w.notes, ", "))
	}
	w.t.Fatal(b.String())
}

func seqIntOrString(v *intstr.IntOrString) string {
	if v == nil {
		return "default"
	}
	return v.String()
}

func seqCanaryText(c v1alpha1.CanarySpec) string {
	switch {
	case len(c.Vehicles) > 0:
		return fmt.Sprintf("vehicles %v", c.Vehicles)
	case c.Selector != nil:
		return "selector " + metav1.FormatLabelSelector(c.Selector.AsMetav1())
	case c.Count != nil:
		return fmt.Sprintf("count %d", *c.Count)
	}
	return "none"
}

func seqStepsText(steps []v1alpha1.RolloutStep) string {
	var out []string
	for _, s := range steps {
		switch {
		case s.SetVehicles != nil && s.SetVehicles.Count != nil:
			out = append(out, fmt.Sprintf("setVehicles %d", *s.SetVehicles.Count))
		case s.SetVehicles != nil:
			out = append(out, fmt.Sprintf("setVehicles %d%%", *s.SetVehicles.Percent))
		case s.Pause != nil && s.Pause.Duration != nil:
			out = append(out, "pause "+s.Pause.Duration.Duration.String())
		case s.Pause != nil:
			out = append(out, "pause")
		case s.Analysis != nil:
			out = append(out, "analysis "+strings.Join(s.Analysis.Names(), "+"))
		}
	}
	return strings.Join(out, ", ")
}

// --- specs ----------------------------------------------------------------

func seqAnalysisSpec(r *v1alpha1.RolloutSpec, name string) *v1alpha1.AnalysisSpec {
	for i := range r.Analyses {
		if r.Analyses[i].Name == name {
			return &r.Analyses[i]
		}
	}
	panic("no analysis " + name)
}

// seqSpec is a rollout with two analyses: latency (2 measurements a minute
// apart) and guard (one, after 30s).
func seqSpec(canary v1alpha1.CanarySpec, maxUnavailable intstr.IntOrString, steps ...v1alpha1.RolloutStep) *v1alpha1.RolloutSpec {
	zero := intstr.FromInt32(0)
	return &v1alpha1.RolloutSpec{
		Canary: canary, Steps: steps, MaxUnavailable: &maxUnavailable, FailureBudget: &zero,
		Analyses: []v1alpha1.AnalysisSpec{
			{Name: "latency", Provider: v1alpha1.ProviderLoki, Interval: dur(time.Minute), Measurements: ptr(int32(2)),
				FailureLimit: ptr(int32(0)), InconclusiveLimit: ptr(int32(0)), OnInconclusive: v1alpha1.InconclusivePause},
			{Name: "guard", Provider: v1alpha1.ProviderPrometheus, Interval: dur(30 * time.Second), Measurements: ptr(int32(1)),
				FailureLimit: ptr(int32(0)), InconclusiveLimit: ptr(int32(0)), OnInconclusive: v1alpha1.InconclusiveAbort},
		},
		UnreachableAfter: dur(2 * time.Minute), UnreachableTimeout: dur(10 * time.Minute),
	}
}

func seqAnalyze(name string, with ...string) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{Analysis: &v1alpha1.AnalysisStep{Name: name, With: with}}
}

func seqPercent(p int32) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(p)}}
}

func seqCount(n int32) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{SetVehicles: &v1alpha1.SetVehiclesStep{Count: ptr(n)}}
}

// seqPause pauses for d, or until promoted when d is 0.
func seqPause(d time.Duration) v1alpha1.RolloutStep {
	if d == 0 {
		return v1alpha1.RolloutStep{Pause: &v1alpha1.PauseStep{}}
	}
	return v1alpha1.RolloutStep{Pause: &v1alpha1.PauseStep{Duration: dur(d)}}
}

func seqCanaryCount(n int32) v1alpha1.CanarySpec { return v1alpha1.CanarySpec{Count: ptr(n)} }

func seqCanaryVehicles(names ...string) v1alpha1.CanarySpec {
	return v1alpha1.CanarySpec{Vehicles: names}
}

func seqCanarySelector() v1alpha1.CanarySpec {
	return v1alpha1.CanarySpec{Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{seqRingLabel: "canary"}}}
}

// --- runs -----------------------------------------------------------------------

// quiet: the rollout reached an end (stable or rolled back) and the last two
// plans assigned the same.
func (w *seqWorld) quiet(out planner.Output) bool {
	end := out.Status.Phase == v1alpha1.PhaseHealthy || out.Status.Phase == v1alpha1.PhaseDegraded || out.Status.Phase == v1alpha1.PhaseRolledBack
	same := w.prevPhase == out.Status.Phase && len(w.prevAssign) == len(out.Assign)
	for k, v := range out.Assign {
		same = same && w.prevAssign[k] == v
	}
	w.prevPhase, w.prevAssign = out.Status.Phase, out.Assign
	return end && same
}

// finished checks the end of a run: the spec's revision stable on every
// vehicle (excluded ones follow the stable revision), or rolled back with
// every vehicle on the stable one.
func (w *seqWorld) finished(out planner.Output) {
	w.t.Helper()
	in := w.input()
	want := w.revision
	if w.revision == w.lastRolledBack {
		want = w.stable
		if out.Status.Phase != v1alpha1.PhaseRolledBack {
			w.fail(in, out, fmt.Sprintf("end: %s was rolled back, phase %s", w.revision, out.Status.Phase))
		}
	} else if w.stable != w.revision {
		w.fail(in, out, fmt.Sprintf("end: stable %q, want the spec's %s", w.stable, w.revision))
	}
	for _, v := range w.fleet {
		if out.Assign[v.Name] != want {
			w.fail(in, out, fmt.Sprintf("end: %s assigned %q, want %q", v.Name, out.Assign[v.Name], want))
		}
	}
}

// seqAction is something that happens to the fleet or the profile, after
// `after` ticks from the previous action, once cond holds.
type seqAction struct {
	after int
	cond  func(w *seqWorld) bool
	do    func(w *seqWorld)
}

func seqAfter(ticks int, do func(w *seqWorld)) seqAction { return seqAction{after: ticks, do: do} }

func seqOnce(cond func(w *seqWorld) bool, do func(w *seqWorld)) seqAction {
	return seqAction{cond: cond, do: do}
}

type seqScenario struct {
	name    string
	models  map[string]int
	stable  string // the fleet's revision before the test ("" = none)
	rollout *v1alpha1.RolloutSpec
	maxLag  int
	tick    time.Duration
	fate    func(w *seqWorld, step int32, analysis string) string
	setup   func(w *seqWorld)
	script  []seqAction
	// want checks the end and that the scenario did what it is named for.
	want func(w *seqWorld) string
}

func runSeqScenario(t *testing.T, sc seqScenario) {
	w := newSeqWorld(t, rand.New(rand.NewSource(1)), sc.models, sc.stable, sc.rollout)
	w.name = "scenario " + sc.name
	w.replay = fmt.Sprintf("go test ./controllers/planner -run '%s$' -count=1 -v -args -sequence.trace", t.Name())
	w.maxLag = sc.maxLag
	if sc.tick > 0 {
		w.tickLen = func() time.Duration { return sc.tick }
	}
	if sc.fate != nil {
		w.fate = sc.fate
	}
	if sc.setup != nil {
		sc.setup(w)
	}
	next, since := 0, 0
	for range 600 {
		for next < len(sc.script) {
			a := sc.script[next]
			if since < a.after || a.cond != nil && !a.cond(w) {
				break
			}
			a.do(w)
			next, since = next+1, 0
		}
		since++
		out := w.step()
		w.last = out
		if w.quiet(out) && next == len(sc.script) {
			w.finished(out)
			if sc.want != nil {
				if msg := sc.want(w); msg != "" {
					w.fail(w.input(), out, "scenario: "+msg)
				}
			}
			return
		}
	}
	w.fail(w.input(), w.last, fmt.Sprintf("no end after 600 ticks (%d of %d actions done)", next, len(sc.script)))
}

// inFlight lists the vehicles assigned rev that have not verified it.
func (w *seqWorld) inFlight(rev string, canaries bool) []string {
	var out []string
	for _, v := range w.fleet {
		if v.Assigned == rev && !v.Verified && !v.Failed && (canaries || !slices.Contains(w.status.CanaryVehicles, v.Name)) {
			out = append(out, v.Name)
		}
	}
	return out
}

func (w *seqWorld) on(rev string) int {
	n := 0
	for _, v := range w.fleet {
		if v.Assigned == rev {
			n++
		}
	}
	return n
}

func seqWant(w *seqWorld, stable, rolledBack string, seen ...string) string {
	if w.stable != stable || w.lastRolledBack != rolledBack {
		return fmt.Sprintf("ended with stable %q and %q rolled back, want %q and %q", w.stable, w.lastRolledBack, stable, rolledBack)
	}
	for _, s := range seen {
		if w.seen[s] == 0 {
			return fmt.Sprintf("never saw %q (saw %v)", s, w.seen)
		}
	}
	return ""
}

func seqFails(rev string, step int32, analysis string) func(*seqWorld, int32, string) string {
	return func(w *seqWorld, s int32, a string) string {
		if w.ep.revision == rev && s == step && a == analysis {
			return v1alpha1.AnalysisFailed
		}
		return v1alpha1.AnalysisSuccessful
	}
}

func seqScenarios() []seqScenario {
	fleet12 := map[string]int{"xavier": 9, "orin": 3}
	one, two := intstr.FromInt32(1), intstr.FromInt32(2)
	shipped := func() *v1alpha1.RolloutSpec {
		return seqSpec(seqCanaryCount(2), one, seqAnalyze("latency"), seqPercent(25), seqAnalyze("latency"), seqPercent(100))
	}
	edit := func(rev string) func(w *seqWorld) { return func(w *seqWorld) { w.edit(rev) } }
	phase := func(p string) func(w *seqWorld) bool { return func(w *seqWorld) bool { return w.status.Phase == p } }
	return []seqScenario{{
		name: "canaries then the fleet with lagging agents", models: fleet12, stable: "r1", rollout: shipped(), maxLag: 3,
		script: []seqAction{seqAfter(0, edit("r2"))},
		want:   func(w *seqWorld) string { return seqWant(w, "r2", "", "maxUnavailable reached", "analysis Successful") },
	}, {
		name: "maxUnavailable 25 percent of 16 with slow agents", models: map[string]int{"xavier": 12, "orin": 4}, stable: "r1", maxLag: 5,
		rollout: seqSpec(seqCanaryVehicles("av-01", "av-13"), intstr.FromString("25%"),
			seqAnalyze("latency", "guard"), seqPercent(50), seqPause(3*time.Minute), seqPercent(100)),
		script: []seqAction{seqAfter(0, edit("r2"))},
		want:   func(w *seqWorld) string { return seqWant(w, "r2", "", "maxUnavailable reached") },
	}, {
		name: "canary analysis fails, rolled back and not retried until edited", models: fleet12, stable: "r1", rollout: shipped(), maxLag: 1,
		fate: seqFails("r2", 0, "latency"),
		script: []seqAction{seqAfter(0, edit("r2")), seqOnce(phase(v1alpha1.PhaseRolledBack), func(*seqWorld) {}),
			seqAfter(10, edit("r3"))},
		want: func(w *seqWorld) string { return seqWant(w, "r3", "r2", "rollback AnalysisFailed") },
	}, {
		name: "second analysis fails after a quarter of the fleet", models: fleet12, stable: "r1", rollout: shipped(), maxLag: 2,
		fate:   seqFails("r2", 2, "latency"),
		script: []seqAction{seqAfter(0, edit("r2"))},
		want:   func(w *seqWorld) string { return seqWant(w, "r1", "r2", "rollback AnalysisFailed") },
	}, {
		name: "guard inconclusive aborts the rollout", models: fleet12, stable: "r1", maxLag: 1,
		rollout: seqSpec(seqCanaryCount(2), two, seqAnalyze("latency", "guard"), seqPercent(100)),
		fate: func(w *seqWorld, s int32, a string) string {
			if a == "guard" {
				return v1alpha1.AnalysisInconclusive
			}
			return v1alpha1.AnalysisSuccessful
		},
		script: []seqAction{seqAfter(0, edit("r2"))},
		want:   func(w *seqWorld) string { return seqWant(w, "r1", "r2", "rollback AnalysisInconclusive") },
	}, {
		name: "abort mid-rollout, the aborted content is refused, a new edit rolls out", models: fleet12, stable: "r1", maxLag: 2,
		rollout: seqSpec(seqCanaryCount(2), two, seqAnalyze("latency"), seqPercent(50), seqPercent(100)),
		script: []seqAction{
			seqAfter(0, edit("r2")),
			seqOnce(func(w *seqWorld) bool { return w.on("r2") > 3 }, func(w *seqWorld) { w.abort() }),
			seqAfter(5, edit("r3")), seqAfter(3, edit("r2")), seqAfter(6, edit("r4")),
		},
		want: func(w *seqWorld) string {
			return seqWant(w, "r4", "r2", "rollback Aborted", "edit back to the rolled-back revision")
		},
	}, {
		name: "new revisions while one is in flight", models: fleet12, stable: "r1", maxLag: 2,
		rollout: seqSpec(seqCanaryCount(3), two, seqAnalyze("guard"), seqPercent(50), seqAnalyze("latency"), seqPercent(100)),
		script: []seqAction{
			seqAfter(0, edit("r2")),
			seqOnce(func(w *seqWorld) bool { return w.on("r2") > 4 && len(w.inFlight("r2", false)) > 0 }, edit("r3")),
			seqOnce(func(w *seqWorld) bool { return len(w.inFlight("r3", true)) > 0 }, edit("r4")),
		},
		want: func(w *seqWorld) string { return seqWant(w, "r4", "", "edit mid-rollout") },
	}, {
		name: "undo to the stable revision, then the superseded revision again", models: fleet12, stable: "r1", rollout: shipped(), maxLag: 1,
		script: []seqAction{
			seqAfter(0, edit("r2")),
			seqOnce(func(w *seqWorld) bool { return w.on("r2") > 3 }, edit("r1")),
			seqAfter(4, edit("r2")),
		},
		want: func(w *seqWorld) string { return seqWant(w, "r2", "", "edit back to the stable revision") },
	}, {
		name: "offline canary", models: fleet12, stable: "r1", maxLag: 1,
		rollout: seqSpec(seqCanaryVehicles("av-01", "av-10"), one, seqAnalyze("latency"), seqPercent(25), seqPercent(100)),
		script: []seqAction{
			seqAfter(0, func(w *seqWorld) { w.offline("av-01"); w.edit("r2") }),
			seqAfter(40, func(w *seqWorld) { w.online("av-01") }),
		},
		want: func(w *seqWorld) string { return seqWant(w, "r2", "", "gave up on an unreachable vehicle") },
	}, {
		name: "vehicles drop out mid-apply and come back over the limit", models: fleet12, stable: "r1", maxLag: 6,
		rollout: seqSpec(seqCanaryCount(2), two, seqAnalyze("guard"), seqPercent(100)),
		script: func() []seqAction {
			var gone []string
			return []seqAction{
				seqAfter(0, edit("r2")),
				seqOnce(func(w *seqWorld) bool { return len(w.inFlight("r2", false)) >= 2 }, func(w *seqWorld) {
					gone = w.inFlight("r2", false)[:2]
					for _, n := range gone {
						w.byName[n].lag = 6 // still applying when they come back
					}
					w.offline(gone...)
				}),
				seqAfter(8, func(w *seqWorld) { w.online(gone...) }),
			}
		}(),
		want: func(w *seqWorld) string { return seqWant(w, "r2", "", "returned vehicles over maxUnavailable") },
	}, {
		name: "excluded vehicles stay on stable, a canary among them", models: fleet12, stable: "r1", maxLag: 4,
		rollout: seqSpec(seqCanaryVehicles("av-02", "av-05", "av-11"), intstr.FromString("20%"),
			seqAnalyze("latency"), seqPercent(50), seqAnalyze("guard"), seqPercent(100)),
		script: []seqAction{
			seqAfter(0, func(w *seqWorld) { w.exclude("av-05", "av-07"); w.edit("r2") }),
			// 20% of 10 vehicles lets 2 in flight; excluding two that wait
			// leaves 8, and 20% of 8 lets 1.
			seqOnce(func(w *seqWorld) bool { return len(w.inFlight("r2", false)) >= 2 }, func(w *seqWorld) {
				var waiting []string
				for _, v := range w.fleet {
					if v.Assigned == "r1" && !slices.Contains(w.commands.Excluded, v.Name) {
						waiting = append(waiting, v.Name)
					}
				}
				w.exclude(waiting[:2]...)
			}),
			seqAfter(3, func(w *seqWorld) { w.exclude(w.inFlight("r2", false)...); w.include("av-07") }),
			seqAfter(6, func(w *seqWorld) { w.exclude("av-11") }),
		},
		want: func(w *seqWorld) string {
			return seqWant(w, "r2", "", "exclude mid-rollout", "limit fell below the vehicles in flight")
		},
	}, {
		name: "pause until promoted and an inconclusive analysis wait for the user", models: fleet12, stable: "r1", maxLag: 1,
		rollout: seqSpec(seqCanaryCount(2), two, seqAnalyze("latency"), seqPercent(50), seqPause(0), seqPercent(100)),
		fate: func(w *seqWorld, s int32, a string) string {
			if s == 0 {
				return v1alpha1.AnalysisInconclusive
			}
			return v1alpha1.AnalysisSuccessful
		},
		script: []seqAction{
			seqAfter(0, edit("r2")),
			seqOnce(phase(v1alpha1.PhasePaused), func(*seqWorld) {}), seqAfter(6, func(w *seqWorld) { w.promote() }),
			seqOnce(func(w *seqWorld) bool { return w.status.Phase == v1alpha1.PhasePaused && *w.status.CurrentStep == 2 }, func(*seqWorld) {}),
			seqAfter(6, func(w *seqWorld) { w.promote() }),
		},
		want: func(w *seqWorld) string { return seqWant(w, "r2", "", "promote", "analysis Inconclusive") },
	}, {
		name: "spec paused mid-rollout holds the fleet", models: fleet12, stable: "r1", maxLag: 2,
		rollout: seqSpec(seqCanaryCount(2), two, seqAnalyze("guard"), seqPercent(100)),
		script: []seqAction{
			seqAfter(0, edit("r2")),
			seqOnce(func(w *seqWorld) bool { return w.on("r2") > 4 }, func(w *seqWorld) { w.setPaused(true) }),
			seqAfter(10, func(w *seqWorld) { w.setPaused(false) }),
		},
		want: func(w *seqWorld) string { return seqWant(w, "r2", "", "spec paused") },
	}, {
		name: "failure budget of one, the second failing vehicle rolls back", models: fleet12, stable: "r1", maxLag: 1,
		rollout: func() *v1alpha1.RolloutSpec {
			r := seqSpec(seqCanaryVehicles("av-01", "av-10"), two, seqAnalyze("guard"), seqPercent(100))
			r.FailureBudget = &one
			return r
		}(),
		setup:  func(w *seqWorld) { w.failOn["av-04/r2"], w.failOn["av-08/r2"] = true, true },
		script: []seqAction{seqAfter(0, edit("r2"))},
		want:   func(w *seqWorld) string { return seqWant(w, "r1", "r2", "rollback FailureBudgetExceeded") },
	}, {
		name: "first rollout onto a fleet without a revision", models: map[string]int{"xavier": 6, "orin": 2, "thor": 2}, stable: "", maxLag: 2,
		rollout: seqSpec(seqCanaryCount(1), two, seqAnalyze("latency"), seqPercent(30), seqPause(2*time.Minute), seqPercent(100)),
		script:  []seqAction{seqAfter(0, edit("r1"))},
		want:    func(w *seqWorld) string { return seqWant(w, "r1", "") },
	}, {
		name: "selector canary with a leading setVehicles step", models: fleet12, stable: "r1", maxLag: 2,
		rollout: seqSpec(seqCanarySelector(), intstr.FromInt32(3), seqPercent(50), seqAnalyze("latency"), seqPercent(100)),
		setup: func(w *seqWorld) {
			for _, n := range []string{"av-03", "av-08", "av-12"} {
				w.byName[n].ring = true
				w.byName[n].Labels = labels.Set{v1alpha1.DefaultHardwareLabel: w.byName[n].model, seqRingLabel: "canary"}
			}
		},
		script: []seqAction{seqAfter(0, edit("r2"))},
		want:   func(w *seqWorld) string { return seqWant(w, "r2", "", "no canary steps") },
	}}
}

// seqFormerBugScenarios are the rollouts that once did what their spec does
// not say, each in the fewest steps; the invariants hold on them now.
func seqFormerBugScenarios() []seqScenario {
	two := intstr.FromInt32(2)
	edit := func(rev string) func(w *seqWorld) { return func(w *seqWorld) { w.edit(rev) } }
	return []seqScenario{{
		// A promote annotation "<revision>@<step>" left from an earlier
		// rollout promoted a later rollout of the same revision, skipping
		// its canary analysis.
		name: "a leftover promote does not skip the canary analysis of a revision rolled out again", models: map[string]int{"xavier": 6, "orin": 2}, stable: "r1",
		rollout: seqSpec(seqCanaryVehicles("av-01", "av-07"), two, seqAnalyze("latency"), seqPercent(100)),
		script: []seqAction{
			seqAfter(0, edit("r2")),
			seqAfter(1, func(w *seqWorld) { w.promote() }), // r2@0, while its canary analysis runs
			seqAfter(3, edit("r3")),
			seqAfter(3, edit("r2")), // the same content again: r2@0 is still on the profile
		},
	}, {
		// A revision rolled out again stopped waiting for an Unreachable
		// vehicle unreachableTimeout after its FIRST rollout began.
		name: "a revision rolled out again waits for its offline canary", models: map[string]int{"xavier": 6, "orin": 2}, stable: "r1",
		rollout: seqSpec(seqCanaryVehicles("av-01", "av-07"), two, seqAnalyze("guard"), seqPercent(100)),
		script: []seqAction{
			seqAfter(0, func(w *seqWorld) { w.offline("av-01"); w.edit("r2") }),
			seqAfter(6, edit("r3")),  // r3 waits for av-01 10m, then completes
			seqAfter(24, edit("r2")), // r2 again at t+15m: it should wait for av-01 until t+25m
			seqAfter(40, func(w *seqWorld) { w.online("av-01") }),
		},
	}, {
		// An Abort-on-inconclusive guard named after a Pause analysis that
		// turned Inconclusive at the same measurement paused instead of
		// rolling back.
		name: "an inconclusive guard aborts beside an inconclusive analysis that pauses", models: map[string]int{"xavier": 6, "orin": 2}, stable: "r1",
		rollout: func() *v1alpha1.RolloutSpec {
			// latency pauses on Inconclusive, guard aborts; one measurement each.
			r := seqSpec(seqCanaryVehicles("av-01", "av-07"), two, seqAnalyze("latency", "guard"), seqPercent(100))
			r.Analyses[0].Measurements = ptr(int32(1))
			return r
		}(),
		fate:   func(*seqWorld, int32, string) string { return v1alpha1.AnalysisInconclusive },
		script: []seqAction{seqAfter(0, edit("r2"))},
	}}
}

// runSeqRandom makes the random run of seed: a random fleet, rollout and
// sequence of events for up to 150 ticks, then a calm end (every vehicle
// back online, pauses promoted, nothing new) that must finish the rollout.
func runSeqRandom(t *testing.T, seed int64) *seqWorld {
	rng := rand.New(rand.NewSource(seed))
	models := map[string]int{"xavier": 3 + rng.Intn(10)}
	if rng.Intn(4) > 0 {
		models["orin"] = 1 + rng.Intn(5)
	}
	if rng.Intn(5) == 0 {
		models["thor"] = 1 + rng.Intn(2)
	}
	n := models["xavier"] + models["orin"] + models["thor"]
	stable := "r1"
	if rng.Intn(8) == 0 {
		stable = ""
	}
	r := seqRandomSpec(rng, n)
	w := newSeqWorld(t, rng, models, stable, r)
	w.name, w.random = fmt.Sprintf("seed %d", seed), true
	w.replay = fmt.Sprintf("go test ./controllers/planner -run 'TestRolloutSequence/random/seed=%d$' -count=1 -v -args -sequence.trace", seed)
	if seed > int64(*sequenceSeeds) {
		w.replay = fmt.Sprintf("go test ./controllers/planner -run 'TestRolloutSequence/random' -count=1 -v -args -sequence.seed=%d -sequence.trace", seed)
	}
	w.maxLag = rng.Intn(5)
	w.tickLen = func() time.Duration { return time.Duration(10+rng.Intn(81)) * time.Second }
	for _, v := range w.fleet {
		if r.Canary.Selector != nil && rng.Intn(4) == 0 {
			v.ring = true
			v.Labels = labels.Set{v1alpha1.DefaultHardwareLabel: v.model, seqRingLabel: "canary"}
		}
		if rng.Intn(15) == 0 {
			v.online = false
			v.LastSeen = w.now.Add(-time.Duration(rng.Intn(30)) * time.Minute)
		}
	}
	calm := false
	w.fate = func(w *seqWorld, step int32, analysis string) string {
		switch k := rng.Intn(100); {
		case calm || k < 70:
			return v1alpha1.AnalysisSuccessful
		case k < 85:
			return v1alpha1.AnalysisFailed
		default:
			return v1alpha1.AnalysisInconclusive
		}
	}
	newRevision := func() {
		rev := w.edit("")
		for _, v := range w.fleet {
			if rng.Intn(25) == 0 {
				w.failOn[v.Name+"/"+rev] = true
			}
		}
	}
	newRevision()
	events := 60 + rng.Intn(90)
	for tick := 1; tick <= events+600; tick++ {
		if tick <= events {
			seqRandomEvents(w, rng, newRevision)
		} else if !calm {
			calm = true
			w.note("calm")
			for _, v := range w.fleet {
				if !v.online {
					w.online(v.Name)
				}
			}
			if w.rollout.Paused {
				w.setPaused(false)
			}
		}
		if calm && w.status.Phase == v1alpha1.PhasePaused && w.status.CurrentStep != nil && !w.promotedNow(*w.status.CurrentStep) {
			w.promote()
		}
		out := w.step()
		w.last = out
		if w.quiet(out) && calm {
			w.finished(out)
			return w
		}
	}
	w.fail(w.input(), w.last, "no end 600 ticks after the last event")
	return w
}

func seqRandomEvents(w *seqWorld, rng *rand.Rand, newRevision func()) {
	p := func(percent float64) bool { return rng.Float64()*100 < percent }
	pick := func(names []string) string { return names[rng.Intn(len(names))] }
	switch {
	case p(3):
		switch k := rng.Intn(10); {
		case k < 6 || w.revs < 2:
			newRevision()
		case k < 7 && w.stable != "":
			w.edit(w.stable)
		case k < 8 && w.lastRolledBack != "" && w.lastRolledBack != w.revision:
			w.edit(w.lastRolledBack)
		default:
			if rev := fmt.Sprintf("r%d", 1+rng.Intn(w.revs)); rev != w.revision {
				w.edit(rev)
			}
		}
	case p(1.5) && w.rolling():
		w.abort()
	case p(3) && w.commands.AbortRevision != "":
		w.commands.AbortRevision = ""
		w.note("abort annotation removed")
	}
	for _, v := range w.fleet {
		switch {
		case v.online && (p(1) || v.Assigned == w.revision && !v.Verified && !v.Failed && p(4)):
			w.offline(v.Name) // more often mid-apply
		case !v.online && p(8):
			w.online(v.Name)
		}
	}
	var names []string
	for _, v := range w.fleet {
		names = append(names, v.Name)
	}
	switch {
	case p(2):
		w.exclude(pick(names))
	case p(3) && len(w.commands.Excluded) > 0:
		w.include(pick(w.commands.Excluded))
	}
	switch {
	case w.status.Phase == v1alpha1.PhasePaused && p(20):
		w.promote()
	case p(2):
		w.promote()
	case p(1):
		w.setPaused(!w.rollout.Paused)
	}
}

// seqRandomSpec is a random rollout for a fleet of n vehicles.
func seqRandomSpec(rng *rand.Rand, n int) *v1alpha1.RolloutSpec {
	var canary v1alpha1.CanarySpec
	switch rng.Intn(3) {
	case 0:
		canary = seqCanaryCount(int32(1 + rng.Intn(3)))
	case 1:
		var names []string
		for range 1 + rng.Intn(3) {
			names = append(names, fmt.Sprintf("av-%02d", 1+rng.Intn(n+1))) // sometimes one not in the fleet
		}
		slices.Sort(names)
		canary = seqCanaryVehicles(slices.Compact(names)...)
	default:
		canary = seqCanarySelector()
	}
	var steps []v1alpha1.RolloutStep
	percent := int32(0)
	for i := range rng.Intn(6) {
		switch k := rng.Intn(10); {
		case i == 0 && k < 2, i > 0 && k < 4:
			percent = min(100, percent+int32(10+rng.Intn(50)))
			if rng.Intn(4) == 0 {
				steps = append(steps, seqCount(int32(max(1, int(percent)*n/100))))
			} else {
				steps = append(steps, seqPercent(percent))
			}
		case k < 7:
			if rng.Intn(3) == 0 {
				steps = append(steps, seqAnalyze("latency", "guard"))
			} else {
				steps = append(steps, seqAnalyze([]string{"latency", "guard"}[rng.Intn(2)]))
			}
		case k < 9:
			steps = append(steps, seqPause(time.Duration(1+rng.Intn(5))*time.Minute))
		default:
			steps = append(steps, seqPause(0))
		}
	}
	maxUnavailable := intstr.FromInt32(int32(1 + rng.Intn(4)))
	if rng.Intn(3) == 0 {
		maxUnavailable = intstr.FromString(fmt.Sprintf("%d%%", 5+rng.Intn(50)))
	}
	r := seqSpec(canary, maxUnavailable, steps...)
	switch rng.Intn(4) {
	case 0:
		r.FailureBudget = nil
	case 1:
		r.FailureBudget = ptr(intstr.FromInt32(int32(1 + rng.Intn(2))))
	case 2:
		r.FailureBudget = ptr(intstr.FromString("20%"))
	}
	r.UnreachableTimeout = dur(time.Duration(3+rng.Intn(8)) * time.Minute)
	for i := range r.Analyses {
		a := &r.Analyses[i]
		a.Measurements = ptr(int32(1 + rng.Intn(3)))
		a.Interval = dur(time.Duration(20+rng.Intn(100)) * time.Second)
		a.DryRun = rng.Intn(8) == 0
		a.OnInconclusive = []v1alpha1.InconclusivePolicy{v1alpha1.InconclusivePause, v1alpha1.InconclusiveAbort}[rng.Intn(2)]
	}
	return r
}

func TestRolloutSequence(t *testing.T) {
	t.Run("scenario", func(t *testing.T) {
		for _, sc := range seqScenarios() {
			t.Run(sc.name, func(t *testing.T) { runSeqScenario(t, sc) })
		}
	})
	t.Run("former bug", func(t *testing.T) {
		for _, sc := range seqFormerBugScenarios() {
			t.Run(sc.name, func(t *testing.T) { runSeqScenario(t, sc) })
		}
	})
	t.Run("random", func(t *testing.T) {
		var seeds []int64
		if *sequenceSeed != 0 {
			seeds = []int64{*sequenceSeed}
		} else {
			for s := range *sequenceSeeds {
				seeds = append(seeds, int64(s+1))
			}
		}
		runs := map[string]int{}
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				w := runSeqRandom(t, seed)
				for k := range w.seen {
					runs[k]++
				}
			})
		}
		if t.Failed() || len(seeds) < 100 {
			return
		}
		// The random runs must keep exercising what the invariants are about.
		var cover []string
		for _, k := range []string{
			"edit mid-rollout", "edit back to the stable revision", "edit back to the rolled-back revision",
			"rollback Aborted", "rollback AnalysisFailed", "rollback AnalysisInconclusive", "rollback FailureBudgetExceeded",
			"offline", "gave up on an unreachable vehicle", "returned vehicles over maxUnavailable", "maxUnavailable reached",
			"exclude mid-rollout", "promote", "spec paused", "no canary steps", "rollout complete",
		} {
			cover = append(cover, fmt.Sprintf("%s: %d", k, runs[k]))
			if runs[k] == 0 {
				t.Errorf("no random run saw %q: the generator no longer exercises it", k)
			}
		}
		t.Logf("runs (of %d) that saw: %s", len(seeds), strings.Join(cover, ", "))
	})
}
