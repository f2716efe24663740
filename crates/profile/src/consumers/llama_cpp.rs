//! llama.cpp's Metal backend (ggml-metal): which paths a set of answers turns on.
//!
//! Read from llama.cpp 0c1e570 (2026-10-01), the tree llama-cpp-python 0.3.36 vendors
//! ([`LLAMA_CPP_SOURCE`]):
//!
//! - the gates of `ggml_metal_device_init` ([`LLAMA_CPP_GATES`]), and the ops
//!   `ggml_metal_device_supports_op` leaves to the CPU without them ([`LLAMA_CPP_OPS_NEEDING`]);
//! - the tensor API also needs a device name containing M5, M6, A19 or A20 (unless
//!   `GGML_METAL_TENSOR_ENABLE` is set), so on the paravirtual device it stays off;
//! - `gpu_family`: asking `supportsFamily:` from Apple21 down to Apple1, the generation of the
//!   first family answered true (0, "none", when there is none); it keys the flash-attention
//!   vector tuning rows ([`super::fa_vec`]);
//! - the FWHT matrix path (`ggml_metal_fwht_supported_size`, ggml-metal-common.cpp): sizes
//!   64–512 always, 1024–8192 only where n · 4 bytes fit in `maxThreadgroupMemoryLength`.

use super::Inputs;
use super::fa_vec::{self, FaVecConfig};
use crate::named::BARE_METAL_THREADGROUP_MEMORY;

/// Where the llama.cpp rules below were read.
pub const LLAMA_CPP_SOURCE: &str = "llama.cpp 0c1e570 (2026-10-01) as vendored by llama-cpp-python 0.3.36: ggml/src/ggml-metal/ggml-metal-device.m (ggml_metal_device_init: the gates, gpu_family; ggml_metal_device_supports_op), ggml-metal-common.cpp (ggml_metal_fwht_supported_size), ggml-metal-tuning.cpp and ggml-metal-ops.cpp (flash-attention vector tuning and threadgroup memory)";

/// The highest Apple family llama.cpp asks about: it loops from `MTLGPUFamilyApple1 + 20`.
pub const HIGHEST_ASKED: i64 = 21;

/// Device-name fragments that allow the tensor API without `GGML_METAL_TENSOR_ENABLE`.
pub const TENSOR_DEVICES: [&str; 4] = ["M5", "M6", "A19", "A20"];

/// FWHT sizes the simdgroup kernel handles with no threadgroup memory.
pub const FWHT_SIMDGROUP_SIZES: [u32; 4] = [64, 128, 256, 512];
/// FWHT sizes the threadgroup kernel handles, each needing n · 4 bytes of threadgroup memory.
pub const FWHT_THREADGROUP_SIZES: [u32; 4] = [1024, 2048, 4096, 8192];

/// One of llama.cpp's capability flags and the families that turn it on (any one suffices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The flag, as ggml-metal names it in its log (`simdgroup reduction`) in snake case.
    pub flag: &'static str,
    /// MTLGPUFamily values; the flag is on when the device supports any of them.
    pub any_of: &'static [i64],
}

/// llama.cpp's gates: simdgroup reduction = Apple7 or Metal3; simdgroup matrix multiply =
/// Apple7; bfloat = Metal3 or Apple6; tensor API = Metal4.
pub const LLAMA_CPP_GATES: [Gate; 4] = [
    Gate {
        flag: "simdgroup_reduction",
        any_of: &[1007, 5001],
    },
    Gate {
        flag: "simdgroup_mm",
        any_of: &[1007],
    },
    Gate {
        flag: "bfloat",
        any_of: &[5001, 1006],
    },
    Gate {
        flag: "tensor",
        any_of: &[5002],
    },
];

/// ggml ops that ggml-metal reports unsupported without a flag, so they run on the CPU
/// (`ggml_metal_device_supports_op` in [`LLAMA_CPP_SOURCE`]; some need further conditions
/// on shapes and types even with the flag).
pub const LLAMA_CPP_OPS_NEEDING: [(&str, &[&str]); 2] = [
    (
        "simdgroup_reduction",
        &[
            "MUL_MAT",
            "MUL_MAT_ID",
            "SOFT_MAX",
            "NORM",
            "RMS_NORM",
            "L2_NORM",
            "GROUP_NORM",
            "SUM",
            "SUM_ROWS",
            "CUMSUM",
            "MEAN",
            "ARGMAX",
            "COUNT_EQUAL",
            "SSM_CONV",
            "SSM_SCAN",
            "GATED_DELTA_NET",
            "SOLVE_TRI",
            "DSV4_HC_COMB",
            "DSV4_HC_PRE",
            "DSV4_HC_POST",
        ],
    ),
    ("simdgroup_mm", &["FLASH_ATTN_EXT", "LIGHTNING_INDEXER"]),
];

