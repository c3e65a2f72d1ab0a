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
	"io"
	"math"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/fleetmodel"
)

type powerOptions struct {
	loki, prometheus             string
	lokiSecret, prometheusSecret string
	over                         time.Duration
	detect                       string
	power                        float64
	canary                       int
}

func (c *cli) powerCommand() *cobra.Command {
	o := &powerOptions{}
	cmd := &cobra.Command{
		Use:   "power PROFILE",
		Short: "How long a canary must run: what each judge analysis can detect on this fleet, and when",
		Long: `Before a rollout starts: from the stable revision's recent messages per host
pair (each judge analysis' totalQuery and slowQuery over --over, divided
among the vehicles on it) and the cohorts the rollout will compare (the
canary's vehicles against the rest), say for each judge analysis

  - when each pair reaches the analysis' sample minimum (minSamples, raised to
    3/(1-quantile)), and whether it does before the analysis gives up
    (inconclusiveLimit x interval);
  - the smallest canary slow share its widest window fails with --power
    (default 80 %), against the share it tolerates (maxRatio x the baseline's
    + maxIncrease), each pair judged at confidence 1-(1-c)/pairs;
  - with --detect, how long the canary step must last for the judge to fail
    that regression (3x the baseline's share, or a share: 2%) with --power;
  - when a canary without a regression (its slow share the baseline's) passes,
    each pair on its own and every pair in one measurement, with --power.

Analyses query their address, or --loki / --prometheus (the controller's
defaults), with their secretRef read from the controller's namespace
(-n), or --loki-secret / --prometheus-secret for the default addresses.`,
		Example: `  kubectl nettune power xavier-lan --loki http://loki.monitoring:3100 --prometheus http://prometheus.monitoring:9090
  kubectl nettune power xavier-lan --loki http://localhost:3100 --detect 3x -o yaml`,
		Args:              args("PROFILE", 1, 1),
		ValidArgsFunction: c.completeProfiles,
	}
	out := outputFlag(cmd.Flags(), "yaml", "json")
	cmd.Flags().StringVar(&o.loki, "loki", "", "Loki base URL for analyses without an address (the controller's --loki-address)")
	cmd.Flags().StringVar(&o.prometheus, "prometheus", "", "Prometheus base URL for analyses without an address (the controller's --prometheus-address)")
	cmd.Flags().StringVar(&o.lokiSecret, "loki-secret", "", "Secret in the controller's namespace with the credentials for --loki (the controller's --loki-secret)")
	cmd.Flags().StringVar(&o.prometheusSecret, "prometheus-secret", "", "Secret in the controller's namespace with the credentials for --prometheus")
	cmd.Flags().DurationVar(&o.over, "over", 30*time.Minute, "how far back to read the stable revision's messages; choose a time the vehicles ran as usual")
	cmd.Flags().StringVar(&o.detect, "detect", "", "a regression to size the canary step for: a ratio to the baseline's slow share (3x) or a slow share (2%, 0.02)")
	cmd.Flags().Float64Var(&o.power, "power", analysis.DefaultPower, "the probability of a Fail the figures are stated at")
	cmd.Flags().IntVar(&o.canary, "canary", 0, "canary vehicles (default: status.canaryVehicles of a rollout in progress, else what spec.rollout.canary selects)")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		format, err := out.get()
		if err != nil {
			return err
		}
		return c.powerReport(cmd.Context(), pos[0], o, format)
	}
	return cmd
}

// powerDoc is the report of kubectl nettune power.
type powerDoc struct {
	Profile        string          `json:"profile"`
	StableRevision string          `json:"stableRevision"`
	Over           string          `json:"over"`
	At             metav1.Time     `json:"at"`
	Vehicles       int             `json:"vehicles"`
	Canary         int             `json:"canaryVehicles"`
	Baseline       int             `json:"baselineVehicles"`
	Power          float64         `json:"power"`
	Detect         string          `json:"detect,omitempty"`
	Analyses       []powerAnalysis `json:"analyses"`
}

