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

// Package controllers wires the nettune reconcilers into a manager
// (Setup, Options): the profile reconciler (controllers/profile), the node
// renderer (controllers/noderender) and the experiment reconciler
// (controllers/experiment), with the state they share (the renderer's
// findings, the agents' liveness). It decides nothing and reads nothing
// itself; its tests run the wired reconcilers against a real API server
// (suite_test.go).
//
// The RBAC markers below cover every reconciler under controllers/.
//
// +kubebuilder:rbac:groups=nettune.io,resources=nettuningprofiles,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=nettune.io,resources=nettuningexperiments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nettune.io,resources=nettuningexperiments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nettune.io,resources=nettuningexperiments/finalizers,verbs=update
// +kubebuilder:rbac:groups=nettune.io,resources=nettuningprofiles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=nettune.io,resources=nettuningprofiles/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;delete,namespace=nettune-system
// +kubebuilder:rbac:groups=nettune.io,resources=nodenettunings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=nettune.io,resources=nodenettunings/status,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;create;update,namespace=nettune-system
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=nettune-system
//
// ControllerRevisions, the leader election lease, the agents' Leases
// (their sign of life, listed by the controller) and the Secrets holding
// the analyses' credentials (read one by one at each measurement, never
// listed or watched) live in the controller's own namespace: a Role there,
// not cluster-wide. The chart renders these
// rules (config/rbac/role.yaml, copied to charts/nettune/files) with its
// release namespace in place of nettune-system.
package controllers
