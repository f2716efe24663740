//! `chart.svg`: grouped bars per test (host, stock, each other arm), the bar at the median and a
//! whisker from the smallest to the largest sample, one panel per test since prompt processing
//! and generation differ by an order of magnitude.

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::{ExportError, Exporter, cell};
use crate::analysis::{Role, Summary};

/// SVG chart output.
pub struct Svg;

const PANEL_WIDTH: u32 = 90;
const PANEL_BASE: u32 = 140;
const HEIGHT: u32 = 460;

fn color(summary: &Summary, arm: &str, index: usize) -> RGBColor {
    const OTHERS: [RGBColor; 5] = [
        RGBColor(31, 119, 180),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(23, 190, 207),
        RGBColor(188, 189, 34),
    ];
    match summary.roles.get(arm) {
        Some(Role::Host) => RGBColor(127, 127, 127),
        Some(Role::Stock) => RGBColor(214, 39, 40),
        _ => OTHERS[index % OTHERS.len()],
    }
}

impl Exporter for Svg {
    fn file_name(&self) -> &'static str {
        "chart.svg"
    }

    fn render(&self, summary: &Summary) -> Result<String, ExportError> {
        draw(summary).map_err(|e| ExportError::Svg(e.to_string()))
    }
}

fn draw(summary: &Summary) -> Result<String, Box<dyn std::error::Error>> {
    let arms = &summary.arm_order;
    let panels = summary.rows.len().max(1) as u32;
    let panel_width = PANEL_BASE + PANEL_WIDTH * arms.len() as u32;
    let mut text = String::new();
    {
        let root =
            SVGBackend::with_string(&mut text, (panel_width * panels, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let model = summary.rows.first().map(|r| r.model.as_str()).unwrap_or("");
        let fig = super::figures(summary);
        let root = root.titled(
            &if fig.command {
                format!("{}: median ({}), whiskers min–max", fig.what, fig.unit)
            } else {
                format!("llama-bench {model}: median samples_ts (tokens/s), whiskers min–max")
            },
            ("sans-serif", 16),
        )?;
        let areas = root.split_evenly((1, panels as usize));
        for (i, (area, row)) in areas.iter().zip(&summary.rows).enumerate() {
            let top = arms
                .iter()
                .filter_map(|a| cell(summary, i, a).map(|s| s.max_ts))
                .fold(0.0f64, f64::max);
            let top = if top > 0.0 { top * 1.15 } else { 1.0 };
            let mut chart = ChartBuilder::on(area)
                .caption(&row.test, ("sans-serif", 15))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(64)
                // Plotters integer ranges include their end: 0..=n-1 gives one segment per arm.
                .build_cartesian_2d((0..arms.len().saturating_sub(1)).into_segmented(), 0.0..top)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(arms.len())
                .x_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(k) => arms.get(*k).cloned().unwrap_or_default(),
                    _ => String::new(),
                })
                .y_desc(fig.unit.as_str())
                .draw()?;
            let mut other = 0;
            for (k, arm) in arms.iter().enumerate() {
                let c = color(summary, arm, other);
                if summary.roles.get(arm) == Some(&Role::Other) {
                    other += 1;
                }
                let Some(s) = cell(summary, i, arm) else {
                    chart.draw_series(std::iter::once(Text::new(
                        "missing",
                        (SegmentValue::CenterOf(k), top * 0.02),
                        ("sans-serif", 12).into_font().color(&BLACK),
                    )))?;
                    continue;
                };
                chart.draw_series(
                    Histogram::vertical(&chart)
                        .style(c.filled())
                        .margin(14)
                        .data(std::iter::once((k, s.median_ts))),
                )?;
                let x = SegmentValue::CenterOf(k);
                let whisker = BLACK.stroke_width(1);
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(x.clone(), s.min_ts), (x.clone(), s.max_ts)],
                    whisker,
                )))?;
                chart.draw_series(std::iter::once(Text::new(
                    format!("{:.2}", s.median_ts),
                    (x, s.max_ts + top * 0.01),
                    ("sans-serif", 11).into_font().color(&BLACK),
                )))?;
            }
        }
        root.present()?;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::analyze;
    use crate::analysis::tests::{arm, row};

    #[test]
    fn one_bar_per_arm_and_test_and_a_note_for_missing_ones() {
        let summary = analyze(&[
            arm(
                "host",
                Role::Host,
                vec![vec![
                    row("m", 512, 0, &[4871.99]),
                    row("m", 0, 128, &[286.71]),
                ]],
            ),
            arm(
                "stock",
                Role::Stock,
                vec![vec![
                    row("m", 512, 0, &[431.86]),
                    row("m", 0, 128, &[12.63]),
                ]],
            ),
            arm(
                "unlocked",
                Role::Other,
                vec![vec![row("m", 512, 0, &[4786.70])]],
            ),
        ])
        .unwrap();
        let svg = Svg.render(&summary).unwrap();
        // The background plus five bars: unlocked has no tg128.
        assert_eq!(svg.matches("<rect").count(), 6, "{svg}");
        assert_eq!(svg.matches("missing").count(), 1);
        for label in ["pp512", "tg128", "host", "stock", "unlocked", "4786.70"] {
            assert!(svg.contains(label), "{label}");
        }
        // One x-axis slot per arm, each labelled: no empty slot after the last arm.
        assert_eq!(svg.matches(">\nunlocked\n<").count(), 2, "{svg}");
        assert!(
            !svg.contains(">\n\n</text>"),
            "an unlabelled x-axis slot: {svg}"
        );
    }
}
