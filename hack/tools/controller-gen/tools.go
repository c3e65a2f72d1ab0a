//go:build tools

// Package tools pins controller-gen for `make tools`.
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