/// What llama.cpp's Metal backend decides from a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LlamaCpp {
    /// `simdgroup reduction` in ggml-metal's log.
    pub simdgroup_reduction: bool,
    /// `simdgroup matrix mul.` in ggml-metal's log.
    pub simdgroup_mm: bool,
    /// `has bfloat`; off when `GGML_METAL_BF16_DISABLE` is set, or when tensor is on.
    pub bfloat: bool,
    /// `has tensor`: Metal4 answered and a device name naming an M5, M6, A19 or A20.
    pub tensor: bool,
    /// ggml ops that fall back to the CPU because a flag above is off, in table order.
    pub cpu_fallback_ops: Vec<String>,
    /// `gpu_family`: the generation of the highest Apple family answered (5 for a stock
    /// guest, 7 for Apple7), which selects the flash-attention vector tuning rows; `None`
    /// when no Apple family is answered (llama.cpp keeps 0).
    pub tuning_family: Option<i64>,
    /// The chips the tuned rows of [`LlamaCpp::tuning_family`] were measured on; `None` when
    /// llama.cpp has no rows for it (then every configuration is the baseline).
    pub tuned_on: Option<&'static str>,
    /// FWHT (Hadamard-hinted matrix multiply) sizes the Metal backend takes, ascending.
    pub fwht_sizes: Vec<u32>,
    /// Tuned flash-attention vector configurations of the tuning family that need more
    /// threadgroup memory than answered, so llama.cpp falls back to the baseline for them.
    pub fa_vec_fallback: Vec<FaVecConfig>,
    /// Tuned configurations that fit the answered threadgroup memory but need more than the
    /// GPU has (32768 bytes): llama.cpp dispatches them.
    pub fa_vec_beyond_gpu: Vec<FaVecConfig>,
    /// What these decisions mean on the host chip, in words.
    pub warnings: Vec<String>,
}

impl LlamaCpp {
    /// Applies the rules of [`LLAMA_CPP_SOURCE`] to `inputs`. `bf16_disabled` is whether
    /// `GGML_METAL_BF16_DISABLE` is set in the workload's environment.
    pub fn decide(inputs: &Inputs<'_>, bf16_disabled: bool) -> LlamaCpp {
        let gate = |flag: &str| {
            LLAMA_CPP_GATES
                .iter()
                .filter(|g| g.flag == flag)
                .any(|g| g.any_of.iter().any(|&f| inputs.supports(f)))
        };
        let tensor_device = inputs
            .device_name
            .is_some_and(|name| TENSOR_DEVICES.iter().any(|d| name.contains(d)));
        let tensor = gate("tensor") && tensor_device;
        let tuning_family = inputs.highest_apple_generation(HIGHEST_ASKED);
        let memory = inputs.answers.max_threadgroup_memory;
        let gpu_memory = inputs
            .host_chip
            .map_or(BARE_METAL_THREADGROUP_MEMORY, |c| c.threadgroup_memory);
        let tuned: Vec<FaVecConfig> = tuning_family
            .map(|f| fa_vec::configs(f).collect())
            .unwrap_or_default();
        let mut decided = LlamaCpp {
            simdgroup_reduction: gate("simdgroup_reduction"),
            simdgroup_mm: gate("simdgroup_mm"),
            bfloat: gate("bfloat") && !bf16_disabled && !tensor,
            tensor,
            cpu_fallback_ops: Vec::new(),
            tuning_family,
            tuned_on: tuning_family.and_then(fa_vec::tuned_on),
            fwht_sizes: FWHT_SIMDGROUP_SIZES
                .into_iter()
                .chain(
                    FWHT_THREADGROUP_SIZES
                        .into_iter()
                        .filter(|&n| u64::from(n) * 4 <= memory),
                )
                .collect(),
            fa_vec_fallback: tuned
                .iter()
                .filter(|c| c.threadgroup_memory > memory)
                .copied()
                .collect(),
            fa_vec_beyond_gpu: tuned
                .iter()
                .filter(|c| c.threadgroup_memory <= memory && c.threadgroup_memory > gpu_memory)
                .copied()
                .collect(),
            warnings: Vec::new(),
        };
        for (flag, ops) in LLAMA_CPP_OPS_NEEDING {
            if !decided.flag(flag) {
                decided
                    .cpu_fallback_ops
                    .extend(ops.iter().map(|op| op.to_string()));
            }
        }
        decided.warnings = decided.warnings_for(inputs, gpu_memory);
        decided
    }

