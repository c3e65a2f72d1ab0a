#!/bin/sh
# Stands in for the k3s install script (get.k3s.io) in TestSitePlay, as this
# machine cannot download k3s: it honours the variables the k3s_agent role
# passes (INSTALL_K3S_VERSION, INSTALL_K3S_EXEC, INSTALL_K3S_BIN_DIR), puts a
# k3s that reports that version, and records each run.
set -eu
: "${INSTALL_K3S_BIN_DIR:?}" "${NETTUNE_TEST_INSTALL_LOG:?}"
mkdir -p "$INSTALL_K3S_BIN_DIR"
cat >"$INSTALL_K3S_BIN_DIR/k3s" <<EOF
#!/bin/sh
echo "k3s version ${INSTALL_K3S_VERSION} (test stand-in)"
EOF
chmod 0755 "$INSTALL_K3S_BIN_DIR/k3s"
echo "INSTALL_K3S_VERSION=${INSTALL_K3S_VERSION:-} INSTALL_K3S_EXEC=${INSTALL_K3S_EXEC:-}" >>"$NETTUNE_TEST_INSTALL_LOG"
