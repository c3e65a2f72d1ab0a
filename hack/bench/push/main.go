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

// Command bench-push measures what TLS and basic auth cost the node agent's
// Loki push: CPU and memory of a process that ships the latency probe's
// lines with the agent's own shipper and client (hack/bench/push/pushload),
// pushing
//
//	A  plain HTTP straight to a multi-tenant Loki, tenant header only;
//	B  HTTPS with basic auth through a TLS gateway (nginx) in front of it,
//	   as internal/stack runs it: keepalive_timeout 0, so every push
//	   opens a new connection and does a full TLS handshake;
//	C  the same through a second such gateway with keep-alive on (75 s):
//	   one handshake, then every push on the same connection, as a Loki
//	   gateway usually runs.
//
// The credentials are in a directory laid out as a mounted Secret, read by
// httpauth.DirClient at every push in all three (A: tenant only; B and C:
// tenant, username, password, ca.crt). The variants run one after the
// other, interleaved (A B C A B C ...), on this machine and, when
// qemu-aarch64-static is installed, as an arm64 build under qemu-user.
// Every line must reach Loki (counted there by vehicle label) or the run is
// invalid. It writes docs/bench-push.md. Run it with `make bench-push`.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/stack"
)

const (
	tenant    = "fleet"
	user      = "agent"
	password  = "bench-push-agent-password"
	keepAlive = "75s"
)