    /// What the decisions mean on the host chip: tuning rows of another chip (only when
    /// flash attention runs on the GPU, i.e. with simdgroup matrix multiply), and
    /// configurations beyond the GPU's threadgroup memory.
    fn warnings_for(&self, inputs: &Inputs<'_>, gpu_memory: u64) -> Vec<String> {
        let mut out = Vec::new();
        let chip = inputs.host_chip;
        if let (Some(chip), true) = (chip, self.simdgroup_mm) {
            let own = chip.apple_family - 1000;
            if self.tuning_family != Some(own) {
                let picked = match (self.tuning_family, self.tuned_on) {
                    (Some(f), Some(on)) => format!("the Apple{f} rows (tuned on {on})"),
                    (Some(f), None) => {
                        format!("the baseline configurations (llama.cpp has no rows for Apple{f})")
                    }
                    (None, _) => "the baseline configurations".to_string(),
                };
                let own_rows = match fa_vec::tuned_on(own) {
                    Some(on) => format!("its own Apple{own} rows (tuned on {on})"),
                    None => format!("the baseline an Apple{own} GPU gets"),
                };
                out.push(format!(
                    "llama.cpp's GPU family is {}, so on the {} it picks flash-attention vector tuning for {picked} instead of {own_rows}",
                    self.tuning_family
                        .map_or("none".to_string(), |f| format!("Apple{f}")),
                    chip.name
                ));
            }
        }
        if !self.fa_vec_beyond_gpu.is_empty() {
            let list: Vec<String> = self
                .fa_vec_beyond_gpu
                .iter()
                .map(|c| {
                    format!(
                        "dk {} dv {} Q {} ({} bytes)",
                        c.dk, c.dv, c.q, c.threadgroup_memory
                    )
                })
                .collect();
            out.push(format!(
                "{} bytes of threadgroup memory let llama.cpp dispatch flash-attention vector configurations that need more than the {gpu_memory} bytes the GPU has, at KV lengths above 4096: {}",
                inputs.answers.max_threadgroup_memory,
                list.join(", ")
            ));
        }
        out
    }

