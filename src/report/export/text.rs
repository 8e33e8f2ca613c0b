//! The human-readable report: aligned tables, thousands separators, PASS/FAIL with margins.

use std::fmt::Write;
use std::io;

use super::exporter::Exporter;
use crate::brief::Brief;
use crate::cost::step::stack::{GradientPrecision, LossPrecision};
use crate::cost::step::Step;
use crate::error::Result;
use crate::format::{count, fixed, general, money, plural, sci, thousands};
use crate::model::layout::Layout;
use crate::plan::check::CheckReport;
use crate::plan::sensitivity::{Input, Point, SearchSensitivity, Sensitivity};
use crate::plan::verdict::ShapeVerdict;
use crate::plan::Plan;
use crate::report::output::written;
use crate::search::rank::Distinct;
use crate::search::{FrontRuns, Ranked, SearchReport, MAX_FRONT_RUNS};

/// Plain text for a terminal.
#[derive(Debug, Clone, Copy, Default)]
pub struct Text;

/// Columns two spaces apart, each line indented: each column as wide as its widest cell, so
/// every row is measured before any is laid out.
#[derive(Default)]
struct Columns {
    widths: Vec<usize>,
    left: Vec<bool>,
}

impl Columns {
    /// Widens the columns to hold `cells`.
    fn measure<S: AsRef<str>>(&mut self, cells: &[S]) {
        if self.widths.len() < cells.len() {
            self.widths.resize(cells.len(), 0);
        }
        for (w, cell) in self.widths.iter_mut().zip(cells) {
            *w = (*w).max(cell.as_ref().chars().count());
        }
    }

    /// Keeps the first `n` columns (a row's cells past the header's are not shown), aligned as
    /// `align` says: one letter per column, `l` left-aligned, anything else right-aligned.
    fn finish(mut self, n: usize, align: &str) -> Self {
        self.widths.truncate(n);
        self.left = align.chars().map(|c| c == 'l').collect();
        self
    }

    /// One line of `cells`.
    fn line<S: AsRef<str>>(&self, cells: &[S], indent: &str) -> String {
        let mut out = String::from(indent);
        for (i, (cell, w)) in cells.iter().zip(&self.widths).enumerate() {
            let cell = cell.as_ref();
            if i > 0 {
                out.push_str("  ");
            }
            let pad = w - cell.chars().count();
            if self.left.get(i).copied().unwrap_or(false) {
                out.push_str(cell);
                out.extend(std::iter::repeat_n(' ', pad));
            } else {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(cell);
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    }
}

/// Lays out rows in columns two spaces apart, each line indented by `indent`. `align` has one
/// letter per column: `l` left-aligned, anything else right-aligned.
fn table(header: &[&str], rows: &[Vec<String>], align: &str, indent: &str) -> String {
    let mut columns = Columns::default();
    columns.measure(header);
    rows.iter().for_each(|row| columns.measure(row));
    let columns = columns.finish(header.len(), align);
    let mut out = columns.line(header, indent);
    for row in rows {
        out.push_str(&columns.line(row, indent));
    }
    out
}

fn verdict_word(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "FAIL"
    }
}

/// The data line of a brief whose law values repeats (Muennighoff et al. 2023): the unique
/// tokens and how fast repeated tokens and excess parameters lose their worth.
fn data_line(b: &Brief) -> Option<String> {
    let r = b.loss_law.repetition?;
    let data = match b.unique_tokens {
        Some(u) => format!("{} unique tokens", thousands(u)),
        None => "unlimited unique tokens".to_string(),
    };
    Some(format!(
        "          data: {data}, graded by effective tokens and parameters: repeats decay as e^(−R/{}), excess parameters as e^(−R/{})\n",
        general(r.r_d),
        general(r.r_n)
    ))
}

/// How the brief's law grades the mixtures of experts of a search, when there are any: by its
/// expert terms, or, under a law fitted on dense models, as dense models of their active
/// parameters (an upper bound on their loss; [`crate::plan::limits::law_size`]).
fn law_note(r: &SearchReport) -> Option<String> {
    let moe = r
        .shapes
        .iter()
        .filter(|v| v.active_params.is_some())
        .count();
    if moe == 0 {
        return None;
    }
    let dense = r.shapes.len() - moe;
    let with = if dense > 0 {
        "dense and MoE shapes graded together"
    } else {
        "MoE shapes graded"
    };
    Some(match r.brief.loss_law.experts {
        Some(_) => format!(
            "  {with} by one law in active parameters and experts (Ê of total over active expert width; a dense model is its one-expert case)\n"
        ),
        None => format!(
            "  {with} by a law fitted on dense models: each MoE as a dense model of its active parameters, an upper bound on its loss; --loss-law ludziejewski grades its experts\n"
        ),
    })
}

/// `x` after a minus sign: `− x`, or `+ |x|` when it is negative.
fn minus(x: f64) -> String {
    if x < 0.0 {
        format!("+ {}", general(-x))
    } else {
        format!("− {}", general(x))
    }
}

/// The brief in two lines, and a third for its price, power and cost limit when it has them.
pub fn brief_lines(b: &Brief) -> String {
    let law = &b.loss_law;
    let formula = match &law.experts {
        None => format!(
            "L = {} + {}/N^{} + {}/D^{}",
            general(law.e),
            general(law.a),
            general(law.alpha),
            general(law.b),
            general(law.beta)
        ),
        Some(x) => format!(
            "L = {} + {}·Ê^{}/N_act^({} {}·ln Ê) + {}·Ê^{}/D^({} {}·ln Ê), Ê of the experts from {} to {} (Ludziejewski et al. 2025's form; dense at one expert)",
            general(law.e),
            general(law.a),
            general(x.delta),
            general(law.alpha),
            minus(x.gamma),
            general(law.b),
            general(x.omega),
            general(law.beta),
            minus(x.zeta),
            general(x.e_start),
            general(x.e_max)
        ),
    };
    let mut out = format!(
        "brief     {} GPUs × {} TFLOP/s at {}% MFU ({} per node), at most {} days, {} GB cap of {} GB per GPU\n          \
         loss ≤ {} with {formula}, sequence {} tokens\n",
        thousands(b.gpus),
        general(b.peak_tflops),
        general(b.mfu * 100.0),
        b.gpus_per_node,
        general(b.max_days),
        general(b.memory_cap_gb),
        general(b.gpu_memory_gb),
        general(b.loss_target),
        thousands(b.seq_len),
    );
    if let Some(line) = data_line(b) {
        out.push_str(&line);
    }
    if let Some(line) = spend_line(b) {
        out.push_str(&line);
    }
    out
}

/// The brief's price, power, PUE, carbon intensity and cost limit, on one line (`None` when
/// it has none of them).
fn spend_line(b: &Brief) -> Option<String> {
    let s = &b.spend;
    let mut parts = Vec::new();
    if let Some(p) = s.price_per_gpu_hour {
        parts.push(format!("{} a GPU-hour", money(p)));
    }
    if let Some(w) = s.gpu_power_w {
        parts.push(format!(
            "{} W a GPU × PUE {}",
            general(w),
            general(s.pue.unwrap_or(1.0))
        ));
    }
    if let Some(c) = s.carbon_g_per_kwh {
        parts.push(format!("{} g CO2e/kWh", general(c)));
    }
    if let Some(limit) = b.max_cost {
        let days = b.cost_limit_days().map_or(String::new(), |d| {
            format!(" ({} days on {} GPUs)", fixed(d, 1), thousands(b.gpus))
        });
        parts.push(format!("cost ≤ {}{days}", money(limit)));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "spend     {}
",
            parts.join(", ")
        )
    })
}

