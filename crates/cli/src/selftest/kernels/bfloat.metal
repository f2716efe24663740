// capshim selftest: bfloat arithmetic, which llama.cpp turns on with Apple6 or Metal3 (and
// Metal stops emulating with Apple9). Not compiled by capshim's tests (there is no Metal
// compiler on Linux): written against Apple's Metal Shading Language specification, section
// "Scalar Data Types" (bfloat, Metal Shading Language 3.1, macOS 14; the compiler defines
// __HAVE_BFLOAT__ where it has the type). Narrowing conversions round to nearest even, the
// default Apple documents for MTLCompileOptions.floatingPointConversionRoundingMode.
//
// Thread i converts x = (4 k + 1) / 256 (k = 37 i mod 1000; never halfway between two bfloat
// values, so the rounding has one right answer) and y = (i mod 13 - 6) / 8 to bfloat, and
// computes a * b + a in bfloat. It writes two floats: bfloat(x) and the result. The CPU
// reference (crates/cli/src/selftest/reference.rs) rounds the same way.
#include <metal_stdlib>
using namespace metal;

#if !defined(__HAVE_BFLOAT__)
#error "this Metal compiler has no bfloat type (Metal Shading Language 3.1, macOS 14, is needed)"
#endif

kernel void capshim_bfloat(device float *out [[buffer(0)]],
                           uint gid [[thread_position_in_grid]]) {
    float x = float(4u * ((gid * 37u) % 1000u) + 1u) / 256.0f;
    float y = float(int(gid % 13u) - 6) / 8.0f;
    bfloat a = bfloat(x);
    bfloat b = bfloat(y);
    bfloat r = a * b + a;
    out[gid * 2u + 0u] = float(a);
    out[gid * 2u + 1u] = float(r);
}
