//! `results.csv` / `--csv`: one line per test and metric (median, min, max in tokens/s,
//! sample and round counts), a column per arm, then per compared arm the speedup, its
//! interval (low, high, half-width), verdict and the rounds that would bring it within the
//! noise band (schema 6: then the ratio of medians, `ratio_of_medians`, the speedup being the
//! paired rounds' estimate), and percent of host.

use super::{ExportError, Exporter, cell};
use crate::analysis::{ArmStats, Summary};

/// CSV output.
pub struct Csv;

impl Exporter for Csv {
    fn file_name(&self) -> &'static str {
        "results.csv"
    }

    fn render(&self, summary: &Summary) -> Result<String, ExportError> {
        render(summary).map_err(|e| ExportError::Csv(e.to_string()))
    }
}

/// The columns after each compared arm's `speedup`, on its `median_ts` line.
const SPEEDUP_COLUMNS: [&str; 5] = [
    "ci95_low",
    "ci95_high",
    "half_width",
    "verdict",
    "rounds_for_noise_band",
];

/// The interval's cells of an arm (empty without one; the verdict column then holds why).
fn speedup_cells(s: Option<&ArmStats>) -> Vec<String> {
    let Some(s) = s else {
        return vec![String::new(); SPEEDUP_COLUMNS.len()];
    };
    let ci = s.speedup_ci95;
    let p = s.speedup_precision;
    vec![
        ci.map(|c| c.low.to_string()).unwrap_or_default(),
        ci.map(|c| c.high.to_string()).unwrap_or_default(),
        p.map(|p| p.half_width.to_string()).unwrap_or_default(),
        match (s.verdict, &s.speedup_no_interval) {
            (Some(v), _) => v.text().to_string(),
            (None, Some(why)) => why.clone(),
            (None, None) => String::new(),
        },
        p.and_then(|p| p.rounds_for_noise_band)
            .map(|n| n.to_string())
            .unwrap_or_default(),
    ]
}

fn render(summary: &Summary) -> Result<String, Box<dyn std::error::Error>> {
    let compared: Vec<&str> = summary
        .arm_order
        .iter()
        .map(String::as_str)
        .filter(|a| Some(*a) != summary.stock.as_deref() && Some(*a) != summary.host.as_deref())
        .collect();
    // Schema 6: `speedup` is the paired estimate, and the ratio of medians has its own column.
    let schema6 = summary.schema_version >= 6;
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let mut header = vec![
        "workload".to_string(),
        "test".to_string(),
        "metric".to_string(),
        "unit".to_string(),
    ];
    header.extend(summary.arm_order.iter().cloned());
    for arm in &compared {
        if summary.stock.is_some() {
            header.push(format!("speedup {arm}"));
            for column in SPEEDUP_COLUMNS {
                header.push(format!("{column} {arm}"));
            }
            if schema6 {
                header.push(format!("ratio_of_medians {arm}"));
            }
        }
        if summary.host.is_some() {
            header.push(format!("percent_of_host {arm}"));
        }
    }
    w.write_record(&header)?;
    for (i, row) in summary.rows.iter().enumerate() {
        // A command's figures are in its own unit (`bench --command`).
        let unit = row.unit.as_deref().unwrap_or("tokens/s");
        for (metric, unit) in [
            ("median_ts", unit),
            ("min_ts", unit),
            ("max_ts", unit),
            ("samples", "count"),
            ("rounds", "count"),
        ] {
            let mut record = vec![
                row.model.clone(),
                row.test.clone(),
                metric.to_string(),
                unit.to_string(),
            ];
            for arm in &summary.arm_order {
                record.push(match cell(summary, i, arm) {
                    None => String::new(),
                    Some(s) => match metric {
                        "median_ts" => s.median_ts.to_string(),
                        "min_ts" => s.min_ts.to_string(),
                        "max_ts" => s.max_ts.to_string(),
                        "rounds" => s.rounds.len().to_string(),
                        _ => s.samples.to_string(),
                    },
                });
            }
            for arm in &compared {
                let s = cell(summary, i, arm).filter(|_| metric == "median_ts");
                if summary.stock.is_some() {
                    record.push(
                        s.and_then(|s| s.speedup_vs_stock)
                            .map(|v| v.to_string())
                            .unwrap_or_default(),
                    );
                    record.extend(speedup_cells(s));
                    if schema6 {
                        record.push(
                            s.and_then(|s| s.ratio_of_medians)
                                .map(|v| v.to_string())
                                .unwrap_or_default(),
                        );
                    }
                }
                if summary.host.is_some() {
                    record.push(
                        s.and_then(|s| s.percent_of_host)
                            .map(|v| v.to_string())
                            .unwrap_or_default(),
                    );
                }
            }
            w.write_record(&record)?;
        }
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}