/// A plan's spend in one line: GPU-hours, cost, energy, emissions, as far as the brief allows.
fn spent_line(p: &Plan, b: &Brief) -> Option<String> {
    let s = p.spend.as_ref()?;
    let mut parts = vec![format!(
        "{} GPU-hours ({} GPUs × {} days)",
        fixed(s.gpu_hours, 0),
        thousands(p.layout.gpus()),
        fixed(p.days, 2)
    )];
    if let (Some(c), Some(price)) = (s.cost, b.spend.price_per_gpu_hour) {
        parts.push(format!("cost {} at {} a GPU-hour", money(c), money(price)));
    }
    if let Some(e) = s.energy_mwh {
        parts.push(format!("{} MWh", fixed(e, 1)));
    }
    if let Some(t) = s.emissions_t {
        parts.push(format!("{} t CO2e", fixed(t, 1)));
    }
    Some(format!(
        "
spend
  {}
",
        parts.join("; ")
    ))
}

/// Each listed shape's best plate plan under the detailed model (the default stack, check's
/// default step): what the plate's assumed MFU hides, as `check --memory detailed --time
/// detailed` would grade it. Empty when no listed shape has a plate plan.
fn runnable_lines(brief: &Brief, shapes: &[&ShapeVerdict]) -> String {
    let rows: Vec<Vec<String>> = shapes
        .iter()
        .filter_map(|v| {
            let p = v.best_plan.as_ref()?;
            let r = p.runnable.as_ref()?;
            let l = &p.layout;
            let layout = l.describe();
            let (Some(days), Some(mfu), Some(memory)) = (r.days, r.mfu, r.memory_gb) else {
                let why = r.refused.clone().unwrap_or_default();
                return Some(vec![
                    p.model.clone(),
                    layout,
                    String::new(),
                    String::new(),
                    String::new(),
                    format!("not graded: {why}"),
                ]);
            };
            let verdict = match (r.fits, days <= brief.max_days, days <= brief.days_limit()) {
                (true, true, true) => "fits, in time".to_string(),
                (true, true, false) => "fits, over the cost limit".to_string(),
                (true, false, _) => format!("fits, {} days over", fixed(days - brief.max_days, 1)),
                (false, _, _) => format!("over the {} GB cap", general(brief.memory_cap_gb)),
            };
            Some(vec![
                p.model.clone(),
                layout,
                fixed(days, 2),
                format!("{} %", fixed(100.0 * mfu, 1)),
                fixed(memory, 2),
                verdict,
            ])
        })
        .collect();
    let Some(stack) = shapes
        .iter()
        .find_map(|v| Some(v.best_plan.as_ref()?.runnable.as_ref()?.stack))
    else {
        return String::new();
    };
    let mut out = format!(
        "\nbest plans under the detailed model ({} stack, b1 full recompute, the batch nearest {} tokens; the plate assumes {} % MFU)\n",
        stack.name(),
        count(brief.batch_target_tokens as f64),
        general(brief.mfu * 100.0)
    );
    out.push_str(&table(
        &[
            "model",
            "layout",
            "days",
            "MFU",
            "GB/GPU",
            "detailed verdict",
        ],
        &rows,
        "llrrrl",
        "  ",
    ));
    out
}

fn plan_rows(plans: &[Plan], numbered: bool) -> Vec<Vec<String>> {
    plans
        .iter()
        .enumerate()
        .map(|(i, p)| plan_row(numbered.then_some(i as u64 + 1), p))
        .collect()
}

/// A plan's row of the plan table, numbered `number` when it is given.
fn plan_row(number: Option<u64>, p: &Plan) -> Vec<String> {
    let mut row = Vec::new();
    if let Some(n) = number {
        row.push(n.to_string());
    }
    let l = &p.layout;
    row.extend([
        p.model.clone(),
        count(p.tokens as f64),
        l.tp.to_string(),
        l.pp.to_string(),
        dp_text(l),
        zero_text(l),
        fixed(p.memory_gb.total, 2),
        fixed(p.days, 3),
        fixed(p.loss, 5),
    ]);
    if let (Some(plate), Some(mfu)) = (p.days_plate, p.mfu) {
        row.push(fixed(plate, 3));
        row.push(format!("{} %", fixed(100.0 * mfu, 1)));
    }
    if let Some(spend) = &p.spend {
        row.push(fixed(spend.gpu_hours, 0));
        row.extend(spend.cost.map(money));
        row.extend(spend.energy_mwh.map(|e| fixed(e, 1)));
        row.extend(spend.emissions_t.map(|t| fixed(t, 1)));
    }
    if let Some(s) = &p.step {
        row.insert(if number.is_some() { 4 } else { 3 }, l.cp.to_string());
        row.push(step_text(s));
    }
    row
}

