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

// Package noderender is the node renderer: one reconciler keyed by Node
// that merges every profile's decision (status.assignments) with the
// revisions' contents into the node's NodeNetTuning, and reports the
// conflicts and warnings it found (Reports) for the profiles' planner to
// turn into conditions. It decides no rollout, and writes no profile: it
// writes NodeNetTunings only.
package noderender
