#!/usr/bin/env python3
"""The shell code blocks of the user docs, for tests/e2e/docs_commands.sh (stdlib only).

A fenced block whose info string is empty, `bash`, `sh`, `shell` or `console` is a command
block: the test runs it, unless an HTML comment on the lines just above its fence says why not.
Blocks with another info string (`text` for output, `yaml`, `json`) are not commands; one
whose first line nevertheless starts like a command (`braid `, `mpirun `, `bash `, ...) is an
error, so a command cannot hide in a `text` block. The markers (invisible in rendered
Markdown):

  <!-- test: skip REASON -->          not run here; REASON is required (a GPU, Slurm, ...)
  <!-- test: replace 'OLD' 'NEW' -->  run with OLD replaced by NEW (shell-quoted words; OLD
                                      must occur in the block, so a stale marker fails)

Usage: docs_blocks.py check FILE...        list the blocks, exit 1 on a marker error
       docs_blocks.py emit OUTDIR FILE...  also write OUTDIR/NNN.sh for each block to run and
                                          OUTDIR/index.tsv (NNN, file:line, first line)
"""
import os
import re
import shlex
import sys

SHELL_INFO = {"", "bash", "sh", "shell", "console"}
COMMAND_START = re.compile(r"^\s*((build/)?braid\s+[a-z][a-z-]*(\s|$)"
                           r"|(mpirun|bash|python3|sbatch|kubectl)\s+-?[\w/.]|cat >)")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([A-Za-z0-9_+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*test:\s*(.*?)\s*-->\s*$")


class DocError(Exception):
    pass


def blocks(path):
    """Yield (line, info, text, markers) for every fenced block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if MARKER.match(lines[i]):
                # A marker must be followed (after more markers) by a fence.
                j = i + 1
                while j < len(lines) and MARKER.match(lines[j]):
                    j += 1
                if j >= len(lines) or not FENCE.match(lines[j]):
                    raise DocError(f"{path}:{i + 1}: a test marker not directly above a code block")
            i += 1
            continue
        fence, info = m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not (lines[j].strip() == fence):
            j += 1
        if j >= len(lines):
            raise DocError(f"{path}:{i + 1}: code block never closed")
        markers = []
        k = i - 1
        while k >= 0 and MARKER.match(lines[k]):
            markers.insert(0, (k + 1, MARKER.match(lines[k]).group(1)))
            k -= 1
        yield i + 1, info, "\n".join(lines[i + 1:j]) + "\n", markers
        i = j + 1


def classify(path, line, info, text, markers):
    """('run', script) | ('skip', reason) | ('other', None)."""
    where = f"{path}:{line}"
    if info not in SHELL_INFO:
        if markers:
            raise DocError(f"{where}: test markers on a ```{info} block (only command blocks run)")
        first = text.lstrip("\n").split("\n", 1)[0]
        if COMMAND_START.match(first):
            raise DocError(f"{where}: a ```{info} block starting like a command ({first.strip()!r}): "
                           "tag it ```bash so the test runs it, or mark it skipped with a reason")
        return "other", None
    skip = None
    script = text
    for mline, body in markers:
        words = body.split(None, 1)
        if not words:
            raise DocError(f"{path}:{mline}: empty test marker")
        if words[0] == "skip":
            if len(words) < 2 or len(words[1].strip()) < 8:
                raise DocError(f"{path}:{mline}: 'test: skip' needs the reason the block cannot run here")
            skip = words[1].strip()
        elif words[0] == "replace":
            try:
                args = shlex.split(words[1] if len(words) > 1 else "")
            except ValueError as e:
                raise DocError(f"{path}:{mline}: bad 'test: replace' marker: {e}")
            if len(args) != 2:
                raise DocError(f"{path}:{mline}: 'test: replace' takes two quoted words, OLD and NEW")
            if args[0] not in script:
                raise DocError(f"{path}:{mline}: 'test: replace' text {args[0]!r} is not in the block")
            script = script.replace(args[0], args[1])
        else:
            raise DocError(f"{path}:{mline}: unknown test marker '{words[0]}' (skip or replace)")
    if skip is not None:
        return "skip", skip
    return "run", script


def main(argv):
    if len(argv) < 2 or argv[0] not in ("check", "emit"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, files = argv[0], argv[1:]
    outdir = None
    if mode == "emit":
        outdir, files = files[0], files[1:]
        os.makedirs(outdir, exist_ok=True)
    counts = {"run": 0, "skip": 0, "other": 0}
    index = []
    try:
        for path in files:
            for line, info, text, markers in blocks(path):
                kind, what = classify(path, line, info, text, markers)
                counts[kind] += 1
                where = f"{path}:{line}"
                if kind == "skip":
                    print(f"skip {where}: {what}")
                elif kind == "run":
                    n = f"{len(index) + 1:03d}"
                    first = what.strip().split("\n", 1)[0]
                    index.append(f"{n}\t{where}\t{first}")
                    if outdir:
                        with open(os.path.join(outdir, n + ".sh"), "w") as f:
                            f.write(what)
    except DocError as e:
        print(f"docs_blocks: {e}", file=sys.stderr)
        return 1
    if outdir:
        with open(os.path.join(outdir, "index.tsv"), "w") as f:
            f.write("".join(l + "\n" for l in index))
    print(f"{counts['run']} command blocks to run, {counts['skip']} skipped with a reason, "
          f"{counts['other']} other blocks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
