#!/usr/bin/env bash
# Builds the kubectl plugin's krew archives (linux amd64 and arm64: Xavier and
# Orin are arm64) into dist/ and writes dist/nettune.yaml from
# plugins/krew/nettune.yaml with the version and each archive's sha256.
#   hack/krew.sh [VERSION]     # default: git describe
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)}
rm -rf dist && mkdir -p dist
manifest=$(cat plugins/krew/nettune.yaml)
manifest=${manifest//VERSION/$version}
for arch in amd64 arm64; do
  stage=$(mktemp -d)
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$stage/kubectl-nettune" ./cmd/kubectl-nettune
  cp plugins/kubectl_complete-nettune LICENSE "$stage/"
  tar -C "$stage" -czf "dist/kubectl-nettune_linux_$arch.tar.gz" kubectl-nettune kubectl_complete-nettune LICENSE
  rm -rf "$stage"
  sum=$(sha256sum "dist/kubectl-nettune_linux_$arch.tar.gz" | cut -d' ' -f1)
  upper=$(echo "$arch" | tr a-z A-Z)
  manifest=${manifest//SHA256_LINUX_$upper/$sum}
  echo "dist/kubectl-nettune_linux_$arch.tar.gz sha256 $sum"
done
printf '%s\n' "$manifest" > dist/nettune.yaml
echo "dist/nettune.yaml (version $version)"
