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

// End-to-end tests of the nettune-agent binary against real network
// namespaces: crash recovery (kill -9 in the middle of an apply, then boot),
// boot from the last-known-good state with no API server, diff exit codes and
// refused applies.
//
// The binary is built with `go build` into a temporary directory. Every test
// makes its own named namespaces ("nta-<random hex>") with the real `ip
// netns`, joins two of them with a veth in 10.252.X.0/24 and removes them
// (and kills any agent process it started) in t.Cleanup. Nothing is changed
// in the test process's own namespace and no traffic leaves the test
// namespaces.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/state"
	"github.com/nettune/nettune/test/framework/nettest"
)

func newNS(t *testing.T) string {
	t.Helper()
	return nettest.NewNetns(t, "nta")
}

// pair is two namespaces joined by a veth: devA (addrA) in A, devB (addrB)
// in B, in 10.252.x.0/24.
type pair struct {
	A, B         string
	devA, devB   string
	addrA, addrB string
	x            int
}

func newPair(t *testing.T) *pair {
	t.Helper()
	x := 1 + nettest.RandInt(t, 254)
	p := &pair{A: newNS(t), B: newNS(t), devA: "veth-a", devB: "veth-b", x: x,
		addrA: fmt.Sprintf("10.252.%d.1", x), addrB: fmt.Sprintf("10.252.%d.2", x)}
	nettest.IP(t, "-n", p.A, "link", "add", p.devA, "type", "veth", "peer", "name", p.devB, "netns", p.B)
	nettest.IP(t, "-n", p.A, "addr", "add", p.addrA+"/24", "dev", p.devA)
	nettest.IP(t, "-n", p.B, "addr", "add", p.addrB+"/24", "dev", p.devB)
	nettest.IP(t, "-n", p.A, "link", "set", p.devA, "up")
	nettest.IP(t, "-n", p.B, "link", "set", p.devB, "up")
	nettest.WaitFor(t, 5*time.Second, func() error {
		if out := nettest.IP(t, "-n", p.A, "link", "show", p.devA); !strings.Contains(out, "LOWER_UP") {
			return fmt.Errorf("no carrier: %s", out)
		}
		return nil
	})
	return p
}

func sysctlOf(t *testing.T, ns, name string) string {
	t.Helper()
	return kernel.NormalizeSysctlValue(nettest.IP(t, "netns", "exec", ns, "cat", "/proc/sys/"+strings.ReplaceAll(name, ".", "/")))
}

// buildAgent builds the nettune-agent binary.
func buildAgent(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go tool not found: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "nettune-agent")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// agentEnv is the environment of agent processes: no kubeconfig and no
// in-cluster configuration (so nothing could reach an API server).
func agentEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "KUBERNETES_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
}

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runCLI runs argv (the binary, or `ip netns exec NS binary`) to
// completion.
func runCLI(t *testing.T, env []string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		r.code = exit.ExitCode()
	default:
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", strings.Join(argv, " "), err, r.stdout, r.stderr)
	}
	return r
}

func i32(v int32) *int32 { return &v }
func bptr(v bool) *bool  { return &v }

func params(cwnd, initcwnd int32, rtoMin time.Duration) v1alpha1.TCPParameters {
	return v1alpha1.TCPParameters{
		Cwnd:     &v1alpha1.Cwnd{Value: cwnd, Lock: bptr(true)},
		Initcwnd: i32(initcwnd),
		Initrwnd: i32(initcwnd),
		RTOMin:   &metav1.Duration{Duration: rtoMin},
		Quickack: bptr(true),
	}
}

// The two revisions of the crash test, told apart in `ip route show`. r2
// also sets a metric (advmss) and a sysctl (tcp_wmem) that r1 does not: only
// the journal's snapshot can take those back, re-applying r1 cannot.
var (
	r1Params = params(30, 25, 10*time.Millisecond)
	r2Params = func() v1alpha1.TCPParameters {
		p := params(20, 15, 20*time.Millisecond)
		p.AdvMSS = i32(1400)
		return p
	}()
	r1Sig  = []string{"cwnd lock 30", "initcwnd 25", "rto_min lock 10ms"}
	r2Sig  = []string{"cwnd lock 20", "initcwnd 15", "rto_min lock 20ms", "advmss 1400"}
	r1Rmem = "4096 262144 16777216"
	r2Rmem = "4096 65536 4194304"
	r2Wmem = "4096 32768 2097152"
)

