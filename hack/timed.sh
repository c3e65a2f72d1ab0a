#!/usr/bin/env bash
# timed.sh NAME COMMAND...: runs COMMAND with one progress line when it
# starts and one when it ends, with its elapsed time (make's tool builds, run
# in parallel: their lines interleave, each names its tool).
set -uo pipefail
name=$1
shift
start=$(date +%s)
printf 'tools: %-24s building\n' "$name"
# The go command names every module it downloads on a cold cache (hundreds
# for Kubernetes or Loki): counted, not printed; the rest of what it says is
# printed when it ends.
log=$(mktemp)
"$@" 2>"$log"
rc=$?
# CPU the command used (user + system, of this shell's children).
times >"$log.cpu"
cpu=$(awk 'NR == 2 { n = split($1 " " $2, t, " "); s = 0; for (i = 1; i <= n; i++) { split(t[i], ms, "m"); s += ms[1] * 60 + ms[2] } printf "%d", s }' "$log.cpu")
rm -f "$log.cpu"
downloads=$(grep -c '^go: downloading ' "$log")
grep -v '^go: downloading ' "$log" >&2
rm -f "$log"
elapsed=$(( $(date +%s) - start ))
if [ $rc -eq 0 ]; then
  printf 'tools: %-24s built in %dm%02ds (%dm%02ds of CPU%s)\n' "$name" $((elapsed / 60)) $((elapsed % 60)) \
    $((cpu / 60)) $((cpu % 60)) "$([ "$downloads" -gt 0 ] && printf ', %d modules downloaded' "$downloads")"
else
  printf 'tools: %-24s FAILED after %dm%02ds (exit %d)\n' "$name" $((elapsed / 60)) $((elapsed % 60)) $rc >&2
fi
exit $rc
