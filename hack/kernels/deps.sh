#!/usr/bin/env bash
# Installs the Debian packages `make test-kernels` needs on this machine, if
# missing: qemu for x86_64 and aarch64 system VMs, static busybox (its depmod
# indexes the kernels' modules; it is also the amd64 initramfs's busybox),
# and the amd64 userland copied into the initramfs (iproute2's ip,
# iptables-nft, util-linux's mount and setpriv, dash), dpkg-deb and apt-get
# (the kernels and the arm64 userland come from the Debian mirror under a
# separate apt configuration: see hack/kernels/apt.go). Nothing else.
set -euo pipefail
need=()
for f in /usr/bin/qemu-system-x86_64:qemu-system-x86 /usr/bin/qemu-system-aarch64:qemu-system-arm \
  /bin/busybox:busybox-static /usr/sbin/ip:iproute2 /usr/sbin/xtables-nft-multi:iptables \
  /usr/bin/mount:mount /usr/bin/setpriv:util-linux /usr/bin/dash:dash /usr/bin/dpkg-deb:dpkg; do
  [ -x "${f%%:*}" ] || need+=("${f##*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "kernels deps: missing Debian packages: ${need[*]} (install them as root with apt-get)" >&2
  exit 1
fi
echo "kernels deps: apt-get install ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
