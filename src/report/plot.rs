//! Plots a person would rather look at than read, drawn with plotters as SVG: the plate's two
//! panels. For one plan, memory per GPU by component against the cap (`check --plot`); for a
//! search, predicted loss against days for each shape, with the loss target, the time limit
//! and the Pareto front marked (`search --plot`); with `--sensitivity`, a tornado chart of
//! days as each uncertain input moves within its range.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::brief::Brief;
use crate::error::{Error, Result};
use crate::format::{count, general, money, thousands};
use crate::plan::check::CheckReport;
use crate::plan::sensitivity::Sensitivity;
use crate::plan::verdict::ShapeVerdict;
use crate::plan::Plan;
use crate::search::SearchReport;

/// Width and height of every plot, pixels.
const SIZE: (u32, u32) = (960, 540);
/// Most shapes drawn on the loss–days plot; more would be unreadable.
pub const MAX_CURVES: usize = 8;

/// Colours of the memory components and of the shapes' curves (Tableau 10).
const COLOURS: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(89, 161, 79),
    RGBColor(176, 122, 161),
    RGBColor(237, 201, 72),
    RGBColor(118, 183, 178),
    RGBColor(156, 117, 95),
    RGBColor(255, 157, 167),
    RGBColor(186, 176, 172),
    RGBColor(225, 87, 89),
];
/// The limits: the cap, the loss target, the day limit.
const LIMIT: RGBColor = RGBColor(200, 30, 30);
/// The region where every check passes.
const PASSING: RGBColor = RGBColor(220, 240, 220);

fn failed(e: impl std::fmt::Display) -> Error {
    Error::invalid("--plot", "SVG", format!("a plot that can be drawn ({e})"))
}

fn font(size: u32) -> TextStyle<'static> {
    ("sans-serif", size).into_font().into()
}

/// Runs `draw` on a white SVG canvas and returns the document.
fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        draw(&root)?;
        root.present().map_err(failed)?;
    }
    Ok(out)
}

/// One plan's memory per GPU, component by component, as a stacked bar against the cap and
/// the card (the plate's left panel).
pub fn memory(report: &CheckReport) -> Result<String> {
    let (p, b) = (&report.plan, &report.brief);
    let m = &p.memory_gb;
    let mut parts = vec![
        ("weights", m.weights),
        ("gradients", m.gradients),
        ("optimizer", m.optimizer),
        ("activations", m.activations),
    ];
    for (name, value) in [
        ("logits", m.logits),
        ("transient", m.transient),
        ("reserve", m.reserve),
    ] {
        if let Some(v) = value.filter(|&v| v > 0.0) {
            parts.push((name, v));
        }
    }
    let high = m.total.max(b.gpu_memory_gb) * 1.08;
    let verdict = if p.checks.memory {
        "fits"
    } else {
        "does not fit"
    };
    let title = format!(
        "{}: TP {} × PP {} × DP {}, ZeRO {} — {} GB per GPU {} the {} GB cap",
        p.model,
        p.layout.tp,
        p.layout.pp,
        p.layout.dp,
        p.layout.zero,
        general_gb(m.total),
        verdict,
        general(b.memory_cap_gb)
    );
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, font(20))
            .margin(20)
            .x_label_area_size(50)
            .build_cartesian_2d(0f64..high, 0f64..1f64)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_desc("memory per GPU, GB")
            .axis_desc_style(font(16))
            .label_style(font(14))
            .draw()
            .map_err(failed)?;
        let mut start = 0.0;
        for (i, (name, gb)) in parts.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let end = start + gb;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(start, 0.45), (end, 0.75)],
                    colour.filled(),
                )))
                .map_err(failed)?
                .label(format!("{name} {} GB", general_gb(*gb)))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled())
                });
            start = end;
        }
        for (x, y, label, colour) in [
            (
                b.memory_cap_gb,
                0.93,
                format!("cap {} GB", general(b.memory_cap_gb)),
                LIMIT,
            ),
            (
                b.gpu_memory_gb,
                0.87,
                format!("card {} GB", general(b.gpu_memory_gb)),
                RGBColor(90, 90, 90),
            ),
        ] {
            chart
                .draw_series(DashedLineSeries::new(
                    [(x, 0.4), (x, y)],
                    8,
                    6,
                    colour.stroke_width(3),
                ))
                .map_err(failed)?;
            // The label beside its line's top, not on it: its left edge a hundredth of the
            // axis to the right.
            chart
                .draw_series(std::iter::once(Text::new(
                    label,
                    (x + high / 100.0, y),
                    font(15).color(&colour),
                )))
                .map_err(failed)?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
        Ok(())
    })
}

