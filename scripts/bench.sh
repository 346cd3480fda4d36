#!/usr/bin/env bash
# Benchmarks, printed as Markdown tables so figures can be quoted side by side. One run
# measures, on the same CPUs:
#   1. the cross-core transfer floor (cache-line ping-pong between the two CPUs);
#   2. the tracers side by side on the same workload (`jitterscope --no-probes`): no tracing,
#      jitterscope's own probes, `perf record` of the same tracepoints on the same CPUs (the
#      seed's method), bpftrace with equivalent probes, and `jitterscope watch` of the
#      measuring-only workload (a watch of another process, as a user runs it). Per row: transit percentiles with
#      ratios to the no-tracing row of the same round, the floor measured just before, the
#      tracer's CPU time, its BPF time and its output size. Two rounds, in opposite orders;
#   3. the BPF cost per event of each program, at the machine's idle rate and under a
#      sched_switch storm (perf bench sched pipe pinned to the measured consumer CPU);
#   4. the attribution engine's throughput and peak memory on one core;
#   5. a run under an hrtimer storm, and a watch's early exit on a CPU with nothing watched;
#   6. the live view as people run it (the default run in a 160×48 tmux pane), an idle watch
#      (a sleeping process) and a busy watch (the measuring-only workload), three of each;
#   7. issue 14's targets for the tracer's own cost, each beside the figure measured here:
#      the median of 3 runs of each kind (the two rounds' jitterscope rows and one more quiet
#      run, 3 probes under the switch storm, 3 runs under the hrtimer storm, 3 watches of
#      each kind; and 3 quiet runs and 3 hrtimer-storm runs deciding the culprits at the end,
#      `--attribution end`), every run's figure listed beside it.
# Usage: sudo scripts/bench.sh [--cpus 0,1] [--duration 10s]
# The Markdown is printed and written to docs/performance.md, stamped with the commit built
# (`-dirty` when tracked files other than that page differ from it), the date and the machine:
# the one place the project's performance figures live.
# Not a test: nothing here passes or fails on speed.
# Installs linux-perf, bpftrace and bpftool when missing. Mounts tracefs if it is not mounted
# (perf and bpftrace need it) and sets kernel.bpf_stats_enabled=1 (bpftrace's BPF run time);
# both are put back on exit, failure and Ctrl-C included.
set -euo pipefail

# Before anything can mount it (perf mounts tracefs by itself when it finds it missing).
tracefs=/sys/kernel/tracing
tracefs_was_mounted=0
mountpoint -q "$tracefs" && tracefs_was_mounted=1
debugfs_was_mounted=0
mountpoint -q /sys/kernel/debug && debugfs_was_mounted=1

source "$(dirname "$0")/env.sh"

cpus=0,1
duration=10s
warmup=2s
while [ $# -gt 0 ]; do
  case "$1" in
    --cpus) cpus=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    *) echo "usage: $0 [--cpus A,B] [--duration 10s]" >&2; exit 2 ;;
  esac
done
consumer=${cpus##*,}

# The tracers compared, and bpftool for bpftrace's BPF run time. Debian's packages.
need=()
command -v perf >/dev/null 2>&1 || need+=(linux-perf)
command -v bpftrace >/dev/null 2>&1 || need+=(bpftrace)
command -v bpftool >/dev/null 2>&1 || need+=(bpftool)
if [ ${#need[@]} -gt 0 ]; then
  echo "bench: installing ${need[*]} (the tracers compared)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

cargo build --release --quiet
# The commit the figures belong to, taken before the page itself is rewritten. As root (sudo)
# git would refuse a repository another user owns, hence safe.directory.
commit=$(git -c safe.directory="$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -c safe.directory="$root" status --porcelain --untracked-files=no -- . ':!docs/performance.md' 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
js="${CARGO_TARGET_DIR:-$root/target}/release/jitterscope"
out=$(mktemp -d)
storm_pid=
tracer_pid=
mounted_tracefs=0
old_bpf_stats=

# The storm runs in its own process group (perf bench forks a partner process): ending it
# ends both, by the group id of the one we started.
stop_storm() {
  [ -n "$storm_pid" ] && kill -- "-$storm_pid" 2>/dev/null || true
  [ -n "$storm_pid" ] && wait "$storm_pid" 2>/dev/null || true
  storm_pid=
}
# perf and bpftrace write their output and exit on SIGINT; TERM, then KILL, if they hang.
stop_tracer() {
  [ -n "$tracer_pid" ] || return 0
  local sig
  for sig in INT INT TERM KILL; do
    kill -"$sig" "$tracer_pid" 2>/dev/null || break
    for _ in $(seq 50); do kill -0 "$tracer_pid" 2>/dev/null || break 2; sleep 0.2; done
  done
  wait "$tracer_pid" 2>/dev/null || true
  tracer_pid=
}
# jitterscope ends on SIGINT by itself and exits 0 from floor, probe and bench-engine: bash
# then skips its INT trap (it assumes the child dealt with the signal) and a Ctrl-C would only
# end one step. Waiting with the `wait` builtin instead lets the trap run at once.
child=
js_run() {
  local rc=0
  "$@" &
  child=$!
  wait "$child" || rc=$?
  child=
  return $rc
}
cleanup() {
  set +e
  [ -n "$child" ] && { kill -INT "$child" 2>/dev/null; wait "$child" 2>/dev/null; }
  stop_tracer
  stop_storm
  [ -n "$old_bpf_stats" ] && sysctl -q -w kernel.bpf_stats_enabled="$old_bpf_stats"
  [ "$mounted_tracefs" = 1 ] && umount "$tracefs"
  [ "$debugfs_was_mounted" = 0 ] && mountpoint -q /sys/kernel/debug && umount /sys/kernel/debug
  [ -n "${BENCH_KEEP:-}" ] && echo "bench: kept $out" >&2 || rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$tracefs_was_mounted" = 0 ]; then
  mount -t tracefs nodev "$tracefs"
  mounted_tracefs=1
fi
old_bpf_stats=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q -w kernel.bpf_stats_enabled=1

# The tracepoints jitterscope's core probes use, those this kernel has.
perf_events=()
bt_probes=()
for tp in sched:sched_switch irq:irq_handler_entry irq:irq_handler_exit irq:softirq_entry \
  irq:softirq_exit irq_vectors:local_timer_entry irq_vectors:local_timer_exit \
  workqueue:workqueue_execute_start workqueue:workqueue_execute_end power:cpu_frequency \
  timer:tick_stop; do
  if [ -d "$tracefs/events/${tp%%:*}/${tp#*:}" ]; then
    perf_events+=(-e "$tp")
    bt_probes+=("$tp")
  fi
done

# bpftrace: the same tracepoints on the same CPUs, each event printed with its time, CPU,
# pid, comm and the fields that name it — like the records perf writes, but as text.
cpu_filter=$(echo "$cpus" | sed 's/,/ || cpu == /g; s/^/cpu == /')
bt_script="$out/probes.bt"
for tp in "${bt_probes[@]}"; do
  case "${tp#*:}" in
    sched_switch) fmt=' %s[%d] -> %s[%d]' args=', args->prev_comm, args->prev_pid, args->next_comm, args->next_pid' ;;
    irq_handler_entry) fmt=' irq %d %s' args=', args->irq, str(args->name)' ;;
    irq_handler_exit) fmt=' irq %d ret %d' args=', args->irq, args->ret' ;;
    softirq_entry | softirq_exit) fmt=' vec %d' args=', args->vec' ;;
    local_timer_*) fmt=' vector %d' args=', args->vector' ;;
    workqueue_execute_start) fmt=' work %llx function %llx' args=', args->work, args->function' ;;
    workqueue_execute_end) fmt=' work %llx' args=', args->work' ;;
    cpu_frequency) fmt=' state %u cpu %u' args=', args->state, args->cpu_id' ;;
    *) fmt='' args='' ;;
  esac
  printf 'tracepoint:%s /%s/ { printf("%%llu %%d %%d %%s %s%s\\n", nsecs, cpu, pid, comm%s); }\n' \
    "$tp" "$cpu_filter" "${tp#*:}" "$fmt" "$args" >>"$bt_script"