/// The DP column: the degree, and for a mixture of experts with expert parallelism its EP (and
/// its ETP where it is not the TP).
fn dp_text(l: &Layout) -> String {
    match (l.ep, l.etp) {
        (1, etp) if etp == l.tp => thousands(l.dp),
        (ep, etp) if etp == l.tp => format!("{} EP {ep}", thousands(l.dp)),
        (ep, etp) => format!("{} EP {ep}/ETP {etp}", thousands(l.dp)),
    }
}

/// The ZeRO column: the stage, and with hybrid sharding `×R`, the replicas of each shard.
fn zero_text(l: &Layout) -> String {
    if l.replicate > 1 {
        format!("{}×{}", l.zero, l.replicate)
    } else {
        l.zero.to_string()
    }
}

/// A shape's verdict at each context-parallel degree and precision searched (when more than
/// one was): why a degree never passes, and what one precision buys over another, from the
/// fastest configuration that fits at each.
fn facet_lines(v: &ShapeVerdict, brief: &Brief) -> String {
    let mut out = String::new();
    if v.min_tokens_for_loss.is_none() {
        // No configuration reaches the loss: the facets add nothing to the verdict.
        return out;
    }
    // A CP degree's lines are shown when the degrees disagree (some pass, some never do): they
    // say why the others fail. A precision's always: they say what it buys.
    let shown = |dimension: &str| {
        let of = || v.facets.iter().filter(move |f| f.dimension == dimension);
        dimension == "precision"
            || (of().any(|f| f.token_window.is_some()) && of().any(|f| f.token_window.is_none()))
    };
    let mut last_dimension = "";
    for f in v.facets.iter().filter(|f| shown(&f.dimension)) {
        if f.dimension != last_dimension {
            last_dimension = &f.dimension;
            let what = if f.dimension == "cp" {
                "context-parallel degree"
            } else {
                "precision"
            };
            let _ = writeln!(
                out,
                "  {} by {what}, each at its fastest configuration that fits:",
                v.model
            );
        }
        let label = if f.dimension == "cp" {
            format!("CP {}", f.value)
        } else {
            f.value.clone()
        };
        let verdict = match (f.token_window, &f.reason) {
            (Some([lo, hi]), _) => {
                format!(
                    "passes on {} – {} tokens",
                    count(lo as f64),
                    count(hi as f64)
                )
            }
            (_, Some(reason)) => format!("never passes: {reason}"),
            _ => "never passes".into(),
        };
        let fastest = match (f.fastest_layout, f.fastest_step) {
            (Some(l), Some(s)) => {
                let per_step = s
                    .micro_batch
                    .saturating_mul(s.seq_len)
                    .saturating_mul(l.dp)
                    .max(1);
                let m = s.global_batch_tokens / per_step;
                format!(
                    "; fastest {}, {}, {} micro-batch{} a step",
                    l.describe(),
                    step_text(&s),
                    thousands(m),
                    if m == 1 { "" } else { "es" }
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "    {label}: {verdict}{fastest} ({} of {} fit)",
            count(f.fitting as f64),
            plural(f.configurations, "configuration")
        );
    }
    // What each precision buys over BF16: the tokens its fastest fitting configuration trains
    // in the day limit, the ratio of the paces.
    let bf16 = v
        .facets
        .iter()
        .find(|f| f.dimension == "precision" && f.value == "bf16");
    let bf16 = bf16.and_then(|f| Some((f.days_per_token?, f.max_tokens_in_time)));
    for f in v
        .facets
        .iter()
        .filter(|f| f.dimension == "precision" && f.value != "bf16")
    {
        if let (Some((base, base_tokens)), Some(k)) = (bf16, f.days_per_token) {
            let _ = writeln!(
                out,
                "    {} over bf16: {}× the pace, at most {} tokens in {} days against {}",
                f.value,
                fixed(base / k, 2),
                count(f.max_tokens_in_time as f64),
                fixed(brief.max_days, 1),
                count(base_tokens as f64)
            );
        }
    }
    out
}

/// A step in the plan table's words: `b1 s8192 full sp 1f1b B 16.78 M` (`sp+o` where TP
/// communication overlaps the GEMMs).
fn step_text(s: &Step) -> String {
    let sp = match (s.sequence_parallel, s.tp_comm_overlap) {
        (true, true) => " sp+o",
        (true, false) => " sp",
        (false, true) => " o",
        (false, false) => "",
    };
    let precision = if s.precision.is_fp8() {
        format!(" {}", s.precision)
    } else {
        String::new()
    };
    format!(
        "b{} s{} {}{sp} {}{precision} B {}",
        s.micro_batch,
        s.seq_len,
        s.recompute.name(),
        s.schedule,
        count(s.global_batch_tokens as f64)
    )
}

/// A plan in a line: its model, tokens, layout and (for a detailed plan) step.
fn plan_line(p: &Plan) -> String {
    let l = &p.layout;
    let mut out = format!(
        "{} on {} tokens, {}",
        p.model,
        count(p.tokens as f64),
        l.describe()
    );
    if let Some(s) = &p.step {
        let _ = write!(out, ", {}", step_text(s));
    }
    out
}

/// The sensitivity table: the design as given, a row per input at the low and the high end
/// of its range, the ends where the verdict flips, and the inputs that cannot move it.
fn sensitivity_section(s: &Sensitivity) -> String {
    let days = |p: &Point| p.days.map_or("never ends".into(), |d| fixed(d, 2));
    let mfu = |p: &Point| {
        p.mfu
            .map_or("—".into(), |m| format!("{} %", fixed(100.0 * m, 1)))
    };
    let verdict = |p: &Point| {
        if p.pass {
            "PASS".to_string()
        } else {
            format!("FAIL ({})", p.failing.join(", "))
        }
    };
    let mut out = String::from(
        "sensitivity: each input at the low and the high end of its range, the others as given\n",
    );
    let _ = writeln!(
        out,
        "  as given: {} days, {} MFU, {}",
        s.base.days.map_or("never ends".into(), |d| fixed(d, 3)),
        mfu(&s.base),
        verdict(&s.base)
    );
    let rows: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|r| {
            let i = r.input;
            vec![
                i.name().into(),
                format!("{} – {}", i.show(r.low), i.show(r.high)),
                i.show(r.base),
                format!("{} – {}", days(&r.at_low), days(&r.at_high)),
                format!("{} – {}", mfu(&r.at_low), mfu(&r.at_high)),
                format!("{} / {}", verdict(&r.at_low), verdict(&r.at_high)),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["input", "low – high", "base", "days", "MFU", "verdict"],
            &rows,
            "lrrrrl",
            "  ",
        ));
    }
    for flip in &s.flips {
        let _ = writeln!(out, "  {flip}");
    }
    if s.flips.is_empty() {
        let _ = writeln!(
            out,
            "  no input moves the plan from {} to {} within its range",
            verdict_word(s.base.pass),
            verdict_word(!s.base.pass)
        );
    }
    for u in &s.unmoved {
        let _ = writeln!(out, "  {} does not move this plan: {}", u.input, u.why);
    }
    if let Some(stack) = s
        .stack
        .filter(|_| s.rows.iter().any(|r| r.input == Input::Sustained))
    {
        let _ = writeln!(
            out,
            "  sustained: the calibration's value for the {stack} stack (--calibration FILE sets it)"
        );
    }
    out
}

/// A search's sensitivity: its first plan's table, and where another plan would rank first.
fn search_sensitivity_section(s: &SearchSensitivity, first: Option<&Plan>) -> String {
    let mut out = String::new();
    match (&s.plan, first) {
        (Some(table), Some(p)) => {
            let _ = writeln!(out, "\nplan 1 again: {}", plan_line(p));
            out.push_str(&sensitivity_section(table));
        }
        _ => out.push_str("\nsensitivity: no plan passes, so none is graded again\n"),
    }
    let _ = writeln!(
        out,
        "the first plan at each end of each range ({} {} run again: {})",
        thousands(s.searches),
        if s.searches == 1 {
            "search"
        } else {
            "searches"
        },
        s.inputs
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for c in &s.changes {
        let setting = format!("{} {}", c.input, c.input.show(c.value));
        let _ = match &c.first {
            Some(p) if c.same_layout => writeln!(
                out,
                "  with {setting}: the same shape and layout on {} tokens ranks first ({} days, loss {})",
                count(p.tokens as f64),
                fixed(p.days, 2),
                fixed(p.loss, 5)
            ),
            Some(p) => writeln!(
                out,
                "  with {setting}: {} ranks first ({} days, loss {})",
                plan_line(p),
                fixed(p.days, 2),
                fixed(p.loss, 5)
            ),
            None => writeln!(out, "  with {setting}: no plan passes"),
        };
    }
    if s.changes.is_empty() {
        out.push_str("  the first plan stays first at every end of every range\n");
    }
    out
}

/// Where a step's seconds go and what the run needs, under the detailed time model.
fn time_section(p: &Plan, brief: &Brief) -> Option<String> {
    let (b, seconds) = (p.breakdown?, p.step_seconds?);
    let (failures, mfu) = (p.failures?, p.mfu?);
    let share = |x: f64| format!("{} %", fixed(100.0 * x / seconds, 1));
    let fp8 = p.step.is_some_and(|s| s.precision.is_fp8());
    let optimizer = if fp8 {
        "AdamW step and FP8 weight casts, HBM-bound"
    } else {
        "AdamW step, HBM-bound"
    };
    let rows: Vec<Vec<String>> = [
        ("compute", "forward, backward, recomputation", b.compute),
        ("tp_comm", "tensor-parallel collectives, NVLink", b.tp_comm),
        ("cp_comm", "context-parallel K and V, exposed", b.cp_comm),
        ("pp_comm", "pipeline sends", b.pp_comm),
        ("dp_comm", "data-parallel collectives, exposed", b.dp_comm),
        (
            "ep_comm",
            "expert all-to-alls and gathers, exposed",
            b.ep_comm,
        ),
        ("bubble", "pipeline fill and drain", b.bubble),
        ("optimizer", optimizer, b.optimizer),
        ("step", "", seconds),
    ]
    .iter()
    .filter(|(name, ..)| *name != "cp_comm" || p.layout.cp > 1)
    .filter(|(name, ..)| *name != "ep_comm" || p.active_params.is_some())
    .map(|(name, how, s)| vec![name.to_string(), how.to_string(), fixed(*s, 3), share(*s)])
    .collect();
    let mut out = String::from("\ntime per step\n");
    out.push_str(&table(
        &["part", "", "seconds", "share"],
        &rows,
        "llrr",
        "  ",
    ));
    let fp8_peak = if fp8 && brief.fp8_tflops > 0.0 {
        format!(
            " against the BF16 peak ({} % of the {} TFLOP/s FP8 peak)",
            fixed(100.0 * mfu * brief.peak_tflops / brief.fp8_tflops, 1),
            general(brief.fp8_tflops)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  {} tokens/s; MFU {} % derived{fp8_peak} (the brief assumes {} %), HFU {} %",
        thousands(p.tokens_per_second.unwrap_or(0.0).round() as u64),
        fixed(100.0 * mfu, 1),
        general(100.0 * brief.mfu),
        fixed(100.0 * p.hfu.unwrap_or(0.0), 1)
    );
    let failing = match (failures.checkpoint_interval_minutes, failures.mtbf_hours) {
        (Some(interval), Some(mtbf)) => format!(
            "a checkpoint every {} min ({} s to write), MTBF {} h, {} failures expected",
            fixed(interval, 1),
            fixed(failures.checkpoint_seconds, 1),
            fixed(mtbf, 1),
            fixed(failures.expected_failures, 0)
        ),
        _ => "no failures expected".to_string(),
    };
    let _ = writeln!(
        out,
        "  {} days of compute; {failing}, goodput {} %: {} days (6ND at the assumed MFU: {})",
        fixed(p.compute_days.unwrap_or(0.0), 2),
        fixed(100.0 * failures.goodput, 1),
        fixed(p.days, 2),
        fixed(p.days_plate.unwrap_or(0.0), 2)
    );
    Some(out)
}

/// The memory table of a plan: each component with how it is counted.
fn memory_rows(p: &Plan) -> Vec<Vec<String>> {
    let m = &p.memory_gb;
    let row = |name: &str, how: String, gb: f64| vec![name.to_string(), how, fixed(gb, 2)];
    // Ψ: the parameters this GPU holds before ZeRO; "/DP" where the stage shards the piece.
    let zero = p.layout.zero;
    let per = |bytes: u32, sharded: bool| {
        if sharded {
            format!("{bytes}Ψ/DP")
        } else {
            format!("{bytes}Ψ")
        }
    };
    let mut rows = vec![row(
        "weights",
        format!("BF16, {}", per(2, zero.shards_weights())),
        m.weights,
    )];
    let optimizer = format!(
        "FP32 master + Adam m, v, {}",
        per(12, zero.shards_optimizer())
    );
    match (&p.memory_model, &p.step, &p.worst_stage) {
        (Some(options), Some(step), Some(stage)) => {
            let (grad, bytes) = match options.gradients {
                GradientPrecision::Bf16 => ("BF16", 2),
                GradientPrecision::Fp32 => ("FP32", 4),
            };
            let gradients = format!("{grad}, {}", per(bytes, zero.shards_gradients()));
            rows.push(row("gradients", gradients, m.gradients));
            rows.push(row("optimizer", optimizer, m.optimizer));
            let mb = if stage.in_flight == 1.0 {
                "micro-batch"
            } else {
                "micro-batches"
            };
            rows.push(row(
                "activations",
                format!(
                    "recompute {}, {} layers × {} {mb}",
                    step.recompute.name(),
                    stage.layers,
                    general(stage.in_flight)
                ),
                m.activations,
            ));
            let loss = match options.loss {
                LossPrecision::Fp32 => "FP32 log-probabilities, 4·s·b·V/TP",
                LossPrecision::Bf16 => "BF16 log-probabilities, 2·s·b·V/TP",
            };
            rows.push(row("logits", loss.into(), m.logits.unwrap_or(0.0)));
            rows.push(row(
                "transient",
                "backward working set or loss peak".into(),
                m.transient.unwrap_or(0.0),
            ));
            // With TP overlap on Transformer Engine, its userbuffers are in the reserve's figure.
            let buffers =
                crate::cost::memory::buffers::holds_userbuffers(options.stack, step, &p.layout);
            rows.push(row(
                "reserve",
                format!(
                    "{} GB + {} % fragmentation{}",
                    general(options.reserve_gb),
                    general(options.fragmentation * 100.0),
                    if buffers { " + TE userbuffers" } else { "" }
                ),
                m.reserve.unwrap_or(0.0),
            ));
        }
        _ => {
            let gradients = format!("BF16, {}", per(2, zero.shards_gradients()));
            rows.push(row("gradients", gradients, m.gradients));
            rows.push(row("optimizer", optimizer, m.optimizer));
            rows.push(row("activations", "2·s·h·⌈L/PP⌉/TP".into(), m.activations));
        }
    }
    rows.push(row("total", String::new(), m.total));
    rows
}

/// The plan table's header, with a step column when the plans have training steps.
fn plan_header(plans: &[Plan]) -> Vec<&'static str> {
    let mut shown = Shown::default();
    plans.iter().for_each(|p| shown.see(p));
    plan_header_with(shown)
}

/// Which of the plan table's optional columns the plans have.
#[derive(Debug, Clone, Copy, Default)]
struct Shown {
    /// The time model's columns: days at the assumed MFU, and the derived MFU.
    mfu: bool,
    /// Training steps: a CP column after TP and a step column.
    step: bool,
    /// GPU-hours (the brief has a price or a power).
    gpu_hours: bool,
    /// Cost (the brief has a price).
    cost: bool,
    /// Energy, MWh (the brief has a power).
    energy: bool,
    /// Emissions, t CO2e (the brief has a power and a carbon intensity).
    emissions: bool,
}

impl Shown {
    /// Takes note of the columns `p` has.
    fn see(&mut self, p: &Plan) {
        self.mfu |= p.mfu.is_some();
        self.step |= p.step.is_some();
        let spend = p.spend.as_ref();
        self.gpu_hours |= spend.is_some();
        self.cost |= spend.is_some_and(|s| s.cost.is_some());
        self.energy |= spend.is_some_and(|s| s.energy_mwh.is_some());
        self.emissions |= spend.is_some_and(|s| s.emissions_t.is_some());
    }
}

/// The plan table's header, with the optional columns the plans have.
fn plan_header_with(shown: Shown) -> Vec<&'static str> {
    let mut header = PLAN_HEADER.to_vec();
    if shown.step {
        header.insert(3, "CP");
    }
    if shown.mfu {
        header.extend(["days@MFU", "MFU"]);
    }
    for (has, name) in [
        (shown.gpu_hours, "GPU-h"),
        (shown.cost, "cost"),
        (shown.energy, "MWh"),
        (shown.emissions, "tCO2e"),
    ] {
        if has {
            header.push(name);
        }
    }
    if shown.step {
        header.push("step");
    }
    header
}

/// The ranked plans as a numbered table, written row by row: one walk measures the columns
/// and tells which there are, a second writes the rows.
fn write_plan_table(plans: &dyn Ranked, out: &mut dyn io::Write) -> io::Result<()> {
    let (mut columns, mut shown) = (Columns::default(), Shown::default());
    for (i, p) in plans.walk().enumerate() {
        shown.see(&p);
        columns.measure(&plan_row(Some(i as u64 + 1), &p));
    }
    let mut header = vec!["#"];
    header.extend(plan_header_with(shown));
    let align = plan_align(&header);
    columns.measure(&header);
    let columns = columns.finish(header.len(), &align);
    out.write_all(columns.line(&header, "  ").as_bytes())?;
    for (i, p) in plans.walk().enumerate() {
        let row = plan_row(Some(i as u64 + 1), &p);
        out.write_all(columns.line(&row, "  ").as_bytes())?;
    }
    Ok(())
}

/// The plan table's alignment: names left, numbers right.
fn plan_align(header: &[&str]) -> String {
    header
        .iter()
        .map(|h| {
            if matches!(*h, "model" | "step") {
                'l'
            } else {
                'r'
            }
        })
        .collect()
}

/// Runs of the exact front a search's summary lists; the `--pareto` file has them all.
const SUMMARY_RUNS: usize = 10;

/// The exact front's runs: each run's first and last plan, every whole token count between
/// them a plan on the front.
fn exact_runs(front: &FrontRuns, rows: usize) -> String {
    let runs = &front.runs;
    let Some((first, last)) = runs.first().zip(runs.last()) else {
        return if front.complete {
            "\nexact pareto front: empty\n".to_string()
        } else {
            "\nexact pareto front: unknown (a shard stopped before any run of it)\n".to_string()
        };
    };
    let shown = if front.complete {
        plural(runs.len() as u64, "run")
    } else if runs.len() == MAX_FRONT_RUNS {
        format!(
            "the first {} runs only (it carries on: shapes this close trade the front token by token)",
            thousands(MAX_FRONT_RUNS as u64)
        )
    } else {
        format!(
            "the first {} only (it carries on past where a shard stopped at {} runs)",
            plural(runs.len() as u64, "run"),
            thousands(MAX_FRONT_RUNS as u64)
        )
    };
    let mut out = format!(
        "\nexact pareto front over every whole token count: {shown}, from {} days at loss {} to {} days at loss {}\n",
        fixed(first.first.days, 2),
        fixed(first.first.loss, 4),
        fixed(last.last.days, 2),
        fixed(last.last.loss, 4)
    );
    let ends: Vec<Plan> = runs
        .iter()
        .take(rows)
        .flat_map(|run| [run.first.clone(), run.last.clone()])
        .collect();
    let mut header = vec!["run", "end"];
    header.extend(plan_header(&ends));
    let rows: Vec<Vec<String>> = plan_rows(&ends, false)
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let end = if i % 2 == 0 { "first" } else { "last" };
            [(i / 2 + 1).to_string(), end.to_string()]
                .into_iter()
                .chain(row)
                .collect()
        })
        .collect();
    let align = format!("rl{}", plan_align(&header[2..]));
    out.push_str(&table(&header, &rows, &align, "  "));
    if rows.len() < 2 * runs.len() {
        let _ = writeln!(
            out,
            "  … {} more in the --pareto file",
            plural((runs.len() - rows.len() / 2) as u64, "run")
        );
    }
    out
}

