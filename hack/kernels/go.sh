#!/bin/sh
# The VM has no Go toolchain. The tests of cmd/nettune-agent start with
# `go build -o OUT .` in that package's directory: the host built the same
# binary from the same checkout for this architecture (CGO_ENABLED=0,
# hack/kernels) and put it at /nettune/bin/nettune-agent; this copies it.
# Anything else fails.
if [ "$1" = build ] && [ "$2" = -o ] && [ "$4" = . ] && [ $# -eq 4 ] && [ "${PWD##*/}" = nettune-agent ]; then
	echo "go (hack/kernels): copying the nettune-agent built on the host to $3" >&2
	exec cp /nettune/bin/nettune-agent "$3"
fi
echo "go (hack/kernels): no Go toolchain in this VM; only 'go build -o OUT .' of cmd/nettune-agent is served" >&2
exit 1
