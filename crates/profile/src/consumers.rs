//! What known consumers decide from a device's answers.
//!
//! Plain data tables, each with the consumer source they were read from, so
//! `capshim explain` can say before anything runs what a profile changes, and
//! `capshim bench` can check what the workload itself reported.

use crate::device::Answers;
use crate::family::GpuFamily;

/// Where the llama.cpp rules below were read: ggml-metal's `ggml_metal_device_init` and
/// `ggml_metal_device_supports_op`, in the llama.cpp tree vendored by llama-cpp-python 0.3.36
/// (DESIGN.md section 1).
pub const LLAMA_CPP_SOURCE: &str = "llama.cpp as vendored by llama-cpp-python 0.3.36: ggml/src/ggml-metal/ggml-metal-device.m (ggml_metal_device_init, ggml_metal_device_supports_op)";

/// Where the MLX rule was read (DESIGN.md section 1).
pub const MLX_SOURCE: &str =
    "MLX Metal backend: residency sets are used when supportsFamily(Metal3) is true";

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
    /// `has tensor` (newer builds also require an M5 or A19 class GPU).
    pub tensor: bool,
    /// ggml ops that fall back to the CPU because a flag above is off, in table order.
    pub cpu_fallback_ops: Vec<String>,
}

impl LlamaCpp {
    /// Applies [`LLAMA_CPP_GATES`] and [`LLAMA_CPP_OPS_NEEDING`] to `answers`.
    /// `bf16_disabled` is whether `GGML_METAL_BF16_DISABLE` is set in the workload's environment.
    pub fn decide(answers: &Answers, bf16_disabled: bool) -> LlamaCpp {
        let gate = |flag: &str| {
            LLAMA_CPP_GATES
                .iter()
                .filter(|g| g.flag == flag)
                .any(|g| g.any_of.iter().any(|&f| answers.supports(GpuFamily(f))))
        };
        let tensor = gate("tensor");
        let mut decided = LlamaCpp {
            simdgroup_reduction: gate("simdgroup_reduction"),
            simdgroup_mm: gate("simdgroup_mm"),
            bfloat: gate("bfloat") && !bf16_disabled && !tensor,
            tensor,
            cpu_fallback_ops: Vec::new(),
        };
        for (flag, ops) in LLAMA_CPP_OPS_NEEDING {
            if !decided.flag(flag) {
                decided
                    .cpu_fallback_ops
                    .extend(ops.iter().map(|op| op.to_string()));
            }
        }
        decided
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

/// What MLX decides from a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Mlx {
    /// Whether MLX will try to create residency sets (Metal3 answered true).
    pub residency_sets: bool,
    /// Problems to expect, in words.
    pub warnings: Vec<String>,
}

impl Mlx {
    /// Applies the MLX rule. `paravirtual` is whether the device is the paravirtual one,
    /// which cannot create residency sets.
    pub fn decide(answers: &Answers, paravirtual: bool) -> Mlx {
        let residency_sets = answers.supports(GpuFamily::METAL3);
        let mut warnings = Vec::new();
        if residency_sets && paravirtual {
            warnings.push(
                "Metal3 is answered true, so MLX will create residency sets, which the paravirtual \
                 device cannot: expect \"Unable to construct residency set\" at start"
                    .to_string(),
            );
        }
        Mlx {
            residency_sets,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::named::apple9_64k;

    #[test]
    fn stock_paravirtual_device_sends_matrix_work_to_the_cpu() {
        let stock = LlamaCpp::decide(&Answers::paravirtual_stock(), false);
        assert!(
            !stock.simdgroup_reduction && !stock.simdgroup_mm && !stock.bfloat && !stock.tensor
        );
        assert_eq!(stock.cpu_fallback_ops.len(), 22);
        assert_eq!(stock.cpu_fallback_ops[0], "MUL_MAT");
        assert_eq!(stock.cpu_fallback_ops.last().unwrap(), "LIGHTNING_INDEXER");
    }

    #[test]
    fn published_profile_turns_the_gates_on_but_not_tensor() {
        let answers = Answers::paravirtual_stock().with_profile(&apple9_64k());
        let unlocked = LlamaCpp::decide(&answers, false);
        assert!(unlocked.simdgroup_reduction && unlocked.simdgroup_mm && unlocked.bfloat);
        assert!(!unlocked.tensor);
        assert!(unlocked.cpu_fallback_ops.is_empty());
        assert!(!LlamaCpp::decide(&answers, true).bfloat);
        let mlx = Mlx::decide(&answers, true);
        assert!(!mlx.residency_sets && mlx.warnings.is_empty());
    }

    #[test]
    fn apple6_alone_gives_bfloat_without_simdgroup_work() {
        let mut answers = Answers::paravirtual_stock();
        answers.families.insert(1006, true);
        let d = LlamaCpp::decide(&answers, false);
        assert!(d.bfloat && !d.simdgroup_reduction && !d.simdgroup_mm);
        answers.families.insert(5001, true);
        let d = LlamaCpp::decide(&answers, false);
        assert!(d.simdgroup_reduction && !d.simdgroup_mm);
        assert_eq!(
            d.cpu_fallback_ops,
            vec![
                "FLASH_ATTN_EXT".to_string(),
                "LIGHTNING_INDEXER".to_string()
            ]
        );
        assert_eq!(Mlx::decide(&answers, true).warnings.len(), 1);
        assert!(Mlx::decide(&answers, false).warnings.is_empty());
    }

    #[test]
    fn tensor_turns_bfloat_off() {
        let mut answers = Answers::paravirtual_stock();
        answers
            .families
            .extend([(1009, true), (5001, true), (5002, true)]);
        let d = LlamaCpp::decide(&answers, false);
        assert!(d.tensor && !d.bfloat);
    }
}