/// Shapes listed one by one in a search report; beyond this only the presets are.
const MAX_SHAPE_ROWS: usize = 12;

/// Whether `model` names one of the published presets.
fn is_preset(model: &str) -> bool {
    crate::model::presets().iter().any(|p| p.name == model)
}

/// The shapes whose best plans rank highest, the best preset's, and the compute-optimal size
/// to compare them with.
fn best_shapes(r: &SearchReport) -> String {
    let rank = r.rank;
    let mut best: Vec<&Plan> = r
        .shapes
        .iter()
        .filter_map(|v| v.best_plan.as_ref())
        .collect();
    let key = |p: &Plan| match rank {
        crate::search::rank::Rank::Loss => (p.loss, p.days),
        crate::search::rank::Rank::Days | crate::search::rank::Rank::Cost => (p.days, p.loss),
        crate::search::rank::Rank::Memory => (p.memory_gb.total, p.loss),
    };
    best.sort_by(|a, b| {
        key(a)
            .0
            .total_cmp(&key(b).0)
            .then(key(a).1.total_cmp(&key(b).1))
    });
    let mut out = format!("\nbest shapes by {} (each at its best plan)\n", rank.name());
    let rows: Vec<Vec<String>> = best
        .iter()
        .take(10)
        .map(|p| {
            let preset = if is_preset(&p.model) { "preset" } else { "" };
            vec![
                p.model.clone(),
                count(p.params as f64),
                count(p.tokens as f64),
                format!(
                    "TP {} × PP {}{}, ZeRO {}",
                    p.layout.tp,
                    p.layout.pp,
                    match (p.layout.ep, p.layout.etp) {
                        (1, etp) if etp == p.layout.tp => String::new(),
                        (ep, etp) if etp == p.layout.tp => format!(" × EP {ep}"),
                        (ep, etp) => format!(" × EP {ep} (ETP {etp})"),
                    },
                    p.layout.zero
                ),
                fixed(p.days, 2),
                fixed(p.loss, 5),
                preset.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["model", "params", "tokens", "layout", "days", "loss", ""],
        &rows,
        "lrrlrrl",
        "  ",
    ));
    let preset = best.iter().find(|p| is_preset(&p.model));
    if let Some(p) = preset {
        let place = best.iter().position(|q| std::ptr::eq(*q, *p)).unwrap_or(0) + 1;
        let _ = writeln!(
            out,
            "  the best preset, {}, comes {}: loss {}, {} days; the compute-optimal size is {}",
            p.model,
            ordinal(place),
            fixed(p.loss, 5),
            fixed(p.days, 2),
            count(r.compute_optimal.params as f64)
        );
    }
    out
}

/// 1st, 2nd, 3rd, 4th, …
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{}{suffix}", thousands(n as u64))
}

