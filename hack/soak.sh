#!/usr/bin/env bash
# Runs the whole end-to-end suite (TestE2E: its rollback case among others)
# and the demo N times each, alternating, while a burner keeps both CPUs 50 %
# busy (bench-detection's -burn), and prints one line per run: exit status,
# duration, load average at its start, and what it observed.
#   sudo hack/soak.sh            # N=5, logs in ${OUT:-/tmp/nettune-soak}
set -uo pipefail
cd "$(dirname "$0")/.."
N=${N:-5}
out=${OUT:-/tmp/nettune-soak}
mkdir -p "$out"
make --no-print-directory build >/dev/null
(cd hack/bench && go build -o "$out/burner" ./detection)
go test -c -o "$out/e2e.test" ./test/e2e/
"$out/burner" -burn 0.5 &
burner=$!
trap 'kill $burner' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
for i in $(seq 1 "$N"); do
  s=$(date +%s) la=$(load)
  (cd test/e2e && "$out/e2e.test" -test.v -test.count=1 -test.timeout 20m) >"$out/e2e-$i.log" 2>&1
  rc=$?
  echo "e2e $i rc=$rc took=$(($(date +%s) - s))s load_at_start=$la $(grep -E -- '--- (PASS|FAIL): TestE2E/bad' "$out/e2e-$i.log" | tr -s ' ')"
  s=$(date +%s) la=$(load)
  bin/nettune-demo -exit >"$out/demo-$i.log" 2>&1
  rc=$?
  echo "demo $i rc=$rc took=$(($(date +%s) - s))s load_at_start=$la $(grep -E 'v2 \(good\):|bad edit:|apply \(bad\)' "$out/demo-$i.log" | tr -s ' ' | tr '\n' ';')"
done
