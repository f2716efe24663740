//! The four Metal kernels (sources in `kernels/*.metal`, embedded), how each is dispatched,
//! and the kernel process's side: run each through [`capshim_gpu::run`] and record what it
//! gave ([`KernelRuns`], the raw file `kernels.json` of a selftest bundle).

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Version of [`KernelRuns`]' layout.
pub const RUNS_FORMAT: u32 = 1;

/// Threads per threadgroup of the SIMD-group reduction, bfloat and threadgroup memory kernels.
pub const THREADS_PER_GROUP: usize = 256;
/// Threadgroups of the SIMD-group reduction and bfloat kernels.
pub const GROUPS: usize = 4;
/// Threads of the SIMD-group matrix kernel: one SIMD-group.
pub const MATRIX_THREADS: usize = 32;

/// A capability with a kernel that needs it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Kernel {
    /// `simd_sum` and `simd_max` (llama.cpp's "simdgroup reduction").
    SimdReduction,
    /// `simdgroup_float8x8` multiply-accumulate (llama.cpp's "simdgroup matrix mul.").
    SimdgroupMatrix,
    /// bfloat arithmetic (llama.cpp's "has bfloat").
    Bfloat,
    /// Threadgroup memory of the claimed size (`maxThreadgroupMemoryLength`).
    ThreadgroupMemory,
}

impl Kernel {
    /// Every kernel, in the order checks print.
    pub const ALL: [Kernel; 4] = [
        Kernel::SimdReduction,
        Kernel::SimdgroupMatrix,
        Kernel::Bfloat,
        Kernel::ThreadgroupMemory,
    ];

    /// Its name in check ids (`kernel.NAME`) and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::SimdReduction => "simd_reduction",
            Kernel::SimdgroupMatrix => "simdgroup_matrix",
            Kernel::Bfloat => "bfloat",
            Kernel::ThreadgroupMemory => "threadgroup_memory",
        }
    }

    /// The capability in words.
    pub fn capability(self) -> &'static str {
        match self {
            Kernel::SimdReduction => "SIMD-group reduction (simd_sum, simd_max)",
            Kernel::SimdgroupMatrix => "SIMD-group matrix multiply (simdgroup_float8x8)",
            Kernel::Bfloat => "bfloat arithmetic",
            Kernel::ThreadgroupMemory => "threadgroup memory",
        }
    }

    /// The kernel's source file, as embedded.
    pub fn source(self) -> &'static str {
        match self {
            Kernel::SimdReduction => include_str!("kernels/simd_reduction.metal"),
            Kernel::SimdgroupMatrix => include_str!("kernels/simdgroup_matrix.metal"),
            Kernel::Bfloat => include_str!("kernels/bfloat.metal"),
            Kernel::ThreadgroupMemory => include_str!("kernels/threadgroup_memory.metal"),
        }
    }

    /// The `kernel` function's name in [`Kernel::source`].
    pub fn function(self) -> &'static str {
        match self {
            Kernel::SimdReduction => "capshim_simd_reduction",
            Kernel::SimdgroupMatrix => "capshim_simdgroup_matrix",
            Kernel::Bfloat => "capshim_bfloat",
            Kernel::ThreadgroupMemory => "capshim_threadgroup_memory",
        }
    }

    /// (threadgroups, threads per threadgroup, output bytes) for a threadgroup memory test of
    /// `threadgroup_bytes`.
    pub fn geometry(self, threadgroup_bytes: u64) -> (usize, usize, usize) {
        let threads = GROUPS * THREADS_PER_GROUP;
        match self {
            Kernel::SimdReduction => (GROUPS, THREADS_PER_GROUP, threads * 3 * 4),
            Kernel::SimdgroupMatrix => (1, MATRIX_THREADS, 64 * 4),
            Kernel::Bfloat => (GROUPS, THREADS_PER_GROUP, threads * 2 * 4),
            Kernel::ThreadgroupMemory => (
                1,
                THREADS_PER_GROUP,
                usize::try_from(threadgroup_bytes).unwrap_or(usize::MAX),
            ),
        }
    }

    /// The source to compile: [`Kernel::source`], with the threadgroup memory test's size
    /// defined in front of it.
    pub fn compiled_source(self, threadgroup_bytes: u64) -> String {
        match self {
            Kernel::ThreadgroupMemory => format!(
                "#define CAPSHIM_TG_BYTES {threadgroup_bytes}u\n{}",
                self.source()
            ),
            _ => self.source().to_string(),
        }
    }
}

