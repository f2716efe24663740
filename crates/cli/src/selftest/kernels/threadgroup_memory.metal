// capshim selftest: threadgroup memory of the size the profile claims
// (maxThreadgroupMemoryLength). capshim prepends `#define CAPSHIM_TG_BYTES N` with the
// claimed size in bytes. Not compiled by capshim's tests (there is no Metal compiler on
// Linux): written against Apple's Metal Shading Language specification, sections "Address
// Spaces" (threadgroup) and "Synchronization and SIMD-Group Functions" (threadgroup_barrier).
//
// The threads of one threadgroup fill every byte of a CAPSHIM_TG_BYTES array with a pattern,
// wait at a barrier, then copy every byte to the output, each byte read by another thread
// than the one that wrote it. The CPU reference (crates/cli/src/selftest/reference.rs)
// compares every byte with the pattern. A device with less threadgroup memory refuses the
// kernel when it is compiled or its pipeline made, or returns other bytes.
#include <metal_stdlib>
using namespace metal;

#ifndef CAPSHIM_TG_BYTES
#error "CAPSHIM_TG_BYTES (the threadgroup memory to test, in bytes) is not defined"
#endif

kernel void capshim_threadgroup_memory(device uchar *out [[buffer(0)]],
                                       uint t [[thread_index_in_threadgroup]],
                                       uint n [[threads_per_threadgroup]]) {
    threadgroup uchar mem[CAPSHIM_TG_BYTES];
    for (uint i = t; i < CAPSHIM_TG_BYTES; i += n) {
        mem[i] = uchar((i * 31u + 7u) ^ (i >> 8));
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = n - 1u - t; i < CAPSHIM_TG_BYTES; i += n) {
        out[i] = mem[i];
    }
}
