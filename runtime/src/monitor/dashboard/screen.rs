//! What the dashboard draws: a snapshot of the shared state ([`View`]) rendered into a ratatui
//! buffer, on the screen thread (or into a buffer of its own for the last frame left on the
//! terminal).

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, LineGauge, Paragraph, Widget};

use super::state::{Chart as Curves, Shared, Split, Status};
use crate::monitor::printer::format_scalar;

/// Everything one frame shows, copied from the shared state.
#[derive(Debug, Clone)]
pub(super) struct View {
    pub(super) status: Status,
    pub(super) detail: String,
    pub(super) epoch: u64,
    pub(super) max_epoch: u64,
    pub(super) global_step: u64,
    /// Steps done in the epoch, and its length.
    pub(super) epoch_steps: (u64, u64),
    /// Steps done in this run, and the run's total (from where it started).
    pub(super) run_steps: (u64, u64),
    pub(super) epoch_left: Option<Duration>,
    pub(super) run_left: Option<Duration>,
    pub(super) steps_per_second: f64,
    pub(super) learning_rate: f64,
    pub(super) charts: Vec<Curves>,
}

impl View {
    /// A snapshot of `shared`, as of now.
    pub(super) fn of(shared: &Shared) -> View {
        let step = shared.global_step.load(Relaxed);
        let (epoch, max_epoch) = (shared.epoch.load(Relaxed), shared.max_epoch.load(Relaxed));
        let per_epoch = shared.steps_per_epoch.load(Relaxed);
        let epoch_done = step.saturating_sub(shared.epoch_first_step.load(Relaxed)).min(per_epoch);
        let first = shared.run_first_step.load(Relaxed);
        let total = (max_epoch * per_epoch).saturating_sub(first);
        let run_done = step.saturating_sub(first).min(total);
        let elapsed = shared.started.elapsed();
        let in_epoch = elapsed.saturating_sub(Duration::from_millis(shared.epoch_started_ms.load(Relaxed)));
        let status = shared.status();
        let over = status.is_final();
        View {
            status,
            detail: shared.detail().clone(),
            epoch,
            max_epoch,
            global_step: step,
            epoch_steps: (epoch_done, per_epoch),
            run_steps: (run_done, total),
            epoch_left: if over { None } else { time_left(in_epoch, epoch_done, per_epoch) },
            run_left: if over { None } else { time_left(elapsed, run_done, total) },
            steps_per_second: run_done as f64 / elapsed.as_secs_f64().max(1e-9),
            learning_rate: f64::from_bits(shared.learning_rate.load(Relaxed)),
            charts: shared.curves().charts.clone(),
        }
    }
}

/// The time `total - done` more steps take at the rate of `done` in `elapsed`.
fn time_left(elapsed: Duration, done: u64, total: u64) -> Option<Duration> {
    (done > 0).then(|| elapsed.mul_f64(total.saturating_sub(done) as f64 / done as f64))
}

/// `h:mm:ss`.
fn clock(d: Option<Duration>) -> String {
    match d {
        Some(d) => {
            let s = d.as_secs();
            format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
        }
        None => "-:--:--".into(),
    }
}

fn status_style(status: Status) -> Style {
    let color = match status {
        Status::Running | Status::Validating => Color::Green,
        Status::Stopping | Status::Stopped => Color::Yellow,
        Status::Interrupted => Color::Magenta,
        Status::Finished => Color::Cyan,
        Status::Failed => Color::Red,
    };
    Style::default().fg(color).add_modifier(Modifier::BOLD)
}

/// Draw `view` into `area` of `buf`: the charts on top, two to a row, the status and progress
/// below.
pub(super) fn render(view: &View, area: Rect, buf: &mut Buffer) {
    let [charts, status] = Layout::vertical([Constraint::Min(6), Constraint::Length(7)]).areas(area);
    render_charts(&view.charts, charts, buf);
    render_status(view, status, buf);
}

fn render_charts(charts: &[Curves], area: Rect, buf: &mut Buffer) {
    if charts.is_empty() {
        Paragraph::new("no scalar put yet")
            .block(Block::default().borders(Borders::ALL).title(" curves "))
            .render(area, buf);
        return;
    }
    let columns = if charts.len() > 1 && area.width >= 80 { 2 } else { 1 };
    let rows = charts.len().div_ceil(columns);
    let row_areas = Layout::vertical(vec![Constraint::Ratio(1, rows as u32); rows]).split(area);
    for (row, chunk) in row_areas.iter().zip(charts.chunks(columns)) {
        let cells = Layout::horizontal(vec![Constraint::Ratio(1, columns as u32); columns]).split(*row);
        for (cell, chart) in cells.iter().zip(chunk) {
            render_chart(chart, *cell, buf);
        }
    }
}

