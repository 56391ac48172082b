#!/usr/bin/env python3
"""Writes tests/data/nf4_reference.safetensors: bitsandbytes' block-wise quantisation of one
seeded (97, 396) f32 weight, for tests/unit/test_quantize.cpp (ctest never runs this script).

Needs `pip install bitsandbytes numpy` (its wheel ships libbitsandbytes_cpu.so; torch itself is
not imported, so the CUDA build of torch need not load). What comes from where:

- nf4 / nf4_absmax: bitsandbytes' quantize_4bit (backends/default/ops.py, the path bitsandbytes
  takes on a CPU), re-run here in numpy step for step: absmax per 64-block, x * (1 / absmax) for
  whole blocks and x / absmax for the last partial one, clamp to [-1, 1], bucketize on the
  midpoints of the NF4 table (ties go to the lower code), two codes per byte, first in the high
  nibble.
- nf4_dequant: bitsandbytes' own C++ dequantiser (cdequantize_blockwise_cpu_nf4_fp32) on that.
- dynamic_map: create_dynamic_map(signed=True) (functional.py), re-run with float32 linspace
  exactly as torch computes it; dynamic_map_unsigned the same with signed=False.
- nested_*: double quantisation as functional.quantize_4bit(compress_statistics=True):
  offset = mean(absmax) (float32), then bitsandbytes' own C++ 8-bit quantiser
  (cquantize_blockwise_cpu_fp32, blocks of 256) on absmax - offset with the dynamic map.
- dyn8 / dyn8_absmax / dyn8_dequant: the same 8-bit C++ quantiser and dequantiser on x itself
  in blocks of 2048 (adamw8bit's state layout).
"""
import ctypes as ct
import importlib.metadata
import importlib.util
import json
import os
import struct
import sys

import numpy as np


NF4 = np.array(
    [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
     -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
     0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
     0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=np.float32)


def torch_linspace_f32(start, end, steps):
    # aten's CPU linspace: step in float, the first half from start, the second from end.
    start, end = np.float32(start), np.float32(end)
    step = (end - start) / np.float32(steps - 1)
    half = steps // 2
    out = np.empty(steps, dtype=np.float32)
    for i in range(steps):
        if i < half:
            out[i] = start + step * np.float32(i)
        else:
            out[i] = end - step * np.float32(steps - i - 1)
    return out


def create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8):
    data = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    for i in range(max_exponent_bits):
        fraction_items = int(2 ** (i + non_sign_bits - max_exponent_bits) + 1 if signed else
                             2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1)
        b = torch_linspace_f32(0.1, 1, fraction_items)
        means = (b[:-1] + b[1:]) / np.float32(2.0)
        scale = np.float32(10 ** (-(max_exponent_bits - 1) + i))
        data += list((scale * means).astype(np.float32))
        if signed:
            data += list((-scale * means).astype(np.float32))
    if additional_items > 0:
        b = torch_linspace_f32(0.1, 1, additional_items + 1)
        means = (b[:-1] + b[1:]) / np.float32(2.0)
        scale = np.float32(10 ** (-(max_exponent_bits - 1) + i))
        data += list((scale * means).astype(np.float32))
        if signed:
            data += list((-scale * means).astype(np.float32))
    data.append(0)
    data.append(1.0)
    data += [0] * (256 - len(data))
    data.sort()
    return np.array(data, dtype=np.float32)


def quantize_nf4(x, block):
    flat = x.reshape(-1).astype(np.float32)
    n = flat.size
    rem = n % block
    full = n - rem
    com = flat[:full].reshape(-1, block)
    absmax = np.abs(com).max(axis=1)
    recip = (np.float32(1.0) / np.maximum(absmax, np.float32(1e-38))).astype(np.float32)
    scaled = np.clip(com * recip[:, None], -1, 1).reshape(-1)
    if rem:
        am = np.maximum(np.abs(flat[full:]).max(), np.float32(1e-38))
        absmax = np.concatenate([absmax, [am]]).astype(np.float32)
        scaled = np.concatenate([scaled, np.clip(flat[full:] / am, -1, 1)])
    if scaled.size % 2:
        scaled = np.pad(scaled, (0, 1))
    bounds = ((NF4[:-1] + NF4[1:]) / np.float32(2)).astype(np.float32)
    q = np.searchsorted(bounds, scaled.astype(np.float32), side="left").astype(np.uint8)
    return ((q[::2] << 4) | q[1::2]).astype(np.uint8), absmax.astype(np.float32)


def ptr(a):
    return a.ctypes.data_as(ct.c_void_p)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        dt = {np.dtype(np.float32): "F32", np.dtype(np.uint8): "U8"}[a.dtype]
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/nf4_reference.safetensors"
    # Located, not imported: importing bitsandbytes imports torch.
    where = os.path.dirname(importlib.util.find_spec("bitsandbytes").origin)
    lib = ct.CDLL(os.path.join(where, "libbitsandbytes_cpu.so"))
    rng = np.random.default_rng(21)
    rows, cols = 97, 396  # 38412 values: 600 blocks of 64 and one of 12; cols even (C++ kernel)
    x = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
    x[3, :64] = 0.0  # an all-zero block
    x[5, 7] = 0.3    # an outlier
    n = x.size

    nf4, absmax = quantize_nf4(x, 64)
    deq = np.empty(n, dtype=np.float32)
    lib.cdequantize_blockwise_cpu_nf4_fp32(ptr(nf4), ptr(absmax), ptr(deq), ct.c_longlong(64),
                                           ct.c_longlong(rows), ct.c_longlong(cols))

    dyn = create_dynamic_map(True)
    offset = np.array([absmax.mean(dtype=np.float32)], dtype=np.float32)
    centred = (absmax - offset[0]).astype(np.float32)
    nb2 = -(centred.size // -256)
    qabs = np.empty(centred.size, dtype=np.uint8)
    absmax2 = np.empty(nb2, dtype=np.float32)
    lib.cquantize_blockwise_cpu_fp32(ptr(dyn), ptr(centred), ptr(absmax2), ptr(qabs),
                                     ct.c_longlong(256), ct.c_longlong(centred.size))

    flat = x.reshape(-1).copy()
    nb8 = -(n // -2048)
    q8 = np.empty(n, dtype=np.uint8)
    absmax8 = np.empty(nb8, dtype=np.float32)
    lib.cquantize_blockwise_cpu_fp32(ptr(dyn), ptr(flat), ptr(absmax8), ptr(q8),
                                     ct.c_longlong(2048), ct.c_longlong(n))
    deq8 = np.empty(n, dtype=np.float32)
    lib.cdequantize_blockwise_cpu_fp32(ptr(dyn), ptr(q8), ptr(absmax8), ptr(deq8),
                                       ct.c_longlong(2048), ct.c_longlong(n))

    write_safetensors(out, {
        "x": x, "nf4": nf4, "nf4_absmax": absmax, "nf4_dequant": deq.reshape(rows, cols),
        "dynamic_map": dyn, "dynamic_map_unsigned": create_dynamic_map(False),
        "nested_offset": offset, "nested_absmax": qabs, "nested_absmax2": absmax2,
        "dyn8": q8, "dyn8_absmax": absmax8, "dyn8_dequant": deq8,
    })
    print(f"wrote {out}: bitsandbytes {importlib.metadata.version('bitsandbytes')}")


if __name__ == "__main__":
    main()
