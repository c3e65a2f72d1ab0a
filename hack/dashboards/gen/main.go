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

// Command gen writes the chart's Grafana dashboards
// (charts/nettune/dashboards/*.json) from hack/dashboards:
//
//	go run ./hack/dashboards/gen
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/nettune/nettune/hack/dashboards"
	"github.com/nettune/nettune/internal/localcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dashboards:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := localcp.RepoRoot()
	if err != nil {
		return err
	}
	files, err := dashboards.Files()
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if err := os.MkdirAll(filepath.Join(root, dashboards.Dir), 0o755); err != nil {
		return err
	}
	for _, p := range paths {
		if err := os.WriteFile(filepath.Join(root, p), files[p], 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", p)
	}
	return nil
}