fn render_chart(chart: &Curves, area: Rect, buf: &mut Buffer) {
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) =
        (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in points.filter(|p| p.1.is_finite()) {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if x1 - x0 < 1.0 {
        x1 = x0 + 1.0;
    }
    let pad = if y1 > y0 {
        (y1 - y0) * 0.05
    } else if y0 != 0.0 {
        y0.abs() * 0.1
    } else {
        1.0
    };
    // A curve that never goes below 0 (a cost, an error) keeps 0 as its floor.
    let (y0, y1) = (if y0 >= 0.0 { (y0 - pad).max(0.0) } else { y0 - pad }, y1 + pad);
    let datasets = chart
        .series
        .iter()
        .map(|s| {
            let last = s.points.last().map_or(String::new(), |p| format_scalar(p.1));
            let (color, label) = match s.split {
                Split::Train => (Color::Cyan, format!("{} {last}", s.name)),
                Split::Valid => (Color::Yellow, format!("{} {last}", s.name)),
                Split::Step => (Color::Blue, format!("{} (steps) {last}", s.name)),
            };
            let graph = if s.points.len() < 2 { GraphType::Scatter } else { GraphType::Line };
            Dataset::default()
                .name(label)
                .marker(Marker::Braille)
                .graph_type(graph)
                .style(Style::default().fg(color))
                .data(&s.points)
        })
        .collect();
    let dim = Style::default().fg(Color::Gray);
    let x_labels = [format!("{x0:.0}"), format!("{x1:.0}")];
    let y_labels = [format_scalar(y0), format_scalar((y0 + y1) / 2.0), format_scalar(y1)];
    Chart::new(datasets)
        .block(
            Block::default().borders(Borders::ALL).title(Span::styled(
                format!(" {} ", chart.key),
                Style::default().add_modifier(Modifier::BOLD),
            )),
        )
        .x_axis(Axis::default().title("step").style(dim).bounds([x0, x1]).labels(x_labels))
        .y_axis(Axis::default().style(dim).bounds([y0, y1]).labels(y_labels))
        .hidden_legend_constraints((Constraint::Ratio(3, 4), Constraint::Ratio(3, 4)))
        .render(area, buf);
}

fn render_status(view: &View, area: Rect, buf: &mut Buffer) {
    let mut status = vec![Span::styled(view.status.text(), status_style(view.status))];
    if !view.detail.is_empty() {
        status.push(Span::raw(format!(": {}", view.detail)));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Line::from([vec![Span::raw(" stoker ─ ")], status, vec![Span::raw(" ")]].concat()));
    let inner = block.inner(area);
    block.render(area, buf);
    let [facts, epoch, run, keys] = Layout::vertical([Constraint::Length(1); 4]).areas(inner);
    Paragraph::new(format!(
        " epoch {}/{}   global step {}   learning rate {}   {:.1} steps/s",
        view.epoch,
        view.max_epoch,
        view.global_step,
        format_scalar(view.learning_rate),
        view.steps_per_second
    ))
    .render(facts, buf);
    let gauge = |label: String, (done, total): (u64, u64), color: Color| {
        LineGauge::default()
            .label(label)
            .ratio(if total == 0 { 0.0 } else { done as f64 / total as f64 })
            .filled_symbol("━")
            .unfilled_symbol("─")
            .filled_style(Style::default().fg(color))
            .unfilled_style(Style::default().fg(Color::DarkGray))
    };
    let (e, r) = (view.epoch_steps, view.run_steps);
    gauge(format!(" epoch {:>6}/{:<6} left {} ", e.0, e.1, clock(view.epoch_left)), e, Color::Green)
        .render(epoch, buf);
    gauge(format!(" run   {:>6}/{:<6} left {} ", r.0, r.1, clock(view.run_left)), r, Color::Cyan)
        .render(run, buf);
    let keys_text = if view.status.is_final() {
        " training is over"
    } else {
        " q: stop at the next step boundary, with a checkpoint   Ctrl-C twice: exit at once"
    };
    Paragraph::new(keys_text).style(Style::default().fg(Color::Gray)).render(keys, buf);
}

/// The text of `buf`, one line per row, trailing blanks dropped.
pub(super) fn text_of(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        for x in area.left()..area.right() {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::dashboard::state::Shared;

    #[test]
    fn a_frame_shows_the_curves_the_epoch_and_the_status() {
        let shared = Shared::new(None);
        for epoch in 1..=3u64 {
            let mut curves = shared.curves();
            curves.push("train_cost", None, epoch * 10, 1.0 / epoch as f64);
            curves.push("validation_cost", None, epoch * 10, 1.2 / epoch as f64);
            curves.push("validation_error", None, epoch * 10, 0.3 / epoch as f64);
        }
        shared.epoch.store(3, Relaxed);
        shared.max_epoch.store(5, Relaxed);
        shared.steps_per_epoch.store(10, Relaxed);
        shared.global_step.store(25, Relaxed);
        shared.epoch_first_step.store(20, Relaxed);
        shared.learning_rate.store(0.01f64.to_bits(), Relaxed);
        shared.set_status(Status::Stopping);
        let area = Rect::new(0, 0, 120, 30);
        let mut buf = Buffer::empty(area);
        render(&View::of(&shared), area, &mut buf);
        let text = text_of(&buf);
        for expected in [
            "cost",
            "error",
            "train_cost 0.33333",
            "validation_cost",
            "epoch 3/5",
            "global step 25",
            "learning rate 0.01",
        ] {
            assert!(text.contains(expected), "no `{expected}` in:\n{text}");
        }
        assert!(text.contains("stopping at the next step boundary"), "{text}");
        assert!(text.contains("     5/10"), "the epoch's progress:\n{text}");
        assert!(text.contains("    25/50"), "the run's progress:\n{text}");
        let run_line = text.lines().find(|l| l.contains("25/50")).expect("the run's line");
        let (filled, unfilled) = (run_line.matches('━').count(), run_line.matches('─').count());
        assert!(filled > 0 && filled.abs_diff(unfilled) <= 2, "half of the run's gauge filled: {run_line}");
    }

    #[test]
    fn time_left_and_clock() {
        assert_eq!(time_left(Duration::from_secs(10), 0, 10), None);
        assert_eq!(time_left(Duration::from_secs(10), 5, 10), Some(Duration::from_secs(10)));
        assert_eq!(clock(Some(Duration::from_secs(3725))), "1:02:05");
        assert_eq!(clock(None), "-:--:--");
    }
}
