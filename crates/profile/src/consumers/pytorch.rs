//! PyTorch's MPS backend: which Metal device, if any, it uses.
//!
//! From PyTorch's `MPSDevice::MPSDevice()` ([`PYTORCH_SOURCE`]): without the macOS 14
//! MPSGraph API there is no MPS device; otherwise the first device of `MTLCopyAllDevices()`
//! that is not low-power and answers `supportsFamily(MTLGPUFamilyMac2)` (2002), skipping
//! others with "Skipping device … that does not support Metal 2.0". capshim never changes
//! Mac2, so PyTorch's choice is the device's own.

use super::Inputs;

/// Where the PyTorch rule was read.
pub const PYTORCH_SOURCE: &str = "PyTorch aten/src/ATen/mps/MPSDevice.mm (MPSDevice::MPSDevice: skips isLowPower devices and devices without supportsFamily(MTLGPUFamilyMac2)), pytorch/pytorch at 017943b";

/// MTLGPUFamilyMac2.
pub const MAC2: i64 = 2002;

/// What PyTorch decides from a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Pytorch {
    /// It selects this device as its MPS device (Mac2 answered; the device is not
    /// low-power and the guest runs macOS 14 or later, which capshim does not check here).
    pub mps_device: bool,
}

impl Pytorch {
    /// Applies the rule of [`PYTORCH_SOURCE`].
    pub fn decide(inputs: &Inputs<'_>) -> Pytorch {
        Pytorch {
            mps_device: inputs.supports(MAC2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Answers;
    use crate::named::apple9_64k;

    #[test]
    fn mac2_decides_and_no_profile_changes_it() {
        let stock = Answers::paravirtual_stock();
        assert!(!Pytorch::decide(&Inputs::new(&stock)).mps_device);
        let unlocked = stock.with_profile(&apple9_64k());
        assert!(!Pytorch::decide(&Inputs::new(&unlocked)).mps_device);
        let mut mac2 = stock;
        mac2.families.insert(MAC2, true);
        let raised = mac2.with_profile(&apple9_64k());
        assert!(Pytorch::decide(&Inputs::new(&raised)).mps_device);
    }
}
