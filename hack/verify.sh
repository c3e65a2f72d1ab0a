#!/usr/bin/env bash
# Regenerates every generated file and fails if the result differs from the
# tree: a hand edit of a generated file, or a source change without
# `make generate`, is caught. The tree is left exactly as it was found.
set -euo pipefail
cd "$(dirname "$0")/.."

generated=(api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml charts/nettune/crds charts/nettune/files/controller-role.yaml config/admission)
snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT
for p in "${generated[@]}"; do
  [ -e "$p" ] && mkdir -p "$snap/$(dirname "$p")" && cp -a "$p" "$snap/$p"
done

restore() {
  for p in "${generated[@]}"; do
    rm -rf "$p"
    [ -e "$snap/$p" ] && cp -a "$snap/$p" "$p"
  done
  return 0
}

status=0
make --no-print-directory generate >/dev/null
for p in "${generated[@]}"; do
  if ! diff -ruN "$snap/$p" "$p" >"$snap/.diff" 2>&1; then
    echo "verify: $p is out of date or was edited by hand; run 'make generate'" >&2
    head -n 40 "$snap/.diff" >&2
    status=1
  fi
done
restore

if ! out=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); then status=1; fi
if [ -n "$out" ]; then echo "verify: not gofmt-ed: $out" >&2; status=1; fi

# Every Go file carries the license header (hack/boilerplate.go.txt) in its
# first lines.
missing=$(for f in $(git ls-files '*.go' 2>/dev/null); do
  head -n 20 "$f" | grep -q 'Licensed under the Apache License, Version 2.0' || echo "$f"
done)
if [ -n "$missing" ]; then
  echo "verify: Go files without the license header of hack/boilerplate.go.txt:" >&2
  echo "$missing" | sed 's/^/  /' >&2
  status=1
fi

if ! go mod tidy -diff >/dev/null 2>&1; then
  echo "verify: go.mod/go.sum are not tidy; run 'go mod tidy'" >&2
  status=1
fi
if ! (cd hack/bench && go mod tidy -diff >/dev/null 2>&1); then
  echo "verify: hack/bench/go.mod/go.sum are not tidy; run 'cd hack/bench && go mod tidy'" >&2
  status=1
fi

if ! make --no-print-directory lint >"$snap/.lint" 2>&1; then
  echo "verify: golangci-lint found problems (make lint):" >&2
  tail -n 40 "$snap/.lint" >&2
  status=1
fi

[ $status -eq 0 ] && echo "verify: generated files, formatting, license headers, go.mod and lint are clean"
exit $status
