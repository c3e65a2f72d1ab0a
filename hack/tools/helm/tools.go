//go:build tools

// Package tools pins helm, built from the Go module proxy, for `helm lint`
// and `helm template` of charts/nettune in `make test`.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
