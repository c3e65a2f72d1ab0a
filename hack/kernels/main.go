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

// Command kernels runs the node agent's kernel-level test suites inside the
// kernels of the fleet's lines, booted with qemu (TCG) on this machine:
// Debian 11's 5.10 on x86_64 and aarch64 (the JetPack 5 line) and Debian
// 12's 6.1 on x86_64 (make test-kernels).
//
// Each VM boots straight from the kernel package's vmlinuz with an
// initramfs of three concatenated cpio archives: the base (busybox, the
// real ip, iptables-nft, mount, setpriv and dash with their libraries, and
// the kernel's network modules), the repository root's markers, and the
// tests (their static binaries, the agent's, and /init: init.sh).
// Kernel packages, and the arm64 userland, come from Debian's mirror
// through an apt configuration of their own (apt.go). Everything
// downloaded or built is kept under bin/kernels and reused: a second run
// relinks the test binaries, rewrites the tests' archive if they changed,
// and boots.
//
// It prints one line per kernel (its time and its tests' counts), keeps
// each console in bin/kernels/logs/<kernel>.log, and exits non-zero if a
// test failed or a VM did not finish.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// kernel is one kernel line of the fleet, from a Debian package.
type kernel struct {
	name string
	arch string // Debian's name of the architecture
	// pkg is the kernel package; meta, a metapackage whose first
	// dependency names it (the package is that name + "-unsigned").
	pkg, meta string
	qemu      []string // the qemu program and its machine options
	console   string
}

// kernels are booted in this order, the slowest (emulated aarch64) first.
var kernels = []kernel{
	{name: "bullseye-5.10-arm64", arch: "arm64", pkg: "linux-image-5.10.0-32-arm64-unsigned",
		qemu: []string{"qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a57"}, console: "ttyAMA0"},
	{name: "bullseye-5.10-amd64", arch: "amd64", pkg: "linux-image-5.10.0-32-amd64-unsigned",
		qemu: []string{"qemu-system-x86_64"}, console: "ttyS0"},
	{name: "bookworm-6.1-amd64", arch: "amd64", meta: "linux-image-amd64/bookworm",
		qemu: []string{"qemu-system-x86_64"}, console: "ttyS0"},
}

// triplets are the Debian multiarch library directories' names.
var triplets = map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}

// testSuites are the packages whose tests run in every VM.
//
// Left out because they start a kube-apiserver: node-agent/agent's
// reconciler, event sink and Lease tests (TestAgent*,
// TestLeaseKeeperRenewsWithOneWrite) and cmd/nettune-agent's
// TestResolveVehicle. Left out because it ships to Loki over HTTP, nothing
// kernel-specific, and building Loki for each architecture cost a cold run
// about 15 minutes (arm64 alone 7m52s): cmd/nettune-agent's
// TestAgentShipsProbeLatencyAndEventsToLoki (under TCG its 10 s wait for
// the agent's port also failed once in four arm64 runs, while Loki started).
var testSuites = []suite{
	{pkg: "node-agent/kernel"},
	{pkg: "node-agent/agent", skip: "^(TestAgent.*|TestLeaseKeeperRenewsWithOneWrite)$"},
	{pkg: "cmd/nettune-agent", run: "^(TestAgentCLI|TestLeastPrivilege)$"},
}

type options struct {
	goBin       string
	dir         string
	only        string
	run         string
	jobs        int
	timeout     time.Duration
	testTimeout time.Duration
	refresh     bool
}

func main() {
	var o options
	flag.StringVar(&o.goBin, "go", "go", "the go command that builds the test binaries")
	flag.StringVar(&o.dir, "dir", "bin/kernels", "where downloads, archives and console logs are kept")
	flag.StringVar(&o.only, "only", "", "comma-separated kernels to boot (default all: "+kernelNames()+")")
	flag.StringVar(&o.run, "run", "", "a -test.run pattern for every suite instead of its own (e.g. -run=TestPrimeRepairsEntryOfLateClose); a suite with no match runs nothing")
	flag.IntVar(&o.jobs, "jobs", runtime.NumCPU(), "VMs at a time")
	// The limits catch a hung VM or test, not a slow one: under TCG the
	// aarch64 VM runs 1.4-3.4x slower than the x86_64 ones, and slower
	// again on a loaded machine (cmd/nettune-agent's tests took 175 s there
	// in one loaded make test and 303 s, past the old 5-minute limit, in
	// another beside a second make test; the VM 7 min 14 s of the old 8).
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "a VM's whole run, boot to power-off")
	flag.DurationVar(&o.testTimeout, "test-timeout", 12*time.Minute, "each test binary's -test.timeout")
	flag.BoolVar(&o.refresh, "refresh", false, "fetch the package lists again (new kernel package versions)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "kernels: %v\n", err)
		os.Exit(1)
	}
}

