#!/usr/bin/env bash
# Installs the Debian packages braid needs (only those missing), then configures and builds
# into build/ (or $BRAID_BUILD_DIR). Safe to run again; used by quickstart.sh and test.sh.
# BRAID_BUILD_TARGETS: the targets to build (default: all; the quick start builds only braid).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BRAID_BUILD_DIR:-$here/build}

pkgs=(build-essential cmake ninja-build pkg-config libopenmpi-dev openmpi-bin libyaml-cpp-dev
      libfmt-dev libgtest-dev libdnnl-dev libopenblas-dev libcli11-dev nlohmann-json3-dev
      libssl-dev zlib1g-dev libpcre2-dev libicu-dev iproute2)
# Only for the tools/ checks outside ctest (tools/check_report.sh): BRAID_SETUP_CHECKS=1.
if [ "${BRAID_SETUP_CHECKS:-0}" = 1 ]; then pkgs+=(chromium); fi
# Only for the suite on an emulated AVX2 CPU (tools/test_on_avx2_cpu.sh): BRAID_SETUP_QEMU=1.
if [ "${BRAID_SETUP_QEMU:-0}" = 1 ]; then pkgs+=(qemu-user); fi
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

# cuDNN attention for the CUDA backend: the cuDNN frontend's headers come from PyPI's
# nvidia-cudnn-frontend wheel (headers only are used; nothing is installed into Python). Without
# them (no nvcc, no network) the backend builds with braid's own attention kernel.
cudnn_fe=$here/.deps/cudnn-frontend
cudnn_fe_version=1.32.0
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ ! -f "$cudnn_fe/include/cudnn_frontend.h" ] || [ "$(cat "$cudnn_fe/VERSION" 2>/dev/null)" != "$cudnn_fe_version" ]; then
    tmp=$(mktemp -d)
    if python3 -m pip download --quiet --no-deps --only-binary=:all: \
         "nvidia-cudnn-frontend==$cudnn_fe_version" -d "$tmp" >/dev/null 2>&1; then
      rm -rf "$cudnn_fe" && mkdir -p "$cudnn_fe"
      python3 - "$tmp" "$cudnn_fe" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if n.startswith("include/"):
            z.extract(n, sys.argv[2])
PY
      echo "$cudnn_fe_version" > "$cudnn_fe/VERSION"
      echo "braid setup: cuDNN frontend $cudnn_fe_version headers in $cudnn_fe"
    else
      echo "braid setup: could not download nvidia-cudnn-frontend; the CUDA backend uses braid's own attention kernel"
    fi
    rm -rf "$tmp"
  fi
fi

jobs=$(nproc)
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${BRAID_CMAKE_ARGS:-} >/dev/null
targets=()
for t in ${BRAID_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
