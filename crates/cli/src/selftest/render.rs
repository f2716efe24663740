//! The text `capshim selftest` prints (one line per check: status, id, summary, the measured
//! time, and on failure the fix; details with `--verbose`), and the bundle's `report.md`.

use std::fmt::Write;

use super::Report;

/// Renders `report`; `verbose` adds each check's detail under its line.
pub fn text(report: &Report, verbose: bool) -> String {
    let mut out = String::new();
    let width = report
        .checks
        .iter()
        .map(|c| c.check.id.len())
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "capshim selftest {} on {}: profile {}",
        report.capshim_version, report.os, report.profile
    );
    for c in &report.checks {
        let mut line = format!(
            "{:<4}  {:<width$}  {}",
            c.check.status.word(),
            c.check.id,
            c.check.summary
        );
        if let Some(ms) = c.time_ms {
            let _ = write!(line, " ({ms:.1} ms)");
        }
        if let Some(fix) = &c.check.fix {
            let _ = write!(line, " -- fix: {fix}");
        }
        let _ = writeln!(out, "{line}");
        if verbose {
            let _ = writeln!(out, "{}{}", " ".repeat(width + 8), c.check.detail);
        }
    }
    let n = report.counts;
    let verdict = if n.fail > 0 {
        "a claim does not hold"
    } else if n.ok == 0 {
        // Exit 0 all the same (a skip is no failure), but nothing here proves a claim.
        "nothing was checked, so no claim is shown to hold"
    } else {
        "every claim checked holds"
    };
    let _ = writeln!(
        out,
        "{} ok, {} fail, {} skip: {verdict}{}",
        n.ok,
        n.fail,
        n.skip,
        if verbose {
            ""
        } else {
            " (--verbose for the details)"
        }
    );
    out
}

/// The bundle's `report.md`: the verbose text in a code block under a heading.
pub fn markdown(report: &Report) -> String {
    format!(
        "# capshim selftest\n\nProfile {} on {} (capshim {}).\n\n```text\n{}```\n",
        report.profile,
        report.os,
        report.capshim_version,
        text(report, true)
    )
}