type options struct {
	duration    time.Duration
	reps        int
	armReps     int
	rate        float64
	peers       int
	size        int
	out         string
	qemu        string
	noKeepAlive bool
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench-push: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long each run ships")
	flag.IntVar(&o.reps, "reps", 5, "repetitions of (A, B, C) on this machine")
	flag.IntVar(&o.armReps, "arm64-reps", 3, "repetitions of (A, B, C) of the arm64 build under qemu-user (0: none)")
	flag.Float64Var(&o.rate, "rate", 40, "messages per second per topic and peer (the demo's planning:16384:40)")
	flag.IntVar(&o.peers, "peers", 2, "peers per agent (a demo vehicle's 3 hosts: 2 peers each)")
	flag.IntVar(&o.size, "size", 16384, "the topic's message size (a field of each line)")
	flag.StringVar(&o.out, "out", "docs/bench-push.md", "report, relative to the repository root")
	flag.StringVar(&o.qemu, "qemu", "qemu-aarch64-static", "qemu-user for arm64")
	flag.BoolVar(&o.noKeepAlive, "no-keepalive-variant", false, "leave out variant C (the gateway with keep-alive)")
	flag.Parse()

	root, err := localcp.RepoRoot()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// As the agent does (cmd/nettune-agent/memory.go): no transparent huge
	// pages. The setting is inherited by the children and kept across exec.
	_ = unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)

	rep := &report{opts: o, began: time.Now(), loadBefore: benchutil.Loadavg(), busiest: benchutil.Busiest(5),
		cpu: benchutil.CPUModel(), ncpu: runtime.NumCPU(), kernel: benchutil.KernelRelease()}
	rep.commit, rep.dirty = gitCommit(root)
	fmt.Printf("bench-push: load average %s; busiest: %s\n", rep.loadBefore, rep.busiest)

	tmp, err := os.MkdirTemp("", "bench-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// The children: this machine's architecture and arm64.
	bins := map[string]string{runtime.GOARCH: filepath.Join(tmp, "pushload-"+runtime.GOARCH)}
	archs := []string{runtime.GOARCH}
	if o.armReps > 0 && runtime.GOARCH != "arm64" {
		if q, err := exec.LookPath(o.qemu); err != nil {
			rep.armSkipped = fmt.Sprintf("%s not found (Debian package qemu-user-static)", o.qemu)
			fmt.Printf("bench-push: no arm64 runs: %s\n", rep.armSkipped)
		} else {
			o.qemu = q
			rep.qemuVersion = firstLine(exec.Command(q, "--version").Output())
			bins["arm64"] = filepath.Join(tmp, "pushload-arm64")
			archs = append(archs, "arm64")
		}
	}
	for _, arch := range archs {
		bin := bins[arch]
		if err := buildChild(ctx, root, arch, bin); err != nil {
			return err
		}
		if st, err := os.Stat(bin); err == nil {
			rep.binSize = append(rep.binSize, fmt.Sprintf("%s %.1f MiB", arch, float64(st.Size())/(1<<20)))
		}
	}

	// Loki, multi-tenant, and the gateways in front of it.
	loki, err := stack.RunLokiOpts(filepath.Join(tmp, "loki"), stack.LokiOptions{Auth: true, Tenant: tenant})
	if err != nil {
		return err
	}
	defer loki.Close()
	users := []stack.GatewayUser{{Name: user, Password: password, Tenants: []string{tenant}}}
	gw, err := stack.RunGateway(filepath.Join(tmp, "gateway"), stack.GatewayOptions{Upstream: loki.URL, Users: users})
	if err != nil {
		return err
	}
	defer gw.Close()
	rep.lokiVersion, _, _ = strings.Cut(firstLine(exec.Command(filepath.Join(root, "bin", "loki"), "-version").Output()), " (")
	rep.lokiVersion = strings.TrimPrefix(rep.lokiVersion, "loki, version ")
	rep.nginxVersion = strings.TrimSpace(string(must(exec.Command("nginx", "-v").CombinedOutput())))

	variants := []*variant{
		{key: "A", name: "plain HTTP, tenant header", url: loki.URL, creds: map[string]string{"tenant": tenant}},
		{key: "B", name: "HTTPS + basic auth, gateway without keep-alive", url: gw.URL,
			creds: map[string]string{"tenant": tenant, "username": user, "password": password, "ca.crt": string(gw.CAPEM)}},
	}
	if reused, err := connReused(ctx, gw); err != nil {
		return fmt.Errorf("gateway B: %w", err)
	} else if reused {
		return errors.New("gateway B reuses connections: internal/stack's gateway changed (keepalive_timeout); update this benchmark's description")
	}
	if !o.noKeepAlive {
		gwKA, err := runKeepAliveGateway(ctx, filepath.Join(tmp, "gateway-keepalive"), loki.URL, users)
		if err != nil {
			return err
		}
		defer gwKA.Close()
		variants = append(variants, &variant{key: "C", name: "HTTPS + basic auth, gateway with keep-alive", url: gwKA.URL,
			creds: map[string]string{"tenant": tenant, "username": user, "password": password, "ca.crt": string(gwKA.CAPEM)}})
	}
	for _, v := range variants {
		v.dir = filepath.Join(tmp, "creds-"+v.key)
		if err := writeSecretDir(v.dir, v.creds); err != nil {
			return err
		}
	}
	rep.variants = variants
	rep.archs = archs

	// Interleaved: every repetition runs each variant once per architecture.
	n := 0
	repsOf := map[string]int{"arm64": o.armReps}
	repsOf[runtime.GOARCH] = o.reps
	for r := 1; r <= max(o.reps, o.armReps); r++ {
		for _, arch := range archs {
			if r > repsOf[arch] {
				continue
			}
			for _, v := range variants {
				if err := ctx.Err(); err != nil {
					return err
				}
				n++
				res, err := runChild(ctx, o, tmp, bins[arch], arch, v, r, loki)
				if err != nil {
					return fmt.Errorf("run %d (%s, %s, repetition %d): %w", n, arch, v.key, r, err)
				}
				res.seq = n
				rep.runs = append(rep.runs, res)
				fmt.Println(res.progress())
			}
		}
	}
	rep.loadAfter = benchutil.Loadavg()
	rep.ended = time.Now()
	fmt.Printf("bench-push: load average %s after %v\n", rep.loadAfter, rep.ended.Sub(rep.began).Round(time.Second))

	doc := rep.markdown(root)
	out := filepath.Join(root, o.out)
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Printf("bench-push: wrote %s\n", out)
	if bad := rep.invalid(); bad > 0 {
		return fmt.Errorf("%d run(s) invalid (lines lost); see %s", bad, out)
	}
	return nil
}

// variant is one way of pushing.
type variant struct {
	key, name string
	url       string
	creds     map[string]string
	dir       string
}

func must(b []byte, _ error) []byte { return b }

func firstLine(b []byte, err error) string {
	if err != nil {
		return "unknown"
	}
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return l
}

func gitCommit(root string) (commit string, dirty bool) {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown", false
	}
	st, _ := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), len(strings.TrimSpace(string(st))) > 0
}

// buildChild builds pushload for arch as the agent's image is built
// (Dockerfile: CGO_ENABLED=0, -trimpath, -ldflags "-s -w").
func buildChild(ctx context.Context, root, arch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./push/pushload")
	cmd.Dir = filepath.Join(root, "hack", "bench")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building pushload for %s: %w: %s", arch, err, b)
	}
	return nil
}

