package testnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// imageFile is one file of an image's single layer.
type imageFile struct {
	path string // inside the image, without the leading /
	data []byte
	mode int64
}

// image is a one-layer OCI image, the equivalent of the Dockerfile's final
// stage: the static binary at /usr/local/bin/app (the agent and the
// controller), or /pause.
type image struct {
	name       string // e.g. ghcr.io/nettune/nettune-agent:node-test
	files      []imageFile
	entrypoint []string
	user       string
}

// epoch is every file's and the image's time, so that the same binaries
// make the same image digest.
var epoch = time.Unix(0, 0).UTC()

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// writeOCIArchive writes the image as an OCI image-layout tarball that
// `ctr images import` takes; the index carries the image name in the
// io.containerd.image.name annotation.
func writeOCIArchive(path string, img image) error {
	// The layer: directories first, then the files.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for _, f := range img.files {
		for d := parentDirs(f.path); len(d) > 0; d = d[1:] {
			if dirs[d[0]] {
				continue
			}
			dirs[d[0]] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[0] + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.path, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if err != nil {
		return err
	}
	if _, err := zw.Write(layer.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"created":      epoch.Format(time.RFC3339),
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": img.entrypoint,
			"User":       img.user,
			"Env":        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer.Bytes())}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
		"layers": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(gz.Bytes()), "size": gz.Len(),
		}},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json",
			"digest":    digest(manifest),
			"size":      len(manifest),
			"platform":  map[string]string{"architecture": "amd64", "os": "linux"},
			"annotations": map[string]string{
				"io.containerd.image.name":          img.name,
				"org.opencontainers.image.ref.name": img.name,
			},
		}},
	})
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	aw := tar.NewWriter(out)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + digest(config)[7:], config},
		{"blobs/sha256/" + digest(gz.Bytes())[7:], gz.Bytes()},
		{"blobs/sha256/" + digest(manifest)[7:], manifest},
	}
	for _, e := range entries {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := aw.Write(e.data); err != nil {
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

func (img image) String() string { return fmt.Sprintf("%s (%d files)", img.name, len(img.files)) }

// Images built by BuildImages: the chart's default registry and
// repositories with this tag, so that the chart takes them with
// image.tag=ImageTag and IfNotPresent never pulls.
const (
	ImageRegistry = "ghcr.io/nettune"
	ImageTag      = "node-test"
)

// BuildImages builds the agent, the controller and the pause image from
// source the way the Dockerfile does (static, CGO off, -trimpath, -s -w),
// writes them as OCI archives and imports them into the node's containerd.
// It returns how long the build and the import took.
func (n *Node) BuildImages(ctx context.Context) (build, imp time.Duration, err error) {
	start := time.Now()
	dir := n.Path("images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	bins := map[string]string{
		"nettune-agent":      "./cmd/nettune-agent",
		"nettune-controller": "./cmd/nettune-controller",
		"pause":              "./internal/testnode/pause",
	}
	for name, pkg := range bins {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = n.Root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, 0, fmt.Errorf("go build %s: %w: %s", pkg, err, out)
		}
	}
	var archives []string
	for _, img := range []struct {
		name, bin, path string
		entry           []string
		user            string
	}{
		{ImageRegistry + "/nettune-agent:" + ImageTag, "nettune-agent", "usr/local/bin/app", []string{"/usr/local/bin/app"}, "0"},
		{ImageRegistry + "/nettune-controller:" + ImageTag, "nettune-controller", "usr/local/bin/app", []string{"/usr/local/bin/app"}, "65532"},
		{PauseImage, "pause", "pause", []string{"/pause"}, "65535"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, img.bin))
		if err != nil {
			return 0, 0, err
		}
		archive := filepath.Join(dir, img.bin+".oci.tar")
		files := []imageFile{
			{path: img.path, data: data, mode: 0o755},
			// Of what distroless/static adds, the users.
			{path: "etc/passwd", data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), mode: 0o644},
			{path: "etc/group", data: []byte("root:x:0:\nnonroot:x:65532:\n"), mode: 0o644},
		}
		if err := writeOCIArchive(archive, image{name: img.name, files: files, entrypoint: img.entry, user: img.user}); err != nil {
			return 0, 0, fmt.Errorf("writing %s: %w", archive, err)
		}
		archives = append(archives, archive)
	}
	build = time.Since(start)
	start = time.Now()
	for _, a := range archives {
		if _, err := n.Ctr("images", "import", a); err != nil {
			return build, 0, err
		}
	}
	return build, time.Since(start), nil
}
