//! The default Metal device's answers, read through objc2-metal's safe API (macOS only).

use capshim_profile::GpuFamily;
use capshim_profile::device::Answers;
use objc2::runtime::NSObjectProtocol;
use objc2::sel;
use objc2_metal::{MTLCreateSystemDefaultDevice, MTLDevice, MTLGPUFamily};

use crate::device::DeviceReport;

/// Creates the system default Metal device (`MTLCreateSystemDefaultDevice`) and reads every
/// named MTLGPUFamily answer, `maxThreadgroupMemoryLength` (bytes),
/// `recommendedMaxWorkingSetSize` (bytes), `maxBufferLength` (bytes), `hasUnifiedMemory` and,
/// on macOS 14 and later (where the device responds to `architecture`), the architecture
/// name.
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
    let mut report = DeviceReport::new(
        Some(device.name().to_string()),
        &answers,
        Some(device.maxBufferLength() as u64),
        Some(device.hasUnifiedMemory()),
    );
    // `architecture` is new in macOS 14; asking an older device would raise an exception.
    if device.respondsToSelector(sel!(architecture)) {
        report.architecture = Some(device.architecture().name().to_string());
    }
    Ok(report)
}
