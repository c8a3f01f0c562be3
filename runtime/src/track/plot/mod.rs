//! The [`Recorder`](super::Recorder)'s plots: the curves, grid, frame, tick marks and legend
//! swatches drawn with plotters into an RGB buffer, then the text (title, legend, tick numbers,
//! axis labels) rasterized over it from the font embedded in the crate (`text`).
//!
//! The layout, in a [`PLOT_SIZE`] image: the plot's area inside a [`PLOT_MARGIN`] border on every
//! side; above it the title (its top 10 pixels down) and the legend's box (rows 40 to 64); below
//! it the x axis's tick numbers (from 8 pixels under the area) and its label (from 32 pixels
//! under it); on the left the left axis's tick numbers (ending 8 pixels before the area)
//! and its label, turned, 4 pixels from the edge; on the right the same for the right axis, when
//! a line has one.

mod text;
mod ticks;

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use self::text::{Align, Canvas, Label};
use self::ticks::{power_text, tick_text, ticks};
use crate::error::{Error, Result};
use crate::monitor::png::encode_png;
use crate::state::{Image, write_atomic};

/// The width and height of the plots, in pixels.
pub const PLOT_SIZE: (u32, u32) = (640, 480);
/// The border around a plot's area, in pixels, the same on every side: it holds the title and
/// the legend above the area, the tick numbers and the axes' labels below it and beside it.
pub const PLOT_MARGIN: u32 = 72;

/// The colour of the text.
const TEXT_COLOR: [u8; 3] = [34, 34, 34];
/// The colour of the frame around the plot's area, its tick marks and the legend's box.
const FRAME_COLOR: RGBColor = RGBColor(160, 160, 160);
/// The colour of the grid lines at the ticks.
const GRID_COLOR: RGBColor = RGBColor(232, 232, 232);
/// The height of a line of text: the title, the axis labels and legend, the tick numbers.
const TITLE_SIZE: f32 = 20.0;
const LABEL_SIZE: f32 = 15.0;
const TICK_SIZE: f32 = 13.0;
/// The top and bottom rows of the legend's box.
const LEGEND_ROWS: (i32, i32) = (40, 64);

/// One line of a plot.
pub(crate) struct Series<'a> {
    /// Its points, `(x, value)`: `x` the global step, or the learning rate on a logarithmic x
    /// axis; those whose value is not finite (or, on a logarithmic axis, whose `x` is not
    /// positive) are left out.
    pub points: &'a [(f64, f64)],
    /// Its colour (RGB).
    pub color: [u8; 3],
    /// Its name, in the legend and on its axis.
    pub label: &'a str,
}

/// A plot: a line on the left axis and maybe one with a scale of its own on the right axis, the
/// global step (or the learning rate, on a logarithmic scale) along the x axis, and points
/// marked on the left line's scale.
pub(crate) struct Plot<'a> {
    /// The title, above the plot.
    pub title: &'a str,
    /// The line whose scale the left axis shows.
    pub left: Series<'a>,
    /// The line whose scale the right axis shows, if any.
    pub right: Option<Series<'a>>,
    /// What the x axis shows.
    pub x: XAxis<'a>,
    /// Points marked on the left axis's scale (fastai's suggested learning rates), each in the
    /// legend.
    pub marks: &'a [Mark<'a>],
}

/// What a plot's x axis shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum XAxis<'a> {
    /// The global step, its ticks whole numbers.
    Steps,
    /// A positive value on a logarithmic scale (ticks at the powers of ten), named.
    Log(&'a str),
}

/// A point marked on a plot: a filled circle in its colour, its name in the legend.
pub(crate) struct Mark<'a> {
    /// Where, `(x, value)`, as the left line's points.
    pub at: (f64, f64),
    /// Its colour (RGB).
    pub color: [u8; 3],
    /// Its name, in the legend.
    pub label: &'a str,
}

/// Draw `plot` and write it as a PNG file at `path`, atomically.
pub(crate) fn write_plot(path: &Path, plot: &Plot<'_>) -> Result<()> {
    let png = draw_plot(plot).map_err(|e| Error::msg(format!("drawing {}: {e}", path.display())))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    write_atomic(path, &png).map_err(|e| Error::io(PathBuf::from(path), e))
}

