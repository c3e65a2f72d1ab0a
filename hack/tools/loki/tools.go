//go:build tools

// Package tools pins Loki for `make tools`.
package tools

import _ "github.com/grafana/loki/v3/cmd/loki"