/// Draws the series' labels at `position`, boxed.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font(font(14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(failed)
}

/// GB to two decimals below 100, one above.
fn general_gb(gb: f64) -> String {
    if gb >= 100.0 {
        format!("{gb:.1}")
    } else {
        format!("{gb:.2}")
    }
}

/// The shapes drawn: every shape that fits the cluster when there are few; else, so that the
/// plot shows the range of sizes, the fitting shapes split into [`MAX_CURVES`] bins of equal
/// width in log-parameters and from each bin the one that reaches the lowest loss within the
/// day limit; in the report's order.
fn drawn(report: &SearchReport) -> Vec<&ShapeVerdict> {
    let law = &report.brief;
    let reach = |v: &ShapeVerdict| law.loss(v.law_size(), v.max_tokens_in_time as f64);
    let cap = report.brief.memory_cap_gb;
    let fitting: Vec<(usize, &ShapeVerdict)> = report
        .shapes
        .iter()
        .enumerate()
        .filter(|(_, v)| fits(v, cap))
        .collect();
    if fitting.len() <= MAX_CURVES {
        return fitting.into_iter().map(|(_, v)| v).collect();
    }
    let ln = |v: &ShapeVerdict| (v.params as f64).ln();
    let low = fitting
        .iter()
        .map(|(_, v)| ln(v))
        .fold(f64::INFINITY, f64::min);
    let high = fitting
        .iter()
        .map(|(_, v)| ln(v))
        .fold(f64::NEG_INFINITY, f64::max);
    let width = (high - low).max(f64::MIN_POSITIVE);
    let mut best: Vec<Option<(usize, &ShapeVerdict)>> = vec![None; MAX_CURVES];
    for &(i, v) in &fitting {
        let bin = (((ln(v) - low) / width * MAX_CURVES as f64) as usize).min(MAX_CURVES - 1);
        let better = match best[bin] {
            None => true,
            Some((_, b)) => reach(v) < reach(b),
        };
        if better {
            best[bin] = Some((i, v));
        }
    }
    let mut chosen: Vec<(usize, &ShapeVerdict)> = best.into_iter().flatten().collect();
    chosen.sort_by_key(|&(i, _)| i);
    chosen.into_iter().map(|(_, v)| v).collect()
}

/// Whether some layout of the shape fits the cap and trains a token within the day limit.
fn fits(v: &ShapeVerdict, cap: f64) -> bool {
    v.max_tokens_in_time > 0 && v.min_memory_gb.is_some_and(|gb| gb <= cap)
}

