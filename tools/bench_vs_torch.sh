#!/usr/bin/env bash
# braid vs PyTorch CPU training of the same model on this CPU, alternating runs so that load
# drift hits both alike, then one table of median tokens/s (fp32, and bf16 vs torch's bf16
# autocast). PyTorch comes from PyPI into a venv (default /tmp/venv-bench-torch, reused).
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
  OMP_NUM_THREADS=$threads "$build/bench_train" --precision bf16 "$@" |
    awk '/^f32 tokens\/s/ { print "braid fp32", $NF } /^bf16 tokens\/s/ { print "braid bf16", $NF }' |
    tee -a "$log"
  OMP_NUM_THREADS=$threads "$py" "$here/bench_torch.py" --threads "$threads" "$@" |
    awk '/^fp32 / { print "torch fp32", $3 } /^bf16 autocast/ { print "torch bf16", $4 }' |
    tee -a "$log"
done
uptime
# Median tokens/s per row, then braid / torch per precision.
sort -k1,2 -k3n "$log" | awk '
  { key = $1 " " $2; v[key, ++n[key]] = $3 }
  END {
    for (key in n) { m = n[key]; med[key] = (m % 2) ? v[key, (m + 1) / 2] : (v[key, m / 2] + v[key, m / 2 + 1]) / 2 }
    printf "\n%-12s %12s %12s %8s\n", "precision", "braid tok/s", "torch tok/s", "ratio"
    split("fp32 bf16", ps, " ")
    for (i = 1; i <= 2; i++) { p = ps[i]; b = med["braid " p]; t = med["torch " p]
      printf "%-12s %12.0f %12.0f %8.2f\n", p, b, t, (t > 0 ? b / t : 0) }
    printf "(median of %d rounds; torch bf16 is torch.autocast bfloat16)\n", n["braid fp32"]
  }'
