#!/usr/bin/env bash
# The one prepared check of the CUDA backend on a machine with a GPU, run as one command:
# builds braid_core with the CUDA backend (BRAID_CORE_ONLY: no MPI, yaml-cpp or oneDNN needed),
# runs the GPU tests (every CUDA kernel and whole training steps against the CPU), the GPU
# benchmark (GPT-2 124M and a 1B Llama in bf16: tokens/s, MFU, peak memory) and the planner's
# GPU calibration (gpu_calibrate: `braid plan --calibrate --device cuda` in the core-only build,
# CAL_SECONDS of probes, default 20; the profile is OUTDIR/gpu_profile.json), and prints one
# table. Within about 9 minutes on one H200 (CHECK_SECONDS, default 540, bounds every stage).
#
#   bash tools/gpu_check.sh --prepare   here, on a machine with the -dev packages: collects what
#                                       a bare GPU machine lacks into .gpu_deps/ (fmt and
#                                       nlohmann_json headers, libcrypto, GoogleTest's sources,
#                                       the cuDNN frontend's headers; about 13 MiB) and dry-runs the build and the run as the
#                                       GPU machine would, without a GPU (the tests skip)
#   bash tools/gpu_check.sh [OUTDIR]    on the GPU machine (carry .gpu_deps): the check itself;
#                                       logs and the table go to OUTDIR (default $OUT or
#                                       build-gpu/out)
# Environment: GPU_ARCH (default 90-real: the H100/H200), JOBS (default all cores), CAL_SECONDS.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
deps=$here/.gpu_deps

