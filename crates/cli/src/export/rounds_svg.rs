//! `rounds.svg` (schema 6): every paired round's ratio arm / stock (stock / arm for a
//! lower-is-better figure) in time order, with the speedup's estimate as a line and its 95%
//! interval as a band, one panel per test and arm, so that drift, bursts and carry-over are
//! seen at a glance. Derived again and compared like
//! `chart.svg`, so the same summary always gives the same bytes: no clock, no randomness, and
//! plotters' SVG backend writes its elements in drawing order.

use plotters::prelude::*;

use super::{ExportError, Exporter, cell, format_speedup_claim};
use crate::analysis::Summary;

/// Per-round plot output.
pub struct RoundsSvg;

const PANEL_WIDTH: u32 = 420;
const PANEL_HEIGHT: u32 = 260;
const TITLE_HEIGHT: u32 = 40;
const POINT: RGBColor = RGBColor(31, 119, 180);
const BAND: RGBColor = RGBColor(255, 187, 120);
const ESTIMATE: RGBColor = RGBColor(214, 39, 40);

impl Exporter for RoundsSvg {
    fn file_name(&self) -> &'static str {
        "rounds.svg"
    }

    fn render(&self, summary: &Summary) -> Result<String, ExportError> {
        draw(summary).map_err(|e| ExportError::Svg(e.to_string()))
    }
}

/// The panels: (row, arm) of every cell with round ratios, tests across, arms down.
fn panels(summary: &Summary) -> (Vec<usize>, Vec<&str>) {
    let has = |i: usize, arm: &str| cell(summary, i, arm).is_some_and(|s| s.round_ratios.is_some());
    let tests: Vec<usize> = (0..summary.rows.len())
        .filter(|&i| summary.arm_order.iter().any(|a| has(i, a)))
        .collect();
    let arms: Vec<&str> = summary
        .arm_order
        .iter()
        .map(String::as_str)
        .filter(|a| tests.iter().any(|&i| has(i, a)))
        .collect();
    (tests, arms)
}

