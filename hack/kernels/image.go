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
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nettune/nettune/hack/images/oci"
)

// The VM's /init and the stand-in for `go build` (see goShim).
var (
	//go:embed init.sh
	initScript []byte
	//go:embed go.sh
	goShim []byte
)

// programs are the userland the tests call, as image paths: busybox (the
// init's shell and every small tool), the real iproute2 `ip` (nettest calls
// /usr/sbin/ip), iptables-nft (the guard-counter and probe tests drop
// packets with it), util-linux's mount and setpriv (the least-privilege test
// calls /usr/bin/...) and dash as /bin/sh (busybox's shell would run its own
// mount and setpriv applets instead of those).
var programs = []string{"/usr/bin/busybox", "/usr/sbin/ip", "/usr/sbin/xtables-nft-multi", "/usr/bin/mount", "/usr/bin/setpriv", "/usr/bin/dash"}

// iptablesLinks are the names xtables-nft-multi answers to.
var iptablesLinks = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore",
	"iptables-nft", "iptables-nft-save", "iptables-nft-restore", "ip6tables-nft", "ip6tables-nft-save", "ip6tables-nft-restore"}

// moduleDirs are the parts of the kernel package's lib/modules/<release>
// the initramfs holds: the network stack, netfilter, qdiscs, the diag
// modules, the libraries and crypto they use, and veth.
var moduleDirs = []string{"kernel/net", "kernel/lib", "kernel/crypto", "kernel/drivers/net/veth.ko",
	"modules.builtin", "modules.builtin.modinfo", "modules.order"}

// etcFiles come from this machine (text, the same on every architecture).
var etcFiles = []string{"/etc/protocols", "/etc/services"}

// userland is one architecture's programs and libraries: image path ->
// host file.
type userland map[string]string

// findUserland lists the programs, the xtables plugins and every library
// they need in root.
func findUserland(root sysroot) (userland, error) {
	plugins, err := root.find(path.Join(root.libDir, "xtables"))
	if err != nil {
		return nil, fmt.Errorf("iptables plugins: %w", err)
	}
	entries, err := os.ReadDir(plugins)
	if err != nil {
		return nil, fmt.Errorf("iptables plugins: %w", err)
	}
	progs := slices.Clone(programs)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".so") {
			progs = append(progs, path.Join(root.libDir, "xtables", e.Name()))
		}
	}
	files, err := root.closure(progs)
	if err != nil {
		return nil, err
	}
	return userland(files), nil
}

// hostPackages are the Debian packages that own the image paths on this
// machine (by the path with or without /usr, as dpkg recorded it), without
// their architecture.
func hostPackages(ctx context.Context, u userland) ([]string, error) {
	var args []string
	for p := range u {
		c := "/" + canonical(p)
		args = append(args, c, strings.TrimPrefix(c, "/usr"))
	}
	slices.Sort(args)
	// dpkg -S exits 1 when one of the names is not found: every path is
	// asked twice, and the owners are checked below.
	out, _ := exec.CommandContext(ctx, "dpkg", append([]string{"-S"}, args...)...).Output()
	owned := map[string]bool{}
	pkgs := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		owners, file, ok := strings.Cut(sc.Text(), ": ")
		if !ok || strings.HasPrefix(owners, "diversion ") {
			continue
		}
		owned["/"+canonical(file)] = true
		for _, o := range strings.Split(owners, ", ") {
			name, _, _ := strings.Cut(o, ":")
			pkgs[name] = true
		}
	}
	for p := range u {
		if !owned["/"+canonical(p)] {
			return nil, fmt.Errorf("dpkg -S: no package owns %s", p)
		}
	}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// key hashes the strings and the files' contents (a cache key).
func key(parts []string, files ...string) (string, error) {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			return "", fmt.Errorf("hashing: %w", err)
		}
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("hashing %s: %w", f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// selfKey hashes this program, so archives it wrote before a change of its
// code are not reused.
func selfKey() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this program: %w", err)
	}
	return key(nil, exe)
}

// cachedArchive returns dir/prefix-<key>.cpio.gz, written by write unless
// it exists; older archives of the same prefix are removed. It reports
// whether the archive was written now.
func cachedArchive(dir, prefix, k string, level int, write func(a *archive) error) (string, bool, error) {
	file := filepath.Join(dir, prefix+"-"+k+".cpio.gz")
	if _, err := os.Stat(file); err == nil {
		return file, false, nil
	}
	old, err := filepath.Glob(filepath.Join(dir, prefix+"-*.cpio.gz"))
	if err != nil {
		return "", false, fmt.Errorf("archive %s: %w", file, err)
	}
	for _, o := range old {
		if err := os.Remove(o); err != nil {
			return "", false, fmt.Errorf("removing the stale %s: %w", o, err)
		}
	}
	tmp := file + ".tmp"
	a, err := createArchive(tmp, level)
	if err != nil {
		return "", false, err
	}
	if err := write(a); err != nil {
		_ = a.close()
		_ = os.Remove(tmp)
		return "", false, err
	}
	if err := a.close(); err != nil {
		return "", false, err
	}
	if err := os.Rename(tmp, file); err != nil {
		return "", false, fmt.Errorf("archive %s: %w", file, err)
	}
	return file, true, nil
}

// stageModules copies the selected modules of the unpacked kernel package
// into stage/lib/modules/<release> (hard links where possible) and indexes
// them with busybox depmod, as the VM's busybox modprobe expects.
func stageModules(ctx context.Context, pkg, stage, release string) error {
	if err := os.RemoveAll(stage); err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	src := filepath.Join(pkg, "lib", "modules", release)
	dst := filepath.Join(stage, "lib", "modules", release)
	for _, m := range moduleDirs {
		err := filepath.WalkDir(filepath.Join(src, m), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			to := filepath.Join(dst, rel)
			if d.IsDir() {
				return os.MkdirAll(to, 0o755)
			}
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				return err
			}
			if os.Link(p, to) == nil {
				return nil
			}
			return copyFile(p, to)
		})
		if err != nil {
			return fmt.Errorf("modules %s: %w", m, err)
		}
	}
	if out, err := exec.CommandContext(ctx, "/bin/busybox", "depmod", "-b", stage, release).CombinedOutput(); err != nil {
		return fmt.Errorf("busybox depmod -b %s %s: %w\n%s", stage, release, err, out)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeBase writes what does not change between runs: the file system's
// skeleton, the userland and the kernel's modules.
func writeBase(a *archive, u userland, stage, release string) error {
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "root", "etc", "usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "usr/local/bin"} {
		if err := a.dir(d); err != nil {
			return err
		}
	}
	for _, top := range mergedUsr {
		if err := a.symlink(top, "usr/"+top); err != nil {
			return err
		}
	}
	if err := a.symlink("var/run", "../run"); err != nil {
		return err
	}
	if err := a.charDev("dev/console", 5, 1); err != nil {
		return err
	}
	names := make([]string, 0, len(u))
	for p := range u {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		if err := a.file(p, u[p]); err != nil {
			return err
		}
	}
	if err := a.symlink("usr/bin/sh", "dash"); err != nil {
		return err
	}
	for _, l := range iptablesLinks {
		if err := a.symlink("usr/sbin/"+l, "xtables-nft-multi"); err != nil {
			return err
		}
	}
	for _, f := range etcFiles {
		if err := a.file(f, f); err != nil {
			return err
		}
	}
	for f, content := range map[string]string{
		"etc/hosts":  "127.0.0.1 localhost\n::1 localhost\n",
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	} {
		if err := a.data(f, 0o644, []byte(content)); err != nil {
			return err
		}
	}
	return a.tree("lib/modules/"+release, filepath.Join(stage, "lib", "modules", release))
}

// suite is one package's test binary and the tests it runs in the VM.
type suite struct {
	pkg  string // the package's directory in the module
	run  string // -test.run, when not every test runs
	skip string // -test.skip
}

func (s suite) binary() string { return path.Base(s.pkg) + ".test" }

// suitesFile is what /init reads: one line per suite, "<package dir>
// <binary> <arguments...>".
func suitesFile(suites []suite, testTimeout string) []byte {
	var b strings.Builder
	for _, s := range suites {
		fmt.Fprintf(&b, "%s %s -test.v -test.timeout=%s", s.pkg, s.binary(), testTimeout)
		if s.run != "" {
			fmt.Fprintf(&b, " -test.run=%s", s.run)
		}
		if s.skip != "" {
			fmt.Fprintf(&b, " -test.skip=%s", s.skip)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// buildTests builds every suite's test binary and the nettune-agent binary
// (static, for arch) into dir.
func buildTests(ctx context.Context, goBin, dir, arch string, suites []suite) error {
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("GOARCH=%s %s %s: %w\n%s", arch, goBin, strings.Join(args, " "), err, out)
		}
		return nil
	}
	for _, s := range suites {
		if err := run("test", "-c", "-ldflags=-s -w", "-o", filepath.Join(dir, s.binary()), "./"+s.pkg); err != nil {
			return err
		}
	}
	// The agent the VM runs is the one of its image: built into the agent's
	// OCI image index by the code that builds the chart's images (a
	// one-platform index: its manifest, config, layer and binary are those
	// of that platform in `make images`' two-platform index), then read
	// back out of it.
	archive := filepath.Join(dir, "nettune-agent.oci.tar")
	spec := oci.AgentImage(oci.ImageRegistry, "kernels")
	if err := oci.BuildImageIndex(ctx, ".", dir, archive, spec, []oci.Platform{{Architecture: arch, OS: "linux"}}); err != nil {
		return fmt.Errorf("the agent's image for %s: %w", arch, err)
	}
	bin, err := oci.AgentBinaryFromIndex(archive, arch)
	if err != nil {
		return fmt.Errorf("the agent from its %s image: %w", arch, err)
	}
	return os.WriteFile(filepath.Join(dir, "nettune-agent"), bin, 0o755)
}

// writeRoot writes the repository root as the tests find it, by its go.mod
// and api/v1alpha1; /nettune stands for the root (the test binaries run in
// /nettune/<package dir>).
func writeRoot(a *archive) error {
	if err := a.data("nettune/go.mod", 0o644, []byte("// The repository root the tests look for (hack/kernels).\nmodule github.com/nettune/nettune\n")); err != nil {
		return err
	}
	return a.dir("nettune/api/v1alpha1")
}

// writeTests writes what changes with the code: /init, the suites and
// their binaries (each in /nettune/<package dir>, where it runs), the agent
// binary and the go stand-in.
func writeTests(a *archive, dir string, suites []suite, suitesList []byte) error {
	if err := a.data("init", 0o755, initScript); err != nil {
		return err
	}
	if err := a.data("usr/local/bin/go", 0o755, goShim); err != nil {
		return err
	}
	if err := a.data("nettune/suites", 0o644, suitesList); err != nil {
		return err
	}
	for _, s := range suites {
		if err := a.file(path.Join("nettune", s.pkg, s.binary()), filepath.Join(dir, s.binary())); err != nil {
			return err
		}
	}
	return a.file("nettune/bin/nettune-agent", filepath.Join(dir, "nettune-agent"))
}

// concat writes the archives one after the other into file: the kernel
// unpacks concatenated cpio archives in turn.
func concat(file string, parts ...string) error {
	out, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("initrd: %w", err)
	}
	for _, p := range parts {
		in, err := os.Open(p)
		if err != nil {
			out.Close()
			return fmt.Errorf("initrd: %w", err)
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			out.Close()
			return fmt.Errorf("initrd %s: %w", file, err)
		}
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("initrd: %w", err)
	}
	return nil
}

// gzip levels: the base archive is written once, the tests' often.
const (
	baseLevel  = gzip.DefaultCompression
	testsLevel = gzip.BestSpeed
)
