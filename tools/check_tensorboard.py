#!/usr/bin/env python3
"""Reads a braid run's tfevents files back with TensorBoard's own reader.

Not part of the build or ctest: needs `pip install tensorboard`. Usage:

    python3 tools/check_tensorboard.py RUN_DIR

Exits non-zero when TensorBoard finds no scalars, a tag braid writes is missing, or the values
differ from metrics.jsonl (the same numbers, rounded to float32).
"""
import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator

TAGS = {  # TensorBoard tag -> (metrics.jsonl event, key, scale)
    "train/loss": ("train", "loss", 1.0),
    "train/lr": ("train", "lr", 1.0),
    "train/grad_norm": ("train", "grad_norm", 1.0),
    "perf/tokens_per_s": ("train", "tokens_per_s", 1.0),
    "perf/mfu_percent": ("train", "mfu", 100.0),
    "memory/peak_tensor_mib": ("train", "peak_tensor_mib", 1.0),
    "memory/peak_rss_mib": ("train", "peak_rss_mib", 1.0),
    "val/loss": ("eval", "val_loss", 1.0),
}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run = sys.argv[1]
    files = sorted(f for f in os.listdir(run) if "tfevents" in f)
    if not files:
        sys.exit(f"no tfevents files in {run}")
    acc = event_accumulator.EventAccumulator(run, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    have = acc.Tags()["scalars"]
    want = {}
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            for tag, (ev, key, scale) in TAGS.items():
                if r.get("event") == ev and isinstance(r.get(key), (int, float)):
                    want.setdefault(tag, {})[r["step"]] = r[key] * scale
    bad = 0
    for tag in TAGS:
        if tag not in want:
            print(f"{tag}: not in metrics.jsonl (e.g. eval off), not expected")
            continue
        if tag not in have:
            print(f"MISSING {tag}")
            bad += 1
            continue
        events = acc.Scalars(tag)
        got = {e.step: e.value for e in events}
        if len(got) != len(events):
            print(f"DUPLICATE steps in {tag}: {len(events)} points for {len(got)} steps")
            bad += 1
        if len(events) != len(want[tag]):
            print(f"COUNT {tag}: tensorboard {len(events)} points, metrics.jsonl {len(want[tag])}")
            bad += 1
        for step, v in want.get(tag, {}).items():
            if step not in got or not math.isclose(got[step], v, rel_tol=1e-6, abs_tol=1e-30):
                print(f"MISMATCH {tag} step {step}: tensorboard {got.get(step)} metrics.jsonl {v}")
                bad += 1
        print(f"{tag}: {len(events)} points, steps {events[0].step}..{events[-1].step}, "
              f"last {events[-1].value:.6g}")
    print(f"{len(files)} tfevents file(s), {len(have)} scalar tags")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
