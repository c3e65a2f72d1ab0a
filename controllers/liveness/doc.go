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

// Package liveness knows when each node's agent was last seen, by the
// controller's own clock: it lists the agents' Leases, keeps one timer for
// the whole fleet and wakes the profiles whose vehicles turned Unreachable
// or came back. It decides no rollout and writes nothing: the profile
// reconciler reads LastSeen and the planner judges.
package liveness
