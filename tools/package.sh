#!/usr/bin/env bash
# tools/package.sh BUILD_DIR OUT.tar.gz: a relocatable tarball of braid for nodes that have the
# same OS release: bin/braid, share/braid/{configs,docs}, and lib/ with the shared libraries the
# binary needs beyond the base system (yaml-cpp, oneDNN, OpenBLAS, fmt, PCRE2, ...). The binary
# finds lib/ through its RPATH ($ORIGIN/../lib), so the folder can be unpacked anywhere.
# Not bundled: the C/C++ runtime (libc, libm, libstdc++, libgcc_s, ld.so), Open MPI (mpirun and
# its plugins must be the node's own, of the same major version), and CUDA (libcuda, cudart,
# cuBLASLt, NCCL come from the node's driver and toolkit).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: tools/package.sh BUILD_DIR OUT.tar.gz" >&2
  exit 2
fi
build=$1
out=$2
[ -x "$build/braid" ] || { echo "tools/package.sh: no braid binary in '$build' (build it first)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
name=braid-$("$build/braid" --version | head -1 | awk '{print $2}')
root=$stage/$name
cmake --install "$build" --prefix "$root" > /dev/null
mkdir -p "$root/lib"
# Base system and the node's own MPI and CUDA: left out.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libmpi|libopen-(pal|rte)|libhwloc|libevent|libudev|libOpenCL|libcuda|libcudart|libcublas|libnccl|libcudnn)'
ldd "$root/bin/braid" | awk '$3 ~ /^\// {print $1, $3}' | while read -r lib path; do
  if ! [[ $lib =~ $skip ]]; then cp -L "$path" "$root/lib/$lib"; fi
done
mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out" "$name"
echo "wrote $out ($(ls "$root/lib" | wc -l) bundled libraries: $(ls "$root/lib" | tr '\n' ' '))"
