//! `results.csv` / `--csv`: one line per test and metric (median, min, max in tokens/s,
//! sample count), a column per arm, then speedup and percent of host per compared arm.

use super::{ExportError, Exporter, cell};
use crate::analysis::Summary;

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

fn render(summary: &Summary) -> Result<String, Box<dyn std::error::Error>> {
    let compared: Vec<&str> = summary
        .arm_order
        .iter()
        .map(String::as_str)
        .filter(|a| Some(*a) != summary.stock.as_deref() && Some(*a) != summary.host.as_deref())
        .collect();
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
        }
        if summary.host.is_some() {
            header.push(format!("percent_of_host {arm}"));
        }
    }
    w.write_record(&header)?;
    for (i, row) in summary.rows.iter().enumerate() {
        for (metric, unit) in [
            ("median_ts", "tokens/s"),
            ("min_ts", "tokens/s"),
            ("max_ts", "tokens/s"),
            ("samples", "count"),
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
