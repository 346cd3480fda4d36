#!/usr/bin/env bash
# Prints the summary line of the skip log named by $1 (one `binary::test<TAB>reason` line per
# skip, as tests/common's skip() appends them): `test.sh: 0 skipped`, or
# `test.sh: 2 skipped: probe_bpf::x (reason), cli::y (reason)`. A missing log is no skip.
set -euo pipefail
log="${1:?usage: skips.sh LOG}"
n=0
if [ -f "$log" ]; then
  n=$(grep -c . "$log" || true)
fi
if [ "$n" -eq 0 ]; then
  echo "test.sh: 0 skipped"
else
  echo "test.sh: $n skipped: $(awk -F'\t' 'NF { printf "%s%s (%s)", (NR > 1 ? ", " : ""), $1, $2 }' "$log")"
fi
