//! Output formats of a [`Summary`]: one file per format behind [`Exporter`], shared cell
//! formatting in this file.

pub mod csv;
pub mod json;
pub mod markdown;
pub mod svg;

use crate::analysis::interval::{MAX_ROUNDS_ESTIMATE, NOISE, percent_text};
use crate::analysis::{ArmStats, Summary};

/// Why a format could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The CSV writer failed.
    #[error("cannot write the CSV table: {0}")]
    Csv(String),
    /// JSON serialization failed.
    #[error("cannot write the JSON summary: {0}")]
    Json(#[from] serde_json::Error),
    /// The chart backend failed.
    #[error("cannot draw the chart: {0}")]
    Svg(String),
}

/// Renders a summary in one format.
pub trait Exporter {
    /// The file name this format is stored under in an evidence bundle.
    fn file_name(&self) -> &'static str;
    /// The rendered text.
    ///
    /// # Errors
    /// Only when the underlying writer fails (the SVG drawing backend).
    fn render(&self, summary: &Summary) -> Result<String, ExportError>;
}

/// A throughput in tokens/s with two decimals, or `missing`.
pub fn format_ts(stats: Option<&ArmStats>) -> String {
    match stats {
        Some(s) => format!("{:.2}", s.median_ts),
        None => "missing".to_string(),
    }
}

/// A speedup as `11.08×`, or `—` when it cannot be computed.
pub fn format_speedup(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_string(), |v| format!("{v:.2}×"))
}

/// The main table's speedup: `7.20× [7.13 7.26] faster` with an interval and its verdict,
/// `7.20×` without one, `—` without a stock reference.
pub fn format_speedup_claim(stats: &ArmStats) -> String {
    let point = format_speedup(stats.speedup_vs_stock);
    match (stats.speedup_ci95, stats.verdict) {
        (Some(ci), Some(verdict)) if stats.speedup_vs_stock.is_some() => {
            format!("{point} [{:.2} {:.2}] {}", ci.low, ci.high, verdict.text())
        }
        _ => point,
    }
}

/// The interval's half-width as `±3.1%`, or `—` without an interval.
pub fn format_half_width(stats: &ArmStats) -> String {
    stats
        .speedup_precision
        .map_or_else(|| "—".into(), |p| format!("±{:.1}%", p.half_width * 100.0))
}

/// How precise the speedup is: `within ±2%` when the half-width is within the noise band,
/// else the rounds that would bring it there (`~28 rounds for ±2%`); `no interval (2 of 4
/// rounds)` below the minimum; empty without a comparison.
pub fn format_precision(stats: &ArmStats) -> String {
    let band = percent_text(NOISE);
    if let Some(p) = stats.speedup_precision {
        if p.half_width <= NOISE {
            format!("within ±{band}%")
        } else {
            match p.rounds_for_noise_band {
                Some(n) => format!("~{n} rounds for ±{band}%"),
                None => format!("over {MAX_ROUNDS_ESTIMATE} rounds for ±{band}%"),
            }
        }
    } else if stats.speedup_no_interval.is_some() {
        "no interval (see below)".into()
    } else {
        String::new()
    }
}

/// A percentage as `98.25%`, or `—` when it cannot be computed.
pub fn format_percent(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_string(), |v| format!("{v:.2}%"))
}

/// The statistics of `arm` in row `row`, when the arm has the test.
pub fn cell<'a>(summary: &'a Summary, row: usize, arm: &str) -> Option<&'a ArmStats> {
    summary.rows[row].arms.get(arm).and_then(Option::as_ref)
}

/// All formats written into a bundle.
pub fn all() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(markdown::Markdown),
        Box::new(csv::Csv),
        Box::new(json::Json),
        Box::new(svg::Svg),
    ]
}
