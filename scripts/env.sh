# Sourced by the other scripts: installs missing dependencies and puts cargo on PATH.
# shellcheck shell=bash
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
eval "$("$root/scripts/deps.sh")"
