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
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/hack/images/oci"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/scheme"
)

// footprint is what a running nettune-agent costs: idle with 100 tuned
// routes (connected to a kube-apiserver, drift watcher and resync
// running), and while it applies new metrics on the 100 routes.
type footprint struct {
	Where  string `json:"where"` // "host", or the VM's kernel line
	Arch   string `json:"arch"`
	Kernel string `json:"kernel"`

	IdleRSS  int64 `json:"idleRSS"` // bytes
	IdleAnon int64 `json:"idleAnon"`
	IdleTHP  int64 `json:"idleTHP"`  // of IdleAnon, in transparent huge pages
	IdleFile int64 `json:"idleFile"` // the rest: file-backed or shared memory
	// The binary's code and read-only data resident (part of IdleFile).
	IdleText   int64         `json:"idleText"`
	IdleROData int64         `json:"idleROData"`
	IdleCPU    time.Duration `json:"idleCPU"` // over IdleWindow
	IdleWindow time.Duration `json:"idleWindow"`

	// Each apply: from the spec update to the status reporting the
	// revision applied (post-apply probes and the status write included).
	Applies      int           `json:"applies"`
	ApplyPeakRSS int64         `json:"applyPeakRSS"` // the highest VmHWM of the applies, the peak reset before each
	ApplyCPU     time.Duration `json:"applyCPU"`     // median agent CPU of one apply
	ApplyWall    time.Duration `json:"applyWall"`    // median
}

// idleCPUPercent is the idle CPU in percent of one core.
func (f footprint) idleCPUPercent() float64 {
	return 100 * f.IdleCPU.Seconds() / f.IdleWindow.Seconds()
}

type footprintOptions struct {
	agent      string // the nettune-agent binary
	kubeconfig string // the agent's
	window     time.Duration
	applies    int
	// converge bounds the wait for the agent to report an applied
	// revision (minutes under TCG).
	converge time.Duration
}

// memStatus reads pid's RSS (smaps_rollup's Rss, exact where the status
// counters are per-thread estimates), its anonymous part, the transparent
// huge pages of that, the file-backed rest (the binary's pages: file, or
// shared memory on a tmpfs as in an initramfs) and VmHWM, in bytes.
func memStatus(pid int) (rss, anon, anonHuge, file, hwm int64, err error) {
	kb := func(file string, keys ...string) (map[string]int64, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
		if err != nil {
			return nil, err
		}
		m := map[string]int64{}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 && slices.Contains(keys, f[0]) {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				m[f[0]] = v << 10
			}
		}
		return m, nil
	}
	r, err := kb("smaps_rollup", "Rss:", "Anonymous:", "AnonHugePages:")
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	st, err := kb("status", "VmHWM:")
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	return r["Rss:"], r["Anonymous:"], r["AnonHugePages:"], r["Rss:"] - r["Anonymous:"], st["VmHWM:"], nil
}

// binaryRSS is how much of the executable exe's code (r-x) and read-only
// data (r--) mappings is resident in pid.
func binaryRSS(pid int, exe string) (text, rodata int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0, err
	}
	var cur *int64
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 6 && strings.Contains(f[0], "-") && f[5] == exe:
			switch f[1] {
			case "r-xp":
				cur = &text
			case "r--p":
				cur = &rodata
			default:
				cur = nil
			}
		case len(f) >= 5 && strings.Contains(f[0], "-"):
			cur = nil
		case len(f) == 3 && f[0] == "Rss:" && cur != nil:
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			*cur += kb << 10
		}
	}
	return text, rodata, nil
}

// cpuTime is the CPU time pid has used, all its threads, the exited ones
// too: its process CPU clock (nanoseconds; clock_getcpuclockid), or,
// where that fails, utime+stime in clock ticks.
func cpuTime(pid int) (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid)<<3|2, &ts); err == nil { // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
		return time.Duration(ts.Nano()), nil
	}
	u, err := benchutil.ReadProc(pid)
	return benchutil.TicksDuration(u.Ticks), err
}