/// Predicted loss against days for each shape, at the pace of its fastest layout that fits
/// (`days_limit / max_tokens_in_time` days a token), with the loss target, the day limit (and
/// the cost limit's days, when it binds first), the region where all hold, and the search's
/// Pareto front (the plate's right panel).
pub fn loss_days(report: &SearchReport) -> Result<String> {
    let b = &report.brief;
    let law = b;
    let shapes = drawn(report);
    let x_max = b.max_days * 1.5;
    // From the lowest loss any curve reaches (or the target, if lower) to above the highest
    // loss a curve has at the day limit (or the target, if higher), so every curve drawn
    // crosses the plot and the target is on it.
    let lowest = shapes
        .iter()
        .map(|v| law.loss(v.law_size(), v.max_tokens_in_time as f64 * 1.5))
        .chain(report.front.iter().map(|p| p.loss))
        .fold(b.loss_target, f64::min);
    let highest = shapes
        .iter()
        .map(|v| law.loss(v.law_size(), v.max_tokens_in_time as f64))
        .fold(b.loss_target, f64::max);
    let span = (highest - lowest).max(0.01);
    let y_min = lowest - 0.1 * span;
    let y_max = highest + 0.6 * span;
    let hidden = report
        .shapes
        .iter()
        .filter(|v| v.max_tokens_in_time > 0)
        .count()
        - shapes.len();
    let title = format!(
        "predicted loss against days on {} GPUs: target {}, at most {} days{}",
        count(b.gpus as f64),
        general(b.loss_target),
        general(b.max_days),
        b.max_cost
            .map_or(String::new(), |c| format!(", cost ≤ {}", money(c)))
    );
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, font(20))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x_max, y_min..y_max)
            .map_err(failed)?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, y_min), (b.days_limit(), b.loss_target)],
                PASSING.filled(),
            )))
            .map_err(failed)?
            .label("every check passes")
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], PASSING.filled()));
        chart
            .configure_mesh()
            .x_desc("days")
            .y_desc("predicted loss")
            .axis_desc_style(font(16))
            .label_style(font(14))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(failed)?;
        for (i, v) in shapes.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let n = v.law_size();
            let days_per_token = b.days_limit() / v.max_tokens_in_time as f64;
            // From where the curve enters the plot (its loss at the day limit is below y_max,
            // so it does) to its right edge.
            let first = law.tokens_for_loss(n, y_max).unwrap_or(1.0).max(1.0);
            let last = x_max / days_per_token;
            let points = (0..=200)
                .map(|k| {
                    let d = first * (last / first).max(1.0).powf(f64::from(k) / 200.0);
                    (d * days_per_token, law.loss(n, d))
                })
                .filter(|&(days, loss)| days <= x_max && loss <= y_max && loss >= y_min);
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(3)))
                .map_err(failed)?
                .label(match v.active_params {
                    Some(active) => format!(
                        "{} ({} parameters, {} active)",
                        v.model,
                        count(v.params as f64),
                        count(active as f64)
                    ),
                    None => format!("{} ({} parameters)", v.model, count(v.params as f64)),
                })
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(3))
                });
        }
        let dashed =
            |points: [(f64, f64); 2]| DashedLineSeries::new(points, 8, 6, LIMIT.stroke_width(2));
        chart
            .draw_series(dashed([(0.0, b.loss_target), (x_max, b.loss_target)]))
            .map_err(failed)?;
        chart
            .draw_series(dashed([(b.max_days, y_min), (b.max_days, y_max)]))
            .map_err(failed)?
            .label(format!(
                "target {} and {} days",
                general(b.loss_target),
                general(b.max_days)
            ))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], LIMIT.stroke_width(2)));
        if let Some((limit, days)) = b.binding_cost_limit() {
            chart
                .draw_series(DashedLineSeries::new(
                    [(days, y_min), (days, y_max)],
                    3,
                    4,
                    LIMIT.stroke_width(2),
                ))
                .map_err(failed)?
                .label(format!(
                    "cost {}: {} days",
                    money(limit),
                    general((days * 10.0).round() / 10.0)
                ))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], LIMIT.stroke_width(1)));
        }
        let front: Vec<(f64, f64)> = report.front.iter().map(|p| (p.days, p.loss)).collect();
        chart
            .draw_series(
                front
                    .iter()
                    .map(|&point| Circle::new(point, 5, BLACK.filled())),
            )
            .map_err(failed)?
            .label(format!("Pareto front ({} plans)", front.len()))
            .legend(|(x, y)| Circle::new((x + 9, y), 5, BLACK.filled()));
        if hidden > 0 {
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{} more shapes not drawn", thousands(hidden as u64)),
                    (x_max * 0.02, y_min + 0.03 * (y_max - y_min)),
                    font(14),
                )))
                .map_err(failed)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// The colours of a tornado's bars: the low end of a range, the high end.
