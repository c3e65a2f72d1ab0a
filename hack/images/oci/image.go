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

// Package oci builds nettune's container images without Docker: the
// binary of a package of this module, built the way the Dockerfile builds it,
// in a one-layer image, written as an OCI image-layout archive holding one
// image index for several platforms (BuildImageIndex). It reads such an
// archive back (AgentBinaryFromIndex). `make images` (hack/images), the
// kernel matrix (hack/kernels), the node rig (test/framework/testnode,
// hack/node) and the agent benchmark (hack/bench/agent) use it.
package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Platform is what an image's binary is built for, with GOOS and GOARCH's
// names (which are the OCI ones).
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

func (p Platform) String() string { return p.OS + "/" + p.Architecture }

// ParsePlatform parses os/architecture, e.g. linux/arm64.
func ParsePlatform(s string) (Platform, error) {
	goos, arch, ok := strings.Cut(s, "/")
	if !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
		return Platform{}, fmt.Errorf("platform %q: want os/architecture, e.g. linux/arm64", s)
	}
	return Platform{Architecture: arch, OS: goos}, nil
}

var (
	// FleetPlatforms are the controller's and the agent's: amd64 servers
	// and the Jetson Xavier/Orin compute units (arm64).
	FleetPlatforms = []Platform{{Architecture: "amd64", OS: "linux"}, {Architecture: "arm64", OS: "linux"}}
	// HostPlatform is this machine's (the test node's pause image's).
	HostPlatform = Platform{Architecture: runtime.GOARCH, OS: "linux"}
)

// ImageSpec is a one-layer image, the equivalent of the Dockerfile's final
// stage: one static binary built from a package of this module, and of
// what distroless/static adds, the users.
type ImageSpec struct {
	// Name is the reference containerd names the image by,
	// REGISTRY/REPOSITORY:TAG.
	Name string
	// Package is the binary's Go package, e.g. ./cmd/nettune-agent.
	Package string
	// Path is the binary's path in the image, without the leading slash;
	// it is the entrypoint.
	Path string
	User string
}

// appPath is the agent's and the controller's binary in their images.
const appPath = "usr/local/bin/app"

// AgentImage is the node agent's image; it runs as uid 0 (with
// CAP_NET_ADMIN only, in the chart).
func AgentImage(registry, tag string) ImageSpec {
	return ImageSpec{Name: registry + "/nettune-agent:" + tag, Package: "./cmd/nettune-agent", Path: appPath, User: "0"}
}

// ControllerImage is the controller's image; it runs as nonroot.
func ControllerImage(registry, tag string) ImageSpec {
	return ImageSpec{Name: registry + "/nettune-controller:" + tag, Package: "./cmd/nettune-controller", Path: appPath, User: "65532"}
}

// Repository is the last element of the image's repository, without the
// registry or the tag: nettune-agent. It names the image's archive
// (Repository.oci.tar) and its binaries.
func (s ImageSpec) Repository() string {
	repo := s.Name
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return path.Base(repo)
}

func (s ImageSpec) tag() string {
	if i := strings.LastIndexByte(s.Name, ':'); i > strings.LastIndexByte(s.Name, '/') {
		return s.Name[i+1:]
	}
	return "latest"
}

// BinaryPath is where BuildImageIndex leaves a repository's binary for p
// under its work directory: workDir/linux-arm64/nettune-agent.
func BinaryPath(workDir, repository string, p Platform) string {
	return filepath.Join(workDir, p.OS+"-"+p.Architecture, repository)
}

// BuildBinary builds the package of the module at root for p the way the
// Dockerfile does: static (CGO off), -trimpath, -s -w and no VCS stamp, so
// that the same source makes the same binary.
func BuildBinary(ctx context.Context, root, pkg string, p Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w: %s", pkg, p, err, b)
	}
	return nil
}