// waitApplied waits for the NodeNetTuning's status to report rev applied.
func waitApplied(ctx context.Context, c client.Client, rev string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got := &v1alpha1.NodeNetTuning{}
		if err := c.Get(ctx, client.ObjectKey{Name: "bench-node"}, got); err == nil && got.Status.AppliedRevision == rev {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent did not apply %s within %s", rev, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// measureFootprint runs the agent against the API server c talks to, in
// the benchmark's network namespace, and measures it.
func measureFootprint(c client.Client, o footprintOptions) (footprint, error) {
	ctx := context.Background()
	f := footprint{Where: "host", Arch: runtime.GOARCH, Kernel: benchutil.KernelRelease(), IdleWindow: o.window, Applies: o.applies}
	old := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: "bench-node"}}
	if err := c.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
		return f, err
	}
	nnt := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: "bench-node"}, Spec: spec(100, "fp-0", 30)}
	if err := c.Create(ctx, nnt); err != nil {
		return f, err
	}
	stateDir, err := os.MkdirTemp("", "bench-agent-footprint-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(stateDir)
	cmd := exec.Command(o.agent, "run", "--node", "bench-node", "--netns", nsName,
		"--state-dir", stateDir, "--metrics-bind-address", "127.0.0.1:0", "--probe-port", "0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.kubeconfig)
	logFile, err := os.Create(filepath.Join(stateDir, "agent.log"))
	if err != nil {
		return f, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return f, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	fail := func(err error) (footprint, error) {
		log, _ := os.ReadFile(logFile.Name())
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		return f, fmt.Errorf("%w; the agent's last log lines:\n%s", err, log)
	}
	if err := waitApplied(ctx, c, "fp-0", o.converge); err != nil {
		return fail(err)
	}
	time.Sleep(5 * time.Second) // settle

	t0, err := cpuTime(pid)
	if err != nil {
		return f, err
	}
	start := time.Now()
	time.Sleep(o.window)
	t1, err := cpuTime(pid)
	if err != nil {
		return f, err
	}
	f.IdleWindow = time.Since(start)
	f.IdleCPU = t1 - t0
	if f.IdleRSS, f.IdleAnon, f.IdleTHP, f.IdleFile, _, err = memStatus(pid); err != nil {
		return f, err
	}
	if f.IdleText, f.IdleROData, err = binaryRSS(pid, o.agent); err != nil {
		return f, err
	}

	var cpus, walls []time.Duration
	for i := 1; i <= o.applies; i++ {
		// Writing 5 to clear_refs resets VmHWM to the current RSS.
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200); err != nil {
			return f, fmt.Errorf("resetting the peak RSS: %w", err)
		}
		cwnd := int32(30)
		if i%2 == 1 {
			cwnd = 40
		}
		rev := fmt.Sprintf("fp-%d", i)
		cur := &v1alpha1.NodeNetTuning{}
		if err := c.Get(ctx, client.ObjectKey{Name: "bench-node"}, cur); err != nil {
			return f, err
		}
		cur.Spec = spec(100, rev, cwnd)
		c0, err := cpuTime(pid)
		if err != nil {
			return f, err
		}
		applyStart := time.Now()
		if err := c.Update(ctx, cur); err != nil {
			return f, err
		}
		if err := waitApplied(ctx, c, rev, o.converge); err != nil {
			return fail(err)
		}
		walls = append(walls, time.Since(applyStart))
		c1, err := cpuTime(pid)
		if err != nil {
			return f, err
		}
		cpus = append(cpus, c1-c0)
		_, _, _, _, hwm, err := memStatus(pid)
		if err != nil {
			return f, err
		}
		f.ApplyPeakRSS = max(f.ApplyPeakRSS, hwm)
		time.Sleep(2 * time.Second)
	}
	if len(cpus) == 0 {
		return f, errors.New("no applies measured")
	}
	slices.Sort(cpus)
	slices.Sort(walls)
	f.ApplyCPU, f.ApplyWall = cpus[len(cpus)/2], walls[len(walls)/2]
	return f, nil
}

// kubeconfigClient is a client of the API server a kubeconfig names.
func kubeconfigClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	sch, err := scheme.New()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: sch})
}