const LOW_END: RGBColor = COLOURS[0];
const HIGH_END: RGBColor = COLOURS[1];

/// A tornado chart of days (`--sensitivity --plot`): for each input, largest swing on top, a
/// bar from the days as given to the days at the low end of its range and one to the days at
/// its high end; the days as given and the day limit as vertical lines. `what` names the
/// plan, named in the title. An end at which the run never ends is drawn to the right edge.
pub fn tornado(s: &Sensitivity, brief: &Brief, plan: &Plan) -> Result<String> {
    let base = s.base.days.ok_or_else(|| {
        Error::invalid(
            "--plot",
            "a tornado chart",
            "a plan whose run ends as given",
        )
    })?;
    let days: Vec<f64> = s
        .rows
        .iter()
        .flat_map(|r| [r.at_low.days, r.at_high.days])
        .flatten()
        .chain([base, brief.max_days])
        .collect();
    let low = days.iter().copied().fold(f64::INFINITY, f64::min);
    let high = days.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pad = ((high - low) * 0.08).max(high * 0.01);
    let never = s.rows.iter().any(|r| r.swing_days.is_none());
    let x_min = (low - pad).max(0.0);
    let x_max = high + pad * if never { 3.0 } else { 1.0 };
    let n = s.rows.len() as f64;
    // At least four rows' height, so one input's bars are not a wall; the legend above them.
    let rows_top = n.max(4.0);
    let top = rows_top + 1.5;
    let l = &plan.layout;
    let title = format!(
        "{} on {} tokens, {}: days at each end of each range",
        plan.model,
        count(plan.tokens as f64),
        l.describe()
    );
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, font(18))
            .margin(20)
            .x_label_area_size(50)
            .build_cartesian_2d(x_min..x_max, 0f64..top)
            .map_err(failed)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .x_desc("days")
            .axis_desc_style(font(16))
            .label_style(font(14))
            .draw()
            .map_err(failed)?;
        // The lines first, so the bars and their labels are drawn over them.
        for (label, colour) in [
            ("low end of the range", LOW_END),
            ("high end of the range", HIGH_END),
        ] {
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(failed)?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled())
                });
        }
        chart
            .draw_series(LineSeries::new(
                [(base, rows_top - n), (base, rows_top)],
                BLACK.stroke_width(2),
            ))
            .map_err(failed)?
            .label(format!("as given: {base:.3} days"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.stroke_width(2)));
        chart
            .draw_series(DashedLineSeries::new(
                [(brief.max_days, 0.0), (brief.max_days, top)],
                8,
                6,
                LIMIT.stroke_width(3),
            ))
            .map_err(failed)?
            .label(format!("limit: {} days", general(brief.max_days)))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], LIMIT.stroke_width(3)));
        for (i, row) in s.rows.iter().enumerate() {
            // Row 0 at the top: its band is [rows_top − 1, rows_top].
            let band = rows_top - 1.0 - i as f64;
            let mut ends = Vec::new();
            for (end, point, colour) in [
                (row.low, &row.at_low, LOW_END),
                (row.high, &row.at_high, HIGH_END),
            ] {
                let to = point.days.unwrap_or(x_max);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(base.min(to), band + 0.12), (base.max(to), band + 0.55)],
                        colour.filled(),
                    )))
                    .map_err(failed)?;
                ends.push(format!(
                    "{} → {}",
                    row.input.show(end),
                    point
                        .days
                        .map_or("never ends".into(), |d| format!("{d:.2} days"))
                ));
            }
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{}: {}, {}", row.input, ends[0], ends[1]),
                    (x_min + (x_max - x_min) * 0.01, band + 0.93),
                    font(14),
                )))
                .map_err(failed)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}