done

run_file() { ls "$1"/*.json | grep -v '\.trace\.json$'; }

# Sets the variable named $2 to the CPU time of live process $1, all its threads, in ns
# (scheduler run time: user and system, exact where /proc/PID/stat counts 10 ms ticks).
cpu_ns() {
  local total=0 t a
  for t in /proc/"$1"/task/*/schedstat; do
    read -r a _ 2>/dev/null <"$t" || continue
    total=$((total + a))
  done
  printf -v "$2" '%d' "$total"
}
# Sets the variable named $1 to the CPU of this shell's reaped children, in clock ticks.
reaped_ticks() {
  local line f
  read -r line <"/proc/$$/stat"
  read -ra f <<<"${line##*) }"
  printf -v "$1" '%d' $((f[13] + f[14]))
}

# A failed run is reported in its row (error.txt), not fatal: the other rows still count.
workload() {
  local dir=$1 rc=0
  shift
  js_run "$js" --cpus "$cpus" --duration "$duration" --warmup "$warmup" --label "$(basename "$dir")" \
    --no-tui --output "$dir/files" "$@" >"$dir/workload.log" 2>&1 || rc=$?
  # 128+N: a signal (Ctrl-C) ended the run. jitterscope handled it and exited, so bash does not
  # run its own INT trap (it assumes the child dealt with it): end the bench here.
  [ $rc -gt 128 ] && exit $rc
  if [ $rc != 0 ]; then
    { echo "jitterscope exited with status $rc:"; tail -n 3 "$dir/workload.log"; } >>"$dir/error.txt"
    echo "bench: $(basename "$dir"): the workload failed (status $rc), see $dir/workload.log:" >&2
    tail -n 3 "$dir/workload.log" >&2
  fi
}

# Starts a tracer, waits until it traces, runs the workload under it, stops it by its pid.
# Leaves in $dir: meta (key=value), the tracer's log, its output, bpftool snapshots; error.txt
# instead when the tracer could not run.
traced_row() {
  local name=$1 dir=$2 ready=0 t1 t2 w1 w2 c1 c2 output
  case $name in
    perf)
      output="$dir/perf.data"
      perf record -C "$cpus" "${perf_events[@]}" -o "$output" >"$dir/tracer.log" 2>&1 &
      ;;
    bpftrace)
      output="$dir/bpftrace.out"
      bpftool prog show --json >"$dir/bpf-base.json"
      bpftrace -o "$output" "$bt_script" >"$dir/tracer.log" 2>&1 &
      ;;
  esac
  tracer_pid=$!
  for _ in $(seq 600); do
    kill -0 "$tracer_pid" 2>/dev/null || break
    case $name in
      perf) [ -s "$output" ] && ready=1 ;;
      bpftrace) grep -q '^Attaching' "$output" 2>/dev/null && ready=1 ;;
    esac
    [ $ready = 1 ] && break
    sleep 0.1
  done
  if [ $ready = 0 ]; then
    stop_tracer
    { echo "$name did not start tracing:"; tail -n 5 "$dir/tracer.log"; } >"$dir/error.txt"
    echo "bench: $(basename "$dir"): $(cat "$dir/error.txt")" >&2
    return 0
  fi
  sleep 1 # attaching ends after the file is created or the "Attaching" line is printed
  [ "$name" = bpftrace ] && bpftool prog show --json >"$dir/bpf-before.json"
  cpu_ns "$tracer_pid" t1
  w1=$EPOCHREALTIME
  workload "$dir" --no-probes
  w2=$EPOCHREALTIME
  cpu_ns "$tracer_pid" t2
  [ "$name" = bpftrace ] && bpftool prog show --json >"$dir/bpf-after.json"
  # Nothing else is reaped between these two reads: the difference is the tracer's whole life.
  reaped_ticks c1
  kill -INT "$tracer_pid"
  wait "$tracer_pid" || true # 130 (SIGINT) from perf
  tracer_pid=
  reaped_ticks c2
  # perf.data is binary: the seed's method reads it through `perf script` (then awk, sort,
  # uniq -c). That step's CPU is part of what perf costs to reach an answer.
  local post_ms=0
  if [ "$name" = perf ]; then
    local TIMEFORMAT='%3U %3S'
    { time perf script -i "$output" >"$dir/perf.script" 2>/dev/null; } 2>"$dir/post.time" || true
    post_ms=$(awk '{printf "%d", ($1 + $2) * 1000}' "$dir/post.time")
    rm -f "$dir/perf.script"
  fi
  {
    echo "post_cpu_ms=$post_ms"
    echo "cpu_ns_during=$((t2 - t1))"
    echo "wall_during=$w1 $w2"
    echo "cpu_ticks_life=$((c2 - c1))"
    echo "clk_tck=$(getconf CLK_TCK)"
    echo "output_bytes=$(stat -c %s "$output")"
  } >"$dir/meta"
}

# The watch row: `jitterscope watch -- <the workload, --no-probes>`; the watch starts it and
# ends with it. The workload's run file goes to $dir/files, the watch's to $dir/watch.
watch_row() {
  local dir=$1 rc=0
  js_run "$js" watch --cpus "$cpus" --no-tui --label watch --output "$dir/watch" -- \
    "$js" --cpus "$cpus" --duration "$duration" --warmup "$warmup" --label "$(basename "$dir")" \
    --no-tui --no-probes --output "$dir/files" >"$dir/workload.log" 2>&1 || rc=$?
  [ $rc -gt 128 ] && exit $rc
  if [ $rc != 0 ]; then
    { echo "jitterscope watch exited with status $rc:"; tail -n 3 "$dir/workload.log"; } >>"$dir/error.txt"
    echo "bench: $(basename "$dir"): the watch failed (status $rc), see $dir/workload.log:" >&2
    tail -n 3 "$dir/workload.log" >&2
  fi
}

