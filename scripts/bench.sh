#!/usr/bin/env bash
# Benchmarks, printed as one Markdown table per run so figures can be quoted side by side:
#   - the cross-core transfer floor (cache-line ping-pong between the two CPUs), and
#   - the workload's transit latency on the same CPUs, with the ratio p50 / floor p50.
# Usage: sudo scripts/bench.sh [--cpus 0,1] [--duration 10s]
# Not a test: nothing here passes or fails on speed.
set -euo pipefail
source "$(dirname "$0")/env.sh"

cpus=0,1
duration=10s
while [ $# -gt 0 ]; do
  case "$1" in
    --cpus) cpus=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    *) echo "usage: $0 [--cpus A,B] [--duration 10s]" >&2; exit 2 ;;
  esac
done

cargo build --release --quiet
js="$root/target/release/jitterscope"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

floor=$("$js" floor --cpus "$cpus" --rounds 2000000 --json)
"$js" --cpus "$cpus" --duration "$duration" --warmup 2s --label bench --no-tui --output "$out" >"$out/run.txt"
run=$(ls "$out"/bench-*.json | grep -v "\.trace\.json$")

python3 - "$floor" "$run" "$cpus" "$duration" <<'PY'
import json, os, platform, sys
floor = json.loads(sys.argv[1])
run = json.load(open(sys.argv[2]))
cpus, duration = sys.argv[3], sys.argv[4]
t = run["histograms"][0]["transit"]
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
load = open("/proc/loadavg").read().split()[:3]
print(f"### jitterscope bench — {platform.node()}, {model}, {os.cpu_count()} CPUs, kernel {platform.release()}, load {' '.join(load)}")
print()
print(f"CPUs {cpus}, workload {duration} at {run['run']['settings']['interval_ns']} ns interval, {t['count']} messages; floor = cache-line ping-pong, one way (round trip / 2)")
print()
print("| measure | p50 ns | p99 ns | p99.99 ns | max ns | p50 / floor p50 |")
print("|---|---:|---:|---:|---:|---:|")
fp = floor["percentiles"]
print(f"| transfer floor (ping-pong) | {fp['50']} | {fp['99']} | {fp['99.99']} | {floor['max']} | 1.00 |")
tp = t["percentiles"]
print(f"| workload transit | {tp['50']} | {tp['99']} | {tp['99.99']} | {t['max']} | {tp['50'] / max(fp['50'], 1):.2f} |")
s = run["stall_summary"]
print()
print(f"stalls during the workload run: {s['count']}, total {s['total_ns']} ns, longest {s['longest_ns']} ns")
PY
