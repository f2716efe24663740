// capshim selftest: SIMD-group reduction (simd_sum, simd_max), which llama.cpp turns on with
// Apple7 or Metal3. Not compiled by capshim's tests (there is no Metal compiler on Linux):
// written against Apple's Metal Shading Language specification, section "SIMD-Group
// Functions" (metal_simdgroup, included by metal_stdlib).
//
// Thread i's value is a small integer, so every sum is exact in float and the CPU reference
// (crates/cli/src/selftest/reference.rs) must match it bit for bit. Each thread writes three
// floats: the sum and the maximum over its SIMD-group, and the SIMD-group width it ran with.
#include <metal_stdlib>
using namespace metal;

static inline float capshim_value(uint i) {
    return float(int((i * 7u + 3u) % 17u) - 8);
}

kernel void capshim_simd_reduction(device float *out [[buffer(0)]],
                                   uint gid [[thread_position_in_grid]],
                                   uint width [[threads_per_simdgroup]]) {
    float x = capshim_value(gid);
    out[gid * 3u + 0u] = simd_sum(x);
    out[gid * 3u + 1u] = simd_max(x);
    out[gid * 3u + 2u] = float(width);
}