func kernelNames() string {
	n := make([]string, len(kernels))
	for i, k := range kernels {
		n[i] = k.name
	}
	return strings.Join(n, ",")
}

// prepared is a kernel ready to boot.
type prepared struct {
	kernel
	vmlinuz, initrd, log string
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	var sel []kernel
	for _, k := range kernels {
		if o.only == "" || slices.Contains(strings.Split(o.only, ","), k.name) {
			sel = append(sel, k)
		}
	}
	if len(sel) == 0 {
		return fmt.Errorf("-only %q names none of %s", o.only, kernelNames())
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", o.dir, err)
	}
	vms, err := prepare(ctx, o, dir, sel)
	if err != nil {
		return err
	}
	fmt.Printf("kernels: prepared %d initramfs in %s; booting %d VMs, %d at a time (TCG)\n",
		len(vms), time.Since(start).Round(100*time.Millisecond), len(vms), o.jobs)

	results := make([]*vmResult, len(vms))
	var wg sync.WaitGroup
	var mu sync.Mutex
	slots := make(chan struct{}, max(o.jobs, 1))
	for i, vm := range vms {
		slots <- struct{}{} // in the order of kernels
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			r := bootVM(ctx, vm.kernel, vm.vmlinuz, vm.initrd, vm.log, o.timeout)
			results[i] = r
			mu.Lock()
			defer mu.Unlock()
			fmt.Println(progressLine(vm, r))
		}()
	}
	wg.Wait()

	failed := 0
	for i, r := range results {
		if r.failed() {
			failed++
			fmt.Printf("kernels: FAILED %s:%s (log %s)\n", vms[i].name, failures(r), vms[i].log)
		}
	}
	fmt.Printf("kernels: %d of %d kernels passed in %s\n", len(vms)-failed, len(vms), time.Since(start).Round(time.Second))
	if failed > 0 {
		return fmt.Errorf("%d kernel(s) failed", failed)
	}
	return nil
}

// progressLine is one kernel's outcome: time, counts, what failed.
func progressLine(vm prepared, r *vmResult) string {
	c := r.counts()
	status := "ok"
	if r.failed() {
		status = "FAIL"
	}
	var per []string
	for _, s := range r.suites {
		per = append(per, fmt.Sprintf("%s %ss exit %d", filepath.Base(s.name), s.seconds, s.exit))
	}
	line := fmt.Sprintf("kernels: %-4s %s (%s %s) in %s (boot %s; %s): %d passed, %d failed, %d skipped",
		status, vm.name, r.release, r.machine, r.elapsed.Round(100*time.Millisecond), r.booted.Round(100*time.Millisecond),
		strings.Join(per, ", "), c["PASS"], c["FAIL"], c["SKIP"])
	if s := r.names("SKIP"); len(s) > 0 {
		line += "; skipped " + strings.Join(s, " ")
	}
	return line
}

// failures says what went wrong in one VM.
func failures(r *vmResult) string {
	var why []string
	if r.err != nil {
		why = append(why, r.err.Error())
	}
	for _, s := range r.suites {
		if s.exit != 0 {
			why = append(why, fmt.Sprintf("%s exited %d", s.name, s.exit))
		}
		if s.panic != "" {
			why = append(why, s.name+": "+s.panic)
		}
	}
	if f := r.names("FAIL"); len(f) > 0 {
		why = append(why, "failed: "+strings.Join(f, " "))
	}
	return " " + strings.Join(why, "; ")
}

