//! MLX's Metal backend: what it does with Metal3, and how it routes kernels by the GPU's
//! architecture name. It never reads threadgroup memory or Apple families.
//!
//! From MLX v0.32.1 ([`MLX_SOURCE`]):
//!
//! - `ResidencySets` (resident.cpp) creates residency sets when `supportsFamily(Metal3)` (on
//!   macOS 15 and later), and throws "Unable to construct residency set" when the first
//!   cannot be made, which the paravirtual device cannot do;
//! - `FenceImpl` (fence.cpp) uses its fast fence only with Metal3 (and macOS 15 and
//!   `MLX_METAL_FAST_SYNCH=1`);
//! - `Device::Device` (device.cpp) takes `device.architecture.name` (or `MLX_METAL_GPU_ARCH`)
//!   and parses the generation from its third- and second-last characters
//!   ([`kernel_generation`]): `applegpu_g13s` is 13; one guest reported `air64_v27`, which
//!   parses as 2. The last character is the size class ('p' phone, 'g' base and Pro,
//!   's' Max, 'd' Ultra);
//! - routes by generation: quantized matrix-vector batch limits for 13, 15 and 17 and up
//!   (quantized.cpp `get_qmv_batch_limit`), the wide affine qmv kernel and the streamed GEMV
//!   from 15 (M3), the NAX kernels from 17 (18 for phones) on macOS 26.2.

use super::Inputs;

/// Where the MLX rules were read.
pub const MLX_SOURCE: &str = "MLX v0.32.1 (ml-explore/mlx): mlx/backend/metal/resident.cpp (ResidencySets: supportsFamily(Metal3)), fence.cpp (FenceImpl: supportsFamily(Metal3)), device.cpp (Device::Device: the architecture name and its generation; is_nax_available), quantized.cpp and matmul.cpp (routes by generation)";

/// MTLGPUFamilyMetal3.
pub const METAL3: i64 = 5001;

/// The lowest generation of a real Apple Silicon Mac GPU (M1: `applegpu_g13…`).
pub const M1_GENERATION: u32 = 13;

/// MLX's generation of an architecture name: the digits in its third- and second-last
/// characters (a non-digit counts 0), as `Device::Device` parses it. Names shorter than three
/// characters give 0.
pub fn kernel_generation(name: &str) -> u32 {
    let bytes = name.as_bytes();
    if bytes.len() < 3 {
        return 0;
    }
    let digit = |b: u8| {
        if b.is_ascii_digit() {
            u32::from(b - b'0')
        } else {
            0
        }
    };
    digit(bytes[bytes.len() - 3]) * 10 + digit(bytes[bytes.len() - 2])
}

/// What MLX decides from a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Mlx {
    /// Whether MLX will try to create residency sets (Metal3 answered true).
    pub residency_sets: bool,
    /// Whether MLX may use its fast fence (Metal3 answered true; it also needs macOS 15 and
    /// `MLX_METAL_FAST_SYNCH=1`).
    pub fast_fence: bool,
    /// The device's architecture name, when known (`capshim probe` records it).
    pub architecture: Option<String>,
    /// The kernel-route generation MLX parses from it.
    pub kernel_generation: Option<u32>,
    /// The kernel routes that generation takes, in words.
    pub kernel_routes: Option<String>,
    /// Problems to expect, in words.
    pub warnings: Vec<String>,
}

/// The routes a generation takes, in words.
fn routes(generation: u32) -> String {
    match generation {
        17.. => "generation 17 and up (M5): its quantized batch limits, the wide affine qmv kernel, the streamed GEMV, and the NAX kernels on macOS 26.2 and later".to_string(),
        15..=16 => "generations 15 and 16 (from M3): the wide affine qmv kernel and the streamed GEMV, no NAX".to_string(),
        13..=14 => "generations 13 and 14 (from M1): no wide affine qmv kernel, no streamed GEMV, no NAX".to_string(),
        _ => format!("generation {generation} is below every Apple Silicon Mac GPU (13 and up): MLX takes its fallback routes (default quantized batch limits, no wide affine qmv kernel, no streamed GEMV, no NAX)"),
    }
}

impl Mlx {
    /// Applies the rules of [`MLX_SOURCE`].
    pub fn decide(inputs: &Inputs<'_>) -> Mlx {
        let metal3 = inputs.supports(METAL3);
        let mut warnings = Vec::new();
        if metal3 && inputs.paravirtual() {
            warnings.push(
                "Metal3 is answered true, so MLX will create residency sets, which the paravirtual \
                 device cannot: expect \"Unable to construct residency set\" at start"
                    .to_string(),
            );
        }
        let generation = inputs.architecture.map(kernel_generation);
        if let (Some(name), Some(g)) = (inputs.architecture, generation) {
            if g < M1_GENERATION {
                warnings.push(format!(
                    "MLX reads generation {g} from the architecture name {name:?}, below the 13 of an M1, so it routes kernels as for no Apple Silicon Mac; set MLX_METAL_GPU_ARCH to the host GPU's architecture name (`capshim probe` on the host prints it) to route as on the host"
                ));
            }
        }
        Mlx {
            residency_sets: metal3,
            fast_fence: metal3,
            architecture: inputs.architecture.map(str::to_string),
            kernel_generation: generation,
            kernel_routes: generation.map(routes),
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Answers;
    use crate::named::apple9_64k;

    #[test]
    fn generations_parse_as_mlx_parses_them() {
        assert_eq!(kernel_generation("applegpu_g13s"), 13);
        assert_eq!(kernel_generation("applegpu_g14d"), 14);
        assert_eq!(kernel_generation("applegpu_g17s"), 17);
        assert_eq!(kernel_generation("air64_v27"), 2);
        assert_eq!(kernel_generation("ab"), 0);
        assert_eq!(kernel_generation("x9"), 0);
    }

    #[test]
    fn metal3_on_the_paravirtual_device_breaks_residency_sets() {
        let mut answers = Answers::paravirtual_stock().with_profile(&apple9_64k());
        let d = Mlx::decide(&Inputs::new(&answers));
        assert!(!d.residency_sets && !d.fast_fence && d.warnings.is_empty());
        answers.families.insert(METAL3, true);
        let d = Mlx::decide(&Inputs::new(&answers));
        assert!(d.residency_sets && d.fast_fence);
        assert_eq!(d.warnings.len(), 1);
        let bare = Inputs {
            device_name: Some("Apple M1 Max"),
            ..Inputs::new(&answers)
        };
        assert!(Mlx::decide(&bare).warnings.is_empty());
    }

    #[test]
    fn the_architecture_name_decides_the_routes() {
        let answers = Answers::paravirtual_stock();
        let guest = Inputs {
            architecture: Some("air64_v27"),
            ..Inputs::new(&answers)
        };
        let d = Mlx::decide(&guest);
        assert_eq!(d.kernel_generation, Some(2));
        assert!(
            d.warnings[0].contains("MLX_METAL_GPU_ARCH"),
            "{:?}",
            d.warnings
        );
        let host = Inputs {
            architecture: Some("applegpu_g15s"),
            ..guest
        };
        let d = Mlx::decide(&host);
        assert!(d.warnings.is_empty());
        assert!(
            d.kernel_routes
                .unwrap()
                .starts_with("generations 15 and 16")
        );
        let unknown = Mlx::decide(&Inputs::new(&answers));
        assert_eq!(
            (unknown.kernel_generation, unknown.kernel_routes),
            (None, None)
        );
    }
}
