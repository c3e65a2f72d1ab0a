#!/usr/bin/env bash
# Regenerates every generated file and fails if the result differs from the
# tree: a hand edit of a generated file, or a source change without
# `make generate`, is caught. The tree is left exactly as it was found.
# Then checks formatting, license headers, go.mod, that the product links no
# test code, and lint.
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

# The product links no test code: no non-test package of api/, cmd/,
# controllers/, internal/ or node-agent/ depends, directly or through other
# packages, on a package under test/ (the test rigs) or on the standard
# library's testing. Each offender is named with the chain of imports that
# leads there and the file of its first import.
mod=$(go list -m)
if ! product=$(go list ./api/... ./cmd/... ./controllers/... ./internal/... ./node-agent/...) ||
   ! go list -deps -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' $product >"$snap/.graph"; then
  echo "verify: go list failed on the product's packages" >&2
  status=1
else
  # One line per product package and test package it reaches: the package,
  # its import that leads there, and the shortest chain (breadth first).
  awk -v mod="$mod" -v roots="$(echo $product)" '
    { for (i = 2; i <= NF; i++) adj[$1] = adj[$1] " " $i }
    function istest(p) { return p == "testing" || index(p, mod "/test/") == 1 }
    function short(p) { return index(p, mod "/") == 1 ? substr(p, length(mod) + 2) : p }
    END {
      n = split(roots, r, " ")
      for (k = 1; k <= n; k++) {
        root = r[k]; split("", seen); split("", from); split("", q)
        head = 1; tail = 1; q[1] = root; seen[root] = 1
        while (head <= tail) {
          p = q[head++]
          m = split(adj[p], im, " ")
          for (j = 1; j <= m; j++) {
            d = im[j]
            if (d in seen) continue
            seen[d] = 1; from[d] = p
            if (!istest(d)) { q[++tail] = d; continue }
            chain = short(d); first = d
            for (x = p; x != root; x = from[x]) { chain = short(x) " -> " chain; first = x }
            print root, first, short(root) " -> " chain
          }
        }
      }
    }' "$snap/.graph" >"$snap/.testdeps"
  if [ -s "$snap/.testdeps" ]; then
    echo "verify: product packages link test code (test/... or testing); move what they need into internal/, or the package to test/:" >&2
    # The direct imports first, then the longer chains; at most 40 lines.
    awk '{ print gsub(/ -> /, "&", $0), $0 }' "$snap/.testdeps" | sort -n -s -k1,1 | cut -d' ' -f2- >"$snap/.sorted"
    head -n 40 "$snap/.sorted" | while read -r pkg first chain; do
      dir=$(go list -f '{{.Dir}}' "$pkg")
      rel=${dir#"$PWD"/}
      files=$(cd "$dir" && grep -l "\"$first\"" $(go list -f '{{join .GoFiles " "}}' "$pkg") | sed "s|^|$rel/|" || true)
      echo "  $chain (import of $first in $(echo $files | sed 's/ /, /g'))" >&2
    done
    lines=$(wc -l <"$snap/.sorted")
    [ "$lines" -le 40 ] || echo "  ... and $((lines - 40)) more" >&2
    status=1
  fi
fi

if ! make --no-print-directory lint >"$snap/.lint" 2>&1; then
  echo "verify: golangci-lint found problems (make lint):" >&2
  tail -n 40 "$snap/.lint" >&2
  status=1
fi

[ $status -eq 0 ] && echo "verify: generated files, formatting, license headers, go.mod, the product's imports and lint are clean"
exit $status
