#!/usr/bin/env bash
# Creates bin/ansible-venv with the ansible-core and ansible-lint pinned in
# ansible/requirements.txt (from PyPI), for the ansible/ tree and its test
# (test/ansible). Reused as long as the requirements and the Python it was
# built with are unchanged; silent then. PYTHON picks the interpreter
# (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=bin/ansible-venv
req=ansible/requirements.txt
python=${PYTHON:-python3}
stamp=$venv/.nettune-requirements

mkdir -p bin
exec 9>bin/.ansible-venv.lock
flock 9

want=$( { sha256sum <"$req"; "$python" -c 'import sys; print(sys.executable, sys.version)'; } | sha256sum | cut -d' ' -f1)
# The scripts' #! lines name the venv's own path: a venv made in another
# checkout (or one moved since) fails to run them and is made again.
if [[ -f $stamp && $(<"$stamp") == "$want" ]] &&
  "$venv/bin/python" -c 'import ansible, ansiblelint' 2>/dev/null &&
  "$venv/bin/ansible-playbook" --version >/dev/null 2>&1; then
  exit 0
fi

started=$SECONDS
rm -rf "$venv"
"$python" -m venv "$venv"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >"$log" 2>&1; then
  cat "$log" >&2
  echo "ansible: pip install -r $req into $venv failed" >&2
  exit 1
fi
echo "$want" >"$stamp"
versions=$("$venv/bin/python" -c 'from importlib.metadata import version as v; print("ansible-core", v("ansible-core") + ",", "ansible-lint", v("ansible-lint"))')
echo "ansible: $versions into $venv in $((SECONDS - started))s"
