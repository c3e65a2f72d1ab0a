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

// Package charts holds nettune's Helm chart (charts/nettune) inside the
// binary: the hub's add-on manager renders it for every managed cluster
// (controllers/addon, docs/hub-addon.md).
package charts

import "embed"

// FS holds the chart's files under "nettune/".
//
//go:embed all:nettune
var FS embed.FS

// Dir is the chart's directory in FS.
const Dir = "nettune"
