//! `capshim report --matrix`: many bundles, from many machines, in one table. Rows are a
//! machine (chip, OS version, guest or host, `hw.model`) and a model (by its SHA-256); columns
//! are arm × test. Each cell is the arm's median in tokens/s, and beside it the speedup against
//! its own bundle's stock arm, with the interval only that bundle's random order backs.
//! Verify bundles add a verdict column per arm. The long form (`--csv`) has one line per
//! bundle, arm and test; [`super::matrix_svg`] draws the speedups as a heatmap.
//!
//! Column names follow llama.cpp's `scripts/compare-llama-bench.py` (`CPU`, `Model`, `Test`,
//! `t/s NAME`, `Speedup`), so the table can be posted beside its tables.

use super::ExportError;
use super::markdown::{Align, table};

/// The machine a bundle ran on, from its `environment.json`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MachineKey {
    /// The chip: `machdep.cpu.brand_string` (macOS) or `/proc/cpuinfo`'s model name.
    pub chip: String,
    /// The OS and its version, e.g. `macOS 26.1`.
    pub os: String,
    /// `guest` (a virtual machine), `host`, or `unknown` when the record cannot tell.
    pub place: String,
    /// `sysctl hw.model` (e.g. `VirtualMac2,1`); empty when not recorded.
    pub hw_model: String,
}

impl MachineKey {
    /// One label for the CSV's `machine` column: the four fields joined with ` / `.
    pub fn label(&self) -> String {
        [&self.chip, &self.os, &self.place, &self.hw_model]
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" / ")
    }
}

/// A model: the name llama-bench ran and the file's SHA-256 (rows group by the hash).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ModelKey {
    /// The file's SHA-256 as the bundle recorded it, lowercase hex; empty when not recorded.
    pub sha256: String,
    /// The model's file name without `.gguf`.
    pub name: String,
}

impl ModelKey {
    /// `name (sha256's first 12 digits)`.
    pub fn label(&self) -> String {
        if self.sha256.is_empty() {
            self.name.clone()
        } else {
            format!(
                "{} ({})",
                self.name,
                &self.sha256[..self.sha256.len().min(12)]
            )
        }
    }
}

/// One measured figure: a bundle's arm on one test.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchCell {
    /// The bundle directory as given.
    pub bundle: String,
    /// Its machine.
    pub machine: MachineKey,
    /// Its model.
    pub model: ModelKey,
    /// The arm's name in its bundle.
    pub arm: String,
    /// llama-bench's test name, e.g. `pp512`, `tg128@d1024`.
    pub test: String,
    /// The median, in tokens/s.
    pub value: f64,
    /// Against the bundle's own stock arm (`None` for stock, or without one).
    pub speedup: Option<f64>,
    /// The speedup's 95% interval from the bundle's paired rounds, when it has one.
    pub ci95: Option<(f64, f64)>,
}

/// A verify bundle's result for one arm.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyCell {
    /// The bundle directory as given.
    pub bundle: String,
    /// Its machine.
    pub machine: MachineKey,
    /// Its model.
    pub model: ModelKey,
    /// The arm's name in its bundle.
    pub arm: String,
    /// `reference`, `equivalent`, `different` ... as `capshim verify` wrote it.
    pub verdict: String,
    /// Mean KL divergence against the reference arm, nats.
    pub kld_mean: Option<f64>,
    /// 99th percentile of the KL divergence, nats.
    pub kld_p99: Option<f64>,
    /// Share of tokens whose most likely next token agrees with the reference, 0–1.
    pub top1_agreement: Option<f64>,
    /// Relative change of perplexity against the reference (0.01 = 1%).
    pub ppl_delta: Option<f64>,
}

/// Everything `--matrix` shows, in the order the bundles were given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Matrix {
    /// Bench figures.
    pub bench: Vec<BenchCell>,
    /// Verify verdicts.
    pub verify: Vec<VerifyCell>,
}

/// A column of the wide table.
#[derive(Clone, PartialEq, Eq)]
enum Column {
    /// `t/s ARM TEST`.
    Ts(String, String),
    /// `Speedup ARM TEST`.
    Speedup(String, String),
    /// `verify ARM`.
    Verify(String),
}

impl Column {
    fn header(&self) -> String {
        match self {
            Column::Ts(arm, test) => format!("t/s {arm} {test}"),
            Column::Speedup(arm, test) => format!("Speedup {arm} {test}"),
            Column::Verify(arm) => format!("verify {arm}"),
        }
    }
}