type powerAnalysis struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Skipped says why nothing was computed (not a judge, a query error).
	Skipped         string  `json:"skipped,omitempty"`
	Pairs           int     `json:"pairs,omitempty"`
	PairConfidence  float64 `json:"pairConfidence,omitempty"`
	MinSamples      int64   `json:"minSamples,omitempty"`
	Window          string  `json:"window,omitempty"`
	Interval        string  `json:"interval,omitempty"`
	RankIntervals   int     `json:"rankIntervals,omitempty"`
	Step            string  `json:"step,omitempty"`
	LastMeasurement string  `json:"lastMeasurement,omitempty"`
	WidestWindow    string  `json:"widestWindow,omitempty"`
	DetectStep      string  `json:"detectStep,omitempty"`
	DetectWithin    bool    `json:"detectWithinLimits,omitempty"`
	// PassStep is when a canary without a regression passes every pair in
	// one measurement with the power asked ("never" before the analysis
	// gives up), PassProbability the probability there.
	PassStep        string      `json:"passStep,omitempty"`
	PassProbability *float64    `json:"passProbability,omitempty"`
	Problems        []string    `json:"problems,omitempty"`
	HostPairs       []powerPair `json:"hostPairs,omitempty"`
}

type powerPair struct {
	Pair              string   `json:"pair"`
	PerVehicle        float64  `json:"messagesPerSecondPerVehicle"`
	BaselineShare     float64  `json:"baselineSlowShare"`
	Tolerance         float64  `json:"toleratedShare"`
	MinSamplesAt      string   `json:"minSamplesAt,omitempty"`
	CanarySamples     int64    `json:"canarySamples"`
	BaselineSamples   int64    `json:"baselineSamples"`
	Detectable        *float64 `json:"detectableShare,omitempty"`
	PassAt            string   `json:"passAt,omitempty"`
	PassProbability   *float64 `json:"passProbability,omitempty"`
	DetectShare       *float64 `json:"detectShare,omitempty"`
	DetectAt          string   `json:"detectAt,omitempty"`
	DetectWithin      bool     `json:"detectWithinLimits,omitempty"`
	DetectProbability *float64 `json:"detectProbability,omitempty"`
}

func (c *cli) powerReport(ctx context.Context, name string, o *powerOptions, format string) error {
	var detect *analysis.Regression
	if o.detect != "" {
		r, err := analysis.ParseRegression(o.detect)
		if err != nil {
			return usageError{fmt.Errorf("--detect: %w", err)}
		}
		detect = &r
	}
	if !(o.power > 0 && o.power < 1) {
		return usageError{fmt.Errorf("--power %v is not in (0, 1)", o.power)}
	}
	if o.over < time.Minute {
		return usageError{fmt.Errorf("--over %s: read at least a minute of messages", o.over)}
	}
	for _, a := range []struct{ flag, v string }{{"--loki", o.loki}, {"--prometheus", o.prometheus}} {
		if u, err := url.Parse(a.v); err == nil && u.User != nil {
			return usageError{fmt.Errorf("%s must not carry credentials (user:password@): put them in a Secret and name it with %s-secret", a.flag, a.flag)}
		}
	}
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	if p.Spec.Rollout == nil || len(p.Spec.Rollout.Analyses) == 0 {
		return fmt.Errorf("profile %s has no analyses (spec.rollout.analyses)", name)
	}
	fleet, err := c.selectFleet(ctx, p)
	if err != nil {
		return err
	}
	vehicles, excluded := fleetmodel.NotExcluded(p, fleet)
	if len(vehicles) < 2 {
		return fmt.Errorf("profile %s selects %d vehicle(s) that are not excluded: a canary needs a baseline to be compared with", name, len(vehicles))
	}
	canary := o.canary
	if canary == 0 {
		canary = fleetmodel.CanaryCount(p, fleet, excluded)
	}
	if canary < 1 || canary >= len(vehicles) {
		return fmt.Errorf("profile %s: %d canary vehicle(s) of %d leave no baseline (give --canary)", name, canary, len(vehicles))
	}
	stable := p.Status.StableRevision
	if stable == "" {
		stable = p.Status.CurrentRevision
	}
	if stable == "" {
		return fmt.Errorf("profile %s has no stable revision yet: its vehicles have sent no message to scale from", name)
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	backends := analysis.Backends{
		LokiAddress: o.loki, PrometheusAddress: o.prometheus,
		LokiSecret: o.lokiSecret, PrometheusSecret: o.prometheusSecret,
		Namespace: c.namespace,
		Secrets: func(ctx context.Context, secret string) (map[string][]byte, error) {
			s := &corev1.Secret{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: secret}, s); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, errors.New("not found")
				}
				return nil, err
			}
			return s.Data, nil
		},
	}
	at := c.now()
	doc := powerDoc{Profile: name, StableRevision: stable, Over: o.over.String(), At: metav1.NewTime(at.UTC().Truncate(time.Second)),
		Vehicles: len(vehicles), Canary: canary, Baseline: len(vehicles) - canary, Power: o.power}
	if detect != nil {
		doc.Detect = detect.String()
	}
	cohort := analysis.Cohort{Vehicles: vehicles, Revision: stable}
	for i := range p.Spec.Rollout.Analyses {
		spec := &p.Spec.Rollout.Analyses[i]
		a := powerAnalysis{Name: spec.Name, Provider: string(spec.Provider)}
		if spec.Judge == nil {
			a.Skipped = "not a judge analysis (query): its power is not computed"
			doc.Analyses = append(doc.Analyses, a)
			continue
		}
		a = powerOf(ctx, backends, name, spec, cohort, o, detect, at, canary, len(vehicles)-canary, a)
		doc.Analyses = append(doc.Analyses, a)
	}
	if format != "" {
		return printDoc(c.stdout, format, doc)
	}
	renderPower(c.stdout, doc)
	return nil
}