const PLAN_HEADER: [&str; 9] = [
    "model", "tokens", "TP", "PP", "DP", "ZeRO", "GB/GPU", "days", "loss",
];

impl Exporter for Text {
    fn check(&self, r: &CheckReport) -> Result<String> {
        let p = &r.plan;
        let l = &p.layout;
        let m = &p.memory_gb;
        let mut out = String::new();
        let params = match p.active_params {
            Some(active) => format!(
                "{} parameters, {} active",
                thousands(p.params),
                thousands(active)
            ),
            None => format!("{} parameters", thousands(p.params)),
        };
        let _ = writeln!(
            out,
            "{} ({params}) on {} tokens ({}), {}\n",
            p.model,
            count(p.tokens as f64),
            thousands(p.tokens),
            l.describe()
        );
        if let Some(options) = &p.memory_model {
            let _ = writeln!(
                out,
                "stack     {} (its kernels, overlaps and defaults; --stack to choose)",
                options.stack
            );
        }
        if let (Some(step), Some(stage)) = (&p.step, &p.worst_stage) {
            let _ = writeln!(
                out,
                "step      {} × {} tokens a micro-batch, {} micro-batches a step ({} tokens), recompute {}, sequence parallel {}, TP overlap {}, {}",
                step.micro_batch,
                thousands(step.seq_len),
                stage.micro_batches,
                thousands(step.global_batch_tokens),
                step.recompute.name(),
                if step.sequence_parallel { "on" } else { "off" },
                if step.tp_comm_overlap { "on" } else { "off" },
                step.schedule
            );
            let _ = writeln!(
                out,
                "stage     the {} stage ({} of {}) needs the most: {} layers, {} micro-batches in flight\n",
                stage.role,
                stage.index + 1,
                stage.of,
                stage.layers,
                general(stage.in_flight)
            );
        }
        out.push_str("memory per GPU\n");
        out.push_str(&table(
            &["component", "", "GB"],
            &memory_rows(p),
            "llr",
            "  ",
        ));
        let psi = match (p.worst_stage.is_some(), p.active_params.is_some()) {
            (true, _) => "the stage's parameters per TP rank",
            (false, false) => "N / (TP·PP)",
            (false, true) => "N_rest / (TP·PP) + N_experts / (EP·ETP·PP)",
        };
        let _ = writeln!(
            out,
            "  Ψ = {psi}, held by each GPU before ZeRO shards over DP"
        );
        if p.active_params.is_some() {
            let _ = writeln!(
                out,
                "  the routed experts' share of Ψ is split over EP × ETP = {} × {} ranks, and ZeRO \
                 shards it over their {} copies (EDP)",
                l.ep,
                l.etp,
                thousands(l.expert_dp())
            );
        }
        let margin = |x: f64, unit: &str, decimals: usize| {
            if x >= 0.0 {
                format!("{}{unit} to spare", fixed(x, decimals))
            } else {
                format!("{}{unit} over", fixed(-x, decimals))
            }
        };
        let mut check_rows = vec![
            vec![
                "memory".into(),
                format!("{} GB", fixed(m.total, 2)),
                format!("≤ {} GB", r.brief.memory_cap_gb),
                verdict_word(p.checks.memory).into(),
                margin(p.margins.memory_gb, " GB", 2),
            ],
            vec![
                "days".into(),
                fixed(p.days, 3),
                format!("≤ {}", r.brief.max_days),
                verdict_word(p.checks.days).into(),
                margin(p.margins.days, " days", 3),
            ],
            vec![
                "loss".into(),
                fixed(p.loss, 4),
                format!("≤ {}", r.brief.loss_target),
                verdict_word(p.checks.loss).into(),
                margin(p.margins.loss, "", 4),
            ],
        ];
        if let (Some(pass), Some(limit), Some(c), Some(short)) = (
            p.checks.cost,
            r.brief.max_cost,
            p.spend.and_then(|s| s.cost),
            p.margins.cost,
        ) {
            check_rows.push(vec![
                "cost".into(),
                money(c),
                format!("≤ {}", money(limit)),
                verdict_word(pass).into(),
                if short >= 0.0 {
                    format!("{} to spare", money(short))
                } else {
                    format!("{} over", money(-short))
                },
            ]);
        }
        if let Some(time) = time_section(p, &r.brief) {
            out.push_str(&time);
        }
        if let Some(spend) = spent_line(p, &r.brief) {
            out.push_str(&spend);
        }
        if let Some(data) = &p.data {
            let epochs = match r.brief.unique_tokens {
                Some(u) => format!(
                    "{} epochs of the {} unique tokens",
                    fixed(data.epochs, 2),
                    count(u as f64)
                ),
                None => "every token fresh".to_string(),
            };
            let _ = writeln!(
                out,
                "data      {epochs}: graded as {} effective tokens on {} effective parameters",
                count(data.effective_tokens),
                count(data.effective_params)
            );
        }
        out.push_str("\nchecks\n");
        out.push_str(&table(
            &["check", "value", "limit", "", "margin"],
            &check_rows,
            "lrrll",
            "  ",
        ));
        let _ = writeln!(
            out,
            "\n{}: {}",
            verdict_word(p.pass),
            if p.pass {
                "every check passes"
            } else {
                "see the fixes below"
            }
        );
        if !r.fixes.is_empty() {
            out.push_str("\nto fix\n");
            for f in &r.fixes {
                let _ = writeln!(out, "  - {f}");
            }
        }
        if let Some(sensitivity) = &r.sensitivity {
            out.push('\n');
            out.push_str(&sensitivity_section(sensitivity));
        }
        Ok(out)
    }

