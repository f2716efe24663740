//! One Metal compute dispatch, compiled from Metal Shading Language source at run time, for
//! `capshim selftest` (macOS only; elsewhere [`run`] says there is no Metal device).
//!
//! The CLI forbids unsafe code. objc2-metal marks two steps of a compute dispatch unsafe,
//! binding a buffer to the encoder (`setBuffer:offset:atIndex:`) and reading a shared
//! buffer's contents (a raw pointer), so they live here, behind a safe function that takes
//! source text and returns bytes. Every input a kernel needs is computed by the kernel itself
//! from its thread position, so nothing is written into a buffer from the CPU.
//!
//! The steps, each failing with its [`Stage`]: the default device
//! (`MTLCreateSystemDefaultDevice`), the library (`newLibraryWithSource:options:error:`), the
//! function (`newFunctionWithName:`), the pipeline (`newComputePipelineStateWithFunction:error:`,
//! with the threadgroup size checked against the pipeline's `maxTotalThreadsPerThreadgroup`),
//! one zero-filled shared output buffer (`newBufferWithLength:options:`), one command buffer
//! with one compute encoder dispatching `threadgroups` × `threads_per_group` threads, `commit`,
//! `waitUntilCompleted`, the command buffer's status and error, then the buffer copied out.

#![deny(unsafe_op_in_unsafe_fn)]

use std::fmt;

/// One compute dispatch: a kernel function of a source text, a one-dimensional grid, and the
/// size of the one output buffer bound at index 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch<'a> {
    /// Metal Shading Language source text, compiled with the default options.
    pub source: &'a str,
    /// The `kernel` function to run.
    pub function: &'a str,
    /// Threadgroups in the grid (at least 1).
    pub threadgroups: usize,
    /// Threads per threadgroup (at least 1, at most the pipeline's maximum).
    pub threads_per_group: usize,
    /// Bytes of the output buffer (`[[buffer(0)]]`), zero-filled before the dispatch.
    pub output_bytes: usize,
}

/// What one dispatch gave.
#[derive(Clone, Debug, PartialEq)]
pub struct Ran {
    /// The output buffer's bytes after the command buffer completed.
    pub output: Vec<u8>,
    /// The pipeline's SIMD-group width (`threadExecutionWidth`), 32 on Apple GPUs.
    pub simd_width: usize,
    /// The pipeline's largest threadgroup (`maxTotalThreadsPerThreadgroup`).
    pub max_threads_per_group: usize,
    /// The device's name, as Metal gives it.
    pub device: String,
}

/// Which step of a dispatch failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// No default Metal device (not macOS, or a VM without paravirtualized graphics).
    Device,
    /// The source did not compile.
    Compile,
    /// The library has no such function.
    Function,
    /// The pipeline could not be created, or cannot run the threadgroup size asked for.
    Pipeline,
    /// A queue, buffer, command buffer or encoder could not be created.
    Resources,
    /// The command buffer completed with an error.
    Execute,
}

impl Stage {
    /// The stage's name in messages and records: `device`, `compile`, `function`,
    /// `pipeline`, `resources`, `execute`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Device => "device",
            Stage::Compile => "compile",
            Stage::Function => "function",
            Stage::Pipeline => "pipeline",
            Stage::Resources => "resources",
            Stage::Execute => "execute",
        }
    }
}

/// A dispatch that gave no output: the stage and Metal's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelError {
    /// Where it failed.
    pub stage: Stage,
    /// Metal's error text (or why capshim did not go on).
    pub message: String,
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {}", self.stage.name(), self.message)
    }
}

impl std::error::Error for KernelError {}

impl KernelError {
    fn new(stage: Stage, message: impl Into<String>) -> KernelError {
        KernelError {
            stage,
            message: message.into(),
        }
    }
}

/// Runs `dispatch` on the default Metal device and waits for it.
///
/// # Errors
/// [`KernelError`] with the failed [`Stage`]: off macOS always [`Stage::Device`].
pub fn run(dispatch: &Dispatch<'_>) -> Result<Ran, KernelError> {
    if dispatch.threadgroups == 0 || dispatch.threads_per_group == 0 || dispatch.output_bytes == 0 {
        return Err(KernelError::new(
            Stage::Resources,
            "a dispatch needs at least one threadgroup, one thread and one output byte",
        ));
    }
    imp::run(dispatch)
}

#[cfg(not(target_os = "macos"))]
mod imp {
    use super::{Dispatch, KernelError, Ran, Stage};

    pub fn run(_: &Dispatch<'_>) -> Result<Ran, KernelError> {
        Err(KernelError::new(
            Stage::Device,
            format!("no Metal device: this is {}", std::env::consts::OS),
        ))
    }
}