// powerOf fills in one judge analysis' report.
func powerOf(ctx context.Context, b analysis.Backends, profile string, spec *v1alpha1.AnalysisSpec, cohort analysis.Cohort,
	o *powerOptions, detect *analysis.Regression, at time.Time, canary, baseline int, a powerAnalysis) powerAnalysis {
	cfg, err := analysis.JudgeConfigFor(spec)
	if err != nil {
		a.Skipped = err.Error()
		return a
	}
	q, err := b.QuerierFor(ctx, spec, fmt.Sprintf("spec.rollout.analyses[%s].address or --%s", spec.Name, strings.ToLower(string(spec.Provider))))
	if err != nil {
		a.Skipped = err.Error()
		return a
	}
	counts, err := analysis.StableCounts(ctx, q, profile, spec, cohort, o.over, at)
	if err != nil {
		a.Skipped = fmt.Sprintf("reading the stable revision's messages: %v", err)
		return a
	}
	perVehicle := map[string]float64{}
	var rates []analysis.PairRate
	for pair, n := range counts {
		if !(n.Total > 0) {
			continue
		}
		v := n.Total / o.over.Seconds() / float64(len(cohort.Vehicles))
		perVehicle[pair] = v
		rates = append(rates, analysis.PairRate{Pair: pair, CanaryRate: v * float64(canary), BaselineRate: v * float64(baseline),
			BaselineShare: math.Min(1, math.Max(0, n.Slow)/n.Total)})
	}
	sort.Slice(rates, func(i, j int) bool { return rates[i].Pair < rates[j].Pair })
	s := analysis.ScheduleFor(spec)
	res, err := analysis.Power(analysis.PowerInput{Config: cfg, Schedule: s, Pairs: rates, Power: o.power, Detect: detect})
	if err != nil {
		a.Skipped = err.Error()
		return a
	}
	return powerAnalysisOf(a, s, res, perVehicle)
}

// powerAnalysisOf is the report of one analysis from Power's result.
func powerAnalysisOf(a powerAnalysis, s analysis.Schedule, res analysis.PowerResult, perVehicle map[string]float64) powerAnalysis {
	a.Pairs, a.PairConfidence, a.MinSamples = len(res.Pairs), res.PairConfidence, res.MinSamples
	a.Window, a.Interval, a.Step = s.Window.String(), s.Interval.String(), s.Step.String()
	a.RankIntervals = s.RankIntervals
	a.LastMeasurement, a.WidestWindow = res.LastMeasurement.String(), res.Window.String()
	a.Problems = res.Problems
	a.PassStep, a.PassProbability = fmtAt(res.PassAt), finite(res.PassPower)
	if res.Detect != nil {
		a.DetectStep, a.DetectWithin = fmtAt(res.DetectAt), res.DetectWithin
	}
	for _, p := range res.Pairs {
		pp := powerPair{Pair: p.Pair, PerVehicle: perVehicle[p.Pair], BaselineShare: p.BaselineShare, Tolerance: p.Tolerance,
			MinSamplesAt: fmtAt(p.MinSamplesAt), CanarySamples: p.CanarySamples, BaselineSamples: p.BaselineSamples,
			Detectable: finite(p.Detectable), PassAt: fmtAt(p.PassAt), PassProbability: finite(p.PassPower)}
		if res.Detect != nil {
			pp.DetectShare, pp.DetectAt, pp.DetectWithin, pp.DetectProbability = finite(p.DetectShare), fmtAt(p.DetectAt), p.DetectWithin, finite(p.DetectPower)
		}
		a.HostPairs = append(a.HostPairs, pp)
	}
	return a
}

