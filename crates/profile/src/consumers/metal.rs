//! Metal's own decisions from the device's answers: the guest's `_MTLDevice` asks
//! `supportsFamily:` itself, so a raised answer changes Metal's code paths, not only the
//! application's.
//!
//! From `_MTLDevice` as decompiled in public indexes ([`METAL_SOURCE`]):
//! `-requiresBFloat16Emulation` returns `!supportsFamily(1009)`, and
//! `-readWriteTextureSupport` returns tier 2 when `supportsFamily(1004)`, else 0.

use super::Inputs;
use crate::named::Chip;

/// Where the Metal rules were read.
pub const METAL_SOURCE: &str = "Metal.framework _MTLDevice (-requiresBFloat16Emulation: !supportsFamily(1009); -readWriteTextureSupport: tier 2 when supportsFamily(1004)), decompiled from the iOS 18.0 (22A3354) restore image in the public index EthanArbuckle/iPad_10.2_18.0_22A3354_Restore, System/Library/Frameworks/Metal.framework/_MTLDevice.m; the macOS guest's device inherits _MTLDevice";

/// The family whose GPUs have native bfloat16: Apple9 (M3 and later).
pub const NATIVE_BF16_FAMILY: i64 = 1009;

/// What Metal decides from a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Metal {
    /// `requiresBFloat16Emulation`: Apple9 is not answered, so Metal emulates bfloat16.
    pub bf16_emulation: bool,
    /// `readWriteTextureSupport`: 2 (tier 2) when Apple4 is answered, else 0.
    pub read_write_texture_tier: u8,
    /// What these decisions mean on the host chip, in words.
    pub warnings: Vec<String>,
}

impl Metal {
    /// Applies the rules of [`METAL_SOURCE`].
    pub fn decide(inputs: &Inputs<'_>) -> Metal {
        let bf16_emulation = !inputs.supports(NATIVE_BF16_FAMILY);
        let mut warnings = Vec::new();
        if let Some(chip) = inputs.host_chip.filter(|c| !has_native_bf16(c)) {
            if !bf16_emulation {
                warnings.push(format!(
                    "Apple9 is answered, so Metal stops emulating bfloat16 (requiresBFloat16Emulation is false), but the {} GPU (Apple{}) has no native bfloat16",
                    chip.name,
                    chip.apple_family - 1000
                ));
            }
        }
        Metal {
            bf16_emulation,
            read_write_texture_tier: if inputs.supports(1004) { 2 } else { 0 },
            warnings,
        }
    }
}

/// Whether the chip's GPU has native bfloat16 (Apple9 and later: M3, M4, M5; not M1, M2).
pub fn has_native_bf16(chip: &Chip) -> bool {
    chip.apple_family >= NATIVE_BF16_FAMILY
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Answers;
    use crate::named::{CHIPS, apple9_64k, native};

    #[test]
    fn bf16_emulation_follows_apple9_and_warns_on_chips_without_it() {
        let stock = Answers::paravirtual_stock();
        let d = Metal::decide(&Inputs::new(&stock));
        assert!(d.bf16_emulation && d.warnings.is_empty());
        assert_eq!(d.read_write_texture_tier, 2);
        let unlocked = stock.with_profile(&apple9_64k());
        for chip in CHIPS {
            let on = Inputs {
                host_chip: Some(chip),
                ..Inputs::new(&unlocked)
            };
            let d = Metal::decide(&on);
            assert!(!d.bf16_emulation);
            assert_eq!(
                d.warnings.len(),
                usize::from(!has_native_bf16(chip)),
                "{chip:?}"
            );
            // native never warns: it claims Apple9 only where the chip has it.
            let own = stock.with_profile(&native(chip));
            let d = Metal::decide(&Inputs {
                host_chip: Some(chip),
                ..Inputs::new(&own)
            });
            assert!(d.warnings.is_empty(), "{chip:?}");
            assert_eq!(d.bf16_emulation, !has_native_bf16(chip), "{chip:?}");
        }
        let names: Vec<&str> = CHIPS
            .iter()
            .filter(|c| !has_native_bf16(c))
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["M1", "M2"]);
    }
}
