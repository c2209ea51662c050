#!/usr/bin/env python3
"""tests/test_quant_ref: tallow's quant module against the `gguf` PyPI package.

Needs: numpy, gguf (PyPI; scripts/setup.sh installs them). Exits 77 if
either is missing. Loads $TALLOW_BUILD/libtallow.so through ctypes and calls
the exported quant_dequantize / quant_quantize.

Checks:
  * dequantization: bit-identical float32 output to gguf.quants.dequantize on
    the same random bytes, for every type both implement (fp16 scale fields
    are set to finite random values, everything else is raw random bits);
  * quantization: byte-identical blocks to gguf.quants.quantize for every
    type where the package has a quantizer and ours follows the same
    reference rounding (BF16, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4), on
    Gaussian data, scaled data, ties and all-zero blocks;
  * F16 / BF16 conversions against numpy over ~4M float32 bit patterns and
    all 65536 halves.
"""
import ctypes
import os
import sys

try:
    import numpy as np
    from gguf import GGMLQuantizationType as Q
    from gguf import quants as gq
except ImportError as e:  # pragma: no cover
    print(f"SKIP: needs numpy and gguf from PyPI ({e})")
    sys.exit(77)

build = os.environ.get("TALLOW_BUILD", "build")
libpath = os.path.join(build, "libtallow.so")
if not os.path.exists(libpath):
    print(f"FAIL: {libpath} not found (set TALLOW_BUILD to the build directory)")
    sys.exit(1)
lib = ctypes.CDLL(libpath)
for fn in (lib.quant_dequantize, lib.quant_quantize):
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]

rng = np.random.default_rng(1234)
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL", msg)


# type -> (block elems, block bytes, byte offsets of fp16 scale fields)
TYPES = {
    Q.F32: (1, 4, []),
    Q.F16: (1, 2, []),
    Q.BF16: (1, 2, []),
    Q.Q4_0: (32, 18, [0]),
    Q.Q4_1: (32, 20, [0, 2]),
    Q.Q5_0: (32, 22, [0]),
    Q.Q5_1: (32, 24, [0, 2]),
    Q.Q8_0: (32, 34, [0]),
    Q.IQ4_NL: (32, 18, [0]),
    Q.MXFP4: (32, 17, []),
    Q.Q2_K: (256, 84, [80, 82]),
    Q.Q3_K: (256, 110, [108]),
    Q.Q4_K: (256, 144, [0, 2]),
    Q.Q5_K: (256, 176, [0, 2]),
    Q.Q6_K: (256, 210, [208]),
    Q.IQ4_XS: (256, 136, [0]),
}


def ours_dequant(t, raw, n):
    out = np.empty(n, dtype=np.float32)
    raw = np.ascontiguousarray(raw)
    st = lib.quant_dequantize(int(t), raw.ctypes.data, out.ctypes.data, n)
    return st, out


def ours_quant(t, x, nbytes):
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(nbytes, dtype=np.uint8)
    st = lib.quant_quantize(int(t), x.ctypes.data, out.ctypes.data, x.size)
    return st, out


def random_raw(t, nblocks):
    blck, size, f16 = TYPES[t]
    raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
    if t == Q.F32:
        return rng.standard_normal(nblocks).astype(np.float32).view(np.uint8).reshape(nblocks, 4)
    for off in f16:
        mag = np.ldexp(0.5 + rng.random(nblocks), -rng.integers(3, 12, nblocks))
        sgn = np.where(rng.random(nblocks) < 0.5, -1.0, 1.0)
        raw[:, off:off + 2] = (mag * sgn).astype(np.float16).view(np.uint8).reshape(nblocks, 2)
    return raw


def same_bits(a, b):
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all((a.view(np.uint32) == b.view(np.uint32)) | nan))


