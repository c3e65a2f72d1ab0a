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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/nettune/nettune/node-agent/agent"
)

// vehicleFile remembers the vehicle read from the Node, for boots without
// the API server.
const vehicleFile = "vehicle"

// hostFile remembers the host read from the Node, for boots without the
// API server.
const hostFile = "host"

// resolveVehicle returns the value of label on this node's Node object (one
// GET, bounded by timeout) and remembers it in stateDir; when the API server
// cannot be reached, it returns the value remembered by an earlier start, or
// "" with the reason. A DaemonSet cannot pass a node's labels to its pods,
// so the agent reads its vehicle itself.
func resolveVehicle(ctx context.Context, stateDir, node, label string, timeout time.Duration, log logr.Logger) string {
	return resolveNodeLabel(ctx, filepath.Join(stateDir, vehicleFile), "vehicle", node, label, timeout, log)
}

// resolveHost is resolveVehicle for the host label (the host name inside the
// vehicle, e.g. xavier-b).
func resolveHost(ctx context.Context, stateDir, node, label string, timeout time.Duration, log logr.Logger) string {
	return resolveNodeLabel(ctx, filepath.Join(stateDir, hostFile), "host", node, label, timeout, log)
}

// resolveNodeLabel reads label from this node's Node and remembers it in
// path; what names the value in logs.
func resolveNodeLabel(ctx context.Context, path, what, node, label string, timeout time.Duration, log logr.Logger) string {
	value, err := nodeLabel(ctx, node, label, timeout)
	if err == nil {
		if value == "" {
			log.Info("this node has no "+what+" label: what is shipped to Loki has no "+what+" label", "label", label)
			return ""
		}
		if err := writeFileAtomic(path, []byte(value+"\n")); err != nil {
			log.Error(err, "remembering the "+what)
		}
		return value
	}
	raw, rerr := os.ReadFile(path)
	if rerr != nil {
		log.Error(err, "reading this node's "+what+" label; none remembered either", "label", label)
		return ""
	}
	value = strings.TrimSpace(string(raw))
	log.Info("reading this node's "+what+" label failed; using the one remembered", what, value, "error", err.Error())
	return value
}

func nodeLabel(ctx context.Context, node, label string, timeout time.Duration) (string, error) {
	cfg, err := agent.LoadConfig()
	if err != nil {
		return "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	k, err := agent.NewKube(cfg)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	labels, err := k.NodeLabels(ctx, node)
	if err != nil {
		return "", fmt.Errorf("getting node %s: %w", node, err)
	}
	return labels[label], nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
