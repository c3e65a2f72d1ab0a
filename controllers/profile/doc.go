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

// Package profile is the NetTuningProfile reconciler. It runs one rollout
// round per reconcile (controllers/internal/round: the profile's
// revisions, the planner, the analyses' measurements) on what it observes
// (the fleet from the cache, the agents' liveness, the node renderer's
// findings, the vehicles' kernels), and applies the decision: it writes the
// profile's status as the planner computed it, all of it, in one patch,
// and announces the events and metrics of the round. It decides nothing
// itself, and never writes a NodeNetTuning (the node renderer does).
package profile