// hosts are n destinations in the veth subnet.
func (p *pair) hosts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.252.%d.%d", p.x, 100+i)
	}
	return out
}

func (p *pair) spec(rev string, hosts []string, prm v1alpha1.TCPParameters, rmem string) v1alpha1.NodeNetTuningSpec {
	s := v1alpha1.NodeNetTuningSpec{Revision: rev, Sysctls: []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_rmem", Value: rmem}}}
	if rmem == r2Rmem {
		s.Sysctls = append(s.Sysctls, v1alpha1.Sysctl{Name: "net.ipv4.tcp_wmem", Value: r2Wmem})
	}
	for _, h := range hosts {
		s.Routes = append(s.Routes, v1alpha1.NodeRoute{Destination: h + "/32", Device: p.devA, Parameters: prm})
	}
	return s
}

// writeSpec writes spec as YAML: a whole NodeNetTuning manifest when
// manifest is true, else the bare spec.
func writeSpec(t *testing.T, spec v1alpha1.NodeNetTuningSpec, manifest bool) string {
	t.Helper()
	var obj any = spec
	if manifest {
		obj = v1alpha1.NodeNetTuning{
			TypeMeta:   metav1.TypeMeta{APIVersion: "nettune.io/v1alpha1", Kind: "NodeNetTuning"},
			ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
			Spec:       spec,
		}
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), spec.Revision+".yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func hasAll(s string, subs []string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func hasAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// routeStates reads the whole table with `ip -n NS route show` and classifies
// the route of each host as "r1", "r2", "missing" or "other".
func routeStates(t *testing.T, ns string, hosts []string) (map[string]string, map[string]int) {
	t.Helper()
	lines := map[string]string{}
	for _, l := range strings.Split(nettest.IP(t, "-n", ns, "route", "show"), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = l
		}
	}
	states, counts := map[string]string{}, map[string]int{}
	for _, h := range hosts {
		l := lines[h]
		s := "other"
		switch {
		case l == "":
			s = "missing"
		case hasAll(l, r1Sig) && !hasAny(l, r2Sig):
			s = "r1"
		case hasAll(l, r2Sig) && !hasAny(l, r1Sig):
			s = "r2"
		}
		states[h] = s
		counts[s]++
	}
	return states, counts
}

// assertAll checks that every host's route is in revision rev and tcp_rmem
// holds rmem (and, for r2, tcp_wmem r2's value; for r1, wmem0).
func assertAll(t *testing.T, ns string, hosts []string, rev, rmem, when string, wmem0 ...string) {
	t.Helper()
	states, counts := routeStates(t, ns, hosts)
	if counts[rev] != len(hosts) {
		var bad []string
		for _, h := range hosts {
			if states[h] != rev {
				bad = append(bad, h+"="+states[h])
			}
		}
		t.Errorf("%s: %d of %d routes in %s (%v): %v", when, counts[rev], len(hosts), rev, counts, bad)
	}
	if got := sysctlOf(t, ns, "net.ipv4.tcp_rmem"); got != rmem {
		t.Errorf("%s: tcp_rmem %q, want %s's %q", when, got, rev, rmem)
	}
	wmem := append(wmem0, "")[0]
	if rev == "r2" {
		wmem = r2Wmem
	}
	if got := sysctlOf(t, ns, "net.ipv4.tcp_wmem"); wmem != "" && got != wmem {
		t.Errorf("%s: tcp_wmem %q, want %q", when, got, wmem)
	}
}

func lkgRevision(t *testing.T, dir string) string {
	t.Helper()
	st, err := state.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.LastKnownGood()
	if err != nil {
		t.Fatalf("last-known-good: %v", err)
	}
	if c == nil {
		return ""
	}
	return c.Spec.Revision
}

func journalExists(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, "journal.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// process is an agent started in the background.
type process struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	exited chan struct{}
	err    error
	once   sync.Once
}

func startAgent(t *testing.T, env []string, argv ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(argv[0], argv[1:]...), exited: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill sends SIGKILL (once) and waits for the process to be gone.
func (p *process) kill() {
	p.once.Do(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
		<-p.exited
	})
}

// freezeUntil stops p (SIGSTOP, every thread), calls look while it is
// stopped, and resumes it (SIGCONT), again and again at random sub-millisecond
// gaps, until look says stop there: then p stays frozen (for the caller to
// kill) and freezeUntil returns what look saw and true. It returns false when
// p ended, or ran past the point look waits for (look's counts with done
// false after the last freeze are returned), or timeout passed.
func freezeUntil(t *testing.T, p *process, timeout time.Duration, look func() (map[string]int, bool)) (map[string]int, bool) {
	t.Helper()
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(timeout)
	// The agent runs between two looks for a random time up to a quarter of
	// the last look (at least 1 ms): under emulation a look takes tens of
	// milliseconds, and with sub-millisecond slices the agent never reached
	// its batch; natively it stays about 1 ms.
	slice := time.Millisecond
	for time.Now().Before(deadline) && p.running() {
		time.Sleep(time.Duration(nettest.RandInt(t, int(slice/time.Microsecond))) * time.Microsecond)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return nil, false
		}
		if !waitStopped(pid, time.Second) {
			_ = syscall.Kill(pid, syscall.SIGCONT)
			continue
		}
		began := time.Now()
		c, done := look()
		slice = max(time.Millisecond, time.Since(began)/4)
		if done {
			return c, true
		}
		_ = syscall.Kill(pid, syscall.SIGCONT)
		if c["r2"] > 0 { // past the batch without a look inside it
			return c, false
		}
	}
	return nil, false
}

