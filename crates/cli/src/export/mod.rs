//! Output formats of a [`Summary`]: one file per format behind [`Exporter`], shared cell
//! formatting in this file.

pub mod csv;
pub mod json;
pub mod markdown;
pub mod matrix;
pub mod matrix_svg;
pub mod rounds_svg;
pub mod svg;
#[cfg(test)]
mod tests6;

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

/// What a summary's figures are, for the text around them: llama-bench's `samples_ts` in
/// tokens/s, or a `bench --command` workload's value in its unit.
pub struct Figures {
    /// What they are: ``llama-bench `samples_ts` ``, `the command's wall time`...
    pub what: String,
    /// Their unit.
    pub unit: String,
    /// What one process is: `llama-bench processes`, `command processes`.
    pub processes: &'static str,
    /// Whether they are a command's (then lower may be better, and ggml-metal's lines are not
    /// looked for).
    pub command: bool,
}

/// The [`Figures`] of `summary`, from its first row (a bundle measures one kind of workload).
pub fn figures(summary: &Summary) -> Figures {
    let row = summary.rows.first();
    match row.and_then(|r| r.unit.clone().map(|u| (r, u))) {
        Some((row, unit)) => Figures {
            what: if row.quantity.lower_is_better() && row.test == "wall" {
                "the command's wall time".to_string()
            } else {
                format!(
                    "the command's --metric value ({})",
                    if row.quantity.lower_is_better() {
                        "lower is better"
                    } else {
                        "higher is better"
                    }
                )
            },
            unit,
            processes: "command processes",
            command: true,
        },
        None => Figures {
            what: "llama-bench `samples_ts`".to_string(),
            unit: "tokens/s".to_string(),
            processes: "llama-bench processes",
            command: false,
        },
    }
}

/// A speedup as `11.08×`, or `—` when it cannot be computed.
pub fn format_speedup(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_string(), |v| format!("{v:.2}×"))
}

/// The main table's speedup: with an interval, the paired rounds' estimate (the interval's
/// centre), the interval and the verdict, `7.20× [7.13 7.26] faster`; without one, the ratio of
/// medians, `7.20×`; `—` without a stock reference. The point printed with an interval is the
/// one the interval is built around, so it always lies inside it.
pub fn format_speedup_claim(stats: &ArmStats) -> String {
    match (stats.speedup_precision, stats.speedup_ci95, stats.verdict) {
        (Some(p), Some(ci), Some(verdict)) => format!(
            "{} [{:.2} {:.2}] {}",
            format_speedup(Some(p.center)),
            ci.low,
            ci.high,
            verdict.text()
        ),
        _ => format_speedup(stats.speedup_vs_stock),
    }
}

/// The interval's half-width as `±3.1%`, or `—` without an interval.
pub fn format_half_width(stats: &ArmStats) -> String {
    stats
        .speedup_precision
        .map_or_else(|| "—".into(), |p| format!("±{:.1}%", p.half_width * 100.0))
}

