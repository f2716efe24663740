//! ggml-metal's device lines on stderr: what llama.cpp itself decided about the GPU.
//!
//! `ggml_metal_device_init` logs one line per decision (docs/design.md, "The problem, in facts"), e.g.
//! `ggml_metal_device_init: simdgroup reduction   = false`. A CPU-only build prints none.

use serde::Serialize;

/// What ggml-metal reported about the device, as read from one process's stderr.
///
/// Every field is `None` when the line was absent. [`MetalReport::reported`] is false when
/// no ggml-metal device line was seen at all (a CPU-only build, or Metal failed to start).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetalReport {
    /// `GPU name:` e.g. `MTL0 (Apple Paravirtual device)`.
    pub gpu_name: Option<String>,
    /// `GPU family:` lines, as (name, MTLGPUFamily value), e.g. (`MTLGPUFamilyApple5`, 1005).
    pub gpu_families: Vec<(String, i64)>,
    /// `simdgroup reduction`.
    pub simdgroup_reduction: Option<bool>,
    /// `simdgroup matrix mul.`.
    pub simdgroup_mm: Option<bool>,
    /// `has unified memory`.
    pub unified_memory: Option<bool>,
    /// `has bfloat`.
    pub bfloat: Option<bool>,
    /// `has tensor`.
    pub tensor: Option<bool>,
    /// `use residency sets`.
    pub residency_sets: Option<bool>,
    /// `recommendedMaxWorkingSetSize`, in MB (10^6 bytes), as logged.
    pub recommended_max_working_set_mb: Option<f64>,
}

impl MetalReport {
    /// Reads every ggml-metal device line in `stderr`. When a process initialises several
    /// devices, the first value of each line is kept.
    pub fn parse(stderr: &str) -> MetalReport {
        let mut report = MetalReport::default();
        for line in stderr.lines() {
            let Some(rest) = line.trim().strip_prefix("ggml_metal_device_init:") else {
                continue;
            };
            let rest = rest.trim();
            if let Some(name) = rest.strip_prefix("GPU name:") {
                report
                    .gpu_name
                    .get_or_insert_with(|| name.trim().to_string());
            } else if let Some(family) = rest.strip_prefix("GPU family:") {
                // `MTLGPUFamilyApple5  (1005)`
                let family = family.trim();
                if let Some((name, number)) = family.split_once('(') {
                    if let Ok(value) = number.trim_end_matches(')').trim().parse::<i64>() {
                        let name = name.trim().to_string();
                        if !report.gpu_families.iter().any(|(n, _)| *n == name) {
                            report.gpu_families.push((name, value));
                        }
                    }
                }
            } else if let Some((label, value)) = rest.split_once('=') {
                let label = label.trim();
                let value = value.trim();
                let flag = match value {
                    "true" => Some(true),
                    "false" => Some(false),
                    _ => None,
                };
                let slot = match label {
                    "simdgroup reduction" => &mut report.simdgroup_reduction,
                    "simdgroup matrix mul." => &mut report.simdgroup_mm,
                    "has unified memory" => &mut report.unified_memory,
                    "has bfloat" => &mut report.bfloat,
                    "has tensor" => &mut report.tensor,
                    "use residency sets" => &mut report.residency_sets,
                    "recommendedMaxWorkingSetSize" => {
                        if report.recommended_max_working_set_mb.is_none() {
                            report.recommended_max_working_set_mb =
                                value.trim_end_matches("MB").trim().parse::<f64>().ok();
                        }
                        continue;
                    }
                    _ => continue,
                };
                if slot.is_none() {
                    *slot = flag;
                }
            }
        }
        report
    }

    /// Whether ggml-metal printed any device line.
    pub fn reported(&self) -> bool {
        self.gpu_name.is_some()
            || !self.gpu_families.is_empty()
            || self.simdgroup_reduction.is_some()
            || self.simdgroup_mm.is_some()
            || self.bfloat.is_some()
            || self.tensor.is_some()
    }

    /// The highest `MTLGPUFamilyApple*` line, e.g. `MTLGPUFamilyApple5 (1005)`.
    #[cfg(test)]
    pub fn apple_family(&self) -> Option<&(String, i64)> {
        self.gpu_families
            .iter()
            .filter(|(_, v)| (1001..=1999).contains(v))
            .max_by_key(|(_, v)| *v)
    }

