//! Output formats of a [`Summary`]: one file per format behind [`Exporter`], shared cell
//! formatting in this file.

pub mod csv;
pub mod json;
pub mod markdown;
pub mod svg;

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