/// How precise the speedup is: `within ±2%` when the half-width is within the noise band,
/// else the rounds that would bring it there (`~28 rounds for ±2%`; schema 6: `~35 rounds for
/// ±2% (80% chance)`, [`HINT_CHANCE`](crate::analysis::interval::HINT_CHANCE)); `no interval (2 of 4
/// rounds)` below the minimum; empty without a comparison.
pub fn format_precision(stats: &ArmStats) -> String {
    let band = percent_text(NOISE);
    // Schema 6 cells carry their round ratios; its hint aims at an 80% chance.
    let schema6 = stats.round_ratios.is_some();
    if let Some(p) = stats.speedup_precision {
        if p.half_width <= NOISE {
            format!("within ±{band}%")
        } else {
            match p.rounds_for_noise_band {
                Some(n) if schema6 => format!("~{n} rounds for ±{band}% (80% chance)"),
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

/// The main table's percent of host: with a two-sample interval (schema 6, several host
/// processes), the estimate and the interval, `52.31% [50.12 54.80]`; with a single host
/// process, the figure rounded to its resolution and marked, `52% (1 host process)`;
/// otherwise as [`format_percent`].
pub fn format_host(stats: Option<&ArmStats>) -> String {
    let Some(s) = stats else {
        return format_percent(None);
    };
    match (
        s.percent_of_host,
        s.percent_of_host_ci95,
        &s.percent_of_host_basis,
    ) {
        (Some(p), Some(ci), _) => format!("{p:.2}% [{:.2} {:.2}]", ci.low, ci.high),
        (Some(p), None, Some(basis)) if basis.host_processes == 1 => {
            let digits = basis
                .resolution
                .map_or(2, |r| (-r.log10().round()).max(0.0) as usize);
            format!("{p:.digits$}% (1 host process)")
        }
        (p, _, _) => format_percent(p),
    }
}

/// The statistics of `arm` in row `row`, when the arm has the test.
pub fn cell<'a>(summary: &'a Summary, row: usize, arm: &str) -> Option<&'a ArmStats> {
    summary.rows[row].arms.get(arm).and_then(Option::as_ref)
}

/// The formats written into a bundle of `schema_version`: `report.md`, `results.csv`,
/// `summary.json` and `chart.svg`; from schema 6 also `rounds.svg`.
pub fn for_schema(schema_version: u32) -> Vec<Box<dyn Exporter>> {
    let mut all: Vec<Box<dyn Exporter>> = vec![
        Box::new(markdown::Markdown),
        Box::new(csv::Csv),
        Box::new(json::Json),
        Box::new(svg::Svg),
    ];
    if schema_version >= 6 {
        all.push(Box::new(rounds_svg::RoundsSvg));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::interval::{CONFIDENCE_LEVEL, Interval, Paired, Verdict};

    fn stats(precision: Option<Paired>) -> ArmStats {
        ArmStats {
            median_ts: 119.0,
            min_ts: 80.0,
            max_ts: 150.0,
            samples: 30,
            speedup_vs_stock: Some(1.19),
            percent_of_host: None,
            percent_of_host_ci95: None,
            percent_of_host_basis: None,
            speedup_ci95: precision.map(|p| p.interval),
            verdict: precision.map(|_| Verdict::Inconclusive),
            speedup_precision: precision,
            speedup_no_interval: precision
                .is_none()
                .then(|| "no interval: 2 rounds".to_string()),
            ratio_of_medians: None,
            verdict_basis: None,
            carryover: None,
            unequal_durations: None,
            round_ratios: None,
            speedup_spread: None,
            ms_per_token_over_host: None,
            cv: None,
            rounds: Vec::new(),
            samples_ts: Vec::new(),
        }
    }

    #[test]
    fn schema_6_bundles_add_rounds_svg() {
        let names = |v: u32| -> Vec<&str> { for_schema(v).iter().map(|e| e.file_name()).collect() };
        assert_eq!(
            names(5),
            ["report.md", "results.csv", "summary.json", "chart.svg"]
        );
        assert_eq!(names(6)[..4], names(5)[..]);
        assert_eq!(names(6)[4], "rounds.svg");
    }

    #[test]
    fn the_point_printed_with_an_interval_is_its_centre() {
        // A noisy bench: the ratio of pooled medians (1.19) lies outside the paired interval.
        let p = Paired {
            interval: Interval {
                level: CONFIDENCE_LEVEL,
                low: 0.87,
                high: 1.15,
            },
            center: 1.0003,
            half_width: 0.15,
            rounds: 10,
            coverage: 0.951,
            sd_log: 0.2,
            rounds_for_noise_band: Some(800),
        };
        let s = stats(Some(p));
        assert_eq!(format_speedup_claim(&s), "1.00× [0.87 1.15] inconclusive");
        assert_eq!(format_half_width(&s), "±15.0%");
        assert_eq!(format_precision(&s), "~800 rounds for ±2%");
        let none = stats(None);
        assert_eq!(format_speedup_claim(&none), "1.19×");
        assert_eq!(format_half_width(&none), "—");
        assert_eq!(format_precision(&none), "no interval (see below)");
    }
}