    /// A flag by its table name; unknown names are false.
    pub fn flag(&self, flag: &str) -> bool {
        match flag {
            "simdgroup_reduction" => self.simdgroup_reduction,
            "simdgroup_mm" => self.simdgroup_mm,
            "bfloat" => self.bfloat,
            "tensor" => self.tensor,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Answers;
    use crate::named::{CHIPS, Chip, apple9_64k, native};
    use crate::profile::Profile;

    fn chip(name: &str) -> &'static Chip {
        CHIPS.iter().find(|c| c.name == name).unwrap()
    }

    fn decide(answers: &Answers) -> LlamaCpp {
        LlamaCpp::decide(&Inputs::new(answers), false)
    }

    #[test]
    fn stock_paravirtual_device_sends_matrix_work_to_the_cpu() {
        let stock = decide(&Answers::paravirtual_stock());
        assert!(
            !stock.simdgroup_reduction && !stock.simdgroup_mm && !stock.bfloat && !stock.tensor
        );
        assert_eq!(stock.cpu_fallback_ops.len(), 22);
        assert_eq!(stock.cpu_fallback_ops[0], "MUL_MAT");
        assert_eq!(stock.cpu_fallback_ops.last().unwrap(), "LIGHTNING_INDEXER");
        assert_eq!(stock.tuning_family, Some(5));
        assert_eq!(stock.tuned_on, None);
        assert_eq!(
            stock.fwht_sizes,
            [64, 128, 256, 512, 1024, 2048, 4096, 8192]
        );
    }

    #[test]
    fn published_profile_turns_the_gates_on_but_not_tensor() {
        let answers = Answers::paravirtual_stock().with_profile(&apple9_64k());
        let unlocked = decide(&answers);
        assert!(unlocked.simdgroup_reduction && unlocked.simdgroup_mm && unlocked.bfloat);
        assert!(!unlocked.tensor);
        assert!(unlocked.cpu_fallback_ops.is_empty());
        assert!(!LlamaCpp::decide(&Inputs::new(&answers), true).bfloat);
        assert_eq!(unlocked.tuning_family, Some(9));
        assert!(unlocked.tuned_on.unwrap().contains("M4"));
        // Apple9's rows need at most 16384 bytes: nothing falls back, nothing exceeds a GPU.
        assert!(unlocked.fa_vec_fallback.is_empty() && unlocked.fa_vec_beyond_gpu.is_empty());
        assert!(
            unlocked.warnings.is_empty(),
            "no host chip, nothing to compare"
        );
    }

    #[test]
    fn the_tuning_family_is_the_chips_own_only_with_native() {
        let stock = Answers::paravirtual_stock();
        for chip in CHIPS {
            let profile = native(chip);
            let answers = stock.with_profile(&profile);
            let inputs = Inputs {
                host_chip: Some(chip),
                ..Inputs::new(&answers)
            };
            let d = LlamaCpp::decide(&inputs, false);
            assert_eq!(d.tuning_family, Some(chip.apple_family - 1000), "{chip:?}");
            assert!(d.warnings.is_empty(), "{chip:?}: {:?}", d.warnings);
        }
        let answers = stock.with_profile(&apple9_64k());
        let on_m1 = Inputs {
            host_chip: Some(chip("M1")),
            ..Inputs::new(&answers)
        };
        let d = LlamaCpp::decide(&on_m1, false);
        assert_eq!(
            d.warnings,
            [
                "llama.cpp's GPU family is Apple9, so on the M1 it picks flash-attention vector tuning for the Apple9 rows (tuned on A18 Pro, M3 Max, M3 Pro, M3 Ultra, M4, M4 Max, M4 Pro) instead of its own Apple7 rows (tuned on M1, M1 Ultra)"
            ]
        );
        // On an M4, apple9-64k's family is the chip's own.
        let on_m4 = Inputs {
            host_chip: Some(chip("M4")),
            ..on_m1
        };
        assert!(LlamaCpp::decide(&on_m4, false).warnings.is_empty());
    }

    #[test]
    fn threadgroup_memory_decides_fwht_sizes_and_fa_vec_configurations() {
        let stock = Answers::paravirtual_stock();
        let apple10 = |tg| stock.with_profile(&Profile::new(1010, tg, None).unwrap());
        // M5's own answers: the two Q = 4 configurations of the largest heads do not fit,
        // so llama.cpp uses the baseline for them, as on the M5 itself.
        let native_m5 = apple10(32768);
        let d = LlamaCpp::decide(
            &Inputs {
                host_chip: Some(chip("M5")),
                ..Inputs::new(&native_m5)
            },
            false,
        );
        let dks: Vec<u16> = d.fa_vec_fallback.iter().map(|c| c.dk).collect();
        assert_eq!(dks, [512, 576]);
        assert!(d.fa_vec_beyond_gpu.is_empty() && d.warnings.is_empty());
        // 65536 bytes claimed: they fit the claim, not the GPU.
        let claimed = apple10(65536);
        let d = LlamaCpp::decide(
            &Inputs {
                host_chip: Some(chip("M5")),
                ..Inputs::new(&claimed)
            },
            false,
        );
        assert!(d.fa_vec_fallback.is_empty());
        assert_eq!(d.fa_vec_beyond_gpu.len(), 2);
        assert!(
            d.warnings[0].contains("dk 576 dv 512 Q 4 (57344 bytes)"),
            "{:?}",
            d.warnings
        );
        // A device answering less than 32768 bytes loses the wide FWHT sizes.
        let mut small = stock.clone();
        small.max_threadgroup_memory = 16384;
        assert_eq!(
            decide(&small).fwht_sizes,
            [64, 128, 256, 512, 1024, 2048, 4096]
        );
        small.max_threadgroup_memory = 4095;
        assert_eq!(decide(&small).fwht_sizes, [64, 128, 256, 512]);
    }

    #[test]
    fn a_claim_beyond_apple10_is_what_llama_cpp_asks_too() {
        let beyond = Profile::new(1015, 32768, None).unwrap();
        let answers = Answers::paravirtual_stock().with_profile(&beyond);
        let inputs = Inputs {
            profile: Some(&beyond),
            ..Inputs::new(&answers)
        };
        let d = LlamaCpp::decide(&inputs, false);
        assert_eq!(d.tuning_family, Some(15));
        assert_eq!(d.tuned_on, None);
    }

    #[test]
    fn apple6_alone_gives_bfloat_without_simdgroup_work() {
        let mut answers = Answers::paravirtual_stock();
        answers.families.insert(1006, true);
        let d = decide(&answers);
        assert!(d.bfloat && !d.simdgroup_reduction && !d.simdgroup_mm);
        answers.families.insert(5001, true);
        let d = decide(&answers);
        assert!(d.simdgroup_reduction && !d.simdgroup_mm);
        assert_eq!(
            d.cpu_fallback_ops,
            vec![
                "FLASH_ATTN_EXT".to_string(),
                "LIGHTNING_INDEXER".to_string()
            ]
        );
    }

    #[test]
    fn tensor_needs_metal4_and_an_m5_class_name_and_turns_bfloat_off() {
        let mut answers = Answers::paravirtual_stock();
        answers
            .families
            .extend([(1009, true), (5001, true), (5002, true)]);
        let paravirtual = Inputs {
            device_name: Some(super::super::PARAVIRTUAL_DEVICE_NAME),
            ..Inputs::new(&answers)
        };
        let d = LlamaCpp::decide(&paravirtual, false);
        assert!(!d.tensor && d.bfloat);
        let m5 = Inputs {
            device_name: Some("Apple M5 Max"),
            ..paravirtual
        };
        let d = LlamaCpp::decide(&m5, false);
        assert!(d.tensor && !d.bfloat);
    }
}
