#!/usr/bin/env bash
# The soak: one long run with known noise injected (stat_refresh kworkers, a competing task,
# the virtio-rng IRQ where the machine has one, and a shell loop forking a new short-lived
# process every 100 ms), sampling jitterscope's resident memory every 10 s. Passes when, after
# the first minute, every sample lies within ±5% of their median, and the run's files stay
# bounded (worst-N stalls and spikes, aggregated culprits). Prints Markdown.
# With --watch the soaked jitterscope is a `watch --pid` of a measuring-only run
# (`jitterscope run --no-probes`, the noise injected into it) for the same checks on the
# watch's memory: a watch runs as long as its user wants, so its memory must stay flat.
# With --metrics the soaked jitterscope also writes its metrics file (--metrics-interval 10s)
# and the soak counts its series at every sample: after the first minute (the label set
# closes a minute into recording) the count must not change, and promtool must accept the
# last file.
# With --watch --idle the watched process is a `sleep` and nothing is injected: the always-on
# watch with nothing to explain. Besides flat memory it then holds the targets of an idle
# watch: resident memory at most 24 MiB at every sample, and jitterscope's CPU time
# (utime + stime of all its threads, /proc/PID/stat) at most 0.05 % of one CPU after the
# first minute — over the whole soak and in each third of it, so that it cannot grow.
# A passing idle soak leaves its figures, with the commit soaked, in
# target/soak/watch-idle.txt: scripts/bench.sh shows them in the performance page's soak row
# when it benches that commit.
# Usage: sudo scripts/soak.sh [--cpus 0,1] [--duration 30m] [--watch [--idle]] [--metrics]
# Part of `scripts/test.sh --extended`; not run in CI (it takes the whole duration).
set -euo pipefail
source "$(dirname "$0")/env.sh"

cpus=0,1
duration=30m
watch=0
idle=0
metrics=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cpus) cpus=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --watch) watch=1; shift ;;
    --idle) idle=1; shift ;;
    --metrics) metrics=1; shift ;;
    *) echo "usage: $0 [--cpus A,B] [--duration 30m] [--watch [--idle]] [--metrics]" >&2; exit 2 ;;
  esac
done
if [ "$idle" -eq 1 ] && [ "$watch" -eq 0 ]; then
  echo "--idle: an idle soak is of a watch; give --watch --idle" >&2
  exit 2
