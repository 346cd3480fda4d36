#!/usr/bin/env bash
# Fuzzes every parser of outside data (tests/fuzz): the run-file reader and every renderer
# (run_file), the perf-script parser (perf_script) and the interval-log reader (interval_log),
# for a bounded time split between them. Installs cargo-fuzz from crates.io if missing; uses the nightly toolchain when
# rustup has one, else stable with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs nightly flags).
# Each corpus grows in tests/fuzz/corpus/TARGET (git-ignored), seeded from
# tests/fuzz/seeds/TARGET. Exits non-zero when libFuzzer finds a crash, naming the input.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET…]   (default 60 s in all, split between the
# targets; default every target)
set -euo pipefail
source "$(dirname "$0")/env.sh"

seconds=${1:-60}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS]  (a whole number of seconds, e.g. 60; got '$seconds')" >&2
  exit 2
fi

fuzz_dir=tests/fuzz
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(run_file perf_script interval_log)
fi
for target in "${targets[@]}"; do
  if [ ! -f "$fuzz_dir/fuzz_targets/$target.rs" ]; then
    echo "fuzz: no target '$target' (have: $(ls "$fuzz_dir"/fuzz_targets | sed 's/\.rs$//' | tr '\n' ' '))" >&2
    exit 2
  fi
done
each=$((seconds / ${#targets[@]}))
if [ "$each" -lt 1 ]; then
  each=1
fi

# libFuzzer itself is C++, built by the libfuzzer-sys crate.
if ! command -v c++ >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "fuzz: no C++ compiler (libFuzzer needs one); run as root or: apt-get install g++" >&2
    exit 1
  fi
  echo "fuzz: installing g++ (libFuzzer is C++)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ >/dev/null
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz from crates.io" >&2
  cargo install cargo-fuzz --locked
fi

toolchain=()
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  toolchain=(+nightly)
else
  echo "fuzz: no nightly toolchain; using stable with RUSTC_BOOTSTRAP=1" >&2
  export RUSTC_BOOTSTRAP=1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in "${targets[@]}"; do
  corpus=$fuzz_dir/corpus/$target
  mkdir -p "$corpus"
  cp "$fuzz_dir"/seeds/$target/* "$corpus"/

  before=$(find "$corpus" -type f | wc -l)
  echo "fuzz: $target for ${each}s, corpus $corpus ($before inputs)" >&2
  status=0
  cargo "${toolchain[@]}" fuzz run --fuzz-dir "$fuzz_dir" "$target" "$corpus" -- \
    -max_total_time="$each" -rss_limit_mb=2048 \
    -print_final_stats=1 2>&1 | tee "$log" || status=$?

  after=$(find "$corpus" -type f | wc -l)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  echo
  echo "fuzz: $target: ${execs:-?} runs (${rate:-?}/s), corpus $before → $after inputs"
  if [ "$status" -ne 0 ]; then
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    echo "fuzz: FAILED (exit $status)${crash:+: the input is $crash}" >&2
    if [ -n "$crash" ]; then
      echo "fuzz: reproduce with: cargo ${toolchain[*]} fuzz run --fuzz-dir $fuzz_dir $target $crash" >&2
      echo "fuzz: shrink it with: cargo ${toolchain[*]} fuzz tmin --fuzz-dir $fuzz_dir $target $crash" >&2
    fi
    exit 1
  fi
  echo "fuzz: $target: no crash in ${each}s"
done
