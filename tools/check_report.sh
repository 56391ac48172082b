#!/usr/bin/env bash
# Opens `braid report`'s page in headless Chromium and saves a screenshot, to look at by eye
# (not part of ctest). Needs Debian's chromium (apt-get install chromium). Usage:
#   tools/check_report.sh RUN_DIR [OUT_DIR]       (default OUT_DIR: RUN_DIR)
# Writes OUT_DIR/report.html, OUT_DIR/loss.png and OUT_DIR/report-screenshot.png. Chromium runs
# with networking pointed at an unusable proxy, so a page that needed the network would show it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
run=${1:?usage: tools/check_report.sh RUN_DIR [OUT_DIR]}
out=${2:-$run}
braid=${BRAID:-$here/build/braid}
mkdir -p "$out"
"$braid" report "$run" --out "$out/report.html" --png
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || { echo "chromium not found: apt-get install chromium"; exit 1; }
"$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --proxy-server=127.0.0.1:9 --window-size=1380,2400 \
  --screenshot="$out/report-screenshot.png" "file://$(realpath "$out/report.html")" 2>/dev/null
ls -l "$out/report-screenshot.png" "$out/loss.png"
