#!/usr/bin/env bash
# Installs the Debian packages braid needs (only those missing), then configures and builds
# into build/ (or $BRAID_BUILD_DIR). Safe to run again; used by quickstart.sh and test.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BRAID_BUILD_DIR:-$here/build}

pkgs=(build-essential cmake ninja-build pkg-config libopenmpi-dev openmpi-bin libyaml-cpp-dev
      libfmt-dev libgtest-dev libdnnl-dev libopenblas-dev libcli11-dev nlohmann-json3-dev
      libssl-dev zlib1g-dev libpcre2-dev iproute2)
# Only for the tools/ checks outside ctest (tools/check_report.sh): BRAID_SETUP_CHECKS=1.
if [ "${BRAID_SETUP_CHECKS:-0}" = 1 ]; then pkgs+=(chromium); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "braid setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${BRAID_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$jobs"