fi
consumer=${cpus##*,}

cargo build --release --quiet
js="$root/target/release/jitterscope"
out=$(mktemp -d)
js_pid=
fork_pid=
target_pid=
cleanup() {
  [ -n "$fork_pid" ] && kill "$fork_pid" 2>/dev/null || true
  [ -n "$target_pid" ] && kill "$target_pid" 2>/dev/null || true
  [ -n "$target_pid" ] && wait "$target_pid" 2>/dev/null || true
  [ -n "$js_pid" ] && kill "$js_pid" 2>/dev/null || true
  [ -n "$js_pid" ] && wait "$js_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

inject=(--inject "kworker@$consumer:20" --inject "task@$consumer:5")
if grep -q 'virtio.*input' /proc/interrupts 2>/dev/null; then
  inject+=(--inject "irq@$consumer:50")
fi
metrics_args=()
metrics_file=
if [ "$metrics" -eq 1 ]; then
  mkdir -p "$out/metrics"
  metrics_file="$out/metrics/soak.prom"
  metrics_args=(--metrics "$metrics_file" --metrics-interval 10s)
fi
if [ "$idle" -eq 1 ]; then
  # Nothing to explain: a sleeping process, no noise.
  inject=()
  sleep 24h &
  target_pid=$!
  "$js" watch --pid "$target_pid" --duration "$duration" --label soak-idle --no-tui \
    "${metrics_args[@]}" --output "$out/runs" >"$out/run.txt" 2>&1 &
  js_pid=$!
elif [ "$watch" -eq 1 ]; then
  # The watched program: measures its own stalls, no probes; ended by its pid at the end.
  "$js" run --no-probes --cpus "$cpus" --duration 24h --warmup 1s --label soak-target \
    --no-tui "${inject[@]}" --output "$out/target" >"$out/target.txt" 2>&1 &
  target_pid=$!
  sleep 3
  kill -0 "$target_pid" 2>/dev/null || { echo "the watched run did not start:"; cat "$out/target.txt"; exit 1; }
  "$js" watch --pid "$target_pid" --duration "$duration" --label soak-watch --no-tui \
    "${metrics_args[@]}" --output "$out/runs" >"$out/run.txt" 2>&1 &
  js_pid=$!
else
  "$js" --cpus "$cpus" --duration "$duration" --warmup 1s --label soak --no-tui \
    "${inject[@]}" "${metrics_args[@]}" --output "$out/runs" >"$out/run.txt" 2>&1 &
  js_pid=$!
fi
what=run
noise="${inject[*]} + a forking shell loop"
if [ "$idle" -eq 1 ]; then
  what="watch --pid of a sleeping process"
  noise=none
else
  # New pids all the time: every `sleep` is a new task the ranking may meet.
  ( while :; do sleep 0.1; done ) &
  fork_pid=$!
  [ "$watch" -eq 1 ] && what="watch --pid of a run"
fi
echo "### jitterscope soak ($what) — $(hostname), $(nproc) CPUs, kernel $(uname -r), CPUs $cpus, $duration, noise: $noise"
echo
echo "| t (s) | RSS (KiB) | CPU (clock ticks) | series |"
echo "|---:|---:|---:|---:|"
samples=()
series=()
ticks=()
t=0
while kill -0 "$js_pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$js_pid/status" 2>/dev/null || true)
  # utime + stime of every thread of the process (fields 14 and 15 after the comm).
  cpu=$(sed 's/.*) //' "/proc/$js_pid/stat" 2>/dev/null | awk '{print $12 + $13}' || true)
  n=-
  if [ -n "$metrics_file" ] && [ -f "$metrics_file" ]; then
    n=$(grep -vc '^#' "$metrics_file" || true)
    series+=("$t:$n")
  fi
  if [ -n "$rss" ] && [ -n "$cpu" ]; then
    samples+=("$t:$rss")
    ticks+=("$t:$cpu")
    echo "| $t | $rss | $cpu | $n |"
  fi
  sleep 10
  t=$((t + 10))
done
status=0
wait "$js_pid" || status=$?
js_pid=
kill "$fork_pid" 2>/dev/null || true
fork_pid=
if [ "$status" -ne 0 ]; then
  echo "jitterscope failed (exit $status):"
  tail -20 "$out/run.txt"
  exit 1
fi
sizes=$(du -b "$out"/runs/* | sort -n | awk '{printf "%s %s\n", $1, $2}')
printf '%s\n' "${samples[@]}" | python3 -c '
import sys
rows = [tuple(int(x) for x in l.split(":")) for l in sys.stdin if l.strip()]
steady = [r for t, r in rows if t >= 60] or [r for _, r in rows]
steady.sort()
median = steady[len(steady) // 2]
lo, hi = min(steady), max(steady)
dev = max(abs(lo - median), abs(hi - median)) / median * 100
print()
print(f"samples {len(rows)}; after the first minute: median {median} KiB, min {lo}, max {hi}: within ±{dev:.1f}% of the median (limit ±5%)")
sys.exit(0 if dev <= 5.0 else 1)
' | tee "$out/flat.txt" || { echo "FAIL: resident memory is not flat"; exit 1; }
if [ "$idle" -eq 1 ]; then
  printf '%s\n' "${ticks[@]}" | HZ=$(getconf CLK_TCK) python3 -c '
import os, sys
hz = int(os.environ["HZ"])
rows = [tuple(int(x) for x in l.split(":")) for l in sys.stdin if l.strip()]
steady = [r for r in rows if r[0] >= 60]
if len(steady) < 4:
    print("FAIL: too few samples after the first minute to judge the CPU time")
    sys.exit(1)
def pct(a, b):
    return (b[1] - a[1]) / hz / (b[0] - a[0]) * 100
whole = pct(steady[0], steady[-1])
n = len(steady) - 1
thirds = [pct(steady[i * n // 3], steady[(i + 1) * n // 3]) for i in range(3)]
print()
shown = ", ".join(f"{p:.3f} %" for p in thirds)
print(f"CPU of jitterscope after the first minute: {whole:.3f} % of one CPU (limit 0.05 %); by thirds {shown}")
sys.exit(0 if max([whole] + thirds) <= 0.05 else 1)
' | tee "$out/cpu.txt" || { echo "FAIL: the idle watch took more than 0.05 % of one CPU"; exit 1; }
  printf '%s\n' "${samples[@]}" | python3 -c '
import sys
worst = max(int(l.split(":")[1]) for l in sys.stdin if l.strip())
print(f"largest resident memory: {worst} KiB (limit 24576 KiB)")
sys.exit(0 if worst <= 24576 else 1)
' | tee "$out/largest.txt" || { echo "FAIL: the idle watch's resident memory went over 24 MiB"; exit 1; }
fi
if [ "$metrics" -eq 1 ]; then
  # The label set closes a minute into recording; the first rewrite after that lands by
  # t = 80 s (start-up, warm-up, a 10 s interval).
  final=$(grep -vc '^#' "$metrics_file" || true)
  printf '%s\n' "${series[@]}" "end:$final" | python3 -c '
import sys
rows = [l.strip().split(":") for l in sys.stdin if l.strip()]
steady = [int(n) for t, n in rows if t == "end" or int(t) >= 80]
print()
if not steady:
    print("FAIL: no metrics file sample after the first minute")
    sys.exit(1)
print(f"metrics series: {len(steady)} samples after the first minute (and the final file): min {min(steady)}, max {max(steady)} (must not change)")
sys.exit(0 if min(steady) == max(steady) else 1)
' || { echo "FAIL: the metrics file's series count changed after the first minute"; exit 1; }
  if command -v promtool >/dev/null 2>&1; then
    promtool check metrics <"$metrics_file" || { echo "FAIL: promtool check metrics refused the metrics file"; exit 1; }
    echo "promtool check metrics: accepted"
  fi
fi
echo
echo "Files of the run (bytes):"
echo
echo '```'
echo "$sizes" | sed "s|$out/runs/||"
echo '```'
# The run file holds bounded lists whatever the duration (the .hlog, an interval log, grows
# by design: one histogram per second).
run_file=$(ls "$out"/runs/*.json | grep -v '\.trace\.json$')
run_bytes=$(stat -c %s "$run_file")
if [ "$run_bytes" -gt $((8 * 1024 * 1024)) ]; then
  echo "FAIL: the run file is over 8 MiB ($run_bytes bytes)"
  exit 1
fi
echo
grep -E "^(== Top culprits|[0-9.]+% of all stall time|injected|WARNING)" "$out/run.txt" || true
echo
echo "soak: passed"
if [ "$idle" -eq 1 ]; then
  # What scripts/bench.sh puts in the performance page's soak row (for the commit soaked).
  commit=$(git -c safe.directory="$root" -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git -c safe.directory="$root" -C "$root" status --porcelain --untracked-files=no -- . ':!docs/performance.md' 2>/dev/null)" ]; then
    commit="$commit-dirty"
  fi
  mkdir -p "$root/target/soak"
  {
    echo "commit=$commit"
    echo "date=$(date -u +%Y-%m-%d)"
    echo "duration=$duration"
    echo "cpu=$(grep -v '^$' "$out/cpu.txt")"
    echo "largest=$(grep -v '^$' "$out/largest.txt")"
    echo "flat=$(grep -v '^$' "$out/flat.txt")"
  } >"$root/target/soak/watch-idle.txt"
fi
