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
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The footprint VMs boot a kernel line of hack/kernels (make test-kernels)
// from what it keeps under bin/kernels/<line>: the kernel package's vmlinuz
// and the base initramfs (busybox, the real ip, the network modules).
// Over it goes an archive of this benchmark's own: /init (vminit.sh), the
// agent, this program built for the VM's architecture, a kubeconfig and
// the virtio network driver's modules. qemu's user-mode network lets the
// VM reach this machine's kube-apiserver at 10.0.2.2.

//go:embed vminit.sh
var vmInit []byte

// vmKernel is a kernel line hack/kernels boots, and how.
type vmKernel struct {
	arch    string
	qemu    []string
	console string
}

var vmKernels = map[string]vmKernel{
	"bullseye-5.10-arm64": {arch: "arm64", qemu: []string{"qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a57"}, console: "ttyAMA0"},
	"bullseye-5.10-amd64": {arch: "amd64", qemu: []string{"qemu-system-x86_64"}, console: "ttyS0"},
	"bookworm-6.1-amd64":  {arch: "amd64", qemu: []string{"qemu-system-x86_64"}, console: "ttyS0"},
}

// virtioModules are the virtio network driver's modules, in load order,
// under the kernel's lib/modules/<release>/kernel; the ones a kernel has
// built in are not in its package.
var virtioModules = []string{"drivers/virtio/virtio.ko", "drivers/virtio/virtio_ring.ko", "drivers/virtio/virtio_pci.ko",
	"net/core/failover.ko", "drivers/net/net_failover.ko", "drivers/net/virtio_net.ko"}

// vmMarker starts the line /init prints the measurement on.
const vmMarker = "NETTUNE-FOOTPRINT "

// vmKubeconfig is the kubeconfig of cfg's user for a client in the VM: the
// API server at 10.0.2.2 (qemu's address for this machine's loopback),
// its certificate checked for localhost.
func vmKubeconfig(cfg *rest.Config) ([]byte, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	u.Host = "10.0.2.2:" + u.Port()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: u.String(), CertificateAuthorityData: cfg.CAData, TLSServerName: "localhost"}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	return clientcmd.Write(*kc)
}

// newc writes a gzip-compressed cpio archive ("newc", the kernel's
// initramfs format) of regular files, after their parent directories.
type newc struct {
	w    *bytes.Buffer
	ino  int
	dirs map[string]bool
}

func (a *newc) entry(name string, mode int, data []byte) {
	a.ino++
	fmt.Fprintf(a.w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%s\x00",
		a.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0, name)
	a.w.Write(make([]byte, (4-(110+len(name)+1)%4)%4))
	a.w.Write(data)
	a.w.Write(make([]byte, (4-len(data)%4)%4))
}

func (a *newc) file(name string, perm int, data []byte) {
	var dirs []string
	for d := path.Dir(name); d != "." && !a.dirs[d]; d = path.Dir(d) {
		a.dirs[d] = true
		dirs = append(dirs, d)
	}
	for i := len(dirs) - 1; i >= 0; i-- { // outermost first
		a.entry(dirs[i], 0o040755, nil)
	}
	a.entry(name, 0o100000|perm, data)
}