// BuildImageIndex builds the image's binary for each platform (BuildBinary,
// into workDir/OS-ARCH/REPOSITORY) from the module at root and writes the image as an OCI
// image-layout archive: its index.json names one image index, which lists
// one manifest (a config and a layer) per platform. The same binaries make
// the same archive, byte for byte.
func BuildImageIndex(ctx context.Context, root, workDir, archive string, spec ImageSpec, platforms []Platform) error {
	bins := make([][]byte, len(platforms))
	for i, p := range platforms {
		out := BinaryPath(workDir, spec.Repository(), p)
		if err := BuildBinary(ctx, root, spec.Package, p, out); err != nil {
			return err
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		bins[i] = b
	}
	if err := writeImageIndex(archive, spec, platforms, bins); err != nil {
		return fmt.Errorf("writing %s: %w", archive, err)
	}
	return nil
}

// epoch is every file's and the image's time, so that the same binaries
// make the same image digest.
var epoch = time.Unix(0, 0).UTC()

// OCI media types and the annotations containerd and skopeo name an
// archive's image by.
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	annotationName    = "io.containerd.image.name"
	annotationRef     = "org.opencontainers.image.ref.name"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *Platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	Created      string `json:"created"`
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Entrypoint []string `json:"Entrypoint"`
		User       string   `json:"User"`
		Env        []string `json:"Env"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// blobs collects an archive's blobs in the order they are added.
type blobs struct {
	names []string
	data  map[string][]byte
}

// add stores b and returns its descriptor.
func (bs *blobs) add(mediaType string, b []byte) descriptor {
	d := digest(b)
	if bs.data[d] == nil {
		bs.names = append(bs.names, d)
		bs.data[d] = b
	}
	return descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

func (bs *blobs) addJSON(mediaType string, v any) (descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return descriptor{}, err
	}
	return bs.add(mediaType, b), nil
}

// layer is the image's only layer: the binary at spec.Path and the users,
// each with its parent directories before it.
func layer(spec ImageSpec, bin []byte) ([]byte, error) {
	files := []struct {
		path string
		data []byte
		mode int64
	}{
		{spec.Path, bin, 0o755},
		{"etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), 0o644},
		{"etc/group", []byte("root:x:0:\nnonroot:x:65532:\n"), 0o644},
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dirs := map[string]bool{}
	for _, f := range files {
		for _, d := range parentDirs(f.path) {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.path, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeImageIndex writes the image with bins[i] as platforms[i]'s binary,
// as an OCI image-layout archive that `ctr images import` and skopeo's
// oci-archive transport take: index.json holds one descriptor, of the
// image index, annotated with the image's name for containerd and its tag
// for skopeo; the image index lists the platforms' manifests.
func writeImageIndex(archive string, spec ImageSpec, platforms []Platform, bins [][]byte) error {
	bs := &blobs{data: map[string][]byte{}}
	idx := index{SchemaVersion: 2, MediaType: mediaTypeIndex}
	for i, p := range platforms {
		tarLayer, err := layer(spec, bins[i])
		if err != nil {
			return err
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		if _, err := zw.Write(tarLayer); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		cfg := imageConfig{Created: epoch.Format(time.RFC3339), Architecture: p.Architecture, OS: p.OS}
		cfg.Config.Entrypoint = []string{"/" + spec.Path}
		cfg.Config.User = spec.User
		cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		cfg.RootFS.Type = "layers"
		cfg.RootFS.DiffIDs = []string{digest(tarLayer)}
		m := manifest{SchemaVersion: 2, MediaType: mediaTypeManifest}
		if m.Config, err = bs.addJSON(mediaTypeConfig, cfg); err != nil {
			return err
		}
		m.Layers = []descriptor{bs.add(mediaTypeLayer, gz.Bytes())}
		md, err := bs.addJSON(mediaTypeManifest, m)
		if err != nil {
			return err
		}
		md.Platform = &platforms[i]
		idx.Manifests = append(idx.Manifests, md)
	}
	id, err := bs.addJSON(mediaTypeIndex, idx)
	if err != nil {
		return err
	}
	id.Annotations = map[string]string{annotationName: spec.Name, annotationRef: spec.tag()}
	top, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaTypeIndex, Manifests: []descriptor{id}})
	if err != nil {
		return err
	}

	out, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	aw := tar.NewWriter(out)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	write := func(name string, data []byte) error {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err := aw.Write(data)
		return err
	}
	if err := write("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := write("index.json", top); err != nil {
		return err
	}
	for _, d := range bs.names {
		if err := write("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), bs.data[d]); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	return out.Close()
}

// parentDirs lists the directories above a path, outermost first:
// usr/local/bin/app -> usr, usr/local, usr/local/bin.
func parentDirs(path string) []string {
	var out []string
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			out = append(out, path[:i])
		}
	}
	return out
}

// ociArchive is an OCI image-layout archive read into memory, its regular
// files by name.
type ociArchive map[string][]byte

func readOCIArchive(file string) (ociArchive, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	a := ociArchive{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return a, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if a[h.Name], err = io.ReadAll(tr); err != nil {
			return nil, fmt.Errorf("reading %s: %s: %w", file, h.Name, err)
		}
	}
}

// blob returns the blob d points to, after checking its size and digest.
func (a ociArchive) blob(d descriptor) ([]byte, error) {
	name := "blobs/" + strings.Replace(d.Digest, ":", "/", 1)
	b, ok := a[name]
	if !ok {
		return nil, fmt.Errorf("%s: no %s", d.MediaType, name)
	}
	if int64(len(b)) != d.Size || digest(b) != d.Digest {
		return nil, fmt.Errorf("%s: %d bytes of digest %s, the descriptor says %d bytes of %s", name, len(b), digest(b), d.Size, d.Digest)
	}
	return b, nil
}

// blobJSON decodes the blob d points to into v, after checking that its
// media type is the descriptor's.
func (a ociArchive) blobJSON(d descriptor, v any) error {
	b, err := a.blob(d)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s %s: %w", d.MediaType, d.Digest, err)
	}
	var mt struct {
		MediaType string `json:"mediaType"`
	}
	if err := json.Unmarshal(b, &mt); err != nil {
		return err
	}
	if mt.MediaType != "" && mt.MediaType != d.MediaType {
		return fmt.Errorf("%s: media type %s, the descriptor says %s", d.Digest, mt.MediaType, d.MediaType)
	}
	return nil
}

// imageIndex returns the image index index.json names.
func (a ociArchive) imageIndex() (index, error) {
	var top, idx index
	if err := json.Unmarshal(a["index.json"], &top); err != nil {
		return idx, fmt.Errorf("index.json: %w", err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaTypeIndex {
		return idx, fmt.Errorf("index.json: want one image index, have %d descriptors", len(top.Manifests))
	}
	return idx, a.blobJSON(top.Manifests[0], &idx)
}

// file returns the file at name (without the leading slash) in the image
// of platform p, from its layers, after checking the manifest's config
// says p.
func (a ociArchive) file(p Platform, name string) ([]byte, error) {
	idx, err := a.imageIndex()
	if err != nil {
		return nil, err
	}
	for _, md := range idx.Manifests {
		if md.Platform == nil || *md.Platform != p {
			continue
		}
		var m manifest
		if err := a.blobJSON(md, &m); err != nil {
			return nil, err
		}
		var cfg imageConfig
		if err := a.blobJSON(m.Config, &cfg); err != nil {
			return nil, err
		}
		if got := (Platform{Architecture: cfg.Architecture, OS: cfg.OS}); got != p {
			return nil, fmt.Errorf("the manifest for %s has a config for %s", p, got)
		}
		for i := len(m.Layers) - 1; i >= 0; i-- {
			b, ok, err := a.layerFile(m.Layers[i], name)
			if err != nil || ok {
				return b, err
			}
		}
		return nil, fmt.Errorf("%s image: no /%s", p, name)
	}
	return nil, fmt.Errorf("no %s image in the index", p)
}

// layerFile returns the regular file name from a gzip-compressed layer.
func (a ociArchive) layerFile(d descriptor, name string) ([]byte, bool, error) {
	b, err := a.blob(d)
	if err != nil {
		return nil, false, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, false, fmt.Errorf("layer %s: %w", d.Digest, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("layer %s: %w", d.Digest, err)
		}
		if strings.TrimPrefix(path.Clean("/"+h.Name), "/") == name && h.Typeflag == tar.TypeReg {
			f, err := io.ReadAll(tr)
			if err != nil {
				return nil, false, fmt.Errorf("layer %s: %s: %w", d.Digest, name, err)
			}
			return f, true, nil
		}
	}
}

// AgentBinaryFromIndex returns the agent's binary (/usr/local/bin/app) for
// linux/arch from an agent image archive BuildImageIndex wrote (make images:
// bin/images/nettune-agent.oci.tar), checking every digest on the way.
func AgentBinaryFromIndex(archive, arch string) ([]byte, error) {
	a, err := readOCIArchive(archive)
	if err != nil {
		return nil, err
	}
	b, err := a.file(Platform{Architecture: arch, OS: "linux"}, appPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	return b, nil
}

// ImageRegistry is the chart's default registry: images named under it are
// the chart's own (the image's repository and tag aside).
const ImageRegistry = "ghcr.io/nettune"
