package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
)

// vehicleFile remembers the vehicle read from the Node, for boots without
// the API server.
const vehicleFile = "vehicle"

// resolveVehicle returns the value of label on this node's Node object (one
// GET, bounded by timeout) and remembers it in stateDir; when the API server
// cannot be reached, it returns the value remembered by an earlier start, or
// "" with the reason. A DaemonSet cannot pass a node's labels to its pods,
// so the agent reads its vehicle itself.
func resolveVehicle(ctx context.Context, stateDir, node, label string, timeout time.Duration, log logr.Logger) string {
	path := filepath.Join(stateDir, vehicleFile)
	vehicle, err := nodeLabel(ctx, node, label, timeout)
	if err == nil {
		if vehicle == "" {
			log.Info("this node has no vehicle label: what is shipped to Loki has no vehicle label", "label", label)
			return ""
		}
		if err := writeFileAtomic(path, []byte(vehicle+"\n")); err != nil {
			log.Error(err, "remembering the vehicle")
		}
		return vehicle
	}
	raw, rerr := os.ReadFile(path)
	if rerr != nil {
		log.Error(err, "reading this node's vehicle label; none remembered either", "label", label)
		return ""
	}
	vehicle = strings.TrimSpace(string(raw))
	log.Info("reading this node's vehicle label failed; using the one remembered", "vehicle", vehicle, "error", err.Error())
	return vehicle
}

func nodeLabel(ctx context.Context, node, label string, timeout time.Duration) (string, error) {
	cfg, err := config.GetConfig()
	if err != nil {
		return "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
	if err := c.Get(ctx, types.NamespacedName{Name: node}, obj); err != nil {
		return "", fmt.Errorf("getting node %s: %w", node, err)
	}
	return obj.Labels[label], nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
