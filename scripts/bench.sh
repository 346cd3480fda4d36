#!/usr/bin/env bash
# Benchmarks, printed as Markdown tables so figures can be quoted side by side. One run
# measures, on the same CPUs:
#   1. the cross-core transfer floor (cache-line ping-pong between the two CPUs);
#   2. the workload's transit latency without probes and with probes attached (ratio);
#   3. the BPF cost per event of each program, at the machine's idle rate and under a
#      sched_switch storm (perf bench sched pipe pinned to the measured consumer CPU);
#   4. the attribution engine's throughput and peak memory on one core.
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
consumer=${cpus##*,}

if ! command -v perf >/dev/null 2>&1; then
  echo "bench: installing linux-perf (for the sched_switch storm)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
fi

cargo build --release --quiet
js="$root/target/release/jitterscope"
out=$(mktemp -d)
storm_pid=
# The storm runs in its own process group (perf bench forks a partner process): ending it
# ends both, by the group id of the one we started.
stop_storm() {
  [ -n "$storm_pid" ] && kill -- "-$storm_pid" 2>/dev/null || true
  [ -n "$storm_pid" ] && wait "$storm_pid" 2>/dev/null || true
  storm_pid=
}
cleanup() {
  stop_storm
  rm -rf "$out"
}
trap cleanup EXIT

run_file() { ls "$out/$1"-*.json | grep -v '\.trace\.json$'; }

"$js" floor --cpus "$cpus" --rounds 2000000 --json >"$out/floor.json"
# Alternate so that drifts of the host hit both sides alike; measure the floor right before
# each run too (a VM's vCPUs can land on other host cores between runs, which moves it).
for round in 1 2; do
  "$js" floor --cpus "$cpus" --rounds 1000000 --json >"$out/floor-plain$round.json"
  "$js" --cpus "$cpus" --duration "$duration" --warmup 2s --label "plain$round" --no-probes --no-tui --output "$out" >/dev/null
  "$js" floor --cpus "$cpus" --rounds 1000000 --json >"$out/floor-probes$round.json"
  "$js" --cpus "$cpus" --duration "$duration" --warmup 2s --label "probes$round" --no-tui --output "$out" >/dev/null
done
"$js" probe --cpus "$consumer" --duration 5s --json >"$out/idle.json"
setsid taskset -c "$consumer" perf bench sched pipe -l 100000000 >/dev/null 2>&1 &
storm_pid=$!
sleep 0.5
"$js" probe --cpus "$consumer" --duration 5s --json >"$out/storm.json"
stop_storm

taskset -c "$consumer" "$js" bench-engine --records 5000000 >"$out/engine.json"

python3 - "$out" "$cpus" "$duration" "$(run_file plain1)" "$(run_file plain2)" "$(run_file probes1)" "$(run_file probes2)" <<'PY'
import json, os, platform, sys
out, cpus, duration = sys.argv[1:4]
plain = [json.load(open(p)) for p in sys.argv[4:6]]
probes = [json.load(open(p)) for p in sys.argv[6:8]]
floor = json.load(open(f"{out}/floor.json"))
idle = json.load(open(f"{out}/idle.json"))
storm = json.load(open(f"{out}/storm.json"))
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"### jitterscope bench — {platform.node()}, {model}, {os.cpu_count()} CPUs, kernel {platform.release()}")
print()
print(f"CPUs {cpus}; workload runs of {duration} (2 without probes, 2 with, alternating); floor = cache-line ping-pong, one way")
print()
keys = ["50", "99", "99.9", "99.99"]
def row(name, h, ratio_to=None):
    p = h["percentiles"]
    cells = [str(p[k]) for k in keys] + [str(h["max"])]
    r = "" if ratio_to is None else " | " + " | ".join(f"{p[k] / max(ratio_to['percentiles'][k], 1):.2f}" for k in ["50", "99.9"])
    return f"| {name} | " + " | ".join(cells) + (r if ratio_to else " | | ")  + " |"
print("| measure | p50 ns | p99 ns | p99.9 ns | p99.99 ns | max ns | p50 ratio | p99.9 ratio |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
fp = floor["percentiles"]
print(f"| transfer floor (ping-pong) | {fp['50']} | {fp['99']} | {fp['99.9']} | {fp['99.99']} | {floor['max']} | 1.00 | |")
for i, r in enumerate(plain):
    t = r["histograms"][0]["transit"]
    f = json.load(open(f"{out}/floor-plain{i+1}.json"))["percentiles"]["50"]
    print(f"| transit, no probes #{i+1} | {t['percentiles']['50']} | {t['percentiles']['99']} | {t['percentiles']['99.9']} | {t['percentiles']['99.99']} | {t['max']} | {t['percentiles']['50'] / max(f, 1):.2f} (vs floor {f} ns just before) | |")
base = plain[0]["histograms"][0]["transit"]
for i, r in enumerate(probes):
    t = r["histograms"][0]["transit"]
    b = plain[i]["histograms"][0]["transit"]
    f = json.load(open(f"{out}/floor-probes{i+1}.json"))["percentiles"]["50"]
    print(f"| transit, probes #{i+1} | {t['percentiles']['50']} | {t['percentiles']['99']} | {t['percentiles']['99.9']} | {t['percentiles']['99.99']} | {t['max']} | {t['percentiles']['50'] / max(b['percentiles']['50'], 1):.2f} (vs no probes #{i+1}); {t['percentiles']['50'] / max(f, 1):.2f} (vs floor {f} ns just before) | {t['percentiles']['99.9'] / max(b['percentiles']['99.9'], 1):.2f} |")
print()
print("BPF cost per event (kernel run-time statistics, `jitterscope probe` on CPU of the consumer for 5 s):")
print()
print("| program | idle: events | idle: ns/event | storm: events | storm: ns/event |")
print("|---|---:|---:|---:|---:|")
ic = {c["program"]: c for c in idle["costs"]}
sc = {c["program"]: c for c in storm["costs"]}
for prog in sorted(set(ic) | set(sc), key=lambda p: -(sc.get(p, {}).get("run_count", 0))):
    a, b = ic.get(prog, {}), sc.get(prog, {})
    if not a.get("run_count") and not b.get("run_count"):
        continue
    f = lambda c: f"{c['ns_per_event']:.0f}" if c.get("ns_per_event") else "–"
    print(f"| {prog} | {a.get('run_count', 0)} | {f(a)} | {b.get('run_count', 0)} | {f(b)} |")
eng = json.load(open(f"{out}/engine.json"))
print()
print("Attribution engine, one core (`jitterscope bench-engine`: ticks, IRQs, softirqs, kworker runs, a stall per 4 records):")
print()
print("| records | stalls | seconds | records/s | peak records held | peak RSS |")
print("|---:|---:|---:|---:|---:|---:|")
print(f"| {eng['records']} | {eng['stalls']} | {eng['seconds']:.2f} | {eng['records_per_second'] / 1e6:.2f} M | {eng['peak_retained']} | {eng['peak_rss_kib'] / 1024:.1f} MiB |")
drops = sum(d["count"] for d in storm["drops"])
print()
print(f"storm: {storm['classes'].get('task', {}).get('count', 0)} task episodes in 5 s, {drops} records dropped; probes on the workload run: "
      + ", ".join(f"{r['run']['label']}: {sum(d['count'] for d in r['probes']['drops'])} drops, incomplete stalls {r['probes']['incomplete_stalls']}" for r in probes))
PY
