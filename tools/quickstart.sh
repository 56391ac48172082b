#!/usr/bin/env bash
# The README's first command: install, build, prepare the quickstart corpus, train, sample.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BRAID_BUILD_DIR:-$here/build}
# Only the binary the quick start runs: the tests and benchmarks are built by tools/test.sh.
BRAID_BUILD_TARGETS=${BRAID_BUILD_TARGETS:-braid} bash "$here/tools/setup.sh"
cd "$here"
# The corpus: the license texts every Debian system ships in /usr/share/common-licenses.
"$build/braid" prepare --input /usr/share/common-licenses --out data/quickstart \
    --tokenizer bpe --vocab-size 512 --val-fraction 0.05 --force
"$build/braid" train configs/quickstart.yaml "$@"