/// A speedup as the cell shows it: with a within-bundle interval `1.23× [1.20 1.26]`, else `1.23×`.
fn speedup_text(speedup: Option<f64>, ci: Option<(f64, f64)>) -> String {
    match (speedup, ci) {
        (Some(s), Some((lo, hi))) => format!("{s:.2}× [{lo:.2} {hi:.2}]"),
        (Some(s), None) => format!("{s:.2}×"),
        (None, _) => String::new(),
    }
}

/// The wide Markdown table: one row per machine and model (a second bundle of the same
/// machine and model whose cells are already filled gets a row of its own), one column per arm
/// × test.
pub fn markdown(matrix: &Matrix) -> String {
    use std::collections::HashMap;
    // Columns in order of first appearance.
    let mut columns: Vec<Column> = Vec::new();
    let mut index: HashMap<(u8, String, String), usize> = HashMap::new();
    let mut add = |c: Column, columns: &mut Vec<Column>| -> usize {
        let key = match &c {
            Column::Ts(a, t) => (0, a.clone(), t.clone()),
            Column::Speedup(a, t) => (1, a.clone(), t.clone()),
            Column::Verify(a) => (2, a.clone(), String::new()),
        };
        *index.entry(key).or_insert_with(|| {
            columns.push(c);
            columns.len() - 1
        })
    };
    // Rows: (machine, model) → the row indices used, each a map column → text and its bundles.
    type Row = (MachineKey, ModelKey, HashMap<usize, String>);
    let mut rows: Vec<Row> = Vec::new();
    let mut by_key: HashMap<(MachineKey, ModelKey), Vec<usize>> = HashMap::new();
    // Each bundle's cells go to the first row of its key where none of them is taken.
    let mut place = |bundle_cells: Vec<(usize, String)>,
                     machine: &MachineKey,
                     model: &ModelKey,
                     rows: &mut Vec<Row>| {
        let candidates = by_key.entry((machine.clone(), model.clone())).or_default();
        let free = candidates
            .iter()
            .copied()
            .find(|&r| bundle_cells.iter().all(|(c, _)| !rows[r].2.contains_key(c)));
        let r = free.unwrap_or_else(|| {
            rows.push((machine.clone(), model.clone(), HashMap::new()));
            candidates.push(rows.len() - 1);
            rows.len() - 1
        });
        rows[r].2.extend(bundle_cells);
    };
    let mut start = 0;
    while start < matrix.bench.len() {
        let bundle = &matrix.bench[start].bundle;
        let end = start
            + matrix.bench[start..]
                .iter()
                .take_while(|c| &c.bundle == bundle)
                .count();
        let mut cells = Vec::new();
        for c in &matrix.bench[start..end] {
            let ts = add(Column::Ts(c.arm.clone(), c.test.clone()), &mut columns);
            cells.push((ts, format!("{:.2}", c.value)));
            if c.speedup.is_some() {
                let sp = add(Column::Speedup(c.arm.clone(), c.test.clone()), &mut columns);
                cells.push((sp, speedup_text(c.speedup, c.ci95)));
            }
        }
        let first = &matrix.bench[start];
        place(cells, &first.machine, &first.model, &mut rows);
        start = end;
    }
    let mut start = 0;
    while start < matrix.verify.len() {
        let bundle = &matrix.verify[start].bundle;
        let end = start
            + matrix.verify[start..]
                .iter()
                .take_while(|c| &c.bundle == bundle)
                .count();
        let cells = matrix.verify[start..end]
            .iter()
            .map(|c| {
                (
                    add(Column::Verify(c.arm.clone()), &mut columns),
                    c.verdict.clone(),
                )
            })
            .collect();
        let first = &matrix.verify[start];
        place(cells, &first.machine, &first.model, &mut rows);
        start = end;
    }
    let mut headers: Vec<String> = ["CPU", "OS", "Guest/host", "hw.model", "Model"]
        .map(String::from)
        .to_vec();
    headers.extend(columns.iter().map(Column::header));
    let mut aligns = vec![Align::Left; 5];
    aligns.extend(columns.iter().map(|c| match c {
        Column::Verify(_) => Align::Left,
        _ => Align::Right,
    }));
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|(machine, model, cells)| {
            let mut line = vec![
                machine.chip.clone(),
                machine.os.clone(),
                machine.place.clone(),
                machine.hw_model.clone(),
                model.label(),
            ];
            line.extend((0..columns.len()).map(|i| cells.get(&i).cloned().unwrap_or_default()));
            line
        })
        .collect();
    let mut out = String::from(
        "Medians of llama-bench `samples_ts`, tokens/s, one row per machine and model (its SHA-256). \
         Speedup: against the same bundle's stock arm; the 95% interval, where shown, is from that \
         bundle's paired rounds in random order. Figures of different rows were not measured \
         side by side, and no interval compares them.\n\n",
    );
    out.push_str(&table(&headers, &aligns, &lines));
    out
}

