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

// Package profile is the NetTuningProfile reconciler. It gathers what the
// planner needs (the profile, the fleet from the cache, the agents'
// liveness, the node renderer's findings, the analyses' measurements),
// runs the planner, and applies its decision: it writes the profile's
// status (as the planner computed it), its revisions, and the events and
// metrics the planner announces. It decides nothing itself, and never
// writes a NodeNetTuning (the node renderer does).
package profile