// prepare downloads and unpacks what is missing, builds the tests and the
// initramfs of every selected kernel.
func prepare(ctx context.Context, o options, dir string, sel []kernel) ([]prepared, error) {
	self, err := selfKey()
	if err != nil {
		return nil, err
	}
	mirror, err := hostMirror()
	if err != nil {
		return nil, err
	}
	hostArch := runtime.GOARCH
	host, err := findUserland(sysroot{dir: "/", libDir: "/usr/lib/" + triplets[hostArch]})
	if err != nil {
		return nil, fmt.Errorf("this machine's userland: %w", err)
	}

	type archBuild struct {
		apt      *apt
		userland userland
		tools    string // the repository root's markers
		tests    string // the tests' archive
	}
	archs := map[string]*archBuild{}
	for _, k := range sel {
		if archs[k.arch] != nil {
			continue
		}
		a, err := newApt(dir, k.arch, mirror)
		if err != nil {
			return nil, err
		}
		if err := a.update(ctx, o.refresh); err != nil {
			return nil, err
		}
		b := &archBuild{apt: a, userland: host}
		if k.arch != hostArch {
			if b.userland, err = foreignUserland(ctx, a, host, filepath.Join(dir, "userland", k.arch)); err != nil {
				return nil, err
			}
		}
		build := filepath.Join(dir, "build", k.arch)
		if b.tests, err = testsArchive(ctx, o.goBin, build, k.arch, self, o.testTimeout, selectTests(testSuites, o.run)); err != nil {
			return nil, err
		}
		if b.tools, err = rootArchive(build, self); err != nil {
			return nil, err
		}
		archs[k.arch] = b
	}

	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	var vms []prepared
	for _, k := range sel {
		b := archs[k.arch]
		kdir := filepath.Join(dir, k.name)
		pkg := k.pkg
		if pkg == "" {
			dep, err := b.apt.firstDependency(ctx, k.meta)
			if err != nil {
				return nil, err
			}
			pkg = dep + "-unsigned"
		}
		debs, err := b.apt.download(ctx, []string{pkg})
		if err != nil {
			return nil, err
		}
		if err := unpack(ctx, filepath.Join(kdir, "pkg"), debs); err != nil {
			return nil, err
		}
		release, err := onlyEntry(filepath.Join(kdir, "pkg", "lib", "modules"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pkg, err)
		}
		parts := []string{self, filepath.Base(debs[0])}
		for p, hp := range b.userland {
			st, err := os.Stat(hp)
			if err != nil {
				return nil, fmt.Errorf("userland: %w", err)
			}
			parts = append(parts, fmt.Sprintf("%s %s %d %d", p, hp, st.Size(), st.ModTime().UnixNano()))
		}
		slices.Sort(parts[2:])
		bk, err := key(parts)
		if err != nil {
			return nil, err
		}
		base, built, err := cachedArchive(kdir, "base", bk, baseLevel, func(a *archive) error {
			stage := filepath.Join(kdir, "modules")
			if err := stageModules(ctx, filepath.Join(kdir, "pkg"), stage, release); err != nil {
				return err
			}
			return writeBase(a, b.userland, stage, release)
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.name, err)
		}
		how := "reused"
		if built {
			how = "built"
		}
		fmt.Printf("kernels: %s: %s (%s), base initramfs %s\n", k.name, filepath.Base(debs[0]), release, how)
		initrd := filepath.Join(kdir, "initrd.gz")
		if err := concat(initrd, base, b.tools, b.tests); err != nil {
			return nil, err
		}
		vms = append(vms, prepared{kernel: k, initrd: initrd,
			vmlinuz: filepath.Join(kdir, "pkg", "boot", "vmlinuz-"+release),
			log:     filepath.Join(dir, "logs", k.name+".log")})
	}
	return vms, nil
}

// foreignUserland fetches the packages that hold this machine's userland
// for another architecture, unpacks them into dir and finds the same
// programs and their libraries there.
func foreignUserland(ctx context.Context, a *apt, host userland, dir string) (userland, error) {
	pkgs, err := hostPackages(ctx, host)
	if err != nil {
		return nil, err
	}
	debs, err := a.download(ctx, pkgs)
	if err != nil {
		return nil, err
	}
	if err := unpack(ctx, dir, debs); err != nil {
		return nil, err
	}
	u, err := findUserland(sysroot{dir: dir, libDir: "/usr/lib/" + triplets[a.arch]})
	if err != nil {
		return nil, fmt.Errorf("%s userland from %s: %w", a.arch, strings.Join(pkgs, " "), err)
	}
	return u, nil
}

// testsArchive builds the test binaries for arch into dir and returns the
// archive holding them, /init and the suites list.
func testsArchive(ctx context.Context, goBin, dir, arch, self string, testTimeout time.Duration, suites []suite) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("tests: %w", err)
	}
	if err := buildTests(ctx, goBin, dir, arch, suites); err != nil {
		return "", err
	}
	list := suitesFile(suites, testTimeout.String())
	files := []string{filepath.Join(dir, "nettune-agent")}
	for _, s := range suites {
		files = append(files, filepath.Join(dir, s.binary()))
	}
	k, err := key([]string{self, string(list)}, files...)
	if err != nil {
		return "", err
	}
	file, built, err := cachedArchive(dir, "tests", k, testsLevel, func(a *archive) error {
		return writeTests(a, dir, suites, list)
	})
	if err == nil && built {
		fmt.Printf("kernels: %s: tests initramfs built\n", arch)
	}
	return file, err
}

// selectTests returns suites with run as every suite's -test.run (their
// -test.skip kept), or suites as they are when run is empty.
func selectTests(suites []suite, run string) []suite {
	if run == "" {
		return suites
	}
	out := slices.Clone(suites)
	for i := range out {
		out[i].run = run
	}
	return out
}

// rootArchive returns the archive holding the repository root's markers.
func rootArchive(dir, self string) (string, error) {
	k, err := key([]string{self})
	if err != nil {
		return "", err
	}
	file, _, err := cachedArchive(dir, "root", k, baseLevel, writeRoot)
	return file, err
}

// onlyEntry is the name of the one entry of dir.
func onlyEntry(dir string) (string, error) {
	e, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", dir, err)
	}
	if len(e) != 1 {
		return "", errors.New(dir + ": not exactly one entry")
	}
	return e[0].Name(), nil
}
