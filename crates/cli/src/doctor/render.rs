//! The text `capshim doctor` prints: a heading, one line per check (status, id, summary, and
//! the fix where there is one: what to change, or for a workload how to run it), the details with `--verbose`, and the counts.

use std::fmt::Write;

use super::{NOT_MACOS_FIX, Report, Status};

/// Renders `report`; `verbose` adds each check's detail (and sources) under its line.
pub fn render(report: &Report, verbose: bool) -> String {
    let mut out = String::new();
    let width = report.checks.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let _ = if report.macos {
        writeln!(out, "capshim doctor {}", report.capshim_version)
    } else {
        writeln!(
            out,
            "capshim doctor {}: this is {}, not macOS; checks that need macOS are skipped, and nothing here fails",
            report.capshim_version, report.os
        )
    };
    for check in &report.checks {
        let mut line = format!(
            "{:<4}  {:<width$}  {}",
            check.status.word(),
            check.id,
            check.summary
        );
        // Every skip for not being macOS has the same fix; the first line says it once.
        let shown = !(check.status == Status::Skip
            && check.fix.as_deref() == Some(NOT_MACOS_FIX)
            && check.id != "machine.macos");
        if let (Some(fix), true) = (&check.fix, shown) {
            line.push_str(" -- fix: ");
            line.push_str(fix);
        }
        let _ = writeln!(out, "{line}");
        if verbose {
            let indent = " ".repeat(width + 8);
            let _ = writeln!(out, "{indent}{}", check.detail);
            for source in &check.sources {
                let _ = writeln!(
                    out,
                    "{indent}source: {} <{}>: {}",
                    source.name, source.url, source.says
                );
            }
        }
    }
    let c = report.counts;
    let _ = writeln!(
        out,
        "{} ok, {} warn, {} fail, {} skip{}",
        c.ok,
        c.warn,
        c.fail,
        c.skip,
        if verbose {
            ""
        } else {
            " (--verbose for the details)"
        }
    );
    out
}
