//! The text `capshim probe` prints: every answer of one device, or of two side by side, and
//! llama.cpp's derived decisions.

use capshim_profile::GpuFamily;
use capshim_profile::consumers::{Inputs, LlamaCpp};

use super::DeviceReport;
use crate::format::{self, table};

/// `yes`, `no`, or `-` when unknown.
fn yes_no(value: Option<bool>) -> &'static str {
    value.map_or("-", format::yes_no)
}

/// A byte count, or `-` when unknown.
fn bytes(value: Option<u64>) -> String {
    value.map_or("-".to_string(), format::bytes)
}

/// The rows shared by [`render`] and [`render_compare`]: (label, one value per report).
fn rows(reports: &[&DeviceReport]) -> Vec<(String, Vec<String>)> {
    let mut families: Vec<i64> = reports
        .iter()
        .flat_map(|r| r.families.keys().copied())
        .collect();
    families.sort_unstable();
    families.dedup();
    let mut rows = vec![(
        "name".to_string(),
        reports
            .iter()
            .map(|r| r.name.clone().unwrap_or_else(|| "-".into()))
            .collect(),
    )];
    for family in families {
        let label = match GpuFamily(family).name() {
            Some(name) => format!("supportsFamily: MTLGPUFamily{name} ({family})"),
            None => format!("supportsFamily: {family}"),
        };
        rows.push((
            label,
            reports
                .iter()
                .map(|r| yes_no(r.families.get(&family).copied()).to_string())
                .collect(),
        ));
    }
    let mut push = |label: &str, f: &dyn Fn(&DeviceReport) -> String| {
        rows.push((label.to_string(), reports.iter().map(|r| f(r)).collect()));
    };
    push("maxThreadgroupMemoryLength", &|r| {
        bytes(Some(r.max_threadgroup_memory))
    });
    push("recommendedMaxWorkingSetSize", &|r| {
        bytes(r.recommended_working_set_size)
    });
    push("maxBufferLength", &|r| bytes(r.max_buffer_length));
    push("hasUnifiedMemory", &|r| {
        yes_no(r.has_unified_memory).to_string()
    });
    push("architecture", &|r| {
        r.architecture.clone().unwrap_or_else(|| "-".into())
    });
    let decide = |r: &DeviceReport| {
        let answers = r.answers();
        let inputs = Inputs {
            device_name: r.name.as_deref(),
            ..Inputs::new(&answers)
        };
        LlamaCpp::decide(&inputs, false)
    };
    push("llama.cpp simdgroup reduction", &|r| {
        decide(r).simdgroup_reduction.to_string()
    });
    push("llama.cpp simdgroup matrix mul.", &|r| {
        decide(r).simdgroup_mm.to_string()
    });
    push("llama.cpp has bfloat", &|r| decide(r).bfloat.to_string());
    push("llama.cpp has tensor", &|r| decide(r).tensor.to_string());
    push("llama.cpp ops on the CPU", &|r| {
        format::list_or_none(&decide(r).cpu_fallback_ops)
    });
    push("llama.cpp GPU family (tuning)", &|r| {
        decide(r)
            .tuning_family
            .map_or("none".to_string(), |f| format!("Apple{f}"))
    });
    rows
}

/// The text `capshim probe` prints: every answer and llama.cpp's derived decisions.
pub fn render(report: &DeviceReport) -> String {
    table(&[], rows(&[report]))
}

/// The text `capshim probe --compare` prints: stock and shimmed answers side by side.
pub fn render_compare(stock: &DeviceReport, shimmed: &DeviceReport) -> String {
    table(&["stock", "shimmed"], rows(&[stock, shimmed]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use capshim_profile::device::Answers;
    use capshim_profile::named::apple9_64k;

    #[test]
    fn probe_text_and_comparison() {
        let stock = Answers::paravirtual_stock();
        let stock = DeviceReport::new(
            Some("Apple Paravirtual device".into()),
            &stock,
            Some(17_179_869_184),
            Some(true),
        );
        let mut shimmed = stock.clone();
        let answers = stock.answers().with_profile(&apple9_64k());
        shimmed.families = answers.families;
        shimmed.max_threadgroup_memory = answers.max_threadgroup_memory;
        insta::assert_snapshot!("probe_stock", render(&stock));
        insta::assert_snapshot!("probe_compare", render_compare(&stock, &shimmed));
    }
}