# One row: the floor just before, then the workload under the row's tracer. On this shared
# machine another jitterscope may hold the CPUs (one run per CPU): the row waits and starts over.
row() {
  local name=$1 dir="$out/$1-$2" rc
  for _ in $(seq 60); do
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "bench: round $2, $name" >&2
    rc=0
    js_run "$js" floor --cpus "$cpus" --rounds 1000000 --json >"$dir/floor.json" 2>"$dir/floor.log" || rc=$?
    [ $rc -gt 128 ] && exit $rc
    [ $rc = 0 ] || { echo "bench: $name-$2: floor failed:" >&2; cat "$dir/floor.log" >&2; }
    case $name in
      none) workload "$dir" --no-probes ;;
      jitterscope) workload "$dir" --attribution live ;;
      watch) watch_row "$dir" ;;
      perf | bpftrace) traced_row "$name" "$dir" ;;
    esac
    grep -qs 'already measured by another jitterscope' "$dir/error.txt" "$dir/floor.log" || return 0
    echo "bench: $name-$2: CPUs $cpus are measured by another jitterscope; starting the row again in 10 s" >&2
    sleep 10
  done
}

# Other work on the machine moves every row: the load average is printed with the figures.
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
js_run "$js" floor --cpus "$cpus" --rounds 2000000 --json >"$out/floor.json"
# Two rounds in opposite orders, so that drifts of the host hit every row alike; the floor is
# measured right before each row (a VM's vCPUs can land on other host cores between runs,
# which moves it).
order1=(none jitterscope watch perf bpftrace)
order2=(bpftrace perf watch jitterscope none)
for name in "${order1[@]}"; do row "$name" 1; done
for name in "${order2[@]}"; do row "$name" 2; done
# A third quiet run for the targets' medians (not a row of the comparison above).
row jitterscope 3
# Three quiet runs deciding at the end (`--attribution end`), for the targets' second column.
for n in 1 2 3; do
  mkdir -p "$out/at-end-$n"
  echo "bench: quiet run $n of 3 deciding at the end" >&2
  workload "$out/at-end-$n" --attribution end
done

# `jitterscope probe` holds its CPU too: wait for another jitterscope to end, as the rows do.
probe() {
  for _ in $(seq 60); do
    js_run "$js" probe --cpus "$consumer" --duration 5s "${2:---floor}" --json >"$out/$1.json" 2>"$out/$1.log" && return 0
    grep -q 'already measured by another jitterscope' "$out/$1.log" || { cat "$out/$1.log" >&2; return 1; }
    echo "bench: probe: CPU $consumer is measured by another jitterscope; trying again in 10 s" >&2
    sleep 10
  done
  return 1
}
probe idle
setsid taskset -c "$consumer" perf bench sched pipe -l 100000000 >/dev/null 2>&1 &
storm_pid=$!
sleep 0.5
# The first for the table of every program's cost, all three for the targets' medians.
probe storm
probe storm-2
probe storm-3
# The same with the reference programs run before the probes' own (`--floor-first`): the
# first clock read of each timer interrupt costs far more than a later one, whoever takes it;
# these show what the timer programs do apart from that price, and that price alone.
for n in 1 2 3; do probe "storm-first-$n" --floor-first; done
# The watch filter's early exit: a watch of a thread that never runs (a sleep on the
# producer's CPU) while the storm runs on the consumer's, where nothing watched is — once with
# the consumer's CPU left out of the watch (`--cpus`: an unwatched CPU), once with every CPU
# watched (a watched CPU where nothing watched runs: its episodes are still timed, in case a
# watched thread comes to wait there).
taskset -c "${cpus%%,*}" sleep 120 &
sleeper=$!
# A 5 s watch of the sleeper into $out/$1, with the watch options that follow.
early_exit() {
  local name=$1
  shift
  js_run "$js" watch --pid "$sleeper" "$@" --duration 5s --no-tui --output "$out/$name" >"$out/$name.log" 2>&1 ||
    echo "bench: the early-exit watch failed: $(tail -n 2 "$out/$name.log")" >&2
}
for n in 1 2 3; do
  early_exit "early-exit-unwatched-$n" --cpus "${cpus%%,*}"
  early_exit "early-exit-$n"
done
kill "$sleeper" 2>/dev/null; wait "$sleeper" 2>/dev/null || true
stop_storm

# An hrtimer storm on the consumer's CPU (a task sleeping 20 µs at a time, some 20,000
# wake-ups a second) under runs with probes: where the collector's budget holds it back.
setsid taskset -c "$consumer" python3 -c 'import time
while True: time.sleep(0.00002)' >/dev/null 2>&1 &
storm_pid=$!
sleep 0.5
for n in 1 2 3; do
  mkdir -p "$out/hrstorm-$n"
  echo "bench: run $n of 3 under an hrtimer storm on CPU $consumer" >&2
  workload "$out/hrstorm-$n" --attribution live
done
# The same deciding at the end, with rings that hold the storm's records for the whole run.
for n in 1 2 3; do
  mkdir -p "$out/hrstorm-end-$n"
  echo "bench: run $n of 3 under the hrtimer storm deciding at the end" >&2
  workload "$out/hrstorm-end-$n" --attribution end --ringbuf-size 128M
done
stop_storm

js_run taskset -c "$consumer" "$js" bench-engine --records 5000000 >"$out/engine.json"

# The live view as people run it: the default run (every CPU measured: culprits decided at the
# end) in a 160×48 tmux pane, three times.
for n in 1 2 3; do
  d="$out/live-tmux-$n"
  mkdir -p "$d"
  echo "bench: live view under tmux, run $n of 3" >&2
  tmux kill-session -t "jitterscope-bench" 2>/dev/null || true
  tmux new-session -d -s "jitterscope-bench" -x 160 -y 48 \
    "$js --cpus $cpus --duration $duration --warmup $warmup --label live-tmux-$n --output $d/files; echo \$? >$d/status; sleep 1"
  for _ in $(seq 600); do [ -f "$d/status" ] && break; sleep 0.2; done
  # What the pane shows at the end (the report), for a run that failed.
  tmux capture-pane -p -t "jitterscope-bench" >"$d/screen.log" 2>/dev/null || true
  tmux kill-session -t "jitterscope-bench" 2>/dev/null || true
  [ "$(cat "$d/status" 2>/dev/null)" = 0 ] || echo "bench: the live view run $n failed: $(tail -c 300 "$d/screen.log")" >&2
done

# A watch started in the background, its resident memory sampled every second while it runs
# (max and each sample in $1/rss); waits for it.
watch_cost() {
  local d=$1 pid
  shift
  mkdir -p "$d"
  "$js" watch --duration 20s --no-tui --output "$d" "$@" >"$d/watch.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null >>"$d/rss" || true
    sleep 1
  done
  wait "$pid" || echo "bench: the watch in $d failed: $(tail -n 2 "$d/watch.log")" >&2
}
# An always-on watch with nothing to explain: a sleeping process, three times 20 s.
sleep 600 &
idle_target=$!
for n in 1 2 3; do
  echo "bench: idle watch $n of 3" >&2
  watch_cost "$out/watch-idle-$n" --pid "$idle_target"
done
kill "$idle_target" 2>/dev/null; wait "$idle_target" 2>/dev/null || true
# A busy watch: every thread of the measuring-only workload (two threads spinning on the
# measured CPUs, every tick and interrupt of theirs explained), three times.
for n in 1 2 3; do
  echo "bench: busy watch $n of 3" >&2
  watch_cost "$out/watch-busy-$n" -- "$js" run --no-probes --cpus "$cpus" --duration 20s --warmup 0s \
    --no-tui --output "$out/watch-busy-$n/workload"
