//! The default Metal device's answers, read through objc2-metal's safe API (macOS only).

use capshim_profile::GpuFamily;
use capshim_profile::device::Answers;
use objc2_metal::{MTLCreateSystemDefaultDevice, MTLDevice, MTLGPUFamily};

use crate::device::DeviceReport;

/// Creates the system default Metal device (`MTLCreateSystemDefaultDevice`) and reads every
/// named MTLGPUFamily answer, `maxThreadgroupMemoryLength` (bytes),
/// `recommendedMaxWorkingSetSize` (bytes), `maxBufferLength` (bytes) and `hasUnifiedMemory`.
///
/// # Errors
/// When Metal returns no device (e.g. a VM without paravirtualized graphics).
pub fn probe() -> Result<DeviceReport, String> {
    let device = MTLCreateSystemDefaultDevice().ok_or_else(|| {
        "MTLCreateSystemDefaultDevice returned no device; this Mac or VM has no usable Metal GPU \
         (a macOS VM needs paravirtualized graphics)"
            .to_string()
    })?;
    let families = GpuFamily::known()
        .map(|f| {
            let asked = MTLGPUFamily(f.0 as isize);
            (f.0, device.supportsFamily(asked))
        })
        .collect();
    let answers = Answers {
        families,
        max_threadgroup_memory: device.maxThreadgroupMemoryLength() as u64,
        recommended_working_set_size: Some(device.recommendedMaxWorkingSetSize()),
    };
    Ok(DeviceReport::new(
        Some(device.name().to_string()),
        &answers,
        Some(device.maxBufferLength() as u64),
        Some(device.hasUnifiedMemory()),
    ))
}
