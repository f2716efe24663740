//! `capshim report --matrix --svg`: the speedups of [`Matrix`] as a heatmap, a row per bundle
//! (its machine and model), a column per arm × test, each cell coloured by its speedup on a log
//! scale (red slower, white 1×, green faster) and labelled with it.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::ExportError;
use super::matrix::Matrix;

const CELL_W: i32 = 120;
const CELL_H: i32 = 28;
const LABEL_W: i32 = 420;
const HEADER_H: i32 = 60;

/// The colour of a speedup: white at 1×, full green at 4× and beyond, full red at 1/4× and below.
fn colour(speedup: f64) -> RGBColor {
    let t = (speedup.log2() / 2.0).clamp(-1.0, 1.0);
    let fade = |full: u8| (255.0 - (255.0 - f64::from(full)) * t.abs()).round() as u8;
    if t >= 0.0 {
        RGBColor(fade(44), fade(160), fade(44))
    } else {
        RGBColor(fade(214), fade(39), fade(40))
    }
}

/// The heatmap as SVG text.
///
/// # Errors
/// [`ExportError::Svg`] when the drawing backend fails.
pub fn heatmap(matrix: &Matrix) -> Result<String, ExportError> {
    draw(matrix).map_err(|e| ExportError::Svg(e.to_string()))
}

fn draw(matrix: &Matrix) -> Result<String, Box<dyn std::error::Error>> {
    let mut columns: Vec<(String, String)> = Vec::new();
    let mut rows: Vec<String> = Vec::new();
    let mut cells: Vec<(usize, usize, f64)> = Vec::new();
    for c in &matrix.bench {
        let Some(speedup) = c.speedup else { continue };
        let key = (c.arm.clone(), c.test.clone());
        let col = columns.iter().position(|k| *k == key).unwrap_or_else(|| {
            columns.push(key);
            columns.len() - 1
        });
        let label = format!("{} · {} · {}", c.machine.label(), c.model.label(), c.bundle);
        let row = match rows.last() {
            Some(last) if *last == label => rows.len() - 1,
            _ => {
                rows.push(label);
                rows.len() - 1
            }
        };
        cells.push((row, col, speedup));
    }
    let width = (LABEL_W + CELL_W * columns.len().max(1) as i32) as u32;
    let height = (HEADER_H + CELL_H * rows.len().max(1) as i32 + 10) as u32;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let title = ("sans-serif", 14).into_font();
        root.draw(&Text::new(
            "Speedup against each bundle's own stock arm (green faster, red slower)",
            (8, 8),
            title,
        ))?;
        let small = ("sans-serif", 12).into_font();
        let centred = small
            .clone()
            .into_text_style(&root)
            .pos(Pos::new(HPos::Center, VPos::Center));
        for (i, (arm, test)) in columns.iter().enumerate() {
            let x = LABEL_W + CELL_W * i as i32 + CELL_W / 2;
            root.draw(&Text::new(
                format!("{arm} {test}"),
                (x, HEADER_H - 14),
                centred.clone(),
            ))?;
        }
        for (i, label) in rows.iter().enumerate() {
            let y = HEADER_H + CELL_H * i as i32 + CELL_H / 2;
            root.draw(&Text::new(
                label.clone(),
                (8, y),
                small
                    .clone()
                    .into_text_style(&root)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
        }
        for &(row, col, speedup) in &cells {
            let (x, y) = (
                LABEL_W + CELL_W * col as i32,
                HEADER_H + CELL_H * row as i32,
            );
            root.draw(&Rectangle::new(
                [(x, y), (x + CELL_W - 2, y + CELL_H - 2)],
                colour(speedup).filled(),
            ))?;
            root.draw(&Text::new(
                format!("{speedup:.2}×"),
                (x + CELL_W / 2, y + CELL_H / 2),
                centred.clone(),
            ))?;
        }
        root.present()?;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1× is white, faster is green, slower red, and the scale saturates.
    #[test]
    fn colours_follow_the_speedup() {
        assert_eq!(colour(1.0), RGBColor(255, 255, 255));
        assert_eq!(colour(4.0), RGBColor(44, 160, 44));
        assert_eq!(colour(100.0), RGBColor(44, 160, 44));
        assert_eq!(colour(0.25), RGBColor(214, 39, 40));
        let RGBColor(r, g, _) = colour(1.5);
        assert!(g > r, "faster leans green");
    }
}
