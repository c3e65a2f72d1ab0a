package agent

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/state"
)

// TestRevisionInfoFollowsTheCommittedSpec: nettune_agent_revision_info
// reports the profile revisions of the last-known-good spec at each scrape,
// nothing before the first commit, and every apply result starts at 0.
func TestRevisionInfoFollowsTheCommittedSpec(t *testing.T) {
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	NewMetrics(reg, "av-001-xavier-a", &Engine{Store: st})

	if got := gatherSeries(t, reg, "nettune_agent_revision_info"); len(got) != 0 {
		t.Fatalf("before any commit: %v, want no series", got)
	}
	assertSeries(t, reg, "nettune_agent_applies_total",
		`node="av-001-xavier-a",result="committed" 0`,
		`node="av-001-xavier-a",result="error" 0`,
		`node="av-001-xavier-a",result="refused" 0`,
		`node="av-001-xavier-a",result="rolled_back" 0`)

	// No routes: the TCP info part of the collector has nothing to read.
	commit := func(rev string, profiles ...v1alpha1.SourceProfile) {
		t.Helper()
		if err := st.Commit(v1alpha1.NodeNetTuningSpec{Revision: rev, Profiles: profiles}, nil, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	commit("716b4e375b", v1alpha1.SourceProfile{Name: "xavier-lan", Revision: "xavier-lan-982cc13e75"},
		v1alpha1.SourceProfile{Name: "log-upload-wan", Revision: "log-upload-wan-0123456789"})
	assertSeries(t, reg, "nettune_agent_revision_info",
		`node="av-001-xavier-a",node_revision="716b4e375b",profile="log-upload-wan",revision="log-upload-wan-0123456789" 1`,
		`node="av-001-xavier-a",node_revision="716b4e375b",profile="xavier-lan",revision="xavier-lan-982cc13e75" 1`)

	// A new commit replaces the series: no stale revision is left behind.
	commit("2dcfacd537", v1alpha1.SourceProfile{Name: "xavier-lan", Revision: "xavier-lan-8bf34728cc"})
	assertSeries(t, reg, "nettune_agent_revision_info",
		`node="av-001-xavier-a",node_revision="2dcfacd537",profile="xavier-lan",revision="xavier-lan-8bf34728cc" 1`)
}

// gatherSeries renders every series of name as `k="v",... value`, labels
// sorted by name (as the client library keeps them), series sorted.
func gatherSeries(t *testing.T, g prometheus.Gatherer, name string) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			out = append(out, fmt.Sprintf("%s %g", strings.Join(ls, ","), v))
		}
	}
	sort.Strings(out)
	return out
}

func assertSeries(t *testing.T, g prometheus.Gatherer, name string, want ...string) {
	t.Helper()
	got := gatherSeries(t, g, name)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