// runFootprint measures the agent from the agent image index (image, or
// one built from this tree for this machine's and the VMs' architectures):
// on this machine, then in each VM, against one kube-apiserver on this
// machine. It writes the footprint section of docs/bench-agent.md, with
// the results of an earlier run (-before) beside them, and saves the
// results as JSON when jsonOut is set.
func runFootprint(root string, o footprintOptions, image string, vms []string, jsonOut, before string) error {
	ctx := context.Background()
	var prev []footprint
	if before != "" {
		b, err := os.ReadFile(before)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &prev); err != nil {
			return fmt.Errorf("%s: %w", before, err)
		}
	}
	work, err := os.MkdirTemp("", "bench-agent-footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if image == "" {
		platforms := []oci.Platform{{Architecture: runtime.GOARCH, OS: "linux"}}
		for _, vm := range vms {
			k, ok := vmKernels[vm]
			if !ok {
				return fmt.Errorf("no kernel line %q", vm)
			}
			if p := (oci.Platform{Architecture: k.arch, OS: "linux"}); !slices.Contains(platforms, p) {
				platforms = append(platforms, p)
			}
		}
		image = filepath.Join(work, "nettune-agent.oci.tar")
		fmt.Printf("==> building the agent image index for %v\n", platforms)
		if err := oci.BuildImageIndex(ctx, root, work, image, oci.AgentImage(oci.ImageRegistry, "bench"), platforms); err != nil {
			return err
		}
	}
	hostAgent, err := oci.AgentBinaryFromIndex(image, runtime.GOARCH)
	if err != nil {
		return err
	}
	o.agent = filepath.Join(work, "nettune-agent")
	if err := os.WriteFile(o.agent, hostAgent, 0o755); err != nil {
		return err
	}

	cp, err := localcp.Start("")
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	o.kubeconfig = cp.Kubeconfig
	cleanup, err := setupNetns()
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Printf("==> footprint on this machine (%s), %s idle, %d applies of 100 routes\n", runtime.GOARCH, o.window, o.applies)
	f, err := measureFootprint(cp.Client, o)
	if err != nil {
		return err
	}
	fmt.Println("    " + f.summary())
	results := []footprint{f}
	for _, vm := range vms {
		fmt.Printf("==> footprint in the %s VM (qemu TCG)\n", vm)
		agent, err := oci.AgentBinaryFromIndex(image, vmKernels[vm].arch)
		if err != nil {
			return err
		}
		f, err := measureInVM(ctx, root, vm, agent, cp.Config, o)
		if err != nil {
			return err
		}
		fmt.Println("    " + f.summary())
		results = append(results, f)
	}
	if jsonOut != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return writeFootprintSection(filepath.Join(root, "docs", "bench-agent.md"), footprintSection(results, prev, o, vms))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// roundDuration keeps three or four significant digits: 24.6ms, 1.414s.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}

func (f footprint) summary() string {
	return fmt.Sprintf("%s %s %s: RSS idle %s (anon %s of which THP %s, file %s: code %s, rodata %s), peak during an apply %s; CPU idle %.3f %% of a core, %s per apply (%s wall)",
		f.Where, f.Arch, f.Kernel, mib(f.IdleRSS), mib(f.IdleAnon), mib(f.IdleTHP), mib(f.IdleFile), mib(f.IdleText), mib(f.IdleROData), mib(f.ApplyPeakRSS),
		f.idleCPUPercent(), roundDuration(f.ApplyCPU), f.ApplyWall.Round(time.Millisecond))
}

// Markers of the generated footprint section in docs/bench-agent.md.
const (
	footprintBegin = "<!-- footprint: generated by hack/bench/agent -footprint; the notes after the end marker are kept -->"
	footprintEnd   = "<!-- footprint: end -->"
)

