#!/usr/bin/env bash
# tools/package.sh: the tarball unpacked into a fresh folder runs from there (its bundled
# libraries found through the RPATH, not the build tree), and trains a tiny model.
source "$(dirname "$0")/common.bash"
build=$(dirname "$BRAID")
bash "$SRC/tools/package.sh" "$build" "$WORK/braid.tar.gz" > package.log
mkdir fresh
tar -C fresh -xzf braid.tar.gz
bin=$(echo fresh/braid-*/bin/braid)
[ -x "$bin" ] || fail "no bin/braid in the tarball: $(tar -tzf braid.tar.gz | head)"
root=$(dirname "$(dirname "$bin")")
[ -f "$root/share/braid/docs/config.md" ] || fail "docs not installed"
[ -d "$root/share/braid/configs" ] || fail "configs not installed"
# yaml-cpp is not part of the base system: bundled, and loaded from the bundle.
ls "$root/lib" | grep -q '^libyaml-cpp' || fail "yaml-cpp not bundled: $(ls "$root/lib")"
loaded=$(ldd "$bin" | awk '/libyaml-cpp/ {print $3}')
[ -n "$loaded" ] && [ "$(realpath "$loaded")" = "$(realpath "$root/lib/$(basename "$loaded")")" ] ||
  fail "the unpacked binary does not load the bundled yaml-cpp: $(ldd "$bin" | grep yaml)"
ls "$root/lib" | grep -Eq '^lib(cuda|cudart|cublas|nccl|mpi)' && fail "CUDA or MPI libraries bundled"
make_corpus
"$bin" prepare --input corpus --out data --tokenizer byte --val-fraction 0.1 > /dev/null
write_config "$WORK/data" packaged cfg.yaml
"$bin" train cfg.yaml --set train.steps=2 --set train.device=cpu > train.log
grep -q "step 2" train.log || grep -q "step     2" train.log || fail "no step 2 in: $(tail -5 train.log)"
echo "package ok"
