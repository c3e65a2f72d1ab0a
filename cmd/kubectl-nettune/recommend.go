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
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/experiment"
	"github.com/nettune/nettune/internal/httpauth"
)

type recommendOptions struct {
	prometheus string
	// credentials is a directory with one file per credentials key
	// (docs/observability.md): a tenant, basic auth or a token, a CA.
	credentials  string
	switchBuffer int64
	linkRate     int64
	window       time.Duration
	mss          int64
}

func (c *cli) recommendCommand() *cobra.Command {
	o := &recommendOptions{}
	cmd := &cobra.Command{
		Use:   "recommend PROFILE",
		Short: "Starting TCP parameters per receiving host from the agents' measurements: the switch buffer, concurrent senders and the RTT under load",
		Long: `Derive starting parameters for the host pairs of a profile's vehicles from
what their agents measured (sock_diag, exported as nettune_tcp_* metrics and
read from Prometheus over --window):

  - the most hosts seen sending into each host at once (segments out rising
    on their connections to it);
  - the RTTs of those connections, every scrape.

With the switch port buffer (--switch-buffer, else the profile's
spec.switchBufferBytes), each receiving host gets a cwnd clamp that keeps
the in-flight data of its concurrent senders within the buffer, initcwnd a
little below it, ssthresh equal to it, rto_min above the loaded p99.9 RTT
with a margin, and quickack on; each number is printed with its reasoning.
The output ends with the host pairs as YAML, to try as an experiment's
variants or to paste into the profile.`,
		Example:           "  kubectl nettune recommend xavier-lan --prometheus http://prometheus.monitoring:9090 --switch-buffer 131072",
		Args:              args("PROFILE", 1, 1),
		ValidArgsFunction: c.completeProfiles,
		RunE:              func(cmd *cobra.Command, pos []string) error { return c.recommend(cmd.Context(), pos[0], o) },
	}
	cmd.Flags().StringVar(&o.prometheus, "prometheus", "", "Prometheus base URL scraping the agents (required)")
	cmd.Flags().StringVar(&o.credentials, "prometheus-credentials-dir", "", "directory with one file per key (tenant, username and password or token, ca.crt, tls.crt and tls.key, header.NAME; docs/observability.md) for a Prometheus, Mimir or Thanos behind auth or TLS, e.g. the controller's Secret saved with kubectl")
	cmd.Flags().Int64Var(&o.switchBuffer, "switch-buffer", 0, "switch port buffer in bytes (default: the profile's spec.switchBufferBytes)")
	cmd.Flags().Int64Var(&o.linkRate, "link-rate", 1e9, "link rate in bit/s, to say when a clamp is below the bandwidth-delay product")
	cmd.Flags().DurationVar(&o.window, "window", 30*time.Minute, "how far back to read the measurements; choose a time the vehicles were under their usual load")
	cmd.Flags().Int64Var(&o.mss, "mss", 1448, "segment payload in bytes")
	return cmd
}

// recommendStep is the resolution of the range queries (the agents are
// scraped every few seconds; a sender counts as concurrent within a step).
const recommendStep = 5 * time.Second

func (c *cli) recommend(ctx context.Context, name string, o *recommendOptions) error {
	if o.prometheus == "" {
		return usageError{errors.New("--prometheus is required: the agents' nettune_tcp_* metrics are read from it")}
	}
	p, err := c.getProfile(ctx, name)
	if err != nil {
		return err
	}
	buffer := o.switchBuffer
	if buffer == 0 && p.Spec.SwitchBufferBytes != nil {
		buffer = *p.Spec.SwitchBufferBytes
	}
	if u, err := url.Parse(o.prometheus); err == nil && u.User != nil {
		return usageError{errors.New("--prometheus must not carry credentials (user:password@): they would be in your shell's history; use --prometheus-credentials-dir")}
	}
	var hc *http.Client
	if o.credentials != "" {
		creds, err := httpauth.ReadDir(o.credentials)
		if err != nil {
			return usageError{fmt.Errorf("--prometheus-credentials-dir: %w", err)}
		}
		if hc, err = httpauth.NewTransports().Client(creds, analysis.DefaultHTTPTimeout); err != nil {
			return fmt.Errorf("--prometheus-credentials-dir: %w", err)
		}
	}
	q := analysis.NewPrometheus(o.prometheus, hc).(analysis.VectorQuerier)
	end := c.now()
	start := end.Add(-o.window)
	sel := fmt.Sprintf(`profile=%q, peer!=""`, name)
	// Hosts sending into each peer, per vehicle and instant.
	sending, err := q.QueryRange(ctx, fmt.Sprintf(`count by (vehicle, peer) (rate(nettune_tcp_segments_out_total{%s}[%s]) > 0)`, sel, fmtProm(3*recommendStep)),
		start, end, recommendStep)
	if err != nil {
		return fmt.Errorf("reading the senders from %s: %w", o.prometheus, err)
	}
	rtts, err := q.QueryRange(ctx, fmt.Sprintf(`nettune_tcp_rtt_seconds{%s}`, sel), start, end, recommendStep)
	if err != nil {
		return fmt.Errorf("reading the RTTs from %s: %w", o.prometheus, err)
	}
	byPeer := map[string]*experiment.Receiver{}
	peer := func(n string) *experiment.Receiver {
		if byPeer[n] == nil {
			byPeer[n] = &experiment.Receiver{Host: n}
		}
		return byPeer[n]
	}
	for _, s := range sending {
		r := peer(s.Labels["peer"])
		for _, v := range s.Values {
			r.Senders = max(r.Senders, int(v))
		}
	}
	for _, s := range rtts {
		r := peer(s.Labels["peer"])
		for _, v := range s.Values {
			if v > 0 {
				r.RTTs = append(r.RTTs, time.Duration(v*float64(time.Second)))
			}
		}
	}
	if len(byPeer) == 0 {
		return fmt.Errorf("profile %s: no nettune_tcp_* series in %s over the last %s (are its agents scraped?)", name, o.prometheus, o.window)
	}
	t := experiment.Topology{BufferBytes: buffer, LinkBitsPerSecond: o.linkRate, MSS: o.mss}
	for _, r := range byPeer {
		t.Receivers = append(t.Receivers, *r)
	}
	recs, err := experiment.Recommend(t)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	fmt.Fprintf(c.stdout, "Profile %s: measurements of its agents over the last %s (Prometheus %s), switch buffer %d bytes\n", name, o.window, o.prometheus, buffer)
	var pairs []v1alpha1.HostPair
	for _, r := range recs {
		fmt.Fprintf(c.stdout, "\nInto %s: %s\n", r.Host, experiment.Describe(r.Parameters))
		for _, why := range r.Reasons {
			fmt.Fprintf(c.stdout, "  - %s\n", why)
		}
		pairs = append(pairs, v1alpha1.HostPair{From: "*", To: r.Host, Parameters: r.Parameters.DeepCopy()})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].To < pairs[j].To })
	y, err := yaml.Marshal(map[string]any{"hostPairs": pairs})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "\nAs host pairs (spec.hostPairs):\n%s", indent(string(y), "  "))
	return nil
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// fmtProm is a duration in Prometheus' syntax (whole seconds).
func fmtProm(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }
