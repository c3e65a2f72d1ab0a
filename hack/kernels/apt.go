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
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// debianKeyring signs both suites (Debian's archive keyring holds the
// bullseye and bookworm keys).
const debianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// suites are the Debian releases the kernels and the arm64 userland come
// from.
var suites = []string{"bullseye", "bookworm"}

// apt is an apt configuration of its own for one architecture, under dir:
// its sources.list (the mirror this machine uses, the bullseye and bookworm
// suites), its package lists and its cache. The machine's sources, lists
// and dpkg architectures are never touched: everything goes through -o
// options, and only `apt-get update` (into dir), `apt-cache` and `apt-get
// download` run.
type apt struct {
	arch   string
	dir    string // bin/kernels/apt/<arch>
	debs   string // bin/kernels/debs/<arch>: the downloaded packages
	mirror string
}

func newApt(root, arch, mirror string) (*apt, error) {
	a := &apt{arch: arch, dir: filepath.Join(root, "apt", arch), debs: filepath.Join(root, "debs", arch), mirror: mirror}
	for _, d := range []string{filepath.Join(a.dir, "lists", "partial"), filepath.Join(a.dir, "cache", "archives", "partial"), a.debs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("apt %s: %w", arch, err)
		}
	}
	var b strings.Builder
	for _, s := range suites {
		fmt.Fprintf(&b, "deb [arch=%s signed-by=%s] %s %s main\n", arch, debianKeyring, mirror, s)
	}
	if err := os.WriteFile(filepath.Join(a.dir, "sources.list"), []byte(b.String()), 0o644); err != nil {
		return nil, fmt.Errorf("apt %s: %w", arch, err)
	}
	return a, nil
}

func (a *apt) options() []string {
	o := []string{
		"-o", "Dir::Etc::sourcelist=" + filepath.Join(a.dir, "sources.list"),
		"-o", "Dir::Etc::sourceparts=-",
		"-o", "Dir::State::Lists=" + filepath.Join(a.dir, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(a.dir, "cache"),
		"-o", "APT::Architecture=" + a.arch,
		"-o", "APT::Architectures=" + a.arch,
		"-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
		"-o", "Acquire::Languages=none",
	}
	if os.Geteuid() == 0 {
		// Downloads land in bin/, which apt's unprivileged _apt user may
		// not be allowed to write.
		o = append(o, "-o", "APT::Sandbox::User=root")
	}
	return o
}

func (a *apt) run(ctx context.Context, dir, tool string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, tool, append(a.options(), args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s (%s): %w\n%s", tool, strings.Join(args, " "), a.arch, err, out)
	}
	return string(out), nil
}

// update fetches the package lists unless they are cached (or refresh).
func (a *apt) update(ctx context.Context, refresh bool) error {
	lists, err := filepath.Glob(filepath.Join(a.dir, "lists", "*_Packages*"))
	if err != nil {
		return fmt.Errorf("apt %s: %w", a.arch, err)
	}
	if len(lists) >= len(suites) && !refresh {
		return nil
	}
	_, err = a.run(ctx, a.dir, "apt-get", "update", "-q")
	return err
}

var dependsRe = regexp.MustCompile(`(?m)^Depends: ([a-z0-9][a-z0-9.+-]*)`)

// firstDependency is the first package a (meta)package depends on, e.g.
// linux-image-amd64/bookworm -> linux-image-6.1.0-50-amd64.
func (a *apt) firstDependency(ctx context.Context, pkg string) (string, error) {
	out, err := a.run(ctx, a.dir, "apt-cache", "show", "--no-all-versions", pkg)
	if err != nil {
		return "", err
	}
	m := dependsRe.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("apt-cache show %s (%s): no Depends line", pkg, a.arch)
	}
	return m[1], nil
}

// cached is the downloaded .deb of pkg, or "".
func (a *apt) cached(pkg string) (string, error) {
	m, err := filepath.Glob(filepath.Join(a.debs, pkg+"_*.deb"))
	if err != nil || len(m) == 0 {
		return "", err
	}
	slices.Sort(m)
	return m[len(m)-1], nil
}

// download fetches the packages not yet in the cache with `apt-get
// download` and returns every package's .deb, in the order given.
func (a *apt) download(ctx context.Context, pkgs []string) ([]string, error) {
	var missing []string
	for _, p := range pkgs {
		if f, err := a.cached(p); err != nil {
			return nil, err
		} else if f == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		if _, err := a.run(ctx, a.debs, "apt-get", append([]string{"download", "-q"}, missing...)...); err != nil {
			return nil, err
		}
	}
	debs := make([]string, len(pkgs))
	for i, p := range pkgs {
		f, err := a.cached(p)
		if err != nil {
			return nil, err
		}
		if f == "" {
			return nil, fmt.Errorf("apt-get download %s (%s) left no .deb in %s", p, a.arch, a.debs)
		}
		debs[i] = f
	}
	return debs, nil
}

// unpack extracts debs into dir with dpkg-deb -x, each once (a marker file
// per package remembers it).
func unpack(ctx context.Context, dir string, debs []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	for _, deb := range debs {
		marker := filepath.Join(dir, ".unpacked-"+filepath.Base(deb))
		if _, err := os.Stat(marker); err == nil {
			continue
		}
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg-deb -x %s: %w\n%s", deb, err, out)
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
	}
	return nil
}

// hostMirror is the Debian mirror this machine's apt uses for bookworm (a
// one-line or deb822 source under /etc/apt).
func hostMirror() (string, error) {
	files := []string{"/etc/apt/sources.list"}
	for _, pat := range []string{"/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			return "", fmt.Errorf("finding the apt sources: %w", err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("reading the apt sources: %w", err)
		}
		if u := bookwormURI(string(b)); u != "" {
			return u, nil
		}
	}
	return "", fmt.Errorf("no bookworm source in %s", strings.Join(files, ", "))
}

// bookwormURI finds the URI of a source with the suite "bookworm" in a
// sources.list (one-line) or .sources (deb822) text.
func bookwormURI(text string) string {
	var uris []string
	var deb822Suite bool
	flush := func() string {
		if deb822Suite && len(uris) > 0 {
			return uris[0]
		}
		uris, deb822Suite = nil, false
		return ""
	}
	sc := bufio.NewScanner(strings.NewReader(text + "\n\n"))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			if u := flush(); u != "" {
				return u
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case f[0] == "deb":
			// deb [options] URI suite components...
			rest := f[1:]
			if len(rest) > 0 && strings.HasPrefix(rest[0], "[") {
				for len(rest) > 0 && !strings.HasSuffix(rest[0], "]") {
					rest = rest[1:]
				}
				if len(rest) > 0 {
					rest = rest[1:]
				}
			}
			if len(rest) >= 2 && rest[1] == "bookworm" {
				return rest[0]
			}
		case strings.EqualFold(f[0], "URIs:"):
			uris = f[1:]
		case strings.EqualFold(f[0], "Suites:"):
			deb822Suite = slices.Contains(f[1:], "bookworm")
		}
	}
	return flush()
}
