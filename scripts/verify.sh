#!/usr/bin/env bash
# The independent check of attribution: jitterscope's measured stolen time per cause on the
# consumer's CPU and on the producer's against perf's net durations over the same window. For
# each scenario —
#   quiet     nothing injected (the tick is always there),
#   task      a competing task pinned to the consumer's CPU, busy 2 ms every 40 ms,
#   kworker   `echo 1 > /proc/sys/vm/stat_refresh` every 50 ms (refresh_vm_stats kworkers)
# — `perf record -k mono` of the same CPUs runs around `jitterscope --cpus P,C`, then
# `jitterscope verify` prints the per-cause table (jitterscope ms / perf ms / ratio / within
# tolerance) for the consumer's CPU, then the producer's. A scenario passes when both tables
# pass and its injected cause was graded within tolerance on the consumer's. Prints Markdown; exit 0 when every scenario passes.
# Usage: sudo scripts/verify.sh [--cpus 0,1] [--duration 12s] [--order perf-first|jitterscope-first]
#        [--attribution live|end]   (`end`: the runs decide their culprits after the workload)
# Two tracers on one tracepoint run one after the other: the one attached second takes its
# timestamps after the first one's handler, so its short episodes look ~0.3-1 µs shorter
# (perf-first, the default: jitterscope's; jitterscope-first: perf's, perf then attaches during
# a 4 s warm-up). Running both orders shows that bias of the method itself.
# Mounts tracefs if it is not mounted (perf's tracepoints need it) and unmounts it at the end,
# also on failure and Ctrl-C; every process it starts is ended by its pid.
set -euo pipefail

# Before anything can mount it (perf mounts tracefs by itself when it finds it missing).
tracefs=/sys/kernel/tracing
tracefs_was_mounted=0
mountpoint -q "$tracefs" && tracefs_was_mounted=1
debugfs_was_mounted=0
mountpoint -q /sys/kernel/debug && debugfs_was_mounted=1

source "$(dirname "$0")/env.sh"

cpus=0,1
duration=12s
order=perf-first
attribution=live
usage="usage: $0 [--cpus P,C] [--duration 12s] [--order perf-first|jitterscope-first|both] [--attribution live|end]"
while [ $# -gt 0 ]; do
  case "$1" in
    --cpus) cpus=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --order) order=$2; shift 2 ;;
    --attribution) attribution=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
case $order in
  perf-first | jitterscope-first | both) ;;
  *) echo "--order $order: give perf-first, jitterscope-first or both; $usage" >&2; exit 2 ;;
