//! llama.cpp's flash-attention vector kernel (FA-vec): the tuned configurations it picks by
//! Apple GPU family, and the threadgroup memory each needs.
//!
//! Read from llama.cpp 0c1e570 as vendored by llama-cpp-python 0.3.36 ([`FA_VEC_SOURCE`]):
//!
//! - `fa_vec_pick(gpu_family, dtype, dk, dv, ne11, ne01)` (ggml-metal-tuning.cpp) looks the
//!   family up in `fa_vec_tuned_table`, rows for Apple7, 8, 9 and 10 only; any other family,
//!   and every KV length below 1024, gets the baseline configuration, Q = 1.
//! - `ggml_metal_op_flash_attn_ext` (ggml-metal-ops.cpp) computes the threadgroup memory of
//!   the picked configuration, `fa_vec_smem(nsg, Q)` = (pad128(dk) + 4·32 + 2·pad128(dv)) ·
//!   Q · nsg halves, padded to 16 bytes, with nsg = 1, 2 or 4 simdgroups (4 once the KV
//!   length exceeds 4096). When that exceeds the device's `maxThreadgroupMemoryLength` it
//!   falls back to the baseline (Q = 1); otherwise it asserts
//!   `smem <= max_theadgroup_memory_size` and dispatches with that much threadgroup memory.
//!
//! So a claimed threadgroup memory decides which tuned rows run, and a claim above the GPU's
//! real 32768 bytes lets llama.cpp dispatch configurations the GPU cannot hold.
//! [`TUNED`] is the table reduced to what decides that: per family and head size, the
//! largest Q of any row.

/// Where the FA-vec rules were read.
pub const FA_VEC_SOURCE: &str = "llama.cpp 0c1e570 (2026-10-01) as vendored by llama-cpp-python 0.3.36: ggml/src/ggml-metal/ggml-metal-tuning.cpp (fa_vec_tuned_table, fa_vec_pick), ggml-metal-ops.cpp (ggml_metal_op_flash_attn_ext: fa_vec_smem, the fallback to the baseline, GGML_ASSERT(smem <= max_theadgroup_memory_size))";

/// The KV cache values one simdgroup handles (`OP_FLASH_ATTN_EXT_VEC_NCPSG`).
pub const NCPSG: u64 = 32;
/// The most simdgroups a threadgroup uses (KV length above 4096).
pub const MAX_NSG: u64 = 4;

/// The Apple families with tuned rows, as generation numbers, and the chips the rows were
/// measured on (the segment headings of `fa_vec_tuned_table`).
pub const TUNED_FAMILIES: &[(i64, &str)] = &[
    (7, "M1, M1 Ultra"),
    (8, "M2, M2 Max, M2 Pro"),
    (9, "A18 Pro, M3 Max, M3 Pro, M3 Ultra, M4, M4 Max, M4 Pro"),
    (10, "M5 Max"),
];

/// (family generation, dk, dv, the largest Q of its rows) for every head size with tuned
/// rows, from `fa_vec_tuned_table` (1033 rows).
pub const TUNED: &[(i64, u16, u16, u8)] = &[
    (7, 32, 32, 4),
    (7, 64, 64, 4),
    (7, 96, 96, 4),
    (7, 128, 128, 2),
    (7, 192, 128, 4),
    (7, 192, 192, 2),
    (7, 256, 256, 2),
    (7, 320, 256, 2),
    (7, 512, 512, 1),
    (7, 576, 512, 1),
    (8, 32, 32, 4),
    (8, 64, 64, 4),
    (8, 96, 96, 4),
    (8, 128, 128, 4),
    (8, 192, 128, 4),
    (8, 192, 192, 2),
    (8, 256, 256, 2),
    (8, 320, 256, 4),
    (8, 512, 512, 1),
    (8, 576, 512, 1),
    (9, 32, 32, 4),
    (9, 64, 64, 4),
    (9, 96, 96, 4),
    (9, 128, 128, 4),
    (9, 192, 128, 2),
    (9, 192, 192, 2),
    (9, 256, 256, 2),
    (9, 320, 256, 2),
    (9, 512, 512, 1),
    (9, 576, 512, 1),
    (10, 32, 32, 4),
    (10, 64, 64, 4),
    (10, 96, 96, 4),
    (10, 128, 128, 4),
    (10, 192, 128, 4),
    (10, 192, 192, 4),
    (10, 256, 256, 2),
    (10, 320, 256, 2),
    (10, 512, 512, 4),
    (10, 576, 512, 4),
];

/// `fa_vec_smem(nsg, Q)` for head sizes `dk`, `dv`, in bytes (non-sparse attention).
pub fn smem(dk: u16, dv: u16, q: u8, nsg: u64) -> u64 {
    let pad128 = |x: u16| u64::from(x).next_multiple_of(128);
    let halves = (pad128(dk) + 4 * NCPSG + 2 * pad128(dv)) * u64::from(q) * nsg;
    (halves * 2).next_multiple_of(16)
}

/// The chips the tuned rows of a family were measured on, if it has any.
pub fn tuned_on(family: i64) -> Option<&'static str> {
    TUNED_FAMILIES
        .iter()
        .find(|&&(f, _)| f == family)
        .map(|&(_, chips)| chips)
}

/// One tuned configuration at its largest Q, with the threadgroup memory it needs at 4
/// simdgroups (KV length above 4096).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FaVecConfig {
    /// K head size.
    pub dk: u16,
    /// V head size.
    pub dv: u16,
    /// Queries per threadgroup of the tuned row.
    pub q: u8,
    /// Threadgroup memory it needs, in bytes.
    pub threadgroup_memory: u64,
}

/// The tuned configurations of `family` (a generation number) that differ from the baseline:
/// every head size whose rows pick Q above 1, at its largest Q, with the threadgroup memory
/// it needs at 4 simdgroups. (The baseline, Q = 1, needs at most 14336 bytes.)
pub fn configs(family: i64) -> impl Iterator<Item = FaVecConfig> {
    TUNED
        .iter()
        .filter(move |&&(f, _, _, q)| f == family && q > 1)
        .map(|&(_, dk, dv, q)| FaVecConfig {
            dk,
            dv,
            q,
            threadgroup_memory: smem(dk, dv, q, MAX_NSG),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smem_matches_the_kernels_layout() {
        // dk = dv = 128, Q = 1, nsg = 1: (128 + 128 + 256) halves = 1024 bytes.
        assert_eq!(smem(128, 128, 1, 1), 1024);
        // The largest configurations of the Apple10 rows: DeepSeek-style 576/512 at Q = 4.
        assert_eq!(smem(576, 512, 4, 4), 57344);
        assert_eq!(smem(512, 512, 4, 4), 53248);
        // Apple8's 320/256 at Q = 4 needs exactly the 32768 bytes every Apple GPU has.
        assert_eq!(smem(320, 256, 4, 4), 32768);
    }

    #[test]
    fn only_apple10_rows_need_more_than_the_gpus_have() {
        for family in 7..=10 {
            let over: Vec<FaVecConfig> = configs(family)
                .filter(|c| c.threadgroup_memory > 32768)
                .collect();
            assert_eq!(over.is_empty(), family != 10, "Apple{family}: {over:?}");
        }
        assert_eq!(configs(5).count(), 0);
        assert_eq!(tuned_on(9).map(|c| c.contains("M3 Max")), Some(true));
        assert_eq!(tuned_on(5), None);
    }
}
