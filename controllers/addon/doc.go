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

// Package addon installs nettune's cluster part (the chart in charts/) on
// the managed clusters of an Open Cluster Management hub as an add-on
// (docs/hub-addon.md): Manager keeps the ClusterManagementAddOn "nettune"
// and writes, for every ManagedClusterAddOn of that name, the chart
// rendered for its cluster as the ManifestWork addon-nettune-deploy-0,
// rolling a new chart version out by the install strategy's rollout
// strategy (Plan, pure); Lease is the health the cluster's controller
// reports (OCM's lease-based add-on health check).
package addon