done

SOAK_IDLE="$root/target/soak/watch-idle.txt" BENCH_COMMIT="$commit" \
python3 - "$out" "$cpus" "$duration" "$warmup" "${order1[*]}" "${order2[*]}" "${bt_probes[*]}" "$load_start" >"$out/bench.md" <<'PY'
import glob, json, math, os, platform, re, sys
out, cpus, duration, warmup = sys.argv[1:5]
orders = [sys.argv[5].split(), sys.argv[6].split()]
tracepoints = sys.argv[7].split()
load_start = sys.argv[8]
load_end = " ".join(open("/proc/loadavg").read().split()[:3])
floor = json.load(open(f"{out}/floor.json"))
idle = json.load(open(f"{out}/idle.json"))
storm = json.load(open(f"{out}/storm.json"))
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"### jitterscope bench — {platform.node()}, {model}, {os.cpu_count()} CPUs, kernel {platform.release()}")
print()
print(f"CPUs {cpus}; every row runs `jitterscope --cpus {cpus} --duration {duration} --warmup {warmup} --no-tui` "
      "(`--no-probes` except in the jitterscope row, which decides live: `--attribution live`); floor = cache-line ping-pong, one way, measured once here and again just before each row; "
      f"load average (1, 5, 15 min) {load_start} at the start, {load_end} at the end")
print()
KEYS = ["50", "99", "99.99"]
fp = floor["percentiles"]
print("| measure | p50 ns | p99 ns | p99.9 ns | p99.99 ns | max ns |")
print("|---|---:|---:|---:|---:|---:|")
print(f"| transfer floor (ping-pong) | {fp['50']} | {fp['99']} | {fp['99.9']} | {fp['99.99']} | {floor['max']} |")

def run_file(d):
    files = [p for p in glob.glob(f"{d}/files/*.json") if not p.endswith(".trace.json")]
    return json.load(open(files[0])) if files else None

def watch_file(d):
    files = [p for p in glob.glob(f"{d}/watch/*.json") if not p.endswith(".trace.json")]
    return json.load(open(files[0])) if files else None

def meta(d):
    try:
        return dict(l.rstrip("\n").split("=", 1) for l in open(f"{d}/meta"))
    except FileNotFoundError:
        return None

def progs(path):
    try:
        return {p["id"]: p for p in json.load(open(path))}
    except (FileNotFoundError, ValueError):
        return {}

def transit(run):
    t = run["histograms"][0]["transit"]
    v = {k: t["percentiles"][k] for k in KEYS}
    v["max"] = t["max"]
    return v