    fn write_search(
        &self,
        r: &SearchReport,
        plans: &dyn Ranked,
        sink: &mut dyn io::Write,
    ) -> Result<()> {
        let mut out = brief_lines(&r.brief);
        let b = &r.brief;
        let days = b.binding_cost_limit().map_or("days".into(), |(_, days)| {
            format!("{} days (the cost limit's)", fixed(days, 1))
        });
        let _ = writeln!(
            out,
            "budget    {} FLOPs (GPUs × peak × MFU × {days} × 86,400)",
            sci(r.budget_flops)
        );
        let opt = &r.compute_optimal;
        // Under a law with expert terms the split is a dense model's, its one-expert case.
        let which = if b.loss_law.experts.is_some() {
            "compute-optimal dense model for the budget"
        } else {
            "compute-optimal for the budget"
        };
        let _ = writeln!(
            out,
            "optimum   {} parameters on {} tokens, loss {} ({which})\n",
            count(opt.params as f64),
            count(opt.tokens as f64),
            fixed(opt.loss, 4)
        );
        out.push_str("shapes\n");
        // A family can hold thousands of shapes: list the presets, count the rest, and show
        // the best shapes found.
        let many = r.shapes.len() > MAX_SHAPE_ROWS;
        let listed: Vec<&ShapeVerdict> = r
            .shapes
            .iter()
            .filter(|v| !many || is_preset(&v.model))
            .collect();
        let shape_rows: Vec<Vec<String>> = listed
            .iter()
            .map(|v| {
                let what = match (v.token_window, v.days_window, &v.reason) {
                    (Some([lo, hi]), Some([dlo, dhi]), _) => format!(
                        "passes on {} – {} tokens ({} – {} days)",
                        count(lo as f64),
                        count(hi as f64),
                        fixed(dlo, 1),
                        fixed(dhi, 1)
                    ),
                    (_, _, Some(reason)) => format!("never passes: {reason}"),
                    _ => "never passes".into(),
                };
                let params = match v.active_params {
                    Some(active) => format!(
                        "{} ({} active)",
                        count(v.params as f64),
                        count(active as f64)
                    ),
                    None => count(v.params as f64),
                };
                vec![v.model.clone(), params, what]
            })
            .collect();
        out.push_str(&table(
            &["model", "params", "verdict"],
            &shape_rows,
            "lrl",
            "  ",
        ));
        if let Some(line) = law_note(r) {
            out.push_str(&line);
        }
        for v in &listed {
            for e in &v.excluded {
                let _ = writeln!(
                    out,
                    "  {}: {} left out by {}, for example: {}",
                    v.model,
                    plural(e.count, "configuration"),
                    e.rule,
                    e.example
                );
            }
        }
        for v in &listed {
            out.push_str(&facet_lines(v, &r.brief));
        }
        if many {
            let rest = r.shapes.len() - listed.len();
            let passing = r
                .shapes
                .iter()
                .filter(|v| !is_preset(&v.model) && v.token_window.is_some())
                .count();
            let _ = writeln!(
                out,
                "  and {} family shapes, of which {} can pass",
                thousands(rest as u64),
                thousands(passing as u64)
            );
        }
        out.push_str(&runnable_lines(&r.brief, &listed));
        if r.shapes.iter().any(|v| !is_preset(&v.model)) {
            out.push_str(&best_shapes(r));
        }
        out.push('\n');
        if r.exact {
            let _ = writeln!(
                out,
                "top {} by {} over every whole token count in the windows (on the grid: {} passing of {} graded on {})",
                plural(plans.count(), "plan"),
                r.rank.name(),
                thousands(r.passing),
                plural(r.evaluated, "candidate"),
                plural(r.grid.len(), "token count")
            );
        } else {
            let shown = if plans.count() == r.choices {
                format!("all {}", thousands(r.choices))
            } else {
                format!("top {} of {}", plans.count(), thousands(r.choices))
            };
            let what = match r.distinct {
                Distinct::Plan => {
                    format!("passing {}", if r.passing == 1 { "plan" } else { "plans" })
                }
                Distinct::Layout => format!(
                    "passing layouts and steps, each at its best token count, of {} passing plans,",
                    thousands(r.passing)
                ),
                Distinct::Shape => format!(
                    "passing shapes, each at its best plan, of {} passing plans,",
                    thousands(r.passing)
                ),
            };
            let _ = writeln!(
                out,
                "{shown} {what} by {} ({} graded on {})",
                r.rank.name(),
                plural(r.evaluated, "candidate"),
                plural(r.grid.len(), "token count")
            );
        }
        written(sink.write_all(out.as_bytes()))?;
        if plans.count() > 0 {
            written(write_plan_table(plans, sink))?;
        }
        let mut out = String::new();
        match (r.front.first(), r.front.last()) {
            (Some(a), Some(b)) => {
                let _ = writeln!(
                    out,
                    "\npareto front (loss, days): {}, from {} days at loss {} to {} days at loss {}",
                    plural(r.front.len() as u64, "plan"),
                    fixed(a.days, 2),
                    fixed(a.loss, 4),
                    fixed(b.days, 2),
                    fixed(b.loss, 4)
                );
            }
            _ if r.any_pass() => out.push_str(
                "\npareto front (loss, days) on the grid: empty, no count of the grid passes\n",
            ),
            _ => out.push_str("\nno plan passes every check\n"),
        }
        if let Some(runs) = &r.front_runs {
            out.push_str(&exact_runs(runs, SUMMARY_RUNS));
        }
        if let Some(sensitivity) = &r.sensitivity {
            out.push_str(&search_sensitivity_section(sensitivity, r.plans.first()));
        }
        written(sink.write_all(out.as_bytes()))
    }

    fn front(&self, r: &SearchReport) -> Result<String> {
        let mut out = format!(
            "pareto front on (loss, days): {}, sorted by days\n",
            plural(r.front.len() as u64, "plan")
        );
        let header = plan_header(&r.front);
        let rows = plan_rows(&r.front, false);
        out.push_str(&table(&header, &rows, &plan_align(&header), "  "));
        if let Some(runs) = &r.front_runs {
            out.push_str(&exact_runs(runs, usize::MAX));
        }
        Ok(out)
    }
    fn launch(&self, _: &super::launch::Launch) -> Result<String> {
        Err(super::exporter::not_a_launcher("text"))
    }
}
