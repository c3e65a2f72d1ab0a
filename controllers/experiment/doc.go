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

// Package experiment runs NetTuningExperiments. Its pure parts decide: how
// a variant patches the base profile, how vehicles are drawn into cohorts
// stratified by hardware model, how the arms are ranked against the
// control (the kubectl plugin uses these too), and Plan: from the gathered
// state (the experiment, its base profile, the nodes, the arms' profiles,
// the time) what happens next (the status, the arms' profiles to create or
// delete, the events, a measurement due, when to look again; Conclude after
// a measurement). Its Reconciler gathers, calls Plan, measures (with
// measure.Take, as a rollout round does) and applies:
// it creates and deletes the arms' NetTuningProfiles and writes the
// experiment's status; it never writes a NodeNetTuning nor a profile's
// status (the profile reconciler rolls the arms out).
package experiment
