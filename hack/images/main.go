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

// Command images builds the controller's and the node agent's images
// without Docker: one OCI image index each, for linux/amd64 and
// linux/arm64 (Jetson Xavier/Orin), written as OCI image-layout archives
// (`make images`):
//
//	go run ./hack/images [-o bin/images] [-registry ghcr.io/nettune] [-tag 0.1.0] [-platforms linux/amd64,linux/arm64]
//
// writes bin/images/nettune-agent.oci.tar and nettune-controller.oci.tar,
// named REGISTRY/nettune-agent:TAG (the tag defaults to the chart's
// appVersion). Import one into k3s's containerd with
// `k3s ctr images import --all-platforms FILE`, or push it with
// `skopeo copy --all oci-archive:FILE docker://REGISTRY/nettune-agent:TAG`.
//
//	go run ./hack/images -extract bin/images/nettune-agent.oci.tar -arch arm64 -out FILE
//
// writes the agent's binary for that architecture from an archive (every
// digest checked): the binary the image runs, e.g. for a VM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/hack/images/oci"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("o", "bin/images", "directory of the archives (and of the binaries, under OS-ARCH/)")
	registry := flag.String("registry", oci.ImageRegistry, "registry and path the images are named under")
	tag := flag.String("tag", "", "the images' tag (default: the chart's appVersion)")
	platformList := flag.String("platforms", "linux/amd64,linux/arm64", "platforms of the image indexes, comma-separated")
	extract := flag.String("extract", "", "instead of building, write the agent's binary for -arch from this agent image archive to -out")
	arch := flag.String("arch", "arm64", "with -extract: the architecture")
	extractOut := flag.String("out", "", "with -extract: the file to write (mode 0755)")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if *extract != "" {
		if *extractOut == "" {
			return errors.New("-extract needs -out FILE")
		}
		b, err := oci.AgentBinaryFromIndex(*extract, *arch)
		if err != nil {
			return err
		}
		return os.WriteFile(*extractOut, b, 0o755)
	}

	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("run it from the repository's root: %w", err)
	}
	if *tag == "" {
		if *tag, err = appVersion(filepath.Join(root, "charts", "nettune", "Chart.yaml")); err != nil {
			return err
		}
	}
	var platforms []oci.Platform
	for _, s := range strings.Split(*platformList, ",") {
		p, err := oci.ParsePlatform(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		platforms = append(platforms, p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, spec := range []oci.ImageSpec{oci.ControllerImage(*registry, *tag), oci.AgentImage(*registry, *tag)} {
		start := time.Now()
		archive := filepath.Join(*out, spec.Repository()+".oci.tar")
		if err := oci.BuildImageIndex(ctx, root, *out, archive, spec, platforms); err != nil {
			return err
		}
		st, err := os.Stat(archive)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s for %s (%.1f MiB, %s)\n", archive, spec.Name, *platformList, float64(st.Size())/(1<<20), time.Since(start).Round(time.Second))
	}
	return nil
}

// appVersion reads the chart's appVersion, the tag the chart pulls by
// default.
func appVersion(chart string) (string, error) {
	b, err := os.ReadFile(chart)
	if err != nil {
		return "", err
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("%s: %w", chart, err)
	}
	if c.AppVersion == "" {
		return "", fmt.Errorf("%s: no appVersion", chart)
	}
	return c.AppVersion, nil
}
