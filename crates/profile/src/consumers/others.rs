//! Consumers that recognise the paravirtual device by its name, so a raised answer changes
//! little of what they do: Metal.jl and tinygrad.
//!
//! - Metal.jl ([`METAL_JL_SOURCE`]): `is_supported` accepts a device whose name contains
//!   "Paravirtual" on macOS 15 and later ("under-reports its capabilities"), and otherwise
//!   requires Apple7 and Metal3.
//! - tinygrad ([`TINYGRAD_SOURCE`]): `MetalDevice` disables its Metal graph (indirect command
//!   buffers) when the device name contains "virtual" (any case); its `arch` is the highest
//!   Apple family answered (else Mac), which turns on tensor cores from Apple7 and bfloat16
//!   from Apple6.

use super::Inputs;

/// Where the Metal.jl rule was read.
pub const METAL_JL_SOURCE: &str = "Metal.jl v1.10.3 (JuliaGPU/Metal.jl): src/initialization.jl (is_supported), lib/mtl/device.jl (is_virtual: the name contains \"Paravirtual\"); since PR 789 (v1.10.0)";

/// Where the tinygrad rule was read.
pub const TINYGRAD_SOURCE: &str = "tinygrad a9069c1 (after v0.13.0): tinygrad/runtime/ops_metal.py (MetalDevice: no MetalGraph when the name contains \"virtual\", PR 10225; arch from the highest Apple family), tinygrad/renderer/cstyle.py (MetalRenderer: tensor cores from Apple7, bfloat16 from Apple6)";

/// What Metal.jl decides from a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MetalJl {
    /// The device is recognised as paravirtual by its name (and then supported on macOS 15
    /// and later, whatever it answers).
    pub paravirtual: bool,
    /// Supported from the answers alone: Apple7 and Metal3 (what a device not recognised as
    /// paravirtual needs).
    pub supported_by_answers: bool,
}

impl MetalJl {
    /// Applies the rule of [`METAL_JL_SOURCE`].
    pub fn decide(inputs: &Inputs<'_>) -> MetalJl {
        MetalJl {
            paravirtual: inputs
                .device_name
                .is_some_and(|n| n.contains("Paravirtual")),
            supported_by_answers: inputs.supports(1007) && inputs.supports(5001),
        }
    }
}

/// What tinygrad decides from a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Tinygrad {
    /// Whether it uses its Metal graph (indirect command buffers): not on a device whose
    /// name contains "virtual".
    pub graph: bool,
    /// Its `arch`: the highest Apple family answered ("Apple9"), else "Mac2" when that is
    /// answered.
    pub arch: Option<String>,
    /// Tensor cores (simdgroup matrix) in its kernels: an arch of Apple7 or later.
    pub tensor_cores: bool,
    /// bfloat16 as a supported dtype: an arch of Apple6 or later.
    pub bfloat16: bool,
}

impl Tinygrad {
    /// Applies the rule of [`TINYGRAD_SOURCE`].
    pub fn decide(inputs: &Inputs<'_>) -> Tinygrad {
        let named_virtual = inputs
            .device_name
            .is_some_and(|n| n.to_lowercase().contains("virtual"));
        // tinygrad asks the Apple families its Metal binding names (Apple1 … Apple10).
        let apple = inputs.highest_apple_generation(10);
        let arch = match apple {
            Some(g) => Some(format!("Apple{g}")),
            None if inputs.supports(2002) => Some("Mac2".to_string()),
            None => None,
        };
        Tinygrad {
            graph: !named_virtual,
            arch,
            tensor_cores: apple.is_some_and(|g| g >= 7),
            bfloat16: apple.is_some_and(|g| g >= 6),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumers::PARAVIRTUAL_DEVICE_NAME;
    use crate::device::Answers;
    use crate::named::apple9_64k;

    #[test]
    fn the_name_decides_more_than_the_answers() {
        let stock = Answers::paravirtual_stock();
        let unlocked = stock.with_profile(&apple9_64k());
        let guest = |answers| Inputs {
            device_name: Some(PARAVIRTUAL_DEVICE_NAME),
            ..Inputs::new(answers)
        };
        let (before, after) = (guest(&stock), guest(&unlocked));
        let (jb, ja) = (MetalJl::decide(&before), MetalJl::decide(&after));
        assert!(jb.paravirtual && ja.paravirtual);
        assert!(
            !jb.supported_by_answers && !ja.supported_by_answers,
            "Metal3 never raised"
        );
        let (tb, ta) = (Tinygrad::decide(&before), Tinygrad::decide(&after));
        assert!(!tb.graph && !ta.graph);
        assert_eq!(tb.arch.as_deref(), Some("Apple5"));
        assert_eq!(ta.arch.as_deref(), Some("Apple9"));
        assert!(!tb.tensor_cores && ta.tensor_cores && ta.bfloat16);
        let bare = Inputs {
            device_name: Some("Apple M1 Max"),
            ..Inputs::new(&unlocked)
        };
        assert!(Tinygrad::decide(&bare).graph);
        assert!(!MetalJl::decide(&bare).paravirtual);
    }
}