# ---------------------------------------------------------------- dequantize
print("dequantize vs gguf.quants.dequantize (bitwise):")
for t, (blck, size, _) in TYPES.items():
    nblocks = 4096 if blck == 32 else 512
    if blck == 1:
        nblocks = 1 << 16
    raw = random_raw(t, nblocks)
    n = nblocks * blck
    if t in (Q.F16, Q.BF16):  # every 16-bit pattern
        raw = np.arange(1 << 16, dtype=np.uint16).view(np.uint8).reshape(-1, 2)
    with np.errstate(all="ignore"):
        want = gq.dequantize(raw.reshape(-1), t).reshape(-1)
    st, got = ours_dequant(t, raw, n)
    if st == 4:  # TL_ERR_UNSUPPORTED
        print(f"  {t.name:7s} not implemented in tallow")
        check(False, f"{t.name}: tallow has no dequantizer")
        continue
    ok = st == 0 and same_bits(got, want)
    nbad = int(np.sum(~((got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want)))))
    print(f"  {t.name:7s} {n:7d} values: {'identical' if ok else f'{nbad} differ'}")
    if not ok:
        i = int(np.argmax(got.view(np.uint32) != want.view(np.uint32)))
        print(f"    first at {i}: ours {got[i]!r} gguf {want[i]!r}")
    check(ok, f"{t.name}: dequantize differs from gguf")

# ------------------------------------------------------------------ quantize
def datasets(blck):
    n = 256 * 64
    g = rng.standard_normal(n).astype(np.float32)
    yield "gauss", g
    yield "gauss*1e-3", (g * 1e-3).astype(np.float32)
    yield "gauss*300", (g * 300).astype(np.float32)
    yield "uniform[0,1)", rng.random(n).astype(np.float32)
    # exact .5 ties after scaling: per block one 127 (Q8_0 d = 1), rest k + 0.5
    ties = (rng.integers(-127, 127, n) + 0.5).astype(np.float32)
    ties[::32] = 127.0
    yield "ties", ties
    z = g.copy()
    z[:1024] = 0.0
    z[1024:2048] = 1.5  # all-equal blocks (Q4_1 d = 0)
    z[2048:2080] = -2.0
    yield "zeros/constant", z
    grid = (rng.integers(-8, 8, n) * 0.25).astype(np.float32)  # values on a grid
    yield "grid", grid


QTYPES = [Q.BF16, Q.F16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.MXFP4]
print("quantize vs gguf.quants.quantize (bytewise):")
for t in QTYPES:
    blck, size, _ = TYPES[t]
    results = []
    for name, x in datasets(blck):
        with np.errstate(all="ignore"):
            want = gq.quantize(x.reshape(1, -1), t)
        want = np.ascontiguousarray(want).view(np.uint8).reshape(-1)
        st, got = ours_quant(t, x, want.size)
        ok = st == 0 and np.array_equal(got, want)
        if not ok:
            nb = int(np.sum(got.reshape(-1, size) != want.reshape(-1, size), axis=1).astype(bool).sum())
            results.append(f"{name}: {nb} blocks differ")
            check(False, f"{t.name} quantize on {name}: {nb} blocks differ from gguf")
    print(f"  {t.name:7s} {'identical on 7 data sets' if not results else '; '.join(results)}")

# ----------------------------------------------------- F16 / BF16 exhaustive
print("fp32 -> f16 vs numpy astype(float16) on 4M bit patterns:")
bits = rng.integers(0, 1 << 32, size=1 << 22, dtype=np.uint64).astype(np.uint32)
bits[: 1 << 20] = (bits[: 1 << 20] & 0xFFFFE000) | 0x1000  # exact ties
x = bits.view(np.float32)
with np.errstate(all="ignore"):
    want = x.astype(np.float16).view(np.uint16)
st, got = ours_quant(Q.F16, x, x.size * 2)
got = got.view(np.uint16)
nan = np.isnan(x)
check(st == 0 and np.array_equal(got[~nan], want[~nan]), "F16: fp32->fp16 differs from numpy")
check(bool(np.all((got[nan] & 0x7C00) == 0x7C00) and np.all(got[nan] & 0x3FF)), "F16: NaN not kept")
print(f"  {int(np.sum(got[~nan] != want[~nan]))} of {int((~nan).sum())} non-NaN differ; "
      f"{int(nan.sum())} NaNs stay NaN")

print("fp32 -> bf16 vs gguf BF16 on 4M bit patterns:")
bits[: 1 << 20] = (bits[: 1 << 20] & 0xFFFF0000) | 0x8000
x = bits.view(np.float32)
want = gq.quantize(x.reshape(1, -1), Q.BF16).view(np.uint16).reshape(-1)
st, got = ours_quant(Q.BF16, x, x.size * 2)
got = got.view(np.uint16)
check(st == 0 and np.array_equal(got, want), "BF16: fp32->bf16 differs from gguf")
print(f"  {int(np.sum(got != want))} of {x.size} differ (NaNs included)")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("all passed")