/// Why a kernel gave no output: the step and Metal's message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// `device`, `compile`, `function`, `pipeline`, `resources` or `execute`.
    pub stage: String,
    /// Metal's message.
    pub message: String,
}

/// One kernel as the kernel process ran it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRun {
    /// Which kernel.
    pub kernel: Kernel,
    /// Wall time of compiling, dispatching and waiting, in milliseconds.
    pub time_ms: f64,
    /// The output buffer, as lowercase hex, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_hex: Option<String>,
    /// The pipeline's SIMD-group width, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simd_width: Option<usize>,
    /// The device's name, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Why it gave no output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
}

/// What the kernel process prints on stdout (and a bundle keeps as `raw/kernels.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRuns {
    /// [`RUNS_FORMAT`].
    pub format: u32,
    /// The threadgroup memory test's size, in bytes.
    pub threadgroup_bytes: u64,
    /// One per kernel asked for, in order.
    pub runs: Vec<KernelRun>,
}

/// `bytes` as lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lowercase or uppercase hex back to bytes; `None` when it is not hex of whole bytes.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The kernel process: runs each of `kernels` on the default Metal device, one after another.
pub fn run_all(kernels: &[Kernel], threadgroup_bytes: u64) -> KernelRuns {
    let runs = kernels
        .iter()
        .map(|&kernel| {
            let source = kernel.compiled_source(threadgroup_bytes);
            let (threadgroups, threads_per_group, output_bytes) =
                kernel.geometry(threadgroup_bytes);
            let dispatch = capshim_gpu::Dispatch {
                source: &source,
                function: kernel.function(),
                threadgroups,
                threads_per_group,
                output_bytes,
            };
            let clock = Instant::now();
            let result = capshim_gpu::run(&dispatch);
            let time_ms = clock.elapsed().as_secs_f64() * 1000.0;
            match result {
                Ok(ran) => KernelRun {
                    kernel,
                    time_ms,
                    output_hex: Some(to_hex(&ran.output)),
                    simd_width: Some(ran.simd_width),
                    device: Some(ran.device),
                    error: None,
                },
                Err(e) => KernelRun {
                    kernel,
                    time_ms,
                    output_hex: None,
                    simd_width: None,
                    device: None,
                    error: Some(RunError {
                        stage: e.stage.name().to_string(),
                        message: e.message,
                    }),
                },
            }
        })
        .collect();
    KernelRuns {
        format: RUNS_FORMAT,
        threadgroup_bytes,
        runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_defines_its_function_and_the_size_is_prepended() {
        for k in Kernel::ALL {
            assert!(
                k.source()
                    .contains(&format!("kernel void {}(", k.function())),
                "{}",
                k.name()
            );
            assert!(k.source().contains("[[buffer(0)]]"), "{}", k.name());
        }
        let tg = Kernel::ThreadgroupMemory.compiled_source(65536);
        assert!(tg.starts_with("#define CAPSHIM_TG_BYTES 65536u\n"), "{tg}");
        assert_eq!(Kernel::ThreadgroupMemory.geometry(65536).2, 65536);
        assert_eq!(
            Kernel::Bfloat.compiled_source(65536),
            Kernel::Bfloat.source()
        );
    }

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(to_hex(&bytes), "0001abff");
        assert_eq!(from_hex("0001ABff").unwrap(), bytes);
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn off_macos_every_kernel_reports_no_device() {
        let runs = run_all(&[Kernel::Bfloat], 32768);
        let e = runs.runs[0].error.as_ref().unwrap();
        assert_eq!(e.stage, "device");
        assert!(e.message.starts_with("no Metal device"), "{}", e.message);
    }
}