esac
producer=${cpus%%,*}
consumer=${cpus##*,}
if [ "$(id -u)" -ne 0 ]; then
  echo "verify: perf record of tracepoints and jitterscope's probes need root: sudo $0" >&2
  exit 1
fi
command -v perf >/dev/null 2>&1 || {
  echo "verify: perf is missing; install it (Debian: apt-get install linux-perf) or run scripts/deps.sh as root" >&2
  exit 1
}

cargo build --release --quiet
js="${CARGO_TARGET_DIR:-$root/target}/release/jitterscope"
out=$(mktemp -d)
perf_pid=
noise_pid=
child=
mounted_tracefs=0

# perf writes its file and exits on SIGINT; TERM, then KILL, if it hangs.
stop_perf() {
  [ -n "$perf_pid" ] || return 0
  local sig
  for sig in INT INT TERM KILL; do
    kill -"$sig" "$perf_pid" 2>/dev/null || break
    for _ in $(seq 50); do kill -0 "$perf_pid" 2>/dev/null || break 2; sleep 0.2; done
  done
  wait "$perf_pid" 2>/dev/null || true
  perf_pid=
}
stop_noise() {
  [ -n "$noise_pid" ] && kill "$noise_pid" 2>/dev/null || true
  [ -n "$noise_pid" ] && wait "$noise_pid" 2>/dev/null || true
  noise_pid=
}
cleanup() {
  set +e
  [ -n "$child" ] && { kill -INT "$child" 2>/dev/null; wait "$child" 2>/dev/null; }
  stop_noise
  stop_perf
  [ "$mounted_tracefs" = 1 ] && umount "$tracefs"
  [ "$debugfs_was_mounted" = 0 ] && mountpoint -q /sys/kernel/debug && umount /sys/kernel/debug
  [ -n "${VERIFY_KEEP:-}" ] && echo "verify: kept $out" >&2 || rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$tracefs_was_mounted" = 0 ]; then
  mount -t tracefs nodev "$tracefs"
  mounted_tracefs=1
fi
events=()
while read -r tp; do events+=(-e "$tp"); done < <("$js" verify --print-perf-events)

# A FIFO nobody writes to: `read -t` on it sleeps without forking a `sleep` (which would run
# on the pinned CPU too and be a cause of its own).
mkfifo "$out/idle"

# The noise of a scenario, in the background; its pid in noise_pid.
start_noise() {
  case $1 in
    quiet) ;;
    task)
      # Busy 2 ms, then asleep 38 ms, pinned to the consumer's CPU.
      taskset -c "$consumer" bash -c '
        exec 3<>"$1"
        while :; do
          s=${EPOCHREALTIME/./}
          while (( ${EPOCHREALTIME/./} - s < 2000 )); do :; done
          read -t 0.038 -u 3 _ || true
        done' verify-task "$out/idle" &
      noise_pid=$!
      ;;
    kworker)
      # From the producer's CPU: each write runs refresh_vm_stats on every CPU's kworker.
      taskset -c "$producer" bash -c '
        exec 3<>"$1"
        while :; do
          echo 1 >/proc/sys/vm/stat_refresh
          read -t 0.05 -u 3 _ || true
        done' verify-kworker "$out/idle" &
      noise_pid=$!
      ;;
  esac
}

# Starts perf record of the CPUs into $1/perf.data and waits until it records; its pid in
# perf_pid. Its own process stays on the producer's CPU, off the one compared.
start_perf() {
  taskset -c "$producer" perf record -k mono -C "$cpus" -m 4M "${events[@]}" -o "$1/perf.data" \
    >"$1/perf.log" 2>&1 &
  perf_pid=$!
  for _ in $(seq 100); do
    [ -s "$1/perf.data" ] && break
    kill -0 "$perf_pid" 2>/dev/null || break
    sleep 0.1
  done
  if ! kill -0 "$perf_pid" 2>/dev/null; then
    echo "verify: perf record did not start:" >&2
    cat "$1/perf.log" >&2
    exit 1
  fi
  sleep 1 # perf attaches after it creates the file
}

# One scenario into $3: perf and jitterscope (attached first: $2) with the noise, then perf
# script. While another jitterscope holds the CPUs, it waits and starts over. jitterscope
# ends on SIGINT by itself and exits 130: waiting with the `wait` builtin lets this script's
# trap run at once on Ctrl-C.
record() {
  local name=$1 order=$2 dir=$3 rc warmup=1s
  [ "$order" = jitterscope-first ] && warmup=4s
  for _ in $(seq 60); do
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$order" = perf-first ] && start_perf "$dir"
    start_noise "$name"
    [ "$name" = task ] && echo "$noise_pid" >"$dir/task.pid"
    "$js" --cpus "$cpus" --duration "$duration" --warmup "$warmup" --no-tui --label "verify-$name" \
      --attribution "$attribution" --output "$dir/runs" >"$dir/run.log" 2>&1 &
    child=$!
    if [ "$order" = jitterscope-first ]; then
      # Its probes are attached once it names its CPUs; perf then has the warm-up to attach.
      for _ in $(seq 300); do
        grep -q '^jitterscope: producer' "$dir/run.log" && break
        kill -0 "$child" 2>/dev/null || break
        sleep 0.1
      done
      kill -0 "$child" 2>/dev/null && start_perf "$dir"
    fi
    rc=0
    wait "$child" || rc=$?
    child=
    stop_noise
    stop_perf
    [ $rc -gt 128 ] && exit $rc
    if [ $rc = 0 ]; then
      perf script -i "$dir/perf.data" --ns -F cpu,time,event,trace >"$dir/perf.txt" 2>"$dir/perf-script.log"
      return 0
    fi
    if grep -q 'already measured by another jitterscope' "$dir/run.log"; then
      echo "verify: $name: CPUs $cpus are measured by another jitterscope; starting again in 10 s" >&2
      sleep 10
      continue
    fi
    echo "verify: $name: jitterscope failed (status $rc):" >&2
    tail -n 5 "$dir/run.log" >&2
    exit 1
  done
  echo "verify: $name: the CPUs stayed taken for 10 minutes" >&2
  exit 1
}

