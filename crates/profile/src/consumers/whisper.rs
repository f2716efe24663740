//! whisper.cpp: its Metal work goes through ggml-metal, with the same gates as llama.cpp,
//! and flash attention on by default.
//!
//! From whisper.cpp v1.9.3 ([`WHISPER_SOURCE`]): `whisper_context_default_params` sets
//! `flash_attn = true`; the vendored ggml-metal turns simdgroup reduction on with Apple7 or
//! Metal3 and simdgroup matrix multiply with Apple7, and without them reports MUL_MAT,
//! SOFT_MAX, NORM (reduction) and FLASH_ATTN_EXT (matrix multiply) unsupported, so ggml's
//! scheduler runs them on the CPU. On the paravirtual device (Metal3 is never answered) that
//! means: the GPU with Apple7, otherwise the CPU. The issue's short form, "Metal only with
//! Apple7", is this rule with flash attention on; with `-nfa` Metal3 alone would do.

use super::Inputs;

/// Where the whisper.cpp rule was read.
pub const WHISPER_SOURCE: &str = "whisper.cpp v1.9.3: src/whisper.cpp (whisper_context_default_params: flash_attn = true), ggml/src/ggml-metal/ggml-metal-device.m (the simdgroup gates, as in llama.cpp)";

/// What whisper.cpp decides from a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Whisper {
    /// Its encoder and decoder run on the GPU with the default settings (flash attention
    /// on): simdgroup reduction and matrix multiply, i.e. Apple7. Otherwise the heavy ops
    /// fall back to the CPU.
    pub metal: bool,
    /// With flash attention off (`-nfa`): the matrix work runs on the GPU with simdgroup
    /// reduction alone (Apple7 or Metal3).
    pub metal_without_flash_attention: bool,
}

impl Whisper {
    /// Applies the rule of [`WHISPER_SOURCE`].
    pub fn decide(inputs: &Inputs<'_>) -> Whisper {
        let reduction = inputs.supports(1007) || inputs.supports(5001);
        let matrix = inputs.supports(1007);
        Whisper {
            metal: reduction && matrix,
            metal_without_flash_attention: reduction,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Answers;
    use crate::profile::Profile;

    #[test]
    fn the_gpu_only_with_apple7() {
        let stock = Answers::paravirtual_stock();
        let at = |family| {
            let answers = stock.with_profile(&Profile::new(family, 32768, None).unwrap());
            Whisper::decide(&Inputs::new(&answers))
        };
        assert!(!at(1006).metal && !at(1006).metal_without_flash_attention);
        assert!(at(1007).metal && at(1010).metal);
        let mut metal3 = stock.clone();
        metal3.families.insert(5001, true);
        let d = Whisper::decide(&Inputs::new(&metal3));
        assert!(!d.metal && d.metal_without_flash_attention);
    }
}
