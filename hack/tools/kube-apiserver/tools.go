//go:build tools

// Package tools pins kube-apiserver, kubectl and the node's kubelet,
// kube-controller-manager and kube-scheduler for `make tools`: one
// k8s.io/kubernetes version, one build cache.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"

import _ "k8s.io/kubernetes/cmd/kubectl"

import _ "k8s.io/kubernetes/cmd/kubelet"

import _ "k8s.io/kubernetes/cmd/kube-controller-manager"

import _ "k8s.io/kubernetes/cmd/kube-scheduler"
