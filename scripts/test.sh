#!/usr/bin/env bash
# Installs what is missing, builds, and runs every check: formatting, clippy (warnings are
# errors), the build, and all tests — BPF tests included, which need root. Outside CI,
# JITTERSCOPE_SKIP_BPF=1 skips the BPF tests, each named as skipped.
set -euo pipefail
source "$(dirname "$0")/env.sh"

if [ "${CI:-}" = "true" ] && [ -n "${JITTERSCOPE_SKIP_BPF:-}" ]; then
  echo "test.sh: JITTERSCOPE_SKIP_BPF is ignored in CI: BPF tests always run there" >&2
  unset JITTERSCOPE_SKIP_BPF
fi

step() { printf '\n== %s ==\n' "$*"; }
step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --all-targets -- -D warnings"
RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo clippy --all-targets --quiet -- -D warnings
step "cargo build (release, warnings are errors)"
RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo build --release --quiet
step "cargo test"
RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo test --release -- --test-threads="$(nproc)"
echo
echo "test.sh: all checks passed"
