#!/usr/bin/env bash
# Regenerates the man pages in docs/man/ from the clap definitions (the same ones --help
# prints): jitterscope.1 and one jitterscope-<command>.1 per subcommand. tests/man.rs fails
# when the committed pages differ from what this writes.
# Usage: scripts/man.sh
set -euo pipefail
source "$(dirname "$0")/env.sh"

cargo build --release --quiet
js="${CARGO_TARGET_DIR:-$root/target}/release/jitterscope"
rm -f docs/man/*.1
mkdir -p docs/man
"$js" man --out docs/man
ls docs/man
