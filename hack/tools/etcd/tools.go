//go:build tools

// Package tools pins etcd for `make tools`.
package tools

import _ "go.etcd.io/etcd/server/v3"
