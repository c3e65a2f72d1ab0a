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

// Package fleetmodel is the one model of a profile's fleet, shared by the
// controller, the kubectl plugin and the simulations: which nodes a profile
// selects and how they group into vehicles, what each node's agent reports,
// what each vehicle looks like to the planner, the plugin's commands as
// annotations, and revision names. It is pure (no client, no metrics), so
// importing it registers nothing.
package fleetmodel
