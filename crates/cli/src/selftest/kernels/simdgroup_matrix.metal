// capshim selftest: SIMD-group matrix multiply-accumulate (simdgroup_float8x8), which
// llama.cpp turns on with Apple7. Not compiled by capshim's tests (there is no Metal compiler
// on Linux): written against Apple's Metal Shading Language specification, section
// "SIMD-Group Matrix Functions" (metal_simdgroup_matrix, included by metal_stdlib):
// simdgroup_load(d, src, elements_per_row), simdgroup_multiply_accumulate(d, a, b, c) giving
// d = a * b + c, simdgroup_store(a, dst, elements_per_row).
//
// One SIMD-group of 32 threads computes D = A * B + C for A 8x16, B 16x8, C 8x8 (row-major),
// in two 8x8x8 steps accumulating into one matrix. The entries are small integers, so D is
// exact in float and the CPU reference (crates/cli/src/selftest/reference.rs) must match it
// bit for bit. The output is D, 64 floats, row-major.
#include <metal_stdlib>
using namespace metal;

kernel void capshim_simdgroup_matrix(device float *out [[buffer(0)]],
                                     uint t [[thread_index_in_threadgroup]],
                                     uint n [[threads_per_threadgroup]]) {
    threadgroup float a[8 * 16];
    threadgroup float b[16 * 8];
    threadgroup float c[8 * 8];
    for (uint i = t; i < 128u; i += n) {
        a[i] = float(int((i * 5u + 1u) % 9u) - 4);
        b[i] = float(int((i * 3u + 2u) % 7u) - 3);
    }
    for (uint i = t; i < 64u; i += n) {
        c[i] = float(int(i % 5u) - 2);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    simdgroup_float8x8 ma;
    simdgroup_float8x8 mb;
    simdgroup_float8x8 acc;
    simdgroup_load(acc, c, 8);
    for (uint k = 0u; k < 16u; k += 8u) {
        simdgroup_load(ma, a + k, 16);      // rows 0-7, columns k..k+7 of A
        simdgroup_load(mb, b + k * 8u, 8);  // rows k..k+7 of B
        simdgroup_multiply_accumulate(acc, ma, mb, acc);
    }
    simdgroup_store(acc, out, 8);
}