// fmtAt is a time after the analysis started, "never" when negative.
func fmtAt(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.String()
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// renderPower prints the report as tables, one per analysis.
func renderPower(w io.Writer, d powerDoc) {
	fmt.Fprintf(w, "Profile %s: the stable revision %s over the %s before %s, %d vehicles: canary %d, baseline %d\n",
		d.Profile, d.StableRevision, d.Over, d.At.UTC().Format(time.RFC3339), d.Vehicles, d.Canary, d.Baseline)
	fmt.Fprintf(w, "A share is detectable when the judge fails a canary with it in %s of measurements over the window; a canary without a regression passes at the first measurement that passes it with that probability.\n", pct(d.Power, 3))
	for _, a := range d.Analyses {
		fmt.Fprintf(w, "\nAnalysis %s (%s)", a.Name, a.Provider)
		if a.Skipped != "" {
			fmt.Fprintf(w, ": %s\n", a.Skipped)
			continue
		}
		rank := "no rank test"
		if a.RankIntervals > 0 {
			rank = fmt.Sprintf("a Fail needs the rank test's %d values of %s", a.RankIntervals, a.Step)
		}
		fmt.Fprintf(w, ": %d pairs, each judged at confidence %.6g; minSamples %d per cohort and pair; window %s, interval %s, %s; the last measurement that can decide is at %s (window %s)\n",
			a.Pairs, a.PairConfidence, a.MinSamples, a.Window, a.Interval, rank, a.LastMeasurement, a.WidestWindow)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		head := "  PAIR\tMSG/S PER VEHICLE\tBASELINE SLOW\tTOLERATED\tMIN SAMPLES AT\tIN " + a.WidestWindow + " (CANARY/BASELINE)\tDETECTABLE\tPASS AT"
		if d.Detect != "" {
			head += "\tDETECT " + d.Detect
		}
		fmt.Fprintln(tw, head)
		for _, p := range a.HostPairs {
			detectable := "-"
			if p.Detectable != nil {
				detectable = pct(*p.Detectable, 3)
			}
			row := fmt.Sprintf("  %s\t%.1f\t%s\t%s\t%s\t%d/%d\t%s\t%s", p.Pair, p.PerVehicle, pct(p.BaselineShare, 3), pct(p.Tolerance, 3),
				p.MinSamplesAt, p.CanarySamples, p.BaselineSamples, detectable, p.PassAt)
			if d.Detect != "" {
				row += "\t" + detectCell(p)
			}
			fmt.Fprintln(tw, row)
		}
		_ = tw.Flush()
		if a.PassStep == "never" {
			fmt.Fprintf(w, "  A canary without a regression does not pass every pair in one measurement with %s probability before the analysis gives up at %s: a good revision's rollout can stop at this step (onInconclusive).\n", pct(d.Power, 3), a.LastMeasurement)
		} else {
			fmt.Fprintf(w, "  A canary without a regression passes every pair in one measurement with %s probability at %s.\n", pct(d.Power, 3), a.PassStep)
		}
		if d.Detect != "" {
			switch {
			case a.DetectStep == "never":
				fmt.Fprintf(w, "  %s is not detected on every pair by any canary step up to a week.\n", d.Detect)
			case a.DetectWithin:
				fmt.Fprintf(w, "  %s is detected on any one pair with %s power by a canary step of %s.\n", d.Detect, pct(d.Power, 3), a.DetectStep)
			default:
				fmt.Fprintf(w, "  %s needs a canary step of %s on some pair: beyond this analysis' limits (raise window and inconclusiveLimit to reach it).\n", d.Detect, a.DetectStep)
			}
		}
		for _, pr := range a.Problems {
			fmt.Fprintf(w, "  Problem: %s\n", pr)
		}
	}
}

// detectCell is when a pair detects the regression asked.
func detectCell(p powerPair) string {
	switch {
	case p.DetectAt == "never" && p.DetectShare != nil && *p.DetectShare <= p.Tolerance:
		return fmt.Sprintf("never (%s is tolerated)", pct(*p.DetectShare, 3))
	case p.DetectAt == "never":
		return "never"
	case p.DetectWithin:
		return p.DetectAt
	}
	return p.DetectAt + " (beyond the limits)"
}

// pct formats a share as a percentage with digits significant digits.
func pct(v float64, digits int) string {
	return fmt.Sprintf("%.*g%%", digits, 100*v)
}
