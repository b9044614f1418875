"""CUDA kernels (CuPy) for the permutation-min step; same arithmetic as the numba kernels."""

from __future__ import annotations

from typing import Any

_SRC = r"""
extern "C" __global__ void minhash32(const unsigned long long* hashes,
    const long long* offsets, const unsigned long long* a, const unsigned long long* b,
    unsigned int* sig, long long n_docs, long long k) {
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n_docs * k) return;
  long long i = t / k, j = t % k;
  unsigned long long best = 0xFFFFFFFFFFFFFFFFull;
  for (long long p = offsets[i]; p < offsets[i + 1]; ++p) {
    unsigned long long h = hashes[p];
    unsigned long long x = (h ^ (h >> 32)) & 0xFFFFFFFFull;
    unsigned long long v = (a[j] * x + b[j]) >> 32;
    if (v < best) best = v;
  }
  sig[t] = offsets[i + 1] > offsets[i] ? (unsigned int)best : 0xFFFFFFFFu;
}
__device__ unsigned long long fmix64(unsigned long long k) {
  k ^= k >> 33; k *= 0xFF51AFD7ED558CCDull; k ^= k >> 33; k *= 0xC4CEB9FE1A85EC53ull;
  k ^= k >> 33; return k;
}
extern "C" __global__ void minhash64(const unsigned long long* hashes,
    const long long* offsets, const unsigned long long* s,
    unsigned long long* sig, long long n_docs, long long k) {
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n_docs * k) return;
  long long i = t / k, j = t % k;
  unsigned long long best = 0xFFFFFFFFFFFFFFFFull;
  for (long long p = offsets[i]; p < offsets[i + 1]; ++p) {
    unsigned long long v = fmix64(hashes[p] ^ s[j]);
    if (v < best) best = v;
  }
  sig[t] = best;
}
"""
_MODULE: Any = None


def minhash_signatures_gpu(
    hashes: Any, offsets: Any, permutations: Any, use_64_bit_hash: bool = False
) -> Any:
    """CuPy version of :func:`curator_dask.dedup.minhash.minhash_signatures`."""
    import cupy

    global _MODULE
    if _MODULE is None:
        _MODULE = cupy.RawModule(code=_SRC)
    hashes = cupy.ascontiguousarray(hashes, dtype=cupy.uint64)
    offsets = cupy.ascontiguousarray(offsets, dtype=cupy.int64)
    perms = cupy.ascontiguousarray(permutations, dtype=cupy.uint64)
    n_docs, k = len(offsets) - 1, perms.shape[1]
    total = n_docs * k
    threads = 256
    blocks = max(1, (total + threads - 1) // threads)
    if use_64_bit_hash:
        sig = cupy.empty((n_docs, k), dtype=cupy.uint64)
        _MODULE.get_function("minhash64")(
            (blocks,),
            (threads,),
            (
                hashes,
                offsets,
                cupy.ascontiguousarray(perms[1]),
                sig,
                cupy.int64(n_docs),
                cupy.int64(k),
            ),
        )
    else:
        sig = cupy.empty((n_docs, k), dtype=cupy.uint32)
        _MODULE.get_function("minhash32")(
            (blocks,),
            (threads,),
            (
                hashes,
                offsets,
                cupy.ascontiguousarray(perms[0]),
                cupy.ascontiguousarray(perms[1]),
                sig,
                cupy.int64(n_docs),
                cupy.int64(k),
            ),
        )
    return sig
