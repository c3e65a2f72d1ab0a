//go:build tools

// Package tools pins golangci-lint for `make lint` (hack/tools/golangci-lint/go.mod).
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