# Grades CPU $1 of the scenario in $dir (its first order in $first) into $dir/table$2.md,
# printed; returns verify's status.
grade_cpu() {
  local cpu=$1 suffix=$2 rc=0
  if [ "$order" = both ]; then
    "$js" verify --run "$(run_file "$first")" --perf-script "$first/perf.txt" --cpu "$cpu" \
      --swapped-run "$(run_file "$dir/jitterscope-first")" \
      --swapped-perf-script "$dir/jitterscope-first/perf.txt" --order perf-first \
      >"$dir/table$suffix.md" 2>"$dir/verify$suffix.log" || rc=$?
  else
    "$js" verify --run "$(run_file "$dir")" --perf-script "$dir/perf.txt" --cpu "$cpu" --order "$order" \
      >"$dir/table$suffix.md" 2>"$dir/verify$suffix.log" || rc=$?
  fi
  cat "$dir/table$suffix.md"
  [ -s "$dir/verify$suffix.log" ] && [ ! -s "$dir/table$suffix.md" ] && cat "$dir/verify$suffix.log"
  return $rc
}

run_file() { ls "$1"/runs/*.json | grep -v '\.trace\.json$'; }

echo "### jitterscope against perf — $(hostname), $(nproc) CPUs, kernel $(uname -r), CPUs $cpus (consumer $consumer), $duration per scenario"
echo
case $order in
  both) attached="each scenario twice, perf attached first at each tracepoint, then jitterscope; graded across the two orders" ;;
  *) attached="$order: attached first at each tracepoint" ;;
esac
echo "\`perf record -k mono -C $cpus\` of $(( ${#events[@]} / 2 )) tracepoints around \`jitterscope --cpus $cpus --duration $duration\` ($attached); \`jitterscope verify\` compares the consumer's CPU, then the producer's."
verdicts=()
failed=0
for name in quiet task kworker; do
  echo "verify: scenario $name" >&2
  dir="$out/$name"
  if [ "$order" = both ]; then
    record "$name" perf-first "$dir/perf-first"
    record "$name" jitterscope-first "$dir/jitterscope-first"
    first="$dir/perf-first"
  else
    record "$name" "$order" "$dir"
    first="$dir"
  fi
  echo
  echo "#### scenario: $name"
  echo
  case $name in
    quiet) echo "Nothing injected; the tick is always there." ;;
    task) echo "A competing task \`bash[$(cat "$first/task.pid")]\` pinned to CPU $consumer, busy 2 ms every 40 ms." ;;
    kworker) echo "\`echo 1 > /proc/sys/vm/stat_refresh\` every 50 ms from CPU $producer: refresh_vm_stats on CPU $consumer's kworker." ;;
  esac
  echo
  lost=$(grep -ihE 'lost|chunks' "$first"/perf.log "$first"/perf-script.log ${dir}/jitterscope-first/perf*.log 2>/dev/null || true)
  [ -n "$lost" ] && echo "WARNING: perf reported lost events: $lost" && echo
  # Each CPU graded alike: the consumer's into table.md, the producer's (nothing is injected
  # there but perf's own process and the kworker scenario's writer) into table-producer.md.
  rc=0
  grade_cpu "$consumer" "" || rc=$?
  rc_producer=0
  echo
  grade_cpu "$producer" "-producer" || rc_producer=$?
  # The injected cause must be in the table and graded within tolerance.
  injected=ok
  case $name in
    task)
      # The injected shell's row, by its pid; or the row of every `bash` on the CPU, where
      # another shell ran there too (the run file then has one row for the command name's
      # processes, and both recorders count all of them in it).
      row=$(grep -E "^\| bash(\[($(cat "$dir"/task.pid "$dir"/*/task.pid 2>/dev/null | paste -sd'|'))\])? \|" "$dir/table.md" || true) ;;
    kworker)
      row=$(grep -E "^\| kworker/$consumer:[0-9]+ \(.*refresh_vm_stats" "$dir/table.md" || true) ;;
    quiet)
      row=$(grep -F "| local timer |" "$dir/table.md" || true) ;;
  esac
  # Several rows may match (two of the CPU's kworkers ran refresh_vm_stats): those under the
  # floor are listed, not graded; every graded one must be within, and one must be graded.
  graded=$(grep -v "not graded (under" <<<"$row" || true)
  outside=$(grep -v '| ✓ |$' <<<"$graded" || true)
  within=$(grep '| ✓ |$' <<<"$graded" || true)
  if [ "$order" = both ] && [ -n "$outside" ]; then
    # Across both orders, the cause's row in the recording where perf lost its switches is
    # not graded (perf cannot tell) when the other recording grades it; and a row outside in
    # one order may lie between the two (the section after the two tables says so): such
    # rows count as within.
    still=
    while IFS='|' read -r _ cause _; do
      [ -n "$cause" ] || continue
      # The section names a cause without its details (a kworker's work functions).
      cause=$(echo "$cause" | sed 's/^ *//; s/ *$//; s/ (.*)$//')
      if grep -F "| $cause |" "$dir/table.md" | grep -q "✓ (the handlers' difference)"; then
        within+="$cause"$'\n'
      else
        still+="$cause"$'\n'
      fi
    done < <(grep -v "not graded (perf lost" <<<"$outside" || true)
    outside=$still
  fi
  if [ -z "$row" ]; then
    injected="its cause is not in the table"
  elif [ -z "$graded" ] || [ -z "$within" ] || [ -n "$outside" ]; then
    injected="its cause is not graded within tolerance: $(echo "$row" | awk -F'|' '{print $2 "→" $(NF-1)}' | tr -s ' ' | paste -sd ';')"
  fi
  if [ $rc = 0 ] && [ $rc_producer = 0 ] && [ "$injected" = ok ]; then
    verdicts+=("$name: PASS")
  else
    failed=1
    why=()
    # Across both orders, the verdict of the two together (each order's own comes before it).
    [ $rc != 0 ] && why+=("$(sed -n 's/^\*\*verdict: FAIL\*\* \(([a-z ]*) \)\{0,1\}— //p' "$dir/table.md" | tail -1)")
    [ $rc_producer != 0 ] && why+=("producer's CPU $producer: $(sed -n 's/^\*\*verdict: FAIL\*\* \(([a-z ]*) \)\{0,1\}— //p' "$dir/table-producer.md" | tail -1)")
    [ "$injected" != ok ] && why+=("$injected")
    verdicts+=("$name: FAIL — $(printf '%s; ' "${why[@]}" | sed 's/; $//')")
  fi
done
echo
echo "#### verdict"
echo
for v in "${verdicts[@]}"; do echo "- $v"; done
echo
if [ $failed = 0 ]; then
  echo "verify: passed — jitterscope's measured time per cause agrees with perf on CPUs $consumer and $producer"
else
  echo "verify: FAILED — see the tables above"
  exit 1
fi
