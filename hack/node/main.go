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

// Command node starts a real Kubernetes node on this machine for a human
// (make node): the local control plane, containerd and a kubelet in their
// own network namespace (test/framework/testnode), with the nettune images
// built and imported. It prints how to use it and runs until interrupted, then
// tears everything down. `go run ./hack/node -clean` removes what a killed
// run left behind.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nettune/nettune/hack/images/oci"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/testnode"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		os.Exit(1)
	}
}

func run() error {
	clean := flag.Bool("clean", false, "only remove what an earlier node left behind, then exit")
	flag.Parse()
	root, err := localcp.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, ".nettune", "node")
	if *clean {
		return testnode.Cleanup(dir)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	start := time.Now()
	n, err := testnode.Start(ctx, testnode.Options{Root: root, Dir: dir, Logf: func(f string, a ...any) {
		fmt.Printf(f+"\n", a...)
	}})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("node: stopping")
		if err := n.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "node: stopping:", err)
		}
	}()
	fmt.Printf("node: Ready after %s\n", time.Since(start).Round(time.Millisecond))
	build, imp, err := n.BuildImages(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("node: images built in %s, imported in %s\n", build.Round(time.Millisecond), imp.Round(time.Millisecond))
	fmt.Printf(`
The node %[1]s is Ready. In another shell:

  export KUBECONFIG=%[2]s
  bin/kubectl get nodes -o wide
  bin/kubectl label node %[1]s nettune.io/vehicle=bench-1 nettune.io/host=node-a nettune.io/hardware=orin
  bin/helm install nettune charts/nettune -n nettune-system --create-namespace \
    --set image.tag=%[3]s --set agent.stateDir=%[4]s/agent-state
  nsenter --net=%[5]s ip route          # the node's own network namespace

Images: %[6]s/nettune-agent:%[3]s, %[6]s/nettune-controller:%[3]s and %[7]s,
built from this tree (ctr --address %[8]s -n k8s.io images ls).
Logs: %[4]s/logs. Press Ctrl-C to stop the node and remove everything;
if this process is killed, run 'go run ./hack/node -clean'.
`, testnode.NodeName, n.Kubeconfig, testnode.ImageTag, dir, testnode.NetNSPath, oci.ImageRegistry, testnode.PauseImage, n.ContainerdSocket())
	<-ctx.Done()
	return nil
}