#[cfg(target_os = "macos")]
mod imp {
    use objc2_foundation::NSString;
    use objc2_metal::{
        MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder, MTLCommandQueue,
        MTLComputeCommandEncoder, MTLComputePipelineState, MTLCreateSystemDefaultDevice, MTLDevice,
        MTLLibrary, MTLResourceOptions, MTLSize,
    };

    use super::{Dispatch, KernelError, Ran, Stage};

    fn resources(what: &str) -> KernelError {
        KernelError::new(Stage::Resources, format!("Metal returned no {what}"))
    }

    pub fn run(d: &Dispatch<'_>) -> Result<Ran, KernelError> {
        let device = MTLCreateSystemDefaultDevice().ok_or_else(|| {
            KernelError::new(
                Stage::Device,
                "no Metal device: MTLCreateSystemDefaultDevice returned none (a macOS VM needs \
                 paravirtualized graphics)",
            )
        })?;
        let library = device
            .newLibraryWithSource_options_error(&NSString::from_str(d.source), None)
            .map_err(|e| KernelError::new(Stage::Compile, e.localizedDescription().to_string()))?;
        let function = library
            .newFunctionWithName(&NSString::from_str(d.function))
            .ok_or_else(|| {
                KernelError::new(
                    Stage::Function,
                    format!("the library has no function {}", d.function),
                )
            })?;
        let pipeline = device
            .newComputePipelineStateWithFunction_error(&function)
            .map_err(|e| KernelError::new(Stage::Pipeline, e.localizedDescription().to_string()))?;
        let max_threads = pipeline.maxTotalThreadsPerThreadgroup();
        if d.threads_per_group > max_threads {
            return Err(KernelError::new(
                Stage::Pipeline,
                format!(
                    "the pipeline runs at most {max_threads} threads per threadgroup, not {}",
                    d.threads_per_group
                ),
            ));
        }
        let queue = device
            .newCommandQueue()
            .ok_or_else(|| resources("command queue"))?;
        let output = device
            .newBufferWithLength_options(d.output_bytes, MTLResourceOptions::StorageModeShared)
            .ok_or_else(|| resources("output buffer"))?;
        let commands = queue
            .commandBuffer()
            .ok_or_else(|| resources("command buffer"))?;
        let encoder = commands
            .computeCommandEncoder()
            .ok_or_else(|| resources("compute command encoder"))?;
        encoder.setComputePipelineState(&pipeline);
        // SAFETY: `output` is a live buffer of this device, retained by this function until
        // after `waitUntilCompleted`; offset 0 is inside it; index 0 is the kernels'
        // `[[buffer(0)]]`, a device pointer to bytes, which any buffer contents satisfy.
        unsafe { encoder.setBuffer_offset_atIndex(Some(&output), 0, 0) };
        let grid = MTLSize {
            width: d.threadgroups,
            height: 1,
            depth: 1,
        };
        let group = MTLSize {
            width: d.threads_per_group,
            height: 1,
            depth: 1,
        };
        encoder.dispatchThreadgroups_threadsPerThreadgroup(grid, group);
        encoder.endEncoding();
        commands.commit();
        commands.waitUntilCompleted();
        if commands.status() != MTLCommandBufferStatus::Completed {
            let why = commands.error().map_or_else(
                || format!("status {:?}", commands.status()),
                |e| e.localizedDescription().to_string(),
            );
            return Err(KernelError::new(Stage::Execute, why));
        }
        let length = output.length().min(d.output_bytes);
        let start = output.contents().as_ptr().cast::<u8>().cast_const();
        // SAFETY: a shared-storage buffer's `contents` points to `length` bytes the CPU may
        // read (Apple's MTLBuffer documentation); the command buffer that wrote them has
        // completed (`waitUntilCompleted` returned, status Completed), so no GPU work touches
        // them while they are copied, and `output` stays alive until the copy is made.
        let bytes = unsafe { std::slice::from_raw_parts(start, length) }.to_vec();
        Ok(Ran {
            output: bytes,
            simd_width: pipeline.threadExecutionWidth(),
            max_threads_per_group: max_threads,
            device: device.name().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_dispatch_is_refused_before_metal() {
        let d = Dispatch {
            source: "",
            function: "f",
            threadgroups: 0,
            threads_per_group: 32,
            output_bytes: 4,
        };
        assert_eq!(run(&d).unwrap_err().stage, Stage::Resources);
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn off_macos_there_is_no_device() {
        let d = Dispatch {
            source: "kernel void f() {}",
            function: "f",
            threadgroups: 1,
            threads_per_group: 32,
            output_bytes: 4,
        };
        let e = run(&d).unwrap_err();
        assert_eq!(e.stage, Stage::Device);
        assert!(
            e.to_string().starts_with("device failed: no Metal device"),
            "{e}"
        );
    }
}
