#!/usr/bin/env bash
# Installs what building and testing jitterscope needs, only what is missing (idempotent).
# System packages come from Debian's archive through apt-get; Rust is the toolchain already
# on the machine (rustup), never installed here.
set -euo pipefail
# Standard output carries only what the caller evaluates (a PATH line); everything else,
# apt-get included, goes to standard error.
exec 3>&1 1>&2

packages=(clang libelf-dev zlib1g-dev pkg-config make gcc)
# taskset and setpriv (pinning competing tasks, dropping privileges), tmux (the live view's
# real-terminal test), stress-ng (switch and hrtimer storms), capsh (capability tests).
packages+=(util-linux tmux stress-ng libcap2-bin)
# perf, the independent recorder the attribution is checked against (tests/verify_bpf.rs,
# scripts/verify.sh).
packages+=(linux-perf)
# node_exporter and promtool (Debian's prometheus package): the metrics file served by the
# textfile collector and checked (tests/metrics.rs, scripts/soak.sh --metrics).
packages+=(prometheus-node-exporter prometheus)
# oslat and cyclictest (rt-tests): latency-critical programs jitterscope did not write, watched
# and checked against their own measurement (tests/watch_bpf.rs).
packages+=(rt-tests)
# podman with the runc runtime and a static busybox: real containers started offline from a
# root file system directory, watched and named by container (tests/containers_bpf.rs).
packages+=(podman runc busybox-static)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing packages ${missing[*]}; run this as root (sudo $0) or install them: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts Prometheus and node_exporter as services listening on every interface when
  # it installs them; the tests only need the binaries (they start their own node_exporter on
  # the loopback). Services this script installed are stopped and disabled again; ones that
  # were there before are left alone.
  for p in prometheus prometheus-node-exporter; do
    if [[ " ${missing[*]} " == *" $p "* ]] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
      systemctl disable --now "$p.service" >/dev/null 2>&1 || true
      echo "deps: $p installed for its binary; its service is disabled (systemctl enable --now $p to run it)"
    fi
  done
fi

# cargo under sudo: root's PATH often lacks the invoking user's ~/.cargo/bin.
if ! command -v cargo >/dev/null 2>&1; then
  for d in "${CARGO_HOME:-}/bin" "$HOME/.cargo/bin" "/root/.cargo/bin" ${SUDO_USER:+"$(getent passwd "$SUDO_USER" | cut -d: -f6)/.cargo/bin"}; do
    if [ -x "$d/cargo" ]; then
      echo "deps: using cargo from $d" >&2
      echo "export PATH=\"$d:\$PATH\"" >&3
      exit 0
    fi
  done
  echo "error: cargo not found; install Rust (rustup) — jitterscope needs Rust 1.88 or newer" >&2
  exit 1
fi
