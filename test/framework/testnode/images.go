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

package testnode

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/nettune/nettune/hack/images/oci"
)

// ImageTag is the tag of the images BuildImages builds, under the chart's
// default registry and repositories (oci.ImageRegistry), so that the chart
// takes them with image.tag=ImageTag and IfNotPresent never pulls.
const ImageTag = "node-test"

// pauseImage is the sandbox image, built for this machine only.
var pauseImage = oci.ImageSpec{Name: PauseImage, Package: "./test/framework/testnode/pause", Path: "pause", User: "65535"}

// ImageBinary is the host's build of an image's binary, e.g.
// nettune-agent, after BuildImages.
func (n *Node) ImageBinary(repository string) string {
	return oci.BinaryPath(n.Path("images"), repository, oci.HostPlatform)
}

// BuildImages builds the agent and the controller images for
// oci.FleetPlatforms and the pause image for this machine
// (oci.BuildImageIndex) and imports each into the node's containerd with all
// its platforms, as `k3s ctr images import --all-platforms` does on a
// fleet's server. It returns how long the build and the import took.
func (n *Node) BuildImages(ctx context.Context) (build, imp time.Duration, err error) {
	start := time.Now()
	dir := n.Path("images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, 0, err
	}
	var archives []string
	for _, img := range []struct {
		spec      oci.ImageSpec
		platforms []oci.Platform
	}{
		{oci.AgentImage(oci.ImageRegistry, ImageTag), oci.FleetPlatforms},
		{oci.ControllerImage(oci.ImageRegistry, ImageTag), oci.FleetPlatforms},
		{pauseImage, []oci.Platform{oci.HostPlatform}},
	} {
		archive := filepath.Join(dir, img.spec.Repository()+".oci.tar")
		if err := oci.BuildImageIndex(ctx, n.Root, dir, archive, img.spec, img.platforms); err != nil {
			return 0, 0, err
		}
		archives = append(archives, archive)
	}
	build = time.Since(start)
	start = time.Now()
	for _, a := range archives {
		if _, err := n.Ctr("images", "import", "--all-platforms", a); err != nil {
			return build, 0, err
		}
	}
	return build, time.Since(start), nil
}