// waitStopped waits until every thread of pid is stopped (state T).
func waitStopped(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return false
		}
		all := true
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				all = false
				break
			}
			// "pid (comm) S ...": the state follows the last ')'.
			st := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
			if len(st) == 0 || (st[0] != "T" && st[0] != "t") {
				all = false
				break
			}
		}
		if all {
			return true
		}
		time.Sleep(100 * time.Microsecond)
	}
	return false
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func TestAgentCLI(t *testing.T) {
	nettest.RequireRoot(t)
	bin := buildAgent(t)
	env := agentEnv(t)

	// CrashRecovery kills `apply` of r2 with SIGKILL at points across the
	// whole apply, on the production path (all routes in one batch), runs
	// `boot` after each kill and checks that the host is back in r1 — all
	// 150 routes and the sysctls, never a mix. To land a kill inside the
	// batch, which takes milliseconds, the test freezes the agent from
	// outside (SIGSTOP) again and again, looks at the host while it is
	// frozen, and kills it when some routes but not all are in r2. Then r2
	// is applied to completion and survives a boot.
	t.Run("CrashRecovery", func(t *testing.T) {
		p := newPair(t)
		dir := t.TempDir()
		hosts := p.hosts(150)
		common := []string{"--state-dir", dir, "--netns", p.A}
		r1 := writeSpec(t, p.spec("r1", hosts, r1Params, r1Rmem), true)
		r2 := writeSpec(t, p.spec("r2", hosts, r2Params, r2Rmem), false)
		wmem0 := sysctlOf(t, p.A, "net.ipv4.tcp_wmem")
		if wmem0 == r2Wmem {
			t.Fatalf("tcp_wmem is already r2's %q", wmem0)
		}

		res := runCLI(t, env, append([]string{bin, "apply", "-f", r1}, common...)...)
		if res.code != 0 || !strings.Contains(res.stdout, "applied revision r1") {
			t.Fatalf("apply r1: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		t.Logf("apply r1 (%d routes, CLI): %s", len(hosts), strings.SplitN(res.stdout, "\n", 2)[0])
		assertAll(t, p.A, hosts, "r1", r1Rmem, "after apply r1", wmem0)
		if t.Failed() {
			t.FailNow()
		}

		type killPlan struct {
			name    string
			mid     bool          // kill while some routes but not all are in r2 ...
			routes  bool          // ... or once every route is in r2 ...
			sysctls bool          // ... or once r2's last sysctl is written ...
			after   time.Duration // ... or this long after the start
		}
		plans := []killPlan{{name: "early", after: time.Duration(nettest.RandInt(t, 150)) * time.Millisecond}}
		for range 3 {
			plans = append(plans, killPlan{name: "mid-routes", mid: true})
		}
		plans = append(plans, killPlan{name: "all-routes-written", routes: true},
			killPlan{name: "everything-written-not-committed", sysctls: true})
		missed, slow, landed := 0, 0, 0
		for i := 0; i < len(plans); i++ {
			plan := plans[i]
			proc := startAgent(t, env, append([]string{bin, "apply", "-f", r2}, common...)...)
			start := time.Now()
			var at map[string]int // routes when the kill was decided, if frozen
			switch {
			case plan.mid:
				var caught bool
				// The agent runs only between looks: under emulation on a
				// loaded machine it has taken over 15 s to reach its batch
				// (a loaded bullseye-5.10-arm64 VM never did in 20 tries).
				at, caught = freezeUntil(t, proc, time.Minute, func() (map[string]int, bool) {
					_, c := routeStates(t, p.A, hosts)
					return c, c["r2"] > 0 && c["r2"] < len(hosts)
				})
				switch {
				case caught:
					landed++
				case at == nil:
					// A minute and no route written yet: too slow to tell.
					slow++
					if slow > 3 {
						t.Fatalf("kill %d: in %d tries of a minute the apply never reached its batch", i, slow)
					}
					t.Logf("kill %d: the apply wrote no route in a minute of running between looks; trying again", i)
					plans = append(plans[:i+1], plans[i:]...)
				default:
					// The batch went by between two looks: undo and try again.
					missed++
					if missed > 20 {
						t.Fatalf("kill %d: 20 tries never found the batch half-written", i)
					}
					plans = append(plans[:i+1], plans[i:]...)
				}
			case plan.routes:
				nettest.WaitFor(t, 15*time.Second, func() error {
					if _, c := routeStates(t, p.A, hosts); c["r2"] != len(hosts) {
						return fmt.Errorf("routes %v", c)
					}
					return nil
				})
			case plan.sysctls:
				// The last item is written; verify and probe (500ms) follow.
				nettest.WaitFor(t, 15*time.Second, func() error {
					if got := sysctlOf(t, p.A, "net.ipv4.tcp_wmem"); got != r2Wmem {
						return fmt.Errorf("tcp_wmem %q", got)
					}
					return nil
				})
			default:
				time.Sleep(plan.after)
			}
			if !proc.running() {
				t.Fatalf("kill %d (%s): apply finished before the kill (%v)\n%s", i, plan.name, proc.err, proc.out.String())
			}
			proc.kill()
			var exit *exec.ExitError
			if !errors.As(proc.err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("kill %d: apply ended with %v, not SIGKILL", i, proc.err)
			}
			_, counts := routeStates(t, p.A, hosts)
			if at != nil && (counts["r2"] != at["r2"]) {
				t.Errorf("kill %d: %d routes in r2 when frozen, %d after the kill: the process was not stopped", i, at["r2"], counts["r2"])
			}
			journal := journalExists(t, dir)
			t.Logf("kill %d (%s) after %s: routes at the kill %v, tcp_rmem %q, tcp_wmem %q, journal pending %v",
				i, plan.name, time.Since(start).Round(time.Millisecond), counts, sysctlOf(t, p.A, "net.ipv4.tcp_rmem"), sysctlOf(t, p.A, "net.ipv4.tcp_wmem"), journal)
			if counts["r2"] > 0 && !journal {
				t.Errorf("kill %d: r2 routes were written but no journal is pending", i)
			}

			res := runCLI(t, env, append([]string{bin, "boot"}, common...)...)
			if res.code != 0 {
				t.Fatalf("boot after kill %d: exit %d\n%s%s", i, res.code, res.stdout, res.stderr)
			}
			t.Logf("boot after kill %d took %s: %s", i, res.took.Round(time.Millisecond), strings.SplitN(res.stdout, "\n", 2)[0])
			assertAll(t, p.A, hosts, "r1", r1Rmem, fmt.Sprintf("boot after kill %d", i), wmem0)
			if journalExists(t, dir) {
				t.Errorf("boot after kill %d left the journal", i)
			}
			if rev := lkgRevision(t, dir); rev != "r1" {
				t.Errorf("after kill %d: last-known-good %q, want r1", i, rev)
			}
			if t.Failed() {
				t.FailNow()
			}
		}
		t.Logf("mid-batch kills: %d landed inside the batch, %d tries missed it", landed, missed)

		// Uninterrupted, r2 commits and a boot keeps it.
		res = runCLI(t, env, append([]string{bin, "apply", "-f", r2}, common...)...)
		if res.code != 0 {
			t.Fatalf("apply r2: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		t.Logf("apply r2 (%d routes, CLI): %s", len(hosts), strings.SplitN(res.stdout, "\n", 2)[0])
		assertAll(t, p.A, hosts, "r2", r2Rmem, "after apply r2")
		if rev := lkgRevision(t, dir); rev != "r2" {
			t.Errorf("last-known-good %q, want r2", rev)
		}
		res = runCLI(t, env, append([]string{bin, "boot"}, common...)...)
		if res.code != 0 {
			t.Fatalf("boot: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		assertAll(t, p.A, hosts, "r2", r2Rmem, "boot after r2")
		if res := runCLI(t, env, append([]string{bin, "show"}, common...)...); res.code != 0 || !strings.Contains(res.stdout, "last-known-good revision r2") {
			t.Errorf("show: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
	})

	// BootFromLastKnownGood wipes the tuning by hand (bare `ip route
	// replace`, the sysctl reset); `boot` puts it back.
	t.Run("BootFromLastKnownGood", func(t *testing.T) {
		p := newPair(t)
		dir := t.TempDir()
		hosts := p.hosts(3)
		common := []string{"--state-dir", dir, "--netns", p.A}
		if res := runCLI(t, env, append([]string{bin, "apply", "-f", writeSpec(t, p.spec("r1", hosts, r1Params, r1Rmem), false)}, common...)...); res.code != 0 {
			t.Fatalf("apply r1: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		for _, h := range hosts[:2] {
			nettest.IP(t, "-n", p.A, "route", "replace", h+"/32", "dev", p.devA)
		}
		nettest.IP(t, "netns", "exec", p.A, "sh", "-c", "echo '4096 131072 6291456' > /proc/sys/net/ipv4/tcp_rmem")
		if _, counts := routeStates(t, p.A, hosts); counts["r1"] != 1 {
			t.Fatalf("wipe did not take: %v", counts)
		}
		res := runCLI(t, env, append([]string{bin, "boot"}, common...)...)
		if res.code != 0 || !strings.Contains(res.stdout, "applied revision r1") {
			t.Fatalf("boot: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		t.Logf("boot: %s", strings.SplitN(res.stdout, "\n", 2)[0])
		assertAll(t, p.A, hosts, "r1", r1Rmem, "after boot")
		// Without any state, boot succeeds and does nothing.
		empty := []string{"--state-dir", t.TempDir(), "--netns", p.A}
		if res := runCLI(t, env, append([]string{bin, "boot"}, empty...)...); res.code != 0 || !strings.Contains(res.stdout, "no last-known-good") {
			t.Errorf("boot without state: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
	})

	// DiffAndRefusedApply: diff exits 0 when nothing would change and 2
	// when something would, changing nothing either way; an apply that
	// preflight refuses exits non-zero and changes nothing.
	t.Run("DiffAndRefusedApply", func(t *testing.T) {
		p := newPair(t)
		dir := t.TempDir()
		hosts := p.hosts(3)
		common := []string{"--state-dir", dir, "--netns", p.A}
		r1 := writeSpec(t, p.spec("r1", hosts, r1Params, r1Rmem), false)
		r2 := writeSpec(t, p.spec("r2", hosts, r2Params, r2Rmem), true)

		res := runCLI(t, env, append([]string{bin, "diff", "-f", r1}, common...)...)
		t.Logf("diff before r1: exit %d\n%s", res.code, res.stdout)
		if res.code != 2 || !strings.Contains(res.stdout, "4 item(s) would change") {
			t.Errorf("diff before r1: exit %d, want 2\n%s%s", res.code, res.stdout, res.stderr)
		}
		if _, counts := routeStates(t, p.A, hosts); counts["missing"] != len(hosts) {
			t.Errorf("diff created routes: %v", counts)
		}
		if res := runCLI(t, env, append([]string{bin, "apply", "-f", r1}, common...)...); res.code != 0 {
			t.Fatalf("apply r1: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		if res := runCLI(t, env, append([]string{bin, "diff", "-f", r1}, common...)...); res.code != 0 || !strings.Contains(res.stdout, "no changes") {
			t.Errorf("diff of the applied spec: exit %d, want 0\n%s%s", res.code, res.stdout, res.stderr)
		}
		table := nettest.IP(t, "-n", p.A, "route", "show")
		res = runCLI(t, env, append([]string{bin, "diff", "-f", r2}, common...)...)
		if res.code != 2 || !strings.Contains(res.stdout, "~ Route "+hosts[0]+"/32") || !strings.Contains(res.stdout, "~ Sysctl net.ipv4.tcp_rmem") {
			t.Errorf("diff r2: exit %d, want 2\n%s%s", res.code, res.stdout, res.stderr)
		}
		if got := nettest.IP(t, "-n", p.A, "route", "show"); got != table {
			t.Errorf("diff changed the table:\n%s\n->\n%s", table, got)
		}

		bad := p.spec("bad", hosts, r2Params, r2Rmem)
		bad.Routes = append(bad.Routes, v1alpha1.NodeRoute{Destination: fmt.Sprintf("10.252.%d.99/32", p.x), Device: "nosuch0", Parameters: r1Params})
		badFile := writeSpec(t, bad, false)
		res = runCLI(t, env, append([]string{bin, "apply", "-f", badFile}, common...)...)
		t.Logf("refused apply: exit %d: %s", res.code, strings.TrimSpace(res.stderr))
		if res.code == 0 || !strings.Contains(res.stderr, "nosuch0") {
			t.Errorf("apply of a refused spec: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		if got := nettest.IP(t, "-n", p.A, "route", "show"); got != table {
			t.Errorf("refused apply changed the table:\n%s\n->\n%s", table, got)
		}
		assertAll(t, p.A, hosts, "r1", r1Rmem, "after the refused apply")
		if journalExists(t, dir) || lkgRevision(t, dir) != "r1" {
			t.Errorf("refused apply: journal %v, last-known-good %q", journalExists(t, dir), lkgRevision(t, dir))
		}
		if res := runCLI(t, env, append([]string{bin, "diff", "-f", badFile}, common...)...); res.code != 1 || !strings.Contains(res.stderr, "refused") {
			t.Errorf("diff of a refused spec: exit %d, want 1\n%s%s", res.code, res.stdout, res.stderr)
		}
	})

	// BootWithoutAPIServer runs apply and boot inside namespace A, where a
	// fake API server (a TCP listener in B, named by KUBECONFIG and the
	// in-cluster variables) is reachable: boot must work and never connect.
	t.Run("BootWithoutAPIServer", func(t *testing.T) {
		p := newPair(t)
		dir := t.TempDir()
		hosts := p.hosts(3)
		nsB, err := netns.GetFromName(p.B)
		if err != nil {
			t.Fatal(err)
		}
		defer nsB.Close()
		var ln net.Listener
		if err := kernel.DoInNetns(nsB, func() error {
			var err error
			ln, err = net.Listen("tcp4", net.JoinHostPort(p.addrB, "0"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var accepted atomic.Int64
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
		t.Cleanup(func() { ln.Close() })
		port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		apiURL := "https://" + net.JoinHostPort(p.addrB, port)

		// The fake API server is reachable from A.
		nsA, err := netns.GetFromName(p.A)
		if err != nil {
			t.Fatal(err)
		}
		defer nsA.Close()
		if err := kernel.DoInNetns(nsA, func() error {
			c, err := net.DialTimeout("tcp4", net.JoinHostPort(p.addrB, port), 2*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}); err != nil {
			t.Fatalf("fake API server unreachable from %s: %v", p.A, err)
		}
		nettest.WaitFor(t, 2*time.Second, func() error {
			if accepted.Load() != 1 {
				return fmt.Errorf("%d connections accepted", accepted.Load())
			}
			return nil
		})

		kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, apiURL)), 0o600); err != nil {
			t.Fatal(err)
		}
		envAPI := append(append([]string{}, env...), "KUBECONFIG="+kubeconfig, "KUBERNETES_SERVICE_HOST="+p.addrB, "KUBERNETES_SERVICE_PORT="+port)
		inA := []string{nettest.IPBin, "netns", "exec", p.A, bin}
		common := []string{"--state-dir", dir, "--netns", p.A}

		res := runCLI(t, envAPI, append(append(inA, "apply", "-f", writeSpec(t, p.spec("r1", hosts, r1Params, r1Rmem), false)), common...)...)
		if res.code != 0 {
			t.Fatalf("apply r1: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		for _, h := range hosts {
			nettest.IP(t, "-n", p.A, "route", "replace", h+"/32", "dev", p.devA)
		}
		res = runCLI(t, envAPI, append(append(inA, "boot"), common...)...)
		t.Logf("boot inside %s with an API server configured took %s: exit %d: %s", p.A, res.took.Round(time.Millisecond), res.code, strings.SplitN(res.stdout, "\n", 2)[0])
		if res.code != 0 {
			t.Fatalf("boot: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		assertAll(t, p.A, hosts, "r1", r1Rmem, "boot")
		if n := accepted.Load() - 1; n != 0 {
			t.Errorf("apply/boot connected to the API server %d times", n)
		}
	})
}