prepare() {
  rm -rf "$deps" && mkdir -p "$deps/include" "$deps/lib"
  cp -r /usr/include/fmt /usr/include/nlohmann /usr/include/openssl "$deps/include/"
  cp -r /usr/include/x86_64-linux-gnu/openssl/* "$deps/include/openssl/" 2>/dev/null || true
  cp -L /usr/lib/x86_64-linux-gnu/libcrypto.so.3 "$deps/lib/"
  ln -s libcrypto.so.3 "$deps/lib/libcrypto.so"
  cp -r /usr/src/googletest "$deps/googletest"
  # The cuDNN frontend's headers (tools/setup.sh fetched them): cuDNN attention on the GPU.
  if [ -f "$here/.deps/cudnn-frontend/include/cudnn_frontend.h" ]; then
    cp -r "$here/.deps/cudnn-frontend" "$deps/cudnn-frontend"
  else
    echo "gpu_check: no .deps/cudnn-frontend (run tools/setup.sh): the check runs without cuDNN attention"
  fi
  # (In a git worktree .git is a file: ask git where the exclude file is.)
  local exclude
  exclude=$(git -C "$here" rev-parse --git-path info/exclude 2>/dev/null || echo "$here/.git/info/exclude")
  case $exclude in /*) ;; *) exclude=$here/$exclude ;; esac
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.gpu_deps/' "$exclude" 2>/dev/null || echo '/.gpu_deps/' >>"$exclude"
  echo "gpu_check: .gpu_deps/ is $(du -sh "$deps" | cut -f1); dry run without a GPU:"
  DRY_RUN=1 run_check "$here/build-gpu-dry/out"
}

run_check() {
  local out=$1 build=$here/build-gpu${DRY_RUN:+-dry}
  mkdir -p "$out"
  local t0=$SECONDS
  # cuBLASLt: the toolkit's, else the pip wheel's (GPU images keep CUDA libraries there).
  local libdirs="" py=${PYTHON:-python3}
  if command -v "$py" >/dev/null; then
    libdirs=$("$py" - <<'PY' 2>/dev/null || true
import importlib, os
dirs = []
for m in ("nvidia.cublas", "nvidia.cuda_runtime", "nvidia.cu13", "nvidia.cudnn", "nvidia.nccl"):
    try:
        mod = importlib.import_module(m)
        for p in mod.__path__:
            if os.path.isdir(os.path.join(p, "lib")): dirs.append(os.path.join(p, "lib"))
    except Exception:
        pass
print(";".join(dirs))
PY
)
  fi
  local dry_args=()
  # The dry run hides this machine's fmt, nlohmann_json, GoogleTest, oneDNN and OpenBLAS, so
  # it builds from .gpu_deps exactly as the GPU machine will.
  [ -n "${DRY_RUN:-}" ] && dry_args=(-DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON
    -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
    -DBRAID_GEMM_LIBS=OFF)
  # One device call: every stage is time-boxed and the table is written whatever fails. The
  # outputs are at most eight files (build.log, tests.log, nccl.log, bench.md, calibrate.log,
  # gpu_profile.json, summary.md).
  # The tests come first: they stop only when a minute is left; each benchmark then needs 100 s
  # and the calibration 40 s of what remains. 540 s leaves the device call (600 s) room to spare.
  local deadline=$((t0 + ${CHECK_SECONDS:-540}))
  left() { echo $((deadline - SECONDS)); }
  {
    echo "gcc: $(gcc --version 2>&1 | head -1)"
    echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
    echo "cmake: $(cmake --version 2>&1 | head -1)"
    echo "library folders: ${libdirs:-none: the toolkit has them}"
  } >"$out/build.log"
  # The CUDA sources compile without warnings here; a newer host compiler's new warnings must not
  # cost the one check, so they stay warnings (BRAID_CUDA_WERROR=OFF).
  local configure=(cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DBRAID_CORE_ONLY=ON -DBRAID_CUDA=ON -DBRAID_CUDA_WERROR=OFF
    "-DCMAKE_CUDA_ARCHITECTURES=${GPU_ARCH:-90-real}" "-DCMAKE_PREFIX_PATH=$deps"
    "-DOPENSSL_ROOT_DIR=$deps" "-DBRAID_GTEST_SOURCE=$deps/googletest"
    "-DBRAID_CUDA_LIB_DIRS=$libdirs" "-DBRAID_CUDNN_FRONTEND_DIR=$deps/cudnn-frontend/include"
    "${dry_args[@]}")
  local build_rc=0
  "${configure[@]}" >>"$out/build.log" 2>&1 || build_rc=$?
  # -k 0: a target that fails does not stop the others (the tests run without the benchmark).
  [ $build_rc -eq 0 ] && { timeout -k 5 "$(left)" cmake --build "$build" -j "${JOBS:-$(nproc)}" \
    --target braid_gpu_tests bench_gpu gpu_calibrate -- -k 0 >>"$out/build.log" 2>&1 ||
    build_rc=$?; }
  # A cuDNN frontend the toolkit's cudnn.h does not build with: again without cuDNN attention.
  if [ $build_rc -ne 0 ] && grep -q "attention_cudnn" "$out/build.log" && [ "$(left)" -gt 300 ]; then
    echo "gpu_check: rebuilding without cuDNN attention" >>"$out/build.log"
    build_rc=0
    "${configure[@]}" -DBRAID_CUDNN=OFF >>"$out/build.log" 2>&1 &&
      timeout -k 5 "$(left)" cmake --build "$build" -j "${JOBS:-$(nproc)}" --target braid_gpu_tests \
        bench_gpu gpu_calibrate -- -k 0 >>"$out/build.log" 2>&1 || build_rc=$?
  fi
  [ $build_rc -eq 0 ] || grep -E "error|FAILED" -A3 "$out/build.log" | head -40
  local built=$SECONDS
  export LD_LIBRARY_PATH="${libdirs//;/:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$deps/lib"
  local gpu
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
    head -1 || true)
  local bin=$build/tests/braid_gpu_tests rc=0 suites=0 crashed=""
  : >"$out/tests.log"
  if [ ! -x "$bin" ]; then
    rc=2
  else
    # Without a GPU the binary says why and exits 77 before running anything.
    timeout -k 5 60 "$bin" --gtest_filter=NoSuchTest >"$out/tests.log" 2>&1 || rc=$?
    if [ $rc -eq 0 ]; then
      # Each suite in its own process (a faulting kernel loses its CUDA context, which would fail
      # every test after it), each time-boxed.
      local s src sanitized=""
      for s in $(timeout -k 5 60 "$bin" --gtest_list_tests 2>/dev/null | grep -E '^[^ ].*\.$'); do
        if [ "$(left)" -lt 60 ]; then
          echo "[ gpu_check ] out of time: suites from $s on not run" >>"$out/tests.log"
          crashed+=" (out of time from $s)"
          break
        fi
        suites=$((suites + 1))
        src=0
        local cap=120
        [ "$(left)" -lt 130 ] && cap=$(($(left) - 10))
        timeout -k 5 "$cap" "$bin" --gtest_filter="$s*" >>"$out/tests.log" 2>&1 || src=$?
        # 1: failed tests (listed); anything else: a crash, a device fault (3: the fixture stops
        # the binary) or the timeout (124).
        [ $src -le 1 ] || crashed+=" $s(exit $src)"
        [ $src -eq 0 ] || rc=1
        # The first suite that faulted once more under compute-sanitizer, which names the kernel
        # and the bad access (it works on Firecracker machines; elsewhere it says why not).
        if [ $src -gt 1 ] && [ $src -ne 124 ] && [ -z "${sanitized:-}" ] &&
          command -v compute-sanitizer >/dev/null && [ "$(left)" -gt 300 ]; then
          sanitized=$s
          echo "[ gpu_check ] $s under compute-sanitizer:" >>"$out/tests.log"
          timeout -k 5 120 compute-sanitizer --tool memcheck --print-limit 20 "$bin" \
            --gtest_filter="$s*" >>"$out/tests.log" 2>&1 || true
        fi
      done
    fi
  fi
  local tests_done=$SECONDS
  # The 1-rank NCCL communicator on its own (every collective and dtype against known results;
  # skipped where the build found no NCCL).
  local nccl_rc=0
  if [ -x "$bin" ] && [ $rc -ne 77 ] && [ "$(left)" -gt 40 ]; then
    timeout -k 5 30 "$bin" --gtest_filter='*GpuNccl*:GpuTest.Nccl*' >"$out/nccl.log" 2>&1 ||
      nccl_rc=$?
  else
    echo "not run" >"$out/nccl.log"
  fi
  : >"$out/bench.md"
  if [ -x "$build/bench_gpu" ]; then
    if [ $rc -ne 77 ]; then
      local m
      for m in "gpt2-124m --batch 16 --seq 1024" "llama-1b --batch 4 --seq 2048"; do
        if [ "$(left)" -lt 100 ]; then echo "bench_gpu --model $m: out of time" >>"$out/bench.md"; continue; fi
        # shellcheck disable=SC2086
        timeout -k 5 100 "$build/bench_gpu" --model $m >"$out/bench_one.txt" 2>&1 ||
          echo "bench_gpu --model $m: exit $?" >>"$out/bench.md"
        # the table once, then only the rows
        if [ -s "$out/bench.md" ] && grep -q '^|' "$out/bench.md"; then
          grep '^|' "$out/bench_one.txt" | tail -n +3 >>"$out/bench.md" || true
          grep -v '^|' "$out/bench_one.txt" | tail -3 >>"$out/bench.md" || true
        else
          cat "$out/bench_one.txt" >>"$out/bench.md"
        fi
        rm -f "$out/bench_one.txt"
      done
    else
      timeout -k 5 60 "$build/bench_gpu" >>"$out/bench.md" 2>&1 || true
    fi
  else
    echo "bench_gpu was not built (build.log)" >"$out/bench.md"
  fi
  # The planner's device profile of this GPU (exit 77 without one: skipped).
  local cal_rc=0
  if [ ! -x "$build/gpu_calibrate" ]; then
    cal_rc=2
    echo "gpu_calibrate was not built (build.log)" >"$out/calibrate.log"
  elif [ "$(left)" -lt 40 ]; then
    cal_rc=124
    echo "out of time" >"$out/calibrate.log"
  else
    timeout -k 5 "$(left)" "$build/gpu_calibrate" --out "$out/gpu_profile.json" \
      --seconds "${CAL_SECONDS:-20}" >"$out/calibrate.log" 2>&1 || cal_rc=$?
  fi
  # The table. Counts from every suite's per-test lines (names, so the summary lists at the end
  # of each process are not counted twice).
  local passed failed skipped
  passed=$(grep -c '^\[       OK \] ' "$out/tests.log" || true)
  failed=$(grep -E '^\[  FAILED  \] [A-Za-z_/]+\.' "$out/tests.log" | sed 's/ (.*//' | sort -u |
    grep -c . || true)
  skipped=$(grep -E '^\[  SKIPPED \] [A-Za-z_/]+\.' "$out/tests.log" | sed 's/ (.*//' | sort -u |
    grep -c . || true)
  {
    echo "## gpu_check $(date -u +%Y-%m-%dT%H:%MZ) on ${gpu:-no nvidia-smi}"
    echo
    echo "| stage | result |"
    echo "| --- | --- |"
    echo "| build (core + CUDA, ${GPU_ARCH:-90-real}) | exit $build_rc, $((built - t0)) s$(grep -q 'without cuDNN attention' "$out/build.log" && echo ', without cuDNN attention') |"
    if [ $rc -eq 77 ]; then
      echo "| GPU tests | skipped: $(tail -1 "$out/tests.log") |"
    elif [ ! -x "$bin" ]; then
      echo "| GPU tests | not built (build.log) |"
    else
      echo "| GPU tests | exit $rc: $suites suites, $passed passed, $failed failed, $skipped skipped ($((tests_done - built)) s)${crashed:+; crashed or timed out:$crashed}$([ "$suites" = 0 ] && echo "; $(tail -1 "$out/tests.log")") |"
      echo "| NCCL 1-rank | exit $nccl_rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/nccl.log" | tr '\n' ' ' | sed 's/\[ *//g; s/ *\]//g') |"
      echo "| DP bucket overlap (2 ranks) | skipped: this check runs without MPI (no mpirun on the GPU machine), and NCCL refuses two ranks of one communicator on one GPU; tests/mpi/mp_train_gpu.sh runs the multi-GPU layouts where 2+ GPUs and MPI are present |"
      echo "| attention | $(grep -m1 '^attention: ' "$out/tests.log" | sed 's/^attention: //' || echo 'not reported') |"
    fi
    if [ $cal_rc -eq 77 ]; then
      echo "| plan --calibrate --device cuda | skipped: $(tail -1 "$out/calibrate.log") |"
    else
      echo "| plan --calibrate --device cuda | exit $cal_rc: $(grep -m1 -E '^measured:|error' "$out/calibrate.log" || tail -1 "$out/calibrate.log")$([ -f "$out/gpu_profile.json" ] && echo '; gpu_profile.json, calibrate.log') |"
    fi
    echo
    cat "$out/bench.md"
    if [ "$failed" != 0 ] || [ -n "$crashed" ]; then
      echo
      echo "failed tests:"
      grep -E '^\[  FAILED  \] [A-Za-z_/]+\.' "$out/tests.log" | sed 's/ (.*//' | sort -u | head -40
      grep -m5 'GPU fault in' "$out/tests.log" || true
      grep -m12 '^========= ' "$out/tests.log" || true  # compute-sanitizer's findings
    fi
    echo
    echo "total $((SECONDS - t0)) s"
  } | tee "$out/summary.md"
  [ $rc -eq 0 ] || [ $rc -eq 77 ]
}

if [ "${1:-}" = "--prepare" ]; then
  prepare
else
  [ -d "$deps" ] || { echo "gpu_check: no .gpu_deps/; run 'bash tools/gpu_check.sh --prepare' where the -dev packages are and carry .gpu_deps" >&2; exit 2; }
  run_check "${1:-${OUT:-$here/build-gpu/out}}"
fi
