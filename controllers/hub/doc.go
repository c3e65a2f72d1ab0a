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

// Package hub is the NetTuningProfile reconciler of a nettune hub on Open
// Cluster Management (docs/hub.md). It gathers the vehicles of the managed
// clusters a profile selects from the status feedback of one ManifestWork
// per cluster, runs the same rollout round as a cluster's controller
// (controllers/internal/round: the planner and the judge) over all of them
// as one fleet, and applies the decision: one ManifestWork per cluster
// carrying the profile's copy with the cluster's share of the decision
// (spec.hubAssignment) and the revisions it names, and the profile's
// status as the planner computed it (status.clusters included), in one
// patch. Each cluster's own controller and agents apply it as they apply
// any profile.
package hub
