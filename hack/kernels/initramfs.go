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
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// The file types of a cpio header's mode.
const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
	modeCharDev = 0o020000
)

// mergedUsr are the top-level directories that are symbolic links into
// /usr in the image, as on Debian 12: a path under them is stored under
// /usr.
var mergedUsr = []string{"bin", "sbin", "lib", "lib64"}

// canonical is name's path in the image, without a leading slash and with
// the merged-/usr directories resolved: "/lib/x/y" -> "usr/lib/x/y".
func canonical(name string) string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	top, _, _ := strings.Cut(name, "/")
	if slices.Contains(mergedUsr, top) && name != top {
		return "usr/" + name
	}
	return name
}

// archive writes a gzip-compressed cpio archive in the "newc" format, the
// format the kernel unpacks into its initial root file system. Parent
// directories are written before the first entry below them, and a name
// written twice keeps its first content.
type archive struct {
	f     *os.File
	gz    *gzip.Writer
	w     *bufio.Writer
	ino   int
	names map[string]bool
}

func createArchive(file string, level int) (*archive, error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", file, err)
	}
	gz, err := gzip.NewWriterLevel(f, level)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("creating %s: %w", file, err)
	}
	return &archive{f: f, gz: gz, w: bufio.NewWriterSize(gz, 1<<20), ino: 1, names: map[string]bool{}}, nil
}

// header writes one entry's header and name, padded to 4 bytes.
func (a *archive) header(name string, mode, size, rdevMajor, rdevMinor int) error {
	a.ino++
	nlink := 1
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	_, err := fmt.Fprintf(a.w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%s\x00",
		a.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0, name)
	if err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	return a.pad(110 + len(name) + 1)
}

func (a *archive) pad(n int) error {
	if r := n % 4; r != 0 {
		if _, err := a.w.Write(make([]byte, 4-r)); err != nil {
			return fmt.Errorf("writing the archive: %w", err)
		}
	}
	return nil
}

// claim reports whether name is new, after writing its parent directories.
func (a *archive) claim(name string) (bool, error) {
	if a.names[name] {
		return false, nil
	}
	if dir := path.Dir(name); dir != "." {
		if err := a.dir(dir); err != nil {
			return false, err
		}
	}
	a.names[name] = true
	return true, nil
}

func (a *archive) dir(name string) error {
	name = canonical(name)
	if ok, err := a.claim(name); !ok || err != nil {
		return err
	}
	return a.header(name, modeDir|0o755, 0, 0, 0)
}

func (a *archive) symlink(name, target string) error {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if !slices.Contains(mergedUsr, name) {
		name = canonical(name)
	}
	if ok, err := a.claim(name); !ok || err != nil {
		return err
	}
	if err := a.header(name, modeSymlink|0o777, len(target), 0, 0); err != nil {
		return err
	}
	if _, err := io.WriteString(a.w, target); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	return a.pad(len(target))
}

func (a *archive) charDev(name string, major, minor int) error {
	name = canonical(name)
	if ok, err := a.claim(name); !ok || err != nil {
		return err
	}
	return a.header(name, modeCharDev|0o600, 0, major, minor)
}

// data writes b as the regular file name.
func (a *archive) data(name string, perm int, b []byte) error {
	name = canonical(name)
	if ok, err := a.claim(name); !ok || err != nil {
		return err
	}
	if err := a.header(name, modeFile|perm, len(b), 0, 0); err != nil {
		return err
	}
	if _, err := a.w.Write(b); err != nil {
		return fmt.Errorf("writing the archive: %w", err)
	}
	return a.pad(len(b))
}

// file copies the host file src (followed if a link) to name, keeping its
// permission bits.
func (a *archive) file(name, src string) error {
	name = canonical(name)
	if a.names[name] {
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("adding %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("adding %s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("adding %s: %s is not a regular file", name, src)
	}
	if _, err := a.claim(name); err != nil {
		return err
	}
	if err := a.header(name, modeFile|int(st.Mode().Perm()), int(st.Size()), 0, 0); err != nil {
		return err
	}
	if n, err := io.Copy(a.w, f); err != nil || n != st.Size() {
		return fmt.Errorf("adding %s from %s: %d of %d bytes: %w", name, src, n, st.Size(), err)
	}
	return a.pad(int(st.Size()))
}

// tree copies the host directory src (directories, regular files, symbolic
// links) to name.
func (a *archive) tree(name, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		dst := path.Join(name, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			return a.dir(dst)
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("adding %s: %w", dst, err)
			}
			return a.symlink(dst, t)
		default:
			return a.file(dst, p)
		}
	})
}

func (a *archive) close() error {
	err := a.header("TRAILER!!!", 0, 0, 0, 0)
	if err == nil {
		err = a.w.Flush()
	}
	if err == nil {
		err = a.gz.Close()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("closing %s: %w", a.f.Name(), err)
	}
	return nil
}

// sysroot is a root file system on the host holding dynamically linked
// programs and their libraries: "/" for this machine's own programs, or a
// tree unpacked from another architecture's packages.
type sysroot struct {
	dir    string // "/" or the unpacked tree
	libDir string // where the loader looks, e.g. /usr/lib/aarch64-linux-gnu (or /lib/...)
}

// find is the host path of the image path p in the root; p may be under
// /usr or not (Debian packages ship both, the image merges them).
func (r sysroot) find(p string) (string, error) {
	c := "/" + canonical(p)
	alts := []string{c}
	if rest, ok := strings.CutPrefix(c, "/usr"); ok && slices.Contains(mergedUsr, strings.Split(rest, "/")[1]) {
		alts = append(alts, rest)
	}
	for _, alt := range alts {
		hp, err := r.resolve(alt)
		if err == nil {
			return hp, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s not found in %s: %w", p, r.dir, fs.ErrNotExist)
}

// resolve follows symbolic links in the root (an absolute link target is
// taken inside the root) and returns the host path of the regular file.
func (r sysroot) resolve(p string) (string, error) {
	for range 40 {
		hp := filepath.Join(r.dir, p)
		st, err := os.Lstat(hp)
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			return hp, nil
		}
		t, err := os.Readlink(hp)
		if err != nil {
			return "", err
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		p = t
	}
	return "", fmt.Errorf("%s in %s: too many links", p, r.dir)
}

// closure finds the shared libraries the programs (image paths) need,
// transitively, and their program interpreter, and returns the host file of
// each image path: the programs themselves, every library under libDir by
// its soname, the interpreter at its own path.
func (r sysroot) closure(programs []string) (map[string]string, error) {
	type need struct{ path, by string }
	files := map[string]string{}
	var queue []need
	for _, p := range programs {
		queue = append(queue, need{path: p})
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if _, ok := files[n.path]; ok {
			continue
		}
		hp, err := r.find(n.path)
		if err != nil {
			if n.by != "" {
				return nil, fmt.Errorf("%s, needed by %s: %w", n.path, n.by, err)
			}
			return nil, err
		}
		files[n.path] = hp
		needed, interp, err := elfNeeds(hp)
		if err != nil {
			return nil, err
		}
		if interp != "" {
			queue = append(queue, need{interp, n.path})
		}
		for _, lib := range needed {
			queue = append(queue, need{path.Join(r.libDir, lib), n.path})
		}
	}
	return files, nil
}

// elfNeeds reads an ELF file's NEEDED libraries and program interpreter.
func elfNeeds(file string) ([]string, string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", file, err)
	}
	defer f.Close()
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", file, err)
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return nil, "", fmt.Errorf("reading %s: %w", file, err)
		}
		interp = strings.TrimRight(string(b), "\x00")
	}
	return needed, interp, nil
}