// writeSecretDir lays data out as kubelet mounts a Secret: the keys in a
// timestamped directory, ..data pointing at it, and one symlink per key
// through ..data.
func writeSecretDir(dir string, data map[string]string) error {
	snap := "..2026_01_01_00_00_00.000000001"
	if err := os.MkdirAll(filepath.Join(dir, snap), 0o755); err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, snap, k), []byte(v), 0o644); err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			return err
		}
	}
	return os.Symlink(snap, filepath.Join(dir, "..data"))
}

// runKeepAliveGateway starts a gateway as internal/stack does and turns its
// keep-alive on (keepalive_timeout 0 -> 75s, SIGHUP to its nginx master),
// then checks that a second request reuses the first one's connection.
func runKeepAliveGateway(ctx context.Context, dir, upstream string, users []stack.GatewayUser) (*stack.Gateway, error) {
	gw, err := stack.RunGateway(dir, stack.GatewayOptions{Upstream: upstream, Users: users})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*stack.Gateway, error) {
		gw.Close()
		return nil, fmt.Errorf("gateway with keep-alive: %w", err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		return fail(err)
	}
	if !strings.Contains(string(b), "keepalive_timeout 0;") {
		return fail(fmt.Errorf("%s has no \"keepalive_timeout 0;\" to change", conf))
	}
	b = []byte(strings.Replace(string(b), "keepalive_timeout 0;", "keepalive_timeout "+keepAlive+";", 1))
	if err := os.WriteFile(conf, b, 0o600); err != nil {
		return fail(err)
	}
	master, err := nginxMaster(dir)
	if err != nil {
		return fail(err)
	}
	if err := syscall.Kill(master, syscall.SIGHUP); err != nil {
		return fail(fmt.Errorf("SIGHUP to nginx %d: %w", master, err))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		reused, err := connReused(ctx, gw)
		if err == nil && reused {
			return gw, nil
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("connections still not reused 20s after the reload (last error: %v)", err))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nginxMaster finds the PID of the nginx master whose prefix is dir (its
// process title names its command line).
func nginxMaster(dir string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := "-p " + dir + "/"
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		s := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if strings.HasPrefix(s, "nginx: master process") && strings.Contains(s, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no nginx master process with %q", want)
}

// connReused sends two requests to the gateway's /ready (through to Loki,
// with basic auth) on one client and says whether the second reused the
// first's connection.
func connReused(ctx context.Context, gw *stack.Gateway) (bool, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(gw.CAPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var reused bool
	for i := range 2 {
		trace := &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, gw.URL+"/ready", nil)
		if err != nil {
			return false, err
		}
		req.SetBasicAuth(user, password)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("GET %s/ready (request %d): HTTP %d", gw.URL, i+1, resp.StatusCode)
		}
	}
	return reused, nil
}

// result is pushload's output (its Result) and what the driver adds.
type result struct {
	GOARCH        string        `json:"goarch"`
	Wall          time.Duration `json:"wall"`
	UserCPU       time.Duration `json:"user_cpu"`
	SysCPU        time.Duration `json:"sys_cpu"`
	TotalCPU      time.Duration `json:"total_cpu"`
	MaxRSSKiB     int64         `json:"max_rss_kib"`
	VmRSSKiB      int64         `json:"vm_rss_kib"`
	RssAnonKiB    int64         `json:"rss_anon_kib"`
	RssFileKiB    int64         `json:"rss_file_kib"`
	VmHWMKiB      int64         `json:"vm_hwm_kib"`
	GoMappedBytes uint64        `json:"go_mapped_bytes"`
	GoHeapBytes   uint64        `json:"go_heap_bytes"`
	GCCycles      uint64        `json:"gc_cycles"`
	Added         int64         `json:"added"`
	Pushed        int64         `json:"pushed"`
	Dropped       int64         `json:"dropped"`
	Errors        int64         `json:"errors"`
	Buffered      int           `json:"buffered"`
	Requests      int64         `json:"requests"`
	NewConns      int64         `json:"new_conns"`
	TLSHandshakes int64         `json:"tls_handshakes"`
	BodyBytes     int64         `json:"body_bytes"`
	TLS           string        `json:"tls"`
	LastReason    string        `json:"last_reason"`
	LastMessage   string        `json:"last_message"`

	seq     int
	arch    string
	variant *variant
	rep     int
	load1   string
	inLoki  int64
	problem string // why the run is invalid; "" when valid
}

func (r *result) cpu() time.Duration { return r.UserCPU + r.SysCPU }

// cpuPer1000 is the CPU per 1,000 lines shipped, in milliseconds.
func (r *result) cpuPer1000() float64 {
	if r.Added == 0 {
		return 0
	}
	return r.cpu().Seconds() * 1e3 / float64(r.Added) * 1000
}

// cpuPercent is the CPU in % of one core over the window.
func (r *result) cpuPercent() float64 { return 100 * r.cpu().Seconds() / r.Wall.Seconds() }

func (r *result) progress() string {
	s := fmt.Sprintf("run %2d  %-5s %s rep %d  load %s  cpu %6.1f ms (%.1f ms/1000 lines, %.2f %%)  peak %.1f MiB  rss %.1f MiB (anon %.1f)  go %.1f MiB  lines %d/%d in Loki  pushes %d, conns %d, handshakes %d",
		r.seq, r.arch, r.variant.key, r.rep, r.load1, float64(r.cpu().Microseconds())/1e3, r.cpuPer1000(), r.cpuPercent(),
		mib(r.VmHWMKiB), mib(r.VmRSSKiB), mib(r.RssAnonKiB), float64(r.GoMappedBytes)/(1<<20), r.inLoki, r.Added, r.Requests, r.NewConns, r.TLSHandshakes)
	if r.problem != "" {
		s += "  INVALID: " + r.problem
	}
	return s
}

func mib(kib int64) float64 { return float64(kib) / 1024 }

// runChild runs pushload once and checks that every line it added reached
// Loki.
func runChild(ctx context.Context, o options, tmp, bin, arch string, v *variant, rep int, loki *stack.Loki) (*result, error) {
	vehicle := fmt.Sprintf("bench-push-%s-%s-%d", arch, strings.ToLower(v.key), rep)
	buf := filepath.Join(tmp, "buffer-"+vehicle)
	args := []string{"-url", v.url, "-creds", v.dir, "-dir", buf, "-duration", o.duration.String(),
		"-rate", strconv.FormatFloat(o.rate, 'f', -1, 64), "-peers", strconv.Itoa(o.peers), "-size", strconv.Itoa(o.size), "-vehicle", vehicle}
	name := bin
	if arch != runtime.GOARCH {
		args = append([]string{bin}, args...)
		name = o.qemu
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = childEnv()
	cmd.Stderr = os.Stderr
	load1, _, _ := strings.Cut(benchutil.Loadavg(), " ")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	res := &result{arch: arch, variant: v, rep: rep, load1: load1}
	if err := json.Unmarshal(out, res); err != nil {
		return nil, fmt.Errorf("decoding pushload's output %q: %w", out, err)
	}
	_ = os.RemoveAll(buf)

	sel := fmt.Sprintf(`{job="nettune-probe", vehicle=%q}`, vehicle)
	if err := loki.WaitForCount(sel, int(res.Added), 30*time.Second); err != nil {
		res.problem = fmt.Sprintf("%v (the shipper: %d added, %d pushed, %d dropped, %d left on disk, %d push errors, last %s %q)",
			err, res.Added, res.Pushed, res.Dropped, res.Buffered, res.Errors, res.LastReason, res.LastMessage)
	}
	got, err := lokiCount(ctx, loki, sel)
	switch {
	case err != nil:
		res.problem = strings.TrimSpace(res.problem + "; counting: " + err.Error())
	default:
		res.inLoki = got
	}
	switch {
	case res.problem != "":
	case res.inLoki != res.Added:
		res.problem = fmt.Sprintf("Loki holds %d of the %d lines added", res.inLoki, res.Added)
	case res.Pushed != res.Added || res.Dropped != 0 || res.Buffered != 0:
		res.problem = fmt.Sprintf("the shipper pushed %d, dropped %d, left %d on disk of %d added", res.Pushed, res.Dropped, res.Buffered, res.Added)
	case res.Added == 0:
		res.problem = "no line added"
	}
	return res, nil
}

// childEnv is the environment without GOGC and GOMEMLIMIT: the child runs
// the agent's GOGC=50.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// lokiCount is the exact count of sel's lines over the last 24h.
func lokiCount(ctx context.Context, l *stack.Loki, sel string) (int64, error) {
	q := url.Values{"query": {fmt.Sprintf("sum(count_over_time(%s [24h]))", sel)}, "time": {strconv.FormatInt(time.Now().UnixNano(), 10)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.URL+"/loki/api/v1/query?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Scope-OrgID", l.Tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, err
	}
	if len(r.Data.Result) == 0 {
		return 0, nil
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	return int64(f), err
}
