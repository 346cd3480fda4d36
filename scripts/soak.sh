#!/usr/bin/env bash
# A long run with noise injected, sampling jitterscope's resident memory every 10 s: the
# memory must stay flat whatever the run length (bounded queues, retention window, worst-N
# lists). Prints the samples and a Markdown summary.
# Usage: sudo scripts/soak.sh [--cpus 0,1] [--duration 10m]
set -euo pipefail
source "$(dirname "$0")/env.sh"

cpus=0,1
duration=10m
while [ $# -gt 0 ]; do
  case "$1" in
    --cpus) cpus=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    *) echo "usage: $0 [--cpus A,B] [--duration 10m]" >&2; exit 2 ;;
  esac
done

cargo build --release --quiet
out=$(mktemp -d)
js_pid=
noise_pid=
cleanup() {
  [ -n "$noise_pid" ] && kill "$noise_pid" 2>/dev/null || true
  [ -n "$js_pid" ] && kill "$js_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

"$root/target/release/jitterscope" --cpus "$cpus" --duration "$duration" --warmup 1s \
  --label soak --no-tui --output "$out" >"$out/run.txt" 2>&1 &
js_pid=$!
# Noise: a stat_refresh every 100 ms (kworkers on every CPU).
( while :; do echo 1 > /proc/sys/vm/stat_refresh; sleep 0.1; done ) &
noise_pid=$!

echo "| t (s) | RSS (KiB) |"
echo "|---:|---:|"
samples=()
t=0
while kill -0 "$js_pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$js_pid/status" 2>/dev/null || true)
  if [ -n "$rss" ]; then
    samples+=("$rss")
    echo "| $t | $rss |"
  fi
  sleep 10
  t=$((t + 10))
done
wait "$js_pid" || { echo "jitterscope failed:"; tail -20 "$out/run.txt"; exit 1; }
js_pid=
printf '%s\n' "${samples[@]}" | python3 -c '
import sys
s = [int(x) for x in sys.stdin if x.strip()]
steady = s[len(s) // 4:] or s
print()
print(f"samples {len(s)}; RSS first {s[0]} KiB, steady-state min {min(steady)} / max {max(steady)} KiB, peak {max(s)} KiB; spread over the last 3/4: {100 * (max(steady) - min(steady)) / max(min(steady), 1):.1f}%")
'
grep -E "^(== Top culprits|[0-9.]+% of all stall time)" "$out/run.txt" || true
