#!/usr/bin/env bash
# braid vs PyTorch CPU training of the same model on this CPU, alternating runs so that load
# drift hits both alike, then one table of median tokens/s (fp32, and bf16 vs torch's bf16
# autocast) with each side's model FLOP/s as a share of the GEMM peak bench_train measures.
# PyTorch comes from PyPI into a venv (default /tmp/venv-bench-torch, reused).
#   tools/bench_vs_torch.sh [build_dir] [rounds] [-- bench options, e.g. --layers 12 --width 768]
# Environment: THREADS (default 2), VENV (the venv), PYTHON (an interpreter that has torch:
# skips the venv). Run it on an otherwise idle machine; `uptime` is printed before and after.
set -euo pipefail
build=${1:-build} rounds=${2:-3}
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = "--" ] && shift
threads=${THREADS:-2}
for n in "$rounds" "$threads"; do
  case "$n" in
    '' | *[!0-9]* | 0*)
      echo "bench_vs_torch: rounds '$rounds' and THREADS '$threads' must be positive counts" >&2
      exit 2
      ;;
  esac
done
[ -x "$build/bench_train" ] || {
  echo "bench_vs_torch: $build/bench_train is missing; build it first:" >&2
  echo "  cmake --build $build --target bench_train" >&2
  exit 2
}
py=${PYTHON:-}
if [ -z "$py" ]; then
  venv=${VENV:-/tmp/venv-bench-torch}
  if ! "$venv/bin/python" -c "import torch" 2> /dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet torch
  fi
  py=$venv/bin/python
fi
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp /tmp/bench_vs_torch.XXXXXX)
trap 'rm -f "$log"' EXIT
uptime
for i in $(seq "$rounds"); do
  # braid's tokens/s, and what the rates are measured against: the model FLOPs of one token and
  # the GEMM peaks bench_train measures in the same process.
  OMP_NUM_THREADS=$threads "$build/bench_train" --precision bf16 "$@" |
    awk '/^model MFLOP per token/ { print "flop per_token", $NF / 1000 }
         /^f32 tokens\/s/ { print "braid fp32", $NF } /^bf16 tokens\/s/ { print "braid bf16", $NF }
         /^f32 GEMM peak/ { print "peak fp32", $NF } /^bf16 GEMM peak/ { print "peak bf16", $NF }' |
    tee -a "$log"
  OMP_NUM_THREADS=$threads "$py" "$here/bench_torch.py" --threads "$threads" "$@" |
    awk '/^fp32 / { print "torch fp32", $3 } /^bf16 autocast/ { print "torch bf16", $4 }' |
    tee -a "$log"
done
uptime
# Median of each row over the rounds, then braid / torch per precision, and each side's model
# FLOP/s as a share of braid's GEMM peak of that dtype (the same machine, the same rounds).
sort -k1,2 -k3g "$log" | awk '
  { key = $1 " " $2; v[key, ++n[key]] = $3 }
  END {
    for (key in n) { m = n[key]; med[key] = (m % 2) ? v[key, (m + 1) / 2] : (v[key, m / 2] + v[key, m / 2 + 1]) / 2 }
    printf "\n%-12s %12s %12s %8s %14s %14s\n", "precision", "braid tok/s", "torch tok/s", "ratio",
      "braid % peak", "torch % peak"
    split("fp32 bf16", ps, " ")
    for (i = 1; i <= 2; i++) { p = ps[i]; b = med["braid " p]; t = med["torch " p]; pk = med["peak " p]
      f = med["flop per_token"]
      if (pk > 0 && f > 0) { bp = sprintf("%.1f", 100 * b * f / pk); tp = sprintf("%.1f", 100 * t * f / pk) }
      else { bp = "-"; tp = "-" }
      printf "%-12s %12.0f %12.0f %8.2f %14s %14s\n", p, b, t, (t > 0 ? b / t : 0), bp, tp }
    printf "(median of %d rounds; torch bf16 is torch.autocast bfloat16; %% peak: model FLOP/s over\n", n["braid fp32"]
    printf " the GEMM peak of the dtype, %.1f GFLOP/s f32 and %.1f bf16 as bench_train measured them;\n", med["peak fp32"], med["peak bf16"]
    printf " %.6g model GFLOP per token)\n", med["flop per_token"]
  }'
