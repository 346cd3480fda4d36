#!/usr/bin/env bash
# Installs what is missing, builds, and runs every check: formatting, clippy (warnings are
# errors), the build, and all tests — BPF tests included, which need root. Outside CI,
# JITTERSCOPE_SKIP_BPF=1 skips the BPF tests, each named as skipped. Every skip (a test
# whose machine lacks a piece of hardware; outside CI also a missing precondition) is
# appended to target/test-skips.log, and the last line, also when a check fails, lists them:
# `test.sh: 0 skipped` or `test.sh: 2 skipped: probe_bpf::x (reason), …`.
#
# --extended also runs the long checks that CI does not: the fuzzers (run file, perf script,
# interval log) for a bounded time split between them (FUZZ_SECONDS in all, default 300) and
# the soak (SOAK_DURATION, default 30m).
set -euo pipefail
source "$(dirname "$0")/env.sh"

extended=
case "${1:-}" in
  "") ;;
  --extended) extended=1 ;;
  *) echo "usage: $0 [--extended]" >&2; exit 2 ;;
esac

ci=
case "${CI:-}" in [Tt][Rr][Uu][Ee] | 1) ci=1 ;; esac
if [ -n "$ci" ] && [ -n "${JITTERSCOPE_SKIP_BPF:-}" ]; then
  echo "test.sh: JITTERSCOPE_SKIP_BPF is ignored in CI: BPF tests always run there" >&2
  unset JITTERSCOPE_SKIP_BPF
fi

export JITTERSCOPE_SKIP_LOG="$root/target/test-skips.log"
mkdir -p "$root/target"
: >"$JITTERSCOPE_SKIP_LOG"
skips_summary() { bash "$root/scripts/skips.sh" "$JITTERSCOPE_SKIP_LOG"; }
trap skips_summary EXIT

step() { printf '\n== %s ==\n' "$*"; }
step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --all-targets -- -D warnings"
RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo clippy --all-targets --quiet -- -D warnings
step "cargo build (release, warnings are errors)"
RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo build --release --quiet
step "cargo test"
RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo test --release -- --test-threads="$(nproc)"

if [ -n "$extended" ]; then
  step "fuzz the run-file, perf-script and interval-log readers for ${FUZZ_SECONDS:-300} s in all"
  bash "$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-300}"
  step "soak for ${SOAK_DURATION:-30m}"
  bash "$root/scripts/soak.sh" --metrics --duration "${SOAK_DURATION:-30m}"
  step "soak of a watch for ${SOAK_DURATION:-30m}"
  bash "$root/scripts/soak.sh" --watch --metrics --duration "${SOAK_DURATION:-30m}"
  step "soak of an idle watch for ${SOAK_DURATION:-30m}"
  bash "$root/scripts/soak.sh" --watch --idle --duration "${SOAK_DURATION:-30m}"
fi
echo
echo "test.sh: all checks passed"
