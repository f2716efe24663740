//! What known consumers decide from a device's answers.
//!
//! Plain rules, each with the consumer source (repository, file and version) it was read
//! from, so `capshim explain` can say before anything runs what a profile changes, and
//! `capshim bench` can check what the workload itself reported. Every rule reads the same
//! [`Inputs`]: the answers, the device's name and architecture name where known, and the host
//! chip where known (to say what a claim means on that chip).
//!
//! - [`llama_cpp`]: ggml-metal's gates, the tuning family, FWHT sizes and flash-attention
//!   vector configurations ([`fa_vec`]).
//! - [`metal`]: Metal's own decisions (bf16 emulation).
//! - [`whisper`]: whisper.cpp (ggml-metal's gates, flash attention on by default).
//! - [`pytorch`]: PyTorch's MPS device selection.
//! - [`mlx`]: residency sets, the fast fence, kernel routes by architecture generation.
//! - [`others`]: Metal.jl and tinygrad, which recognise the paravirtual device by its name.

pub mod fa_vec;
pub mod llama_cpp;
pub mod metal;
pub mod mlx;
pub mod others;
pub mod pytorch;
pub mod whisper;

pub use llama_cpp::{LLAMA_CPP_SOURCE, LlamaCpp};
pub use metal::{METAL_SOURCE, Metal};
pub use mlx::{MLX_SOURCE, Mlx};
pub use others::{METAL_JL_SOURCE, MetalJl, TINYGRAD_SOURCE, Tinygrad};
pub use pytorch::{PYTORCH_SOURCE, Pytorch};
pub use whisper::{WHISPER_SOURCE, Whisper};

use crate::device::Answers;
use crate::family::GpuFamily;
use crate::named::Chip;
use crate::policy;
use crate::profile::Profile;

/// The name the guest's Metal device reports (`-[MTLDevice name]`), as llama.cpp logs it
/// (`GPU name:   MTL0 (Apple Paravirtual device)`).
pub const PARAVIRTUAL_DEVICE_NAME: &str = "Apple Paravirtual device";

/// What the consumer rules read.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The device's answers (with a profile applied, the answers the shim gives).
    pub answers: &'a Answers,
    /// The profile the shim applies on top of `answers`'s device, if any. Used only for
    /// families `answers` does not list: llama.cpp asks Apple1 … Apple21, while a probe asks
    /// the named families; the device answers false to the others, and the shim raises them
    /// as it raises any Apple family.
    pub profile: Option<&'a Profile>,
    /// `-[MTLDevice name]`, when known, e.g. [`PARAVIRTUAL_DEVICE_NAME`].
    pub device_name: Option<&'a str>,
    /// `-[MTLDevice architecture].name` (macOS 14 and later), when known, e.g.
    /// `applegpu_g13s` on bare metal.
    pub architecture: Option<&'a str>,
    /// The chip the guest runs on (the host's), when known.
    pub host_chip: Option<&'static Chip>,
}

impl<'a> Inputs<'a> {
    /// Inputs with only the answers known.
    pub fn new(answers: &'a Answers) -> Inputs<'a> {
        Inputs {
            answers,
            profile: None,
            device_name: None,
            architecture: None,
            host_chip: None,
        }
    }

    /// `supportsFamily:` for `family` as the consumer sees it: the answer when listed, else
    /// the device's false raised by the profile (Apple families up to its maximum).
    pub fn supports(&self, family: i64) -> bool {
        match self.answers.families.get(&family) {
            Some(&answer) => answer,
            None => self
                .profile
                .is_some_and(|p| policy::supports_family(p, family, false)),
        }
    }

    /// Whether the device is the paravirtual one, by its name; a device of unknown name is
    /// assumed to be (capshim describes guests).
    pub fn paravirtual(&self) -> bool {
        self.device_name.is_none_or(|n| n.contains("Paravirtual"))
    }

    /// The highest Apple family answered true among Apple1 … Apple`up_to` (as a generation
    /// number: 7 for Apple7), asking from the top as llama.cpp and tinygrad do.
    pub fn highest_apple_generation(&self, up_to: i64) -> Option<i64> {
        (GpuFamily::APPLE_MIN..GpuFamily::APPLE_MIN + up_to)
            .rev()
            .find(|&f| self.supports(f))
            .map(|f| f - GpuFamily::APPLE_MIN + 1)
    }
}

/// Every consumer's decisions from one set of [`Inputs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decisions {
    /// llama.cpp's Metal backend.
    pub llama_cpp: LlamaCpp,
    /// Metal itself.
    pub metal: Metal,
    /// whisper.cpp.
    pub whisper: Whisper,
    /// PyTorch's MPS backend.
    pub pytorch: Pytorch,
    /// MLX.
    pub mlx: Mlx,
    /// Metal.jl.
    pub metal_jl: MetalJl,
    /// tinygrad.
    pub tinygrad: Tinygrad,
}

impl Decisions {
    /// Applies every consumer's rules (`GGML_METAL_BF16_DISABLE` taken as unset).
    pub fn decide(inputs: &Inputs<'_>) -> Decisions {
        Decisions {
            llama_cpp: LlamaCpp::decide(inputs, false),
            metal: Metal::decide(inputs),
            whisper: Whisper::decide(inputs),
            pytorch: Pytorch::decide(inputs),
            mlx: Mlx::decide(inputs),
            metal_jl: MetalJl::decide(inputs),
            tinygrad: Tinygrad::decide(inputs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::named::{CHIPS, apple9_64k};

    #[test]
    fn families_a_probe_did_not_ask_are_answered_as_the_shim_would() {
        let stock = Answers::paravirtual_stock();
        let beyond = Profile::new(1012, 32768, None).unwrap();
        let after = stock.with_profile(&beyond);
        let mut inputs = Inputs::new(&after);
        assert!(!inputs.supports(1012), "not listed, no profile given");
        inputs.profile = Some(&beyond);
        assert!(inputs.supports(1012) && !inputs.supports(1013));
        assert_eq!(inputs.highest_apple_generation(21), Some(12));
        assert!(!inputs.supports(5001), "never a Metal family");
        assert_eq!(
            Inputs::new(&stock).highest_apple_generation(21),
            Some(5),
            "the stock guest"
        );
        let mut none = Answers::paravirtual_stock();
        none.families.retain(|&f, _| f > 1999);
        assert_eq!(Inputs::new(&none).highest_apple_generation(21), None);
    }

    #[test]
    fn every_consumer_decides_from_one_set_of_inputs() {
        let after = Answers::paravirtual_stock().with_profile(&apple9_64k());
        let m1 = CHIPS.iter().find(|c| c.name == "M1").unwrap();
        let inputs = Inputs {
            device_name: Some(PARAVIRTUAL_DEVICE_NAME),
            host_chip: Some(m1),
            ..Inputs::new(&after)
        };
        let d = Decisions::decide(&inputs);
        assert_eq!(d.llama_cpp.tuning_family, Some(9));
        assert!(!d.metal.bf16_emulation);
        assert!(d.whisper.metal);
        assert!(!d.pytorch.mps_device);
        assert!(!d.mlx.residency_sets);
        assert!(!d.tinygrad.graph);
        assert!(inputs.paravirtual());
    }
}