    /// One line for a report: `GPU MTL0 (Apple Paravirtual device), MTLGPUFamilyApple5 (1005),
    /// simdgroup reduction false, ...`, or `not reported (no ggml-metal device lines on stderr)`.
    pub fn describe(&self) -> String {
        if !self.reported() {
            return "not reported (no ggml-metal device lines on stderr: a CPU-only llama.cpp, or Metal did not start)".to_string();
        }
        let flag = |v: Option<bool>| match v {
            Some(true) => "true",
            Some(false) => "false",
            None => "?",
        };
        let mut parts = Vec::new();
        if let Some(name) = &self.gpu_name {
            parts.push(format!("GPU {name}"));
        }
        for (name, value) in &self.gpu_families {
            parts.push(format!("{name} ({value})"));
        }
        parts.push(format!(
            "simdgroup reduction {}",
            flag(self.simdgroup_reduction)
        ));
        parts.push(format!("simdgroup matrix mul. {}", flag(self.simdgroup_mm)));
        parts.push(format!("bfloat {}", flag(self.bfloat)));
        parts.push(format!("tensor {}", flag(self.tensor)));
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ggml-metal's lines from a stock guest (M1 Ultra host, macOS 26.5.2 guest), between
    /// llama-bench's other output.
    const STOCK_GUEST: &str = "\
ggml_metal_library_init: using embedded metal library
ggml_metal_library_init: loaded in 0.012 sec
ggml_metal_rsets_init: creating a residency set collection (keep_alive = 180 s)
ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)
ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)
ggml_metal_device_init: simdgroup reduction   = false
ggml_metal_device_init: simdgroup matrix mul. = false
ggml_metal_device_init: has unified memory    = true
ggml_metal_device_init: has bfloat            = false
ggml_metal_device_init: has tensor            = false
ggml_metal_device_init: use residency sets    = false
ggml_metal_device_init: use shared buffers    = true
ggml_metal_device_init: recommendedMaxWorkingSetSize  = 12009.60 MB
llama_model_load_from_file_impl: using device MTL0 (Apple Paravirtual device) - 11452 MiB free
";

    const UNLOCKED_GUEST: &str = "\
capshim: hooked AppleParavirtDevice in llama-bench (pid 812): apple_family_max=1009 (Apple9) max_threadgroup_memory=65536 recommended_working_set_size=unchanged scope=children
ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)
ggml_metal_device_init: GPU family: MTLGPUFamilyApple9  (1009)
ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)
ggml_metal_device_init: simdgroup reduction   = true
ggml_metal_device_init: simdgroup matrix mul. = true
ggml_metal_device_init: has unified memory    = true
ggml_metal_device_init: has bfloat            = true
ggml_metal_device_init: has tensor            = false
";

    #[test]
    fn reads_a_stock_guest() {
        let r = MetalReport::parse(STOCK_GUEST);
        assert!(r.reported());
        assert_eq!(
            r.gpu_name.as_deref(),
            Some("MTL0 (Apple Paravirtual device)")
        );
        assert_eq!(
            r.gpu_families,
            vec![("MTLGPUFamilyApple5".to_string(), 1005)]
        );
        assert_eq!(r.simdgroup_reduction, Some(false));
        assert_eq!(r.simdgroup_mm, Some(false));
        assert_eq!(r.unified_memory, Some(true));
        assert_eq!(r.bfloat, Some(false));
        assert_eq!(r.tensor, Some(false));
        assert_eq!(r.residency_sets, Some(false));
        assert_eq!(r.recommended_max_working_set_mb, Some(12009.60));
        assert_eq!(
            r.describe(),
            "GPU MTL0 (Apple Paravirtual device), MTLGPUFamilyApple5 (1005), simdgroup reduction false, \
             simdgroup matrix mul. false, bfloat false, tensor false"
        );
    }

    #[test]
    fn reads_an_unlocked_guest() {
        let r = MetalReport::parse(UNLOCKED_GUEST);
        assert_eq!(
            r.apple_family(),
            Some(&("MTLGPUFamilyApple9".to_string(), 1009))
        );
        assert_eq!(r.gpu_families.len(), 2);
        assert_eq!(r.simdgroup_reduction, Some(true));
        assert_eq!(r.simdgroup_mm, Some(true));
        assert_eq!(r.bfloat, Some(true));
        assert_eq!(r.recommended_max_working_set_mb, None);
    }

    #[test]
    fn cpu_only_output_is_not_reported() {
        let r = MetalReport::parse(
            "load_backend: loaded CPU backend\nllama_model_loader: loaded meta data\n",
        );
        assert!(!r.reported());
        assert!(r.describe().starts_with("not reported"));
    }
}