/// A number for the CSV: shortest round-trip text, empty for none.
fn num(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The long form: one line per bundle, arm and test (`value` in `unit`), then one per verify
/// arm with its metrics.
///
/// # Errors
/// [`ExportError::Csv`] when the writer fails.
pub fn csv(matrix: &Matrix) -> Result<String, ExportError> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let err = |e: ::csv::Error| ExportError::Csv(e.to_string());
    w.write_record([
        "bundle",
        "machine",
        "model",
        "model_sha256",
        "arm",
        "test",
        "value",
        "unit",
        "speedup",
        "ci95_low",
        "ci95_high",
        "verdict",
        "kld_mean",
        "kld_p99",
        "top1_agreement",
        "ppl_delta",
    ])
    .map_err(err)?;
    for c in &matrix.bench {
        w.write_record([
            c.bundle.clone(),
            c.machine.label(),
            c.model.name.clone(),
            c.model.sha256.clone(),
            c.arm.clone(),
            c.test.clone(),
            c.value.to_string(),
            "tokens/s".to_string(),
            num(c.speedup),
            num(c.ci95.map(|c| c.0)),
            num(c.ci95.map(|c| c.1)),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ])
        .map_err(err)?;
    }
    for c in &matrix.verify {
        w.write_record([
            c.bundle.clone(),
            c.machine.label(),
            c.model.name.clone(),
            c.model.sha256.clone(),
            c.arm.clone(),
            "verify".to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            c.verdict.clone(),
            num(c.kld_mean),
            num(c.kld_p99),
            num(c.top1_agreement),
            num(c.ppl_delta),
        ])
        .map_err(err)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ExportError::Csv(e.to_string()))?;
    Ok(String::from_utf8(bytes).expect("CSV of UTF-8 fields"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(chip: &str) -> MachineKey {
        MachineKey {
            chip: chip.into(),
            os: "macOS 26.1".into(),
            place: "guest".into(),
            hw_model: "VirtualMac2,1".into(),
        }
    }

    fn model() -> ModelKey {
        ModelKey {
            sha256: "ab".repeat(32),
            name: "tiny".into(),
        }
    }

    fn cell(bundle: &str, chip: &str, arm: &str, value: f64, speedup: Option<f64>) -> BenchCell {
        BenchCell {
            bundle: bundle.into(),
            machine: machine(chip),
            model: model(),
            arm: arm.into(),
            test: "pp512".into(),
            value,
            speedup,
            ci95: speedup.map(|s| (s - 0.1, s + 0.1)),
        }
    }

    /// Two machines give two rows; the speedup carries its own bundle's interval.
    #[test]
    fn rows_are_machines_and_columns_arms_by_test() {
        let m = Matrix {
            bench: vec![
                cell("b1", "Apple M1", "stock", 10.0, None),
                cell("b1", "Apple M1", "native", 25.0, Some(2.5)),
                cell("b2", "Apple M4", "stock", 20.0, None),
            ],
            verify: vec![],
        };
        let md = markdown(&m);
        let lines: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(lines.len(), 4, "{md}");
        assert!(lines[0].contains("t/s stock pp512") && lines[0].contains("Speedup native pp512"));
        assert!(lines[2].contains("Apple M1") && lines[2].contains("2.50× [2.40 2.60]"));
        assert!(lines[3].contains("Apple M4") && lines[3].contains("20.00"));
    }

    /// A second bundle of the same machine and model does not overwrite the first one's cells.
    #[test]
    fn a_repeated_machine_gets_its_own_row_instead_of_overwriting() {
        let m = Matrix {
            bench: vec![
                cell("b1", "Apple M1", "stock", 10.0, None),
                cell("b2", "Apple M1", "stock", 11.0, None),
            ],
            verify: vec![],
        };
        let md = markdown(&m);
        assert!(md.contains("10.00") && md.contains("11.00"), "{md}");
    }

    /// The long form names bundle, machine and model on every line.
    #[test]
    fn csv_is_long_form() {
        let m = Matrix {
            bench: vec![cell("b1", "Apple M1", "native", 25.0, Some(2.5))],
            verify: vec![],
        };
        let text = csv(&m).unwrap();
        let mut lines = text.lines();
        assert!(lines.next().unwrap().starts_with(
            "bundle,machine,model,model_sha256,arm,test,value,unit,speedup,ci95_low,ci95_high"
        ));
        let line = lines.next().unwrap();
        assert!(
            line.starts_with("b1,\"Apple M1 / macOS 26.1 / guest / VirtualMac2,1\",tiny,"),
            "{line}"
        );
        assert!(
            line.contains(",native,pp512,25,tokens/s,2.5,2.4,2.6,"),
            "{line}"
        );
    }
}