// vmArchive is the benchmark's initramfs overlay for the kernel at kdir.
func vmArchive(kdir, release string, agent, bench, kubeconfig []byte) ([]byte, error) {
	var raw bytes.Buffer
	a := &newc{w: &raw, dirs: map[string]bool{}}
	a.file("init", 0o755, vmInit)
	a.file("footprint/nettune-agent", 0o755, agent)
	a.file("footprint/bench-agent", 0o755, bench)
	a.file("footprint/kubeconfig", 0o600, kubeconfig)
	var mods []string
	for _, m := range virtioModules {
		b, err := os.ReadFile(filepath.Join(kdir, "pkg", "lib", "modules", release, "kernel", m))
		if errors.Is(err, os.ErrNotExist) {
			continue // built in
		}
		if err != nil {
			return nil, err
		}
		// The base archive's /lib is a link to usr/lib.
		a.file(path.Join("usr/lib/modules", release, "footprint", path.Base(m)), 0o644, b)
		mods = append(mods, path.Base(m))
	}
	a.file("footprint/modules", 0o644, []byte(strings.Join(mods, "\n")+"\n"))
	a.entry("TRAILER!!!", 0, nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return gz.Bytes(), nil
}

// measureInVM boots the kernel line with the agent and this benchmark
// built for its architecture, and returns what the benchmark measured
// there against this machine's API server.
func measureInVM(ctx context.Context, root, name string, agent []byte, cfg *rest.Config, o footprintOptions) (footprint, error) {
	f := footprint{Where: name}
	k, ok := vmKernels[name]
	if !ok {
		return f, fmt.Errorf("no kernel line %q (have bullseye-5.10-arm64, bullseye-5.10-amd64, bookworm-6.1-amd64)", name)
	}
	kdir := filepath.Join(root, "bin", "kernels", name)
	bases, _ := filepath.Glob(filepath.Join(kdir, "base-*.cpio.gz"))
	mods, _ := os.ReadDir(filepath.Join(kdir, "pkg", "lib", "modules"))
	if len(bases) != 1 || len(mods) != 1 {
		return f, fmt.Errorf("%s: no base initramfs and kernel package: run make test-kernels KERNELS_ARGS=-only=%s first", kdir, name)
	}
	release := mods[0].Name()
	work, err := os.MkdirTemp("", "bench-agent-vm-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(work)
	benchBin := filepath.Join(work, "bench-agent")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", benchBin, ".")
	build.Dir = filepath.Join(root, "hack", "bench", "agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+k.arch)
	if out, err := build.CombinedOutput(); err != nil {
		return f, fmt.Errorf("building the benchmark for %s: %w: %s", k.arch, err, out)
	}
	bench, err := os.ReadFile(benchBin)
	if err != nil {
		return f, err
	}
	kc, err := vmKubeconfig(cfg)
	if err != nil {
		return f, err
	}
	overlay, err := vmArchive(kdir, release, agent, bench, kc)
	if err != nil {
		return f, err
	}
	base, err := os.ReadFile(bases[0])
	if err != nil {
		return f, err
	}
	initrd := filepath.Join(work, "initrd.gz")
	if err := os.WriteFile(initrd, append(base, overlay...), 0o644); err != nil {
		return f, err
	}
	cmdline := fmt.Sprintf("console=%s panic=-1 quiet footprint.window=%s footprint.applies=%d footprint.converge=%s", k.console, o.window, o.applies, o.converge)
	args := append(append([]string{}, k.qemu[1:]...),
		"-accel", "tcg", "-m", "1024", "-smp", "1",
		"-kernel", filepath.Join(kdir, "pkg", "boot", "vmlinuz-"+release), "-initrd", initrd, "-append", cmdline,
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0",
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot")
	ctx, cancel := context.WithTimeout(ctx, o.converge*3+o.window+time.Duration(o.applies)*(o.converge+5*time.Second))
	defer cancel()
	qemu := exec.CommandContext(ctx, k.qemu[0], args...)
	qemu.WaitDelay = 5 * time.Second
	logPath := filepath.Join(root, "bin", "kernels", "logs", "footprint-"+name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return f, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return f, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "# %s\n", strings.Join(qemu.Args, " "))
	qemu.Stderr = logFile
	out, err := qemu.StdoutPipe()
	if err != nil {
		return f, err
	}
	if err := qemu.Start(); err != nil {
		return f, fmt.Errorf("starting %s: %w", k.qemu[0], err)
	}
	var result []byte
	sc := bufio.NewScanner(io.TeeReader(out, logFile))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), vmMarker); ok {
			result = []byte(strings.TrimSpace(after))
		}
	}
	werr := qemu.Wait()
	if result == nil {
		return f, fmt.Errorf("%s: no measurement (qemu: %v; console in %s)", name, werr, logPath)
	}
	var r struct {
		footprint
		Error string `json:"error"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return f, fmt.Errorf("%s: %w: %s", name, err, result)
	}
	if r.Error != "" {
		return f, fmt.Errorf("%s: %s (console in %s)", name, r.Error, logPath)
	}
	r.Where = name
	return r.footprint, nil
}

// runInVM is the benchmark inside a footprint VM (vminit.sh runs it): it
// measures the agent against the API server of the VM's kubeconfig and
// prints the result, or the error, as one JSON line after vmMarker.
func runInVM(o footprintOptions) {
	f, err := func() (footprint, error) {
		cleanup, err := setupNetns()
		if err != nil {
			return footprint{}, err
		}
		defer cleanup()
		c, err := kubeconfigClient(o.kubeconfig)
		if err != nil {
			return footprint{}, err
		}
		return measureFootprint(c, o)
	}()
	r := struct {
		footprint
		Error string `json:"error,omitempty"`
	}{footprint: f}
	if err != nil {
		r.Error = err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Printf("\n%s%s\n", vmMarker, b)
}