func footprintSection(rs, prev []footprint, o footprintOptions, vms []string) string {
	var b strings.Builder
	b.WriteString(footprintBegin + "\n## Footprint on amd64 and arm64\n\n")
	args := ""
	if len(vms) > 0 {
		args = " -vm " + strings.Join(vms, ",")
	}
	fmt.Fprintf(&b, "Produced by `cd hack/bench && go run ./agent -footprint%s` on %s. ", args, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "The agent binaries are taken from the agent's image index built from this tree, its linux/amd64 and linux/arm64 images (`make images`, `oci.AgentBinaryFromIndex`). "+
		"Each runs `nettune-agent run` against a kube-apiserver on this machine (from the VMs through qemu's user-mode network), "+
		"applies 100 routes in a network namespace, idles %s (drift watcher and 30 s resync running), then applies new metrics on the 100 routes %d times. "+
		"The VMs are hack/kernels' kernel lines under qemu TCG (`-m 1024 -smp 1`; aarch64: `-M virt -cpu cortex-a57`). "+
		"RSS is smaps_rollup's Rss: anon (the Go heap, stacks and runtime; in parentheses, how much of it is in transparent huge pages) plus file (the binary's pages mapped: file-backed, or shared memory in the VMs' initramfs; its code and read-only data shown); the peak is VmHWM, reset before each apply; "+
		"an apply's CPU is the agent's threads' run time from the spec update to the status reporting the revision, the median of the applies. "+
		"Rows marked (before) are an earlier run's (-before).\n\n", o.window, o.applies)
	row := func(label string, f footprint) {
		fmt.Fprintf(&b, "| %s%s | %s | %s | **%s** | %s (%s) | %s (%s + %s) | %s | %.3f %% | %s | %s |\n", f.Where, label, f.Arch, f.Kernel,
			mib(f.IdleRSS), mib(f.IdleAnon), mib(f.IdleTHP), mib(f.IdleFile), mib(f.IdleText), mib(f.IdleROData), mib(f.ApplyPeakRSS), f.idleCPUPercent(),
			roundDuration(f.ApplyCPU), f.ApplyWall.Round(time.Millisecond))
	}
	b.WriteString("| where | arch | kernel | RSS idle | anon (in THP) | file (binary code + rodata) | peak RSS, 100-route apply | idle CPU (% of a core) | CPU per apply | apply wall time |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range rs {
		row("", f)
	}
	for _, f := range prev {
		row(" (before)", f)
	}
	// Emulated CPU time is not an arm64 core's: compare the architectures
	// in the same emulator.
	var amd, arm *footprint
	for i := range rs {
		if !strings.HasPrefix(rs[i].Where, "bullseye-5.10-") {
			continue
		}
		switch rs[i].Arch {
		case "amd64":
			amd = &rs[i]
		case "arm64":
			arm = &rs[i]
		}
	}
	if amd != nil && arm != nil {
		fmt.Fprintf(&b, "\nUnder TCG, CPU time is the emulator's, not an arm64 core's: as a ratio to amd64 on the same kernel line and emulator, the arm64 agent takes %.2f× the idle CPU and %.2f× the CPU of an apply. RSS does not depend on the emulation.\n",
			arm.IdleCPU.Seconds()/amd.IdleCPU.Seconds(), arm.ApplyCPU.Seconds()/amd.ApplyCPU.Seconds())
	}
	b.WriteString("\nTarget: RSS under 30 MiB on both architectures.\n" + footprintEnd + "\n")
	return b.String()
}

// writeFootprintSection replaces the generated footprint section of the
// document, or appends it, and keeps the rest.
func writeFootprintSection(doc, section string) error {
	b, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	s := string(b)
	if i := strings.Index(s, footprintBegin); i >= 0 {
		if j := strings.Index(s[i:], footprintEnd); j >= 0 {
			s = s[:i] + section + strings.TrimPrefix(s[i+j+len(footprintEnd):], "\n")
			return os.WriteFile(doc, []byte(s), 0o644)
		}
	}
	return os.WriteFile(doc, []byte(strings.TrimRight(s, "\n")+"\n\n"+section), 0o644)
}