def size(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024

# One record per (round, tracer).
rows = {}
for rnd, order in enumerate(orders, 1):
    for name in order:
        d = f"{out}/{name}-{rnd}"
        try:
            fl = json.load(open(f"{d}/floor.json"))["percentiles"]["50"]
        except (OSError, ValueError, KeyError):
            fl = "–"
        r = {"name": name, "round": rnd, "floor": fl}
        if os.path.exists(f"{d}/error.txt"):
            r["error"] = " ".join(open(f"{d}/error.txt").read().split())
            rows[rnd, name] = r
            continue
        run = run_file(d)
        if run is None:
            r["error"] = "no run file; workload log: " + " ".join(open(f"{d}/workload.log").read().split()[-30:])
            rows[rnd, name] = r
            continue
        r["transit"] = transit(run)
        m = meta(d)
        if name in ("jitterscope", "none", "watch"):
            # The watch's own cost is in its run file; the workload's is the run's.
            own = watch_file(d) if name == "watch" else run
            o = own.get("overhead") if own else None
            if o:
                r["cpu_ms"] = o["tracer_cpu_ns"] / 1e6
                r["window_s"] = o["window_ns"] / 1e9
                r["bpf_ms"] = o["bpf_run_ns"] / 1e6
                r["events"] = o["bpf_events"]
                if name == "jitterscope":
                    # Its answer is made after the workload stopped: the last decisions, the
                    # probes' detach, its files.
                    r["post_ms"] = round((o.get("after_cpu_ns", 0) + o.get("files_cpu_ns", 0)) / 1e6)
            r["lost"] = (own or run)["lost"]["ring_buffer_drops"]
            files = "watch" if name == "watch" else "files"
            r["output"] = sum(os.path.getsize(p) for p in glob.glob(f"{d}/{files}/*"))
        elif m:
            tck = int(m["clk_tck"])
            w1, w2 = map(float, m["wall_during"].split())
            r["cpu_ms"] = int(m["cpu_ns_during"]) / 1e6
            r["window_s"] = w2 - w1
            r["life_ms"] = int(m["cpu_ticks_life"]) * 1000 / tck
            r["output"] = int(m["output_bytes"])
            r["post_ms"] = int(m.get("post_cpu_ms", 0))
            log = open(f"{d}/tracer.log", errors="replace").read()
            if name == "perf":
                s = re.search(r"\((\d+) samples\)", log)
                r["events"] = int(s.group(1)) if s else None
                lost = re.findall(r"lost (\d+) chunks", log) + re.findall(r"(\d+) (?:samples|events) lost", log, re.I)
                r["lost"] = sum(map(int, lost))
            else:
                text = open(f"{d}/bpftrace.out", errors="replace").read().splitlines()
                lost = [int(x) for l in text for x in re.findall(r"^Lost (\d+) events", l)]
                r["lost"] = sum(lost)
                r["events"] = sum(1 for l in text if l[:1].isdigit())
                # bpftrace's own wake-ups (to read the events it prints) are events on the traced CPUs.
                r["self_events"] = sum(1 for l in text if l[:1].isdigit() and "bpftrace" in l)
                base, before, after = (progs(f"{d}/bpf-{k}.json") for k in ("base", "before", "after"))
                mine = [i for i in after if i not in base]
                # bpftool leaves out run_time_ns and run_cnt while they are 0.
                if mine and any("run_time_ns" in after[i] for i in mine):
                    r["bpf_ms"] = sum(after[i].get("run_time_ns", 0) - before.get(i, {}).get("run_time_ns", 0) for i in mine) / 1e6
                    r["bpf_runs"] = sum(after[i].get("run_cnt", 0) - before.get(i, {}).get("run_cnt", 0) for i in mine)
        rows[rnd, name] = r

tracers = ["jitterscope", "watch", "perf", "bpftrace"]
print()
print("Tracers on the same workload. Ratios are to the no-tracing row of the same round (1.00 = no visible cost).")
print()
print("| round | tracer | floor before, ns | p50 ns | p99 ns | p99.99 ns | max ns | p50 × | p99 × | p99.99 × | max × |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
ratios = {}
for rnd, order in enumerate(orders, 1):
    base = rows[rnd, "none"].get("transit")
    for name in order:
        r = rows[rnd, name]
        label = "no tracing" if name == "none" else name
        if "transit" not in r:
            print(f"| {rnd} | {label} | {r['floor']} | did not run: {r.get('error', '?')} | | | | | | | |")
            continue
        t = r["transit"]
        cells = [str(t[k]) for k in KEYS + ["max"]]
        if base:
            q = [t[k] / max(base[k], 1) for k in KEYS + ["max"]]
            ratios[rnd, name] = q
            rc = [f"{x:.2f}" for x in q]
        else:
            rc = ["–"] * 4
        print(f"| {rnd} | {label} | {r['floor']} | " + " | ".join(cells) + " | " + " | ".join(rc) + " |")
print()
print("Order: round 1 " + " → ".join(orders[0]) + "; round 2 " + " → ".join(orders[1]) + ".")

print()
print("What each tracer cost. Tracer CPU = user+sys time of the tracer's own process(es) while the workload ran "
      "(jitterscope: its threads except the workload's, over the recorded window, from the run file's `overhead`); "
      "BPF = kernel run time of its BPF programs (`kernel.bpf_stats_enabled`), paid on the traced CPUs.")
print()
print("| round | tracer | events | lost | tracer CPU ms | % of one CPU | over s | whole life CPU ms | to text CPU ms | BPF ms | BPF ns/run | output |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
def f(v, fmt):
    return "–" if v is None else format(v, fmt)
for rnd in (1, 2):
    for name in ["none"] + tracers:
        r = rows[rnd, name]
        if "error" in r:
            print(f"| {rnd} | {name} | did not run: {r['error']} | | | | | | | | | |")
            continue
        if name == "none":
            # The workload's collector thread runs in every row, probes or not; in the jitterscope
            # row it is part of the tracer CPU, so its figure without probes is shown for reference.
            if r.get("cpu_ms") is not None:
                r["pct"] = r["cpu_ms"] / 10 / r["window_s"]
                print(f"| {rnd} | no tracing: jitterscope's collector alone | | | {r['cpu_ms']:.0f} | {r['pct']:.2f} | {r['window_s']:.1f} | | | | | |")
            continue
        pct = r["cpu_ms"] / 10 / r["window_s"] if r.get("cpu_ms") is not None and r.get("window_s") else None
        r["pct"] = pct
        runs = r.get("events") if name in ("jitterscope", "watch") else r.get("bpf_runs")
        nsper = r["bpf_ms"] * 1e6 / runs if r.get("bpf_ms") is not None and runs else None
        r["ns_per_run"] = nsper
        print(f"| {rnd} | {name} | {f(r.get('events'), 'd')} | {f(r.get('lost'), 'd')} | {f(r.get('cpu_ms'), '.0f')} | "
              f"{f(pct, '.2f')} | {f(r.get('window_s'), '.1f')} | {f(r.get('life_ms'), '.0f')} | {f(r.get('post_ms'), 'd')} | {f(r.get('bpf_ms'), '.1f')} | "
              f"{f(nsper, '.0f')} | {size(r['output']) if 'output' in r else '–'} |")
print()
print("Notes:")
print(f"- perf: `perf record -C {cpus}` with " + ", ".join(f"`{t}`" for t in tracepoints) + " into perf.data (raw tracepoint "
      "records with time, CPU, pid); events = its sample count. Its in-kernel cost per event is paid on the traced CPUs and "
      "shows only in the ratios: perf runs no BPF, so the BPF columns are empty.")
print(f"- bpftrace: the same tracepoints, each filtered to CPUs {cpus} in the program, each event `printf`ed with time, CPU, pid, "
      "comm and the fields that name it (prev/next task, IRQ number and name, vector, work function address) into a text file; "
      "events = lines printed, lost = its `Lost N events`. BPF runs count every CPU's events, the filtered ones included; "
      "whole-life CPU includes compiling the script. "
      + "Events naming bpftrace itself, as the running task or in a switch (its own wake-ups to read what it prints): "
      + ", ".join(f"round {rnd} {rows[rnd, 'bpftrace']['self_events'] / max(rows[rnd, 'bpftrace']['events'], 1):.0%}"
                  for rnd in (1, 2) if "self_events" in rows[rnd, "bpftrace"]) + ".")
print("- to text: CPU to turn the tracer's output into readable events — `perf script` over perf.data for perf (the seed's "
      "method then pipes it through awk/sort/uniq); bpftrace already prints text; jitterscope: its CPU after the workload stopped, to its answer — the last decisions, the "
      "probes' detach, writing its files (the run file's `overhead.after_cpu_ns` + `files_cpu_ns`; the Markdown report, the run "
      "file and the printed report, some 2 ms, are not in it).")
print("- jitterscope: events = BPF program runs; lost = failed ring-buffer reserves; its BPF time covers the whole probe "
      "session (warm-up included), its tracer CPU only the recorded window; output = every file of the run "
      "(run file, .md, .svg, .trace.json, .hgrm, .hlog).")
print("- watch: `jitterscope watch -- <the workload with --no-probes>`, every thread of the workload watched from its start; "
      "its tracer CPU is the watch process's over its whole watch (warm-up included), from the watch's run file; "
      "events, BPF time and output are the watch's (the workload's own files are not counted).")

# Verdicts, computed: distance from 1 = mean |ln(ratio)| over p50, p99, p99.99 and max of both rounds.
score = {}
for name in tracers:
    qs = [x for rnd in (1, 2) for x in ratios.get((rnd, name), [])]
    if len(qs) == 8:
        score[name] = sum(abs(math.log(max(x, 1e-9))) for x in qs) / len(qs)
cpu = {}
for name in tracers:
    ps = [rows[rnd, name].get("pct") for rnd in (1, 2)]
    if all(p is not None for p in ps):
        cpu[name] = sum(ps) / 2
missing = [n for n in tracers if n not in score]
print()
if score:
    best = min(score, key=score.get)
    print(f"**Closest to no tracing:** {best} (mean |ln ratio| over p50/p99/p99.99/max of both rounds: "
          + ", ".join(f"{n} {s:.3f}" for n, s in sorted(score.items(), key=lambda x: x[1])) + ")"
          + (f"; not compared: {', '.join(missing)}" if missing else "") + ".")
if cpu:
    low = min(cpu, key=cpu.get)
    print(f"**Lowest tracer CPU:** {low} (mean % of one CPU over both rounds: "
          + ", ".join(f"{n} {p:.2f}%" for n, p in sorted(cpu.items(), key=lambda x: x[1])) + ").")
    # The collector runs in the perf and bpftrace rows too but is not counted there: net of it,
    # jitterscope's figure is what its probes add.
    coll = [rows[rnd, "none"].get("pct") for rnd in (1, 2)]
    if "jitterscope" in cpu and all(c is not None for c in coll):
        net = dict(cpu)
        net["jitterscope"] = max(cpu["jitterscope"] - sum(coll) / 2, 0.0)
        low = min(net, key=net.get)
        print(f"**Lowest tracer CPU, net of the collector that every row runs** (jitterscope minus its no-tracing figure): {low} ("
              + ", ".join(f"{n} {p:.2f}%" for n, p in sorted(net.items(), key=lambda x: x[1])) + ").")
# To an answer: the tracer's CPU while tracing plus what it takes to read its output.
answer = {}
for name in tracers:
    vals = []
    for rnd in (1, 2):
        r = rows[rnd, name]
        if r.get("cpu_ms") is None:
            break
        vals.append(r["cpu_ms"] + (r.get("post_ms") or 0))
    if len(vals) == 2:
        answer[name] = sum(vals) / 2
if answer:
    low = min(answer, key=answer.get)
    print(f"**Lowest CPU to a readable answer** (tracer CPU while tracing + turning its output into text, mean ms per round): {low} ("
          + ", ".join(f"{n} {v:.0f} ms" for n, v in sorted(answer.items(), key=lambda x: x[1])) + ").")
bpf = {n: [rows[rnd, n].get("ns_per_run") for rnd in (1, 2)] for n in ("jitterscope", "watch", "bpftrace")}
bpf = {n: sum(v) / 2 for n, v in bpf.items() if all(x is not None for x in v)}
if bpf:
    print("**BPF ns per program run:** " + ", ".join(f"{n} {v:.0f}" for n, v in sorted(bpf.items(), key=lambda x: x[1])) + ".")

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
    g = lambda c: f"{c['ns_per_event']:.0f}" if c.get("ns_per_event") else "–"
    print(f"| {prog} | {a.get('run_count', 0)} | {g(a)} | {b.get('run_count', 0)} | {g(b)} |")
# The floor under those figures, measured in the same probes: reference programs beside them.
ifl = {c["program"]: c for c in idle.get("floor", [])}
sfl = {c["program"]: c for c in storm.get("floor", [])}
for prog, what in (("empty", "*floor:* an empty program (sched_switch)"), ("clock", "*floor:* a clock read alone (sched_switch)"),
                   ("timer_empty", "*floor:* an empty program (local_timer_entry)"),
                   ("timer_clock", "*floor:* a clock read alone (local_timer_entry)")):
    a, b = ifl.get(prog, {}), sfl.get(prog, {})
    if a.get("run_count") or b.get("run_count"):
        g = lambda c: f"{c['ns_per_event']:.0f}" if c.get("ns_per_event") else "–"
        print(f"| {what} | {a.get('run_count', 0)} | {g(a)} | {b.get('run_count', 0)} | {g(b)} |")
empty_ns = sfl.get("empty", {}).get("ns_per_event")
timer_empty_ns = sfl.get("timer_empty", {}).get("ns_per_event")
if empty_ns:
    print()
    print(f"The floor rows are reference programs attached beside the probes (`probe --floor`): what the kernel's run-time statistics "
          f"count for a program that does nothing ({empty_ns:.0f} ns under the storm: the dispatch and the statistics' own clock reads) "
          f"and for one that only reads the clock every record carries. Every figure above includes the first. "
          f"The empty program on the timer interrupt ({timer_empty_ns or 0:.0f} ns under the storm) is what any program there costs: "
          f"it runs some hundreds of times a second between the storm's switches, in interrupt context, and finds its code and data cold. "
          f"These reference programs run after the probes' own on each event; the first clock read of a timer interrupt costs far more "
          f"than a later one, so their clock read on the timer is the cheap, later kind (see the targets below for the first).")
eng = json.load(open(f"{out}/engine.json"))
print()
print("Attribution engine, one core (`jitterscope bench-engine`: ticks, IRQs, softirqs, kworker runs, a stall per 4 records):")
print()
print("| records | stalls | seconds | records/s | peak records held | peak RSS |")
print("|---:|---:|---:|---:|---:|---:|")
print(f"| {eng['records']} | {eng['stalls']} | {eng['seconds']:.2f} | {eng['records_per_second'] / 1e6:.2f} M | {eng['peak_retained']} | {eng['peak_rss_kib'] / 1024:.1f} MiB |")
drops = sum(d["count"] for d in storm["drops"])
probe_runs = [run_file(f"{out}/jitterscope-{rnd}") for rnd in (1, 2)]
print()
print(f"storm: {storm['classes'].get('task', {}).get('count', 0)} task episodes in 5 s, {drops} records dropped; probes on the workload run: "
      + ", ".join(f"{r['run']['label']}: {sum(d['count'] for d in r['probes']['drops'])} drops, incomplete stalls {r['probes']['incomplete_stalls']}"
                  for r in probe_runs if r and r.get("probes")))

# The tracer's own cost against its targets (issue 14): the median of three runs of each
# kind, every run's figure beside it.
def self_ns(run):
    return sum(c["measured_ns"] + c["inferred_ns"] for c in run["culprits"] if c["class"] == "self")

def own_ipis(run):
    # IPIs the collector or the drain thread sent (the workload's own threads are js-producer
    # and js-consumer-N: what they send is the workload's).
    return sum(c["episodes"] for c in run["culprits"] if c["class"] == "self" and c["name"].endswith(" IPI")
               and not re.search(r"from js-(producer|consumer)", c["detail"]))

def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

def figure(xs, fmt, unit=""):
    """The median, then every run's figure."""
    return f"{fmt(median(xs))}{unit} (median of {len(xs)}: " + ", ".join(fmt(x) for x in xs) + ")"

def json_of(path):
    try:
        return json.load(open(path))
    except (FileNotFoundError, ValueError):
        return None

js_runs = [r for r in [run_file(f"{out}/jitterscope-{rnd}") for rnd in (1, 2, 3)] if r and r.get("overhead")]
hrs = [r for r in [run_file(f"{out}/hrstorm-{n}") for n in (1, 2, 3)] if r and r.get("overhead")]
ends = [r for r in [run_file(f"{out}/at-end-{n}") for n in (1, 2, 3)] if r and r.get("overhead")]
hr_ends = [r for r in [run_file(f"{out}/hrstorm-end-{n}") for n in (1, 2, 3)] if r and r.get("overhead")]
storms = [s for s in [storm, json_of(f"{out}/storm-2.json"), json_of(f"{out}/storm-3.json")] if s]
firsts = [s for s in (json_of(f"{out}/storm-first-{n}.json") for n in (1, 2, 3)) if s]
def watch_files(d):
    found = []
    for n in (1, 2, 3):
        f = next(iter(p for p in glob.glob(f"{out}/{d}-{n}/*.json") if not p.endswith(".trace.json")), None)
        w = json_of(f) if f else None
        if w and w.get("overhead") and w["overhead"].get("bpf_events"):
            found.append(w)
    return found
ew, eu = watch_files("early-exit"), watch_files("early-exit-unwatched")
def floor_of(s, prog):
    return next((c["ns_per_event"] for c in s.get("floor", []) if c["program"] == prog and c.get("ns_per_event")), None)
def met(ok):
    return "–" if ok is None else ("met" if ok else "**not met**")
def pct_of(o, ns):
    return 100.0 * ns / o["window_ns"] if o and o.get("window_ns") else None
pct = lambda x: f"{x:.3f}"
pct2 = lambda x: f"{x:.2f}"
pct1 = lambda x: f"{x:.1f}"
us = lambda x: f"{x / 1e3:.0f}"
nsf = lambda x: f"{x:.0f}"
rows_t = []
def longest_own(r):
    return max((l["ns"] for l in r["overhead"].get("longest_self", [])), default=0)
def hidden_gap(r):
    # The longest stretch the workload's own threads lost with no kernel event and no steal
    # (the host's interrupts and VM exits): the same kind of gap lands inside jitterscope's
    # slices too, and the guest cannot tell it from their work.
    return max((c.get("longest_ns", 0) for c in r.get("culprits", []) if c["class"] == "unexplained"), default=0)
def slice_row(what, runs):
    xs = [longest_own(r) for r in runs]
    context = f"; the workload's longest unexplained stretch in the same runs: {figure([hidden_gap(r) for r in runs], us, ' µs')}"
    rows_t.append((what, "≤ 100 µs", figure(xs, us, " µs") + context, met(median(xs) <= 100_000)))
def after_ns(o):
    # After the workload stopped, to the answer: the last decisions, the detach, the files.
    return o.get("after_cpu_ns", 0) + o.get("files_cpu_ns", 0)

if js_runs:
    own = [pct_of(r["overhead"], r["overhead"]["tracer_cpu_ns"] + r["overhead"]["bpf_run_ns"] + after_ns(r["overhead"])) for r in js_runs]
    rows_t.append(("own CPU, quiet 10 s run, to its report (threads + BPF while it runs, then its work after the workload stopped), `--attribution live`",
                   "≤ 0.15 % of one CPU", figure(own, pct, " %"), met(median(own) <= 0.15)))
    threads = [pct_of(r["overhead"], r["overhead"]["tracer_cpu_ns"]) for r in js_runs]
    bpf = [pct_of(r["overhead"], r["overhead"]["bpf_run_ns"]) for r in js_runs]
    after = [pct_of(r["overhead"], after_ns(r["overhead"])) for r in js_runs]
    rows_t.append(("… of which jitterscope's threads / BPF / after the workload stopped", "",
                   figure(threads, pct, " %") + " / " + figure(bpf, pct, " %") + " / " + figure(after, pct, " %"), "–"))
perf_total = [rows[rnd, "perf"].get("cpu_ms", 0) + (rows[rnd, "perf"].get("post_ms") or 0) for rnd in (1, 2) if "cpu_ms" in rows[rnd, "perf"]]
js_total = [(r["overhead"]["tracer_cpu_ns"] + r["overhead"]["bpf_run_ns"] + after_ns(r["overhead"])) / 1e6 for r in js_runs]
if perf_total and js_total:
    a, b = median(js_total), median(perf_total)
    rows_t.append(("own CPU against perf record + perf script, `--attribution live`", "≤ ½ of perf's",
                   f"{a:.0f} ms vs {b:.0f} ms ({a / max(b, 1e-9):.2f} ×; medians of {len(js_total)} and {len(perf_total)} runs)", met(a <= b / 2)))
if js_runs:
    slice_row("longest own slice on a measured CPU, quiet, `--attribution live`", js_runs)
    shares = [100.0 * self_ns(r) / max(r["stall_summary"]["total_ns"], 1) for r in js_runs]
    rows_t.append(("`self` share of stall time, quiet, `--attribution live`", "≤ 1 %", figure(shares, pct1, " %"), met(median(shares) <= 1.0)))
if hrs:
    x = [100.0 * self_ns(r) / max(r["stall_summary"]["total_ns"], 1) for r in hrs]
    rows_t.append(("`self` share of stall time, hrtimer storm, `--attribution live`", "≤ 2 %", figure(x, pct1, " %"), met(median(x) <= 2.0)))
    c = [pct_of(r["overhead"], r["overhead"]["tracer_cpu_ns"]) for r in hrs]
    b = hrs[0]["overhead"].get("collector_budget")
    drops = [sum(d["count"] for d in r["probes"]["drops"]) if r.get("probes") else 0 for r in hrs]
    incomplete = [r["probes"]["incomplete_stalls"] if r.get("probes") else 0 for r in hrs]
    held = [r["overhead"].get("held_back", 0) for r in hrs]
    rows_t.append(("collector under the hrtimer storm (the budget gates kernel records and decisions; the workload's own stalls are always taken in)",
                   f"within its budget ({100 * b:.0f} % of one CPU)" if b else "within its budget",
                   figure(c, pct2, " %") + f"; held back {', '.join(map(str, held))} times, records dropped in the ring "
                   f"{', '.join(map(str, drops))}, stalls incomplete {', '.join(map(str, incomplete))}",
                   met(b is not None and median(c) <= 100 * b * 1.25)))
    slice_row("longest own slice, hrtimer storm, `--attribution live`", hrs)
def share_of_self(r):
    return 100.0 * self_ns(r) / max(r["stall_summary"]["total_ns"], 1)
def lost_of(rs):
    drops = [sum(d["count"] for d in r["probes"]["drops"]) if r.get("probes") else 0 for r in rs]
    incomplete = [r["probes"]["incomplete_stalls"] if r.get("probes") else 0 for r in rs]
    return f"records dropped {', '.join(map(str, drops))}, stalls incomplete {', '.join(map(str, incomplete))}"
if ends:
    x = [share_of_self(r) for r in ends]
    rows_t.append(("`self` share of stall time, quiet, `--attribution end` (the default for a run of up to a minute when every CPU is measured)", "≤ 1 %", figure(x, pct1, " %"), met(median(x) <= 1.0)))
    w = [pct_of(r["overhead"], r["overhead"]["tracer_cpu_ns"]) for r in ends]
    after = [after_ns(r["overhead"]) / 1e6 for r in ends]
    rows_t.append(("… jitterscope's threads in the window, and after the workload stopped (deciding, detaching, its files)", "",
                   figure(w, pct, " %") + " / " + figure(after, lambda v: f"{v:.1f}", " ms") + "; " + lost_of(ends), "–"))
    own_end = [pct_of(r["overhead"], r["overhead"]["tracer_cpu_ns"] + r["overhead"]["bpf_run_ns"] + after_ns(r["overhead"])) for r in ends]
    rows_t.append(("own CPU, quiet 10 s run, to its report, `--attribution end`", "≤ 0.15 % of one CPU", figure(own_end, pct, " %"),
                   met(median(own_end) <= 0.15)))
    # The same target read as a rate over the run: what the probes and the threads take
    # while the workload records (the row above adds the work after it stopped).
    during = [pct_of(r["overhead"], r["overhead"]["tracer_cpu_ns"] + r["overhead"]["bpf_run_ns"]) for r in ends]
    rows_t.append(("own CPU while it records (threads + BPF in the window, no work after it), quiet, `--attribution end`",
                   "≤ 0.15 % of one CPU", figure(during, pct, " %"), met(median(during) <= 0.15)))
    slice_row("longest own slice on a measured CPU, quiet, `--attribution end`", ends)
if hr_ends:
    x = [share_of_self(r) for r in hr_ends]
    rows_t.append(("`self` share of stall time, hrtimer storm, `--attribution end --ringbuf-size 128M`", "≤ 2 %",
                   figure(x, pct1, " %") + "; " + lost_of(hr_ends), met(median(x) <= 2.0)))
    slice_row("longest own slice, hrtimer storm, `--attribution end --ringbuf-size 128M`", hr_ends)
ipis = [own_ipis(r) for r in js_runs + hrs + ends + hr_ends]
if ipis:
    rows_t.append(("IPIs from jitterscope's collector to a measured CPU while recording", "0", ", ".join(map(str, ipis)) + f" ({len(ipis)} runs)", met(sum(ipis) == 0)))
rows_t.append(("engine throughput (`bench-engine`)", "≥ 4 M records/s", f"{eng['records_per_second'] / 1e6:.2f} M", met(eng["records_per_second"] >= 4e6)))
for prog in ("sched_switch", "local_timer_entry", "local_timer_exit"):
    xs = [c["ns_per_event"] for s in storms for c in s["costs"] if c["program"] == prog and c.get("ns_per_event")]
    if not xs:
        continue
    timer = prog.startswith("local_timer")
    floors = [f for f in (floor_of(s, "timer_empty" if timer else "empty") for s in storms) if f]
    fl = ""
    if floors:
        f = median(floors)
        fl = f"; {median(xs) - f:.0f} ns above an empty program's {f:.0f}" + (" on the timer interrupt" if timer else "")
    after = [c["ns_per_event"] for s in firsts for c in s["costs"] if c["program"] == prog and c.get("ns_per_event")]
    first_clock = [f for f in (floor_of(s, "timer_clock") for s in firsts) if f]
    if prog == "local_timer_entry" and after and first_clock:
        fl += (f"; with the reference programs run before it (`probe --floor-first`) {median(after):.0f} ns, "
               f"where a clock read alone, taking the tick's first, costs {median(first_clock):.0f} ns")
    rows_t.append((f"BPF `{prog}` under the switch storm", "≤ 150 ns/event", figure(xs, nsf, " ns") + fl, met(median(xs) <= 150)))
empty = median([f for f in (floor_of(s, "empty") for s in storms) if f] or [0])
for ws, what in ((eu, "watch filter's early exit on an unwatched CPU (`watch --cpus` leaves the storm's CPU out)"),
                 (ew, "watch filter on a watched CPU where nothing watched runs (the storm's; its episodes are still timed)")):
    if ws:
        v = [w["overhead"]["bpf_run_ns"] / w["overhead"]["bpf_events"] for w in ws]
        fl = f"; {median(v) - empty:.0f} ns above an empty program's {empty:.0f}" if empty else ""
        rows_t.append((what, "≤ 100 ns/event", figure(v, nsf, " ns") + fl, met(median(v) <= 100)))
lives = [r for r in [run_file(f"{out}/live-tmux-{n}") for n in (1, 2, 3)] if r and r.get("overhead")]
if lives:
    slice_row("longest own slice on a measured CPU, the live view in a 160×48 tmux, default run (decided at the end)", lives)
    x = [share_of_self(r) for r in lives]
    rows_t.append(("`self` share of stall time, the same live view", "≤ 2 %", figure(x, pct1, " %"), met(median(x) <= 2.0)))
    w = [pct_of(r["overhead"], r["overhead"]["tracer_cpu_ns"]) for r in lives]
    rows_t.append(("… jitterscope's threads in the window, the same live view", "", figure(w, pct, " %") + "; " + lost_of(lives), "–"))
def rss_of(n_dir):
    try:
        xs = [int(l) for l in open(f"{n_dir}/rss") if l.strip()]
    except FileNotFoundError:
        return None
    return xs or None
for kind, what, cpu_target in (("idle", "an idle watch (`watch --pid` of a sleeping process, 20 s)", 0.05),
                               ("busy", "a busy watch (`watch --` the measuring-only workload, both its threads spinning, 20 s)", None)):
    ws = watch_files(f"watch-{kind}")
    if not ws:
        continue
    c = [pct_of(w["overhead"], w["overhead"]["tracer_cpu_ns"]) for w in ws]
    b = [pct_of(w["overhead"], w["overhead"]["bpf_run_ns"]) for w in ws]
    rows_t.append((f"own threads' CPU, {what}", f"≤ {cpu_target} % of one CPU" if cpu_target else "",
                   figure(c, pct, " %") + "; BPF " + figure(b, pct, " %"), met(median(c) <= cpu_target) if cpu_target else "–"))
    rss = [r for r in (rss_of(f"{out}/watch-{kind}-{n}") for n in (1, 2, 3)) if r]
    if rss:
        peak = [max(r) / 1024 for r in rss]
        # Flat once started: the samples after the first three seconds (loading the probes).
        spread = ", ".join(f"{min(r[3:] or r) / 1024:.1f}–{max(r[3:] or r) / 1024:.1f}" for r in rss)
        rows_t.append((f"resident memory, {what}", "≤ 24 MiB" if kind == "idle" else "",
                       figure(peak, pct1, " MiB") + f" (the highest of the samples each second; after the first 3 s, low–high per run: {spread} MiB)",
                       met(median(peak) <= 24) if kind == "idle" else "–"))
rows_t.append(("RSS over a 30-minute soak with noise", "± 5 %", "`scripts/soak.sh --duration 30m` (not run here)", "–"))
# The idle watch's soak takes the whole half hour: run apart (`scripts/soak.sh --watch --idle`),
# it leaves what it measured for the commit soaked, shown here when that is the one benched.
soaked = {}
try:
    with open(os.environ.get("SOAK_IDLE", "")) as f:
        soaked = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)
except OSError:
    pass
if soaked.get("commit") == os.environ.get("BENCH_COMMIT") and "unknown" not in soaked.get("commit", "unknown"):
    rows_t.append(("an idle watch over a 30-minute soak: RSS, its threads' CPU by thirds", "≤ 24 MiB, ≤ 0.05 % of one CPU in each third",
                   f"{soaked['cpu']}; {soaked['largest']}; RSS {soaked['flat']} (`scripts/soak.sh --watch --idle --duration {soaked['duration']}`, "
                   f"{soaked['date']}, passed)", "met"))
else:
    rows_t.append(("an idle watch over a 30-minute soak: RSS, its threads' CPU by thirds", "≤ 24 MiB, ≤ 0.05 % of one CPU in each third",
                   "`scripts/soak.sh --watch --idle --duration 30m` (not run for this commit: it takes the whole half hour)", "–"))
print()
print("Targets for jitterscope's own cost (issue 14), with what this run measured (the median of the runs listed):")
print()
print("| target | wanted | measured here | |")
print("|---|---|---|---|")
for t in rows_t:
    print("| " + " | ".join(t) + " |")
PY

# docs/performance.md: the stamp, then the tables; printed as well.
page="$root/docs/performance.md"
mkdir -p "$root/docs"
model=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)
{
  echo "# Performance"
  echo
  echo "Generated by \`scripts/bench.sh --cpus $cpus --duration $duration\` — do not edit by hand."
  echo
  echo "- commit: \`$commit\`"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: ${model:-unknown CPU}, $(nproc --all) CPUs, kernel $(uname -r)"
  echo
  echo "What the figures mean and which targets they are held to: [guarantees](guarantees.md)."
  echo
  cat "$out/bench.md"
} >"$out/performance.md"
cat "$out/performance.md"
install -m 0644 "$out/performance.md" "$page"
[ -n "${SUDO_UID:-}" ] && chown "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$page"
echo "bench: wrote $page" >&2