fn draw(summary: &Summary) -> Result<String, Box<dyn std::error::Error>> {
    let (tests, arms) = panels(summary);
    let (columns, rows) = (tests.len().max(1), arms.len().max(1));
    let size = (
        PANEL_WIDTH * columns as u32,
        PANEL_HEIGHT * rows as u32 + TITLE_HEIGHT,
    );
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        root.fill(&WHITE)?;
        let model = summary.rows.first().map_or("", |r| r.model.as_str());
        // A lower-is-better figure (a `bench --command` wall time) pairs its rounds as stock /
        // arm, so that above 1 still reads "the arm is faster".
        let ratio = if summary.rows.iter().any(|r| r.quantity.lower_is_better()) {
            "stock median / arm median (lower is better)"
        } else {
            "arm median / stock median"
        };
        let root = root.titled(
            &format!(
                "{model}: each round's {ratio}, in round order; line: estimate, band: 95% interval"
            ),
            ("sans-serif", 15),
        )?;
        if tests.is_empty() {
            root.draw(&Text::new(
                "no paired rounds: no arm was compared with a stock arm round by round",
                (20, 30),
                ("sans-serif", 14).into_font().color(&BLACK),
            ))?;
        }
        let areas = root.split_evenly((rows, columns));
        for (a, arm) in arms.iter().enumerate() {
            for (t, &row) in tests.iter().enumerate() {
                let area = &areas[a * columns + t];
                let title = format!("{} · {arm}", summary.rows[row].test);
                let Some(stats) = cell(summary, row, arm).filter(|s| s.round_ratios.is_some())
                else {
                    area.draw(&Text::new(
                        format!("{title}: no paired rounds"),
                        (20, 20),
                        ("sans-serif", 13).into_font().color(&BLACK),
                    ))?;
                    continue;
                };
                let ratios = stats.round_ratios.as_deref().unwrap_or_default();
                let estimate = stats.speedup_vs_stock;
                let band = stats.speedup_ci95;
                // The y range holds every ratio and the band, with a margin: not 1.00 unless
                // near, so that a 7× arm's rounds are not squeezed into a line.
                let values = ratios
                    .iter()
                    .map(|r| r.ratio)
                    .chain(estimate)
                    .chain(band.map(|b| b.low))
                    .chain(band.map(|b| b.high))
                    .filter(|v| v.is_finite());
                let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                });
                let pad = ((hi - lo) * 0.08).max(0.01 * hi.abs()).max(1e-6);
                let (bottom, top) = (lo - pad, hi + pad);
                let last = ratios.iter().map(|r| r.round).max().unwrap_or(1).max(2);
                let mut chart = ChartBuilder::on(area)
                    .caption(
                        format!("{title}: {}", format_speedup_claim(stats)),
                        ("sans-serif", 13),
                    )
                    .margin(10)
                    .x_label_area_size(30)
                    .y_label_area_size(50)
                    .build_cartesian_2d(0.5f64..last as f64 + 0.5, bottom..top)?;
                chart
                    .configure_mesh()
                    .disable_mesh()
                    .x_desc("round")
                    .y_desc("ratio")
                    .x_label_formatter(&|v| format!("{v:.0}"))
                    .y_label_formatter(&|v| format!("{v:.2}"))
                    .draw()?;
                if let Some(b) = band {
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(0.5, b.low), (last as f64 + 0.5, b.high)],
                        BAND.mix(0.4).filled(),
                    )))?;
                }
                if (bottom..=top).contains(&1.0) {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(0.5, 1.0), (last as f64 + 0.5, 1.0)],
                        BLACK.mix(0.4).stroke_width(1),
                    )))?;
                }
                if let Some(e) = estimate {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(0.5, e), (last as f64 + 0.5, e)],
                        ESTIMATE.stroke_width(2),
                    )))?;
                }
                let points: Vec<(f64, f64)> = ratios
                    .iter()
                    .filter(|r| r.ratio.is_finite())
                    .map(|r| (f64::from(r.round), r.ratio))
                    .collect();
                chart.draw_series(LineSeries::new(points.clone(), POINT.stroke_width(1)))?;
                chart.draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, POINT.filled())),
                )?;
            }
        }
        root.present()?;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::tests::{arm, row};
    use crate::analysis::{Derivation, Options, Role, analyze, analyze_with};

    fn summary(derivation: Derivation) -> Summary {
        let rounds = |scale: f64, wobble: &[f64]| -> Vec<Vec<crate::llama::BenchRow>> {
            wobble
                .iter()
                .map(|w| {
                    vec![
                        row("m", 512, 0, &[100.0 * scale * w]),
                        row("m", 0, 128, &[10.0 * scale * w]),
                    ]
                })
                .collect()
        };
        let arms = [
            arm("stock", Role::Stock, rounds(1.0, &[1.0; 7])),
            arm(
                "unlocked",
                Role::Other,
                rounds(7.0, &[1.0, 1.02, 0.97, 1.01, 0.99, 1.03, 0.98]),
            ),
            arm(
                "again",
                Role::Other,
                rounds(1.0, &[1.0, 0.99, 1.01, 1.0, 1.02, 0.98, 1.0]),
            ),
        ];
        analyze_with(
            &arms,
            &Options {
                derivation,
                ..Options::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn one_panel_per_test_and_arm_with_every_round_and_the_band() {
        let s = summary(Derivation::Schema6);
        let svg = RoundsSvg.render(&s).unwrap();
        // Byte-stable: the same summary, the same text.
        assert_eq!(svg, RoundsSvg.render(&s).unwrap());
        // 2 tests × 2 arms, 7 rounds each: 28 points.
        assert_eq!(svg.matches("<circle").count(), 28, "{svg}");
        for title in [
            "pp512 · unlocked",
            "tg128 · unlocked",
            "pp512 · again",
            "tg128 · again",
        ] {
            assert!(svg.contains(title), "{title}");
        }
        // The caption carries the table's own claim, point and interval.
        let u = s.rows[0].arms.get("unlocked").unwrap().clone().unwrap();
        assert!(svg.contains(&format_speedup_claim(&u)), "{svg}");
        // Stock is the reference, not a panel.
        assert!(!svg.contains("· stock"));
    }

    #[test]
    fn without_round_ratios_it_says_so() {
        let svg = RoundsSvg
            .render(
                &analyze(&[arm(
                    "stock",
                    Role::Stock,
                    vec![vec![row("m", 512, 0, &[1.0])]],
                )])
                .unwrap(),
            )
            .unwrap();
        assert!(svg.contains("no paired rounds"), "{svg}");
        // Schema 5 summaries carry no round ratios: the same note.
        let svg = RoundsSvg.render(&summary(Derivation::Schema5)).unwrap();
        assert!(svg.contains("no paired rounds"), "{svg}");
    }
}
