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

// Package revision is the one home of a profile revision: its content (the
// profile's spec without the rollout), its name ("<profile>-<hash>"), the
// content hash (also of a rendered NodeNetTuning spec), and its storage as
// an apps/v1 ControllerRevision in the controller's namespace (Ensure,
// Prune, Read). It decides no rollout: which revisions to keep is the
// planner's (status.revisions).
package revision
