#!/usr/bin/env bash
# Installs what is missing, builds jitterscope (release) and runs it with the given
# arguments, e.g.: sudo scripts/run.sh --cpus 0,1 --duration 10s
set -euo pipefail
source "$(dirname "$0")/env.sh"
cargo build --release --quiet
exec "$root/target/release/jitterscope" "$@"
