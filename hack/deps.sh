#!/usr/bin/env bash
# Installs the Debian packages the tests use, if missing: iproute2 (network
# namespaces), iptables and ethtool (the agent's tests), prometheus (a real
# Prometheus 2.42 for the analysis tests), git and make (the build); the real
# node of test/node: containerd (with ctr), runc, the CNI plugins (bridge,
# host-local, portmap, loopback in /usr/lib/cni) and nsenter (util-linux);
# nginx-light and apache2-utils: the TLS and basic-auth gateway in front of
# Loki in the judge's tests.
#
# `hack/deps.sh demo` installs only what `make demo` runs: iproute2,
# iptables and prometheus.
set -euo pipefail
cmds=(ip:iproute2 tc:iproute2 iptables:iptables prometheus:prometheus git:git make:make)
if [ "${1:-}" != demo ]; then
  cmds+=(ethtool:ethtool containerd:containerd ctr:containerd runc:runc nsenter:util-linux)
  # The judge's tests put Loki and Prometheus behind what a user's stack has:
  # a TLS gateway with basic auth (nginx), bcrypt password files (htpasswd).
  cmds+=(nginx:nginx-light htpasswd:apache2-utils)
fi
# NETTUNE_DEPS_AS_MISSING="pkg ..." takes those packages for missing (test/deps
# runs the install path with it on a machine that has them).
need=(${NETTUNE_DEPS_AS_MISSING:-})
for cmd in "${cmds[@]}"; do
  # nginx is in /usr/sbin, which a user's PATH may lack.
  command -v "${cmd%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${cmd%%:*}" ] || need+=("${cmd##*:}")
done
if [ "${1:-}" != demo ] && [ ! -x /usr/lib/cni/bridge ]; then
  need+=(containernetworking-plugins)
fi
[ ${#need[@]} -eq 0 ] && exit 0
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: missing Debian packages: ${need[*]} (install them as root with apt-get)" >&2
  exit 1
fi
# Whether nginx was there before: only a daemon this run installed is stopped.
nginx_was_installed=false
[ -x /usr/sbin/nginx ] && nginx_was_installed=true
echo "deps: apt-get install ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The prometheus package just installed may have started its daemon on :9090
# (the tests start their own): stop it through the package's own service,
# which stops only the process it started. A prometheus the user runs is
# never touched, and nothing is stopped when the package was already there.
if printf '%s\n' "${need[@]}" | grep -qx prometheus; then
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl stop prometheus
  elif [ -x /etc/init.d/prometheus ]; then
    /etc/init.d/prometheus stop >/dev/null 2>&1 || true
  fi
fi
# Likewise nginx-light (through the nginx package) may have started the
# system's nginx on :80 (the tests start their own nginx on free ports):
# stop it through the package's service, only when nginx was just installed.
if printf '%s\n' "${need[@]}" | grep -qx nginx-light && [ "$nginx_was_installed" = false ]; then
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
    systemctl stop nginx
  elif [ -x /etc/init.d/nginx ]; then
    /etc/init.d/nginx stop >/dev/null 2>&1 || true
  fi
fi
