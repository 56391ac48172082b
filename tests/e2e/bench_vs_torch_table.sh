#!/usr/bin/env bash
# tools/bench_vs_torch.sh's table: medians, ratios and each side's share of the GEMM peak,
# computed from bench_train's own figures. PyTorch is stood in for by a script that prints
# bench_torch.py's lines with fixed rates, so the test needs no torch. The model is just large
# enough (about 10 MFLOP a token) that shares of the peak read in whole percents.
source "$(dirname "$0")/common.bash"
build=$(dirname "$BRAID")
if [ ! -x "$build/bench_train" ]; then
  echo "skip: $build/bench_train is not built (cmake --build $build --target bench_train)"
  exit 77
fi
cat > fake_python <<'PY'
#!/bin/sh
echo "bench_torch: a stand-in for torch"
echo "precision       step time (s)   tokens/s  last loss"
echo "fp32                    0.100       2000     7.0000"
echo "bf16 autocast           0.050      10000     7.0000"
PY
chmod +x fake_python
shape=(--layers 2 --width 256 --heads 4 --vocab 256 --ctx 64 --batch 2 --steps 1 --warmup 0)
OMP_NUM_THREADS=2 "$build/bench_train" --precision bf16 "${shape[@]}" --peak-seconds 0 > own.txt
mflop=$(awk '/^model MFLOP per token/ { print $NF }' own.txt)
gflop_step=$(awk '/^model GFLOP per step/ { print $NF }' own.txt)
# 2 x 64 tokens a step: the per-token figure times the tokens is the per-step one.
awk -v m="$mflop" -v g="$gflop_step" 'BEGIN { exit !(m > 0 && (m * 128 / 1000 - g) ^ 2 < 0.0025) }' ||
  fail "model MFLOP per token $mflop does not match $gflop_step GFLOP per 128-token step"

PYTHON=$PWD/fake_python "$SRC/tools/bench_vs_torch.sh" "$build" 3 -- "${shape[@]}" --peak-seconds 0.1 > table.txt
cat table.txt
# Every round's lines are in the log: three of each row.
for row in "braid fp32" "braid bf16" "torch fp32" "torch bf16" "peak fp32" "peak bf16" "flop per_token"; do
  [ "$(grep -c "^$row " table.txt)" = 3 ] || fail "expected three '$row' lines"
done
median() { grep "^$1 " table.txt | awk '{ print $NF }' | sort -g | sed -n 2p; }
flop=$(median "flop per_token")
for p in fp32 bf16; do
  braid=$(median "braid $p")
  torch=$(median "torch $p")
  peak=$(median "peak $p")
  line=$(grep "^$p " table.txt) || fail "no $p row in the table"
  read -r _ b t ratio bp tp <<< "$line"
  [ "$b" = "$braid" ] || fail "$p: braid median $b, the rounds give $braid"
  [ "$t" = "$torch" ] || fail "$p: torch median $t, the rounds give $torch"
  awk -v r="$ratio" -v b="$braid" -v t="$torch" 'BEGIN { exit !((r - b / t) ^ 2 < 0.0001) }' ||
    fail "$p: ratio $ratio, not $braid / $torch"
  # Shares of the peak: tokens/s x GFLOP per token over the peak's GFLOP/s, in percent.
  for side in "$bp $braid" "$tp $torch"; do
    read -r shown rate <<< "$side"
    awk -v s="$shown" -v r="$rate" -v f="$flop" -v k="$peak" \
      'BEGIN { want = 100 * r * f / k; exit !((s - want) ^ 2 <= 0.0025 + 1e-9) }' ||
      fail "$p: % of peak $shown, not 100 x $rate x $flop / $peak"
  done
done
echo "ok"