/// The PNG bytes of the plot.
fn draw_plot(plot: &Plot<'_>) -> std::result::Result<Vec<u8>, String> {
    let (width, height) = PLOT_SIZE;
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    let labels = draw_shapes(&mut pixels, plot)?;
    let mut canvas = Canvas { pixels: &mut pixels, size: PLOT_SIZE };
    for label in &labels {
        canvas.draw(label)?;
    }
    encode_png(&Image { height, width, channels: 3, pixels })
}

/// A plotters error as text.
fn text_of(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The finite points of `points`, as `(x, y)`, with `x` as the axis places it (its logarithm on
/// a logarithmic axis).
fn finite(points: &[(f64, f64)], x: XAxis<'_>) -> Vec<(f64, f64)> {
    let place = |s: f64| if matches!(x, XAxis::Log(_)) { s.log10() } else { s };
    points.iter().map(|&(s, v)| (place(s), v)).filter(|(s, v)| s.is_finite() && v.is_finite()).collect()
}

/// Draw everything but the text into `pixels`, and say what text goes where.
fn draw_shapes(pixels: &mut [u8], plot: &Plot<'_>) -> std::result::Result<Vec<Label>, String> {
    let (w, h) = (PLOT_SIZE.0 as i32, PLOT_SIZE.1 as i32);
    let m = PLOT_MARGIN as i32;
    let left = finite(plot.left.points, plot.x);
    let right = plot.right.as_ref().map(|s| (s, finite(s.points, plot.x))).filter(|(_, p)| !p.is_empty());
    // One x range for every line: the steps; each line its own y range.
    let (x0, x1) = range(left.iter().chain(right.iter().flat_map(|(_, p)| p)).map(|p| p.0));
    let (y0, y1) = range(left.iter().map(|p| p.1));
    let root = BitMapBackend::with_buffer(pixels, PLOT_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(text_of)?;
    let area = root.margin(m, m, m, m);
    let chart =
        |(lo, hi): (f64, f64)| ChartBuilder::on(&area).build_cartesian_2d(x0..x1, lo..hi).map_err(text_of);
    let mut left_chart = chart((y0, y1))?;
    let mut labels = vec![label(plot.title, (w / 2, 10), TITLE_SIZE, (Align::Center, Align::Start))];
    // The grid and tick marks, the frame, then the lines over them.
    let (x_axis, x_name) = match plot.x {
        XAxis::Steps => (Axis::X, "step"),
        XAxis::Log(name) => (Axis::LogX, name),
    };
    labels.extend(x_axis.draw(&root, (x0, x1), &|x| left_chart.backend_coord(&(x, y0)).0)?);
    labels.extend(Axis::Left.draw(&root, (y0, y1), &|y| left_chart.backend_coord(&(x0, y)).1)?);
    labels.push(Axis::X.name_label(x_name));
    labels.push(Axis::Left.name_label(plot.left.label));
    let frame = [(m - 2, m - 2), (w - m + 1, h - m + 1)];
    root.draw(&Rectangle::new(frame, ShapeStyle::from(&FRAME_COLOR))).map_err(text_of)?;
    draw_line(&mut left_chart, &left, plot.left.color)?;
    let mut legend = vec![(plot.left.color, plot.left.label.to_string())];
    if let Some((series, points)) = &right {
        let (v0, v1) = range(points.iter().map(|p| p.1));
        let mut right_chart = chart((v0, v1))?;
        labels.extend(Axis::Right.draw(&root, (v0, v1), &|v| right_chart.backend_coord(&(x0, v)).1)?);
        labels.push(Axis::Right.name_label(series.label));
        draw_line(&mut right_chart, points, series.color)?;
        legend.push((series.color, format!("{} (right axis)", series.label)));
    }
    for mark in plot.marks {
        let at = finite(&[mark.at], plot.x);
        let [r, g, b] = mark.color;
        let style = ShapeStyle::from(&RGBColor(r, g, b)).filled();
        left_chart.draw_series(at.iter().map(|&p| Circle::new(p, 5, style))).map_err(text_of)?;
        legend.push((mark.color, mark.label.to_string()));
    }
    labels.extend(draw_legend(&root, &legend)?);
    root.present().map_err(text_of)?;
    Ok(labels)
}

/// A text label in the text's colour, along the line.
fn label(text: &str, at: (i32, i32), size: f32, align: (Align, Align)) -> Label {
    Label { text: text.to_string(), at, size, align, vertical: false, color: TEXT_COLOR }
}

/// A chart over the plot's area.
type Chart<'a, 'b> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// `points` as a line in `color` on `chart`.
fn draw_line(
    chart: &mut Chart<'_, '_>,
    points: &[(f64, f64)],
    [r, g, b]: [u8; 3],
) -> std::result::Result<(), String> {
    let style = ShapeStyle::from(&RGBColor(r, g, b)).stroke_width(2);
    chart.draw_series(LineSeries::new(points.iter().copied(), style)).map_err(text_of)?;
    Ok(())
}

/// An axis of the plot.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Axis {
    /// The steps, below the area.
    X,
    /// A logarithmic x axis: the values are the logarithms, the ticks powers of ten.
    LogX,
    /// The left line's scale.
    Left,
    /// The right line's scale.
    Right,
}

impl Axis {
    /// Draw the axis's tick marks over `lo..=hi`, and the grid lines of the x and left axes, where
    /// `at` is the pixel column (x axis) or row of a value; the tick numbers to write.
    fn draw(
        self,
        root: &DrawingArea<BitMapBackend<'_>, Shift>,
        (lo, hi): (f64, f64),
        at: &dyn Fn(f64) -> i32,
    ) -> std::result::Result<Vec<Label>, String> {
        let (w, h) = (PLOT_SIZE.0 as i32, PLOT_SIZE.1 as i32);
        let m = PLOT_MARGIN as i32;
        let horizontal = matches!(self, Axis::X | Axis::LogX);
        let (values, step) = if horizontal { ticks(lo, hi, 10, true) } else { ticks(lo, hi, 6, false) };
        let largest = values.iter().fold(0f64, |a, v| a.max(v.abs()));
        let mut labels = Vec::with_capacity(values.len());
        for &v in &values {
            let p = at(v);
            let (grid, mark, anchor, align) = match self {
                Axis::X | Axis::LogX => (
                    Some([(p, m), (p, h - m - 1)]),
                    [(p, h - m + 1), (p, h - m + 5)],
                    (p, h - m + 8),
                    (Align::Center, Align::Start),
                ),
                Axis::Left => (
                    Some([(m, p), (w - m - 1, p)]),
                    [(m - 2, p), (m - 6, p)],
                    (m - 8, p),
                    (Align::End, Align::Center),
                ),
                Axis::Right => {
                    (None, [(w - m + 1, p), (w - m + 5, p)], (w - m + 8, p), (Align::Start, Align::Center))
                }
            };
            if let Some(grid) = grid {
                root.draw(&PathElement::new(grid.to_vec(), GRID_COLOR)).map_err(text_of)?;
            }
            root.draw(&PathElement::new(mark.to_vec(), FRAME_COLOR)).map_err(text_of)?;
            let text = if self == Axis::LogX { power_text(v) } else { tick_text(v, step, largest) };
            labels.push(label(&text, anchor, TICK_SIZE, align));
        }
        Ok(labels)
    }

    /// The axis's name: below the x axis, turned beside the others.
    fn name_label(self, name: &str) -> Label {
        let (w, h) = (PLOT_SIZE.0 as i32, PLOT_SIZE.1 as i32);
        let (at, across) = match self {
            Axis::X | Axis::LogX => {
                return label(
                    name,
                    (w / 2, h - PLOT_MARGIN as i32 + 32),
                    LABEL_SIZE,
                    (Align::Center, Align::Start),
                );
            }
            Axis::Left => ((4, h / 2), Align::Start),
            Axis::Right => ((w - 4, h / 2), Align::End),
        };
        Label { vertical: true, ..label(name, at, LABEL_SIZE, (Align::Center, across)) }
    }
}

/// The legend's box, centred above the plot: for each line a swatch of its colour and its name;
/// the names to write.
fn draw_legend(
    root: &DrawingArea<BitMapBackend<'_>, Shift>,
    entries: &[([u8; 3], String)],
) -> std::result::Result<Vec<Label>, String> {
    const SWATCH: i32 = 24;
    const GAP: i32 = 6;
    const BETWEEN: i32 = 20;
    const PADDING: i32 = 10;
    let widths = entries
        .iter()
        .map(|(_, name)| Ok(text::width(name, LABEL_SIZE)?.ceil() as i32))
        .collect::<std::result::Result<Vec<i32>, String>>()?;
    let inner: i32 =
        widths.iter().map(|w| SWATCH + GAP + w).sum::<i32>() + BETWEEN * (entries.len() as i32 - 1);
    let (top, bottom) = LEGEND_ROWS;
    let left = PLOT_SIZE.0 as i32 / 2 - inner / 2 - PADDING;
    let right = left + inner + 2 * PADDING;
    root.draw(&Rectangle::new([(left, top), (right, bottom)], ShapeStyle::from(&FRAME_COLOR)))
        .map_err(text_of)?;
    let middle = (top + bottom) / 2;
    let mut x = left + PADDING;
    let mut labels = Vec::with_capacity(entries.len());
    for ((color, name), width) in entries.iter().zip(widths) {
        let [r, g, b] = *color;
        let style = ShapeStyle::from(&RGBColor(r, g, b)).stroke_width(2);
        root.draw(&PathElement::new(vec![(x, middle), (x + SWATCH, middle)], style)).map_err(text_of)?;
        labels.push(label(name, (x + SWATCH + GAP, middle), LABEL_SIZE, (Align::Start, Align::Center)));
        x += SWATCH + GAP + width + BETWEEN;
    }
    Ok(labels)
}

/// How far an axis runs past its smallest and largest values, as a share of their distance
/// (matplotlib's default margins): no point is drawn on the frame, half cut off by it.
const RANGE_MARGIN: f64 = 0.05;

/// The range of an axis that shows `values`: from the smallest to the largest, each end moved
/// out by [`RANGE_MARGIN`] of the distance between them; when all are one value, by half that
/// value either side (0.05 to 0.15 for a constant 0.1), by 0.5 for 0.
pub(crate) fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi > lo {
        let margin = (hi - lo) * RANGE_MARGIN;
        return (lo - margin, hi + margin);
    }
    let half = if lo == 0.0 { 0.5 } else { lo.abs() / 2.0 };
    (lo - half, hi + half)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of the pixels of `color` in an RGB buffer of the plot's size.
    fn rows_of(pixels: &[u8], color: [u8; 3]) -> Vec<u32> {
        pixels
            .chunks(3)
            .enumerate()
            .filter(|(_, p)| *p == color)
            .map(|(i, _)| i as u32 / PLOT_SIZE.0)
            .collect()
    }

    #[test]
    fn every_point_lies_inside_its_axis_range_away_from_its_ends() {
        for values in [
            vec![2.3, 0.4, 0.01],
            vec![0.36, 0.18, 0.17, 0.12],
            vec![-3.0, 7.0],
            vec![5.0],
            vec![0.0, 0.0],
            vec![1e-4, 1.1e-4],
        ] {
            let (lo, hi) = range(values.iter().copied());
            let room = (hi - lo) * 0.04;
            for v in &values {
                assert!(lo + room <= *v && *v <= hi - room, "{v} at an end of {lo}..{hi} ({values:?})");
            }
        }
    }

    #[test]
    fn the_highest_and_lowest_points_are_drawn_inside_the_frame() {
        // The validation loss is highest at its first point, as in the guide's loss.png.
        let train: Vec<(f64, f64)> = (1..=100).map(|s| (s as f64, 2.0 / s as f64)).collect();
        let valid = [(20.0, 0.36), (40.0, 0.18), (60.0, 0.17), (80.0, 0.12), (100.0, 0.13)];
        let plot = Plot {
            title: "loss",
            left: Series { points: &train, color: [31, 119, 180], label: "training loss" },
            right: Some(Series { points: &valid, color: [255, 127, 14], label: "validation loss" }),
            x: XAxis::Steps,
            marks: &[],
        };
        let mut pixels = vec![0u8; PLOT_SIZE.0 as usize * PLOT_SIZE.1 as usize * 3];
        draw_shapes(&mut pixels, &plot).unwrap();
        let (top, bottom) = (PLOT_MARGIN, PLOT_SIZE.1 - PLOT_MARGIN - 1);
        for (name, color) in [("training", [31, 119, 180]), ("validation", [255, 127, 14])] {
            // Inside the area, below the legend's swatches.
            let rows: Vec<u32> = rows_of(&pixels, color).into_iter().filter(|&r| r >= top - 2).collect();
            let (first, last) = (rows.iter().min().unwrap(), rows.iter().max().unwrap());
            assert!(
                *first >= top + 8 && *last + 8 <= bottom,
                "the {name} line reaches rows {first}..={last}"
            );
        }
    }
}
