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

package oci

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAgentImageIndex builds the agent's image for linux/amd64 and
// linux/arm64 from this tree and reads the archive back the way a
// registry client does: index.json names one image index listing both
// platforms; each platform's manifest points to a config of that
// architecture and a layer holding /usr/local/bin/app, an ELF binary of
// that machine, identical to the one built; every blob is named by the
// digest of its content, and every descriptor's digest and size are its
// blob's. Writing the same binaries again makes the same archive, byte for
// byte, and a corrupted blob is refused.
func TestAgentImageIndex(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	spec := AgentImage("registry.example.com/fleet", "1.2.3")
	archive := filepath.Join(dir, "nettune-agent.oci.tar")
	start := time.Now()
	if err := BuildImageIndex(ctx, root, dir, archive, spec, FleetPlatforms); err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %s", time.Since(start).Round(time.Millisecond))

	a, err := readOCIArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(a["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout: %s", got)
	}
	unused := map[string]bool{}
	for name, b := range a {
		if hex, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			unused[name] = true
			if digest(b) != "sha256:"+hex {
				t.Errorf("%s holds content of digest %s", name, digest(b))
			}
		}
	}
	use := func(d descriptor) {
		delete(unused, "blobs/"+strings.Replace(d.Digest, ":", "/", 1))
	}

	var top index
	if err := json.Unmarshal(a["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaTypeIndex {
		t.Fatalf("index.json: want one image index, have %+v", top.Manifests)
	}
	if got := top.Manifests[0].Annotations; got[annotationName] != "registry.example.com/fleet/nettune-agent:1.2.3" || got[annotationRef] != "1.2.3" {
		t.Errorf("index.json annotations: %v", got)
	}
	var idx index
	if err := a.blobJSON(top.Manifests[0], &idx); err != nil {
		t.Fatal(err)
	}
	use(top.Manifests[0])
	var platforms []Platform
	for _, md := range idx.Manifests {
		if md.MediaType != mediaTypeManifest || md.Platform == nil {
			t.Fatalf("image index entry %+v: want a manifest with a platform", md)
		}
		platforms = append(platforms, *md.Platform)
	}
	if !slices.Equal(platforms, FleetPlatforms) {
		t.Fatalf("the image index lists %v, want %v", platforms, FleetPlatforms)
	}

	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	layers := map[string][]byte{}
	for _, md := range idx.Manifests {
		p := *md.Platform
		var m manifest
		if err := a.blobJSON(md, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		use(md)
		var cfg imageConfig
		if err := a.blobJSON(m.Config, &cfg); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		use(m.Config)
		if m.Config.MediaType != mediaTypeConfig || cfg.Architecture != p.Architecture || cfg.OS != p.OS {
			t.Errorf("%s: config %s says %s/%s", p, m.Config.MediaType, cfg.OS, cfg.Architecture)
		}
		if !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/app"}) || cfg.Config.User != "0" {
			t.Errorf("%s: entrypoint %v, user %q", p, cfg.Config.Entrypoint, cfg.Config.User)
		}
		if len(m.Layers) != 1 || m.Layers[0].MediaType != mediaTypeLayer {
			t.Fatalf("%s: layers %+v, want one gzip layer", p, m.Layers)
		}
		use(m.Layers[0])
		gz, err := a.blob(m.Layers[0])
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		layers[p.Architecture] = gz
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		tarLayer, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.RootFS.DiffIDs, []string{digest(tarLayer)}) {
			t.Errorf("%s: diff_ids %v, the layer's is %s", p, cfg.RootFS.DiffIDs, digest(tarLayer))
		}
		app, ok, err := a.layerFile(m.Layers[0], "usr/local/bin/app")
		if err != nil || !ok {
			t.Fatalf("%s: /usr/local/bin/app in the layer: %v %v", p, ok, err)
		}
		f, err := elf.NewFile(bytes.NewReader(app))
		if err != nil {
			t.Fatalf("%s: /usr/local/bin/app: %v", p, err)
		}
		if f.Machine != machines[p.Architecture] || f.Class != elf.ELFCLASS64 {
			t.Errorf("%s: /usr/local/bin/app is %s %s", p, f.Class, f.Machine)
		}
		built, err := os.ReadFile(BinaryPath(dir, "nettune-agent", p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(app, built) {
			t.Errorf("%s: /usr/local/bin/app differs from the built binary", p)
		}
		fromIndex, err := AgentBinaryFromIndex(archive, p.Architecture)
		if err != nil || !bytes.Equal(fromIndex, built) {
			t.Errorf("AgentBinaryFromIndex(%s): %d bytes, %v; want the built binary", p.Architecture, len(fromIndex), err)
		}
	}
	if len(unused) > 0 {
		t.Errorf("blobs no descriptor points to: %v", unused)
	}
	if _, err := AgentBinaryFromIndex(archive, "riscv64"); err == nil || !strings.Contains(err.Error(), "no linux/riscv64 image") {
		t.Errorf("AgentBinaryFromIndex(riscv64): %v, want no linux/riscv64 image", err)
	}

	// Reproducible: the same binaries make the same archive. (So does the
	// same tree: the binaries are built with -trimpath and no VCS stamp.)
	var bins [][]byte
	for _, p := range FleetPlatforms {
		b, err := os.ReadFile(BinaryPath(dir, "nettune-agent", p))
		if err != nil {
			t.Fatal(err)
		}
		bins = append(bins, b)
	}
	again := filepath.Join(dir, "again.oci.tar")
	if err := writeImageIndex(again, spec, FleetPlatforms, bins); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("the same binaries made different archives")
	}

	// A byte changed in the middle of the arm64 layer is refused.
	i := bytes.Index(first, layers["arm64"])
	if i < 0 {
		t.Fatal("the arm64 layer is not in the archive as is")
	}
	first[i+len(layers["arm64"])/2] ^= 0xff
	corrupt := filepath.Join(dir, "corrupt.oci.tar")
	if err := os.WriteFile(corrupt, first, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := AgentBinaryFromIndex(corrupt, "arm64"); err == nil || !strings.Contains(err.Error(), "the descriptor says") {
		t.Errorf("AgentBinaryFromIndex of a corrupted layer: %v, want a digest mismatch", err)
	}
}
