//! The search report: the brief and its budget, each shape's verdict (with its facets and its
//! best plan under the detailed model), the best shapes, the ranked plans, the front and the
//! sensitivity.

use std::fmt::Write;
use std::io;

use super::brief::{brief_lines, placement_lines};
use super::front;
use super::plan_table::{plan_line, step_text, write_plan_table};
use super::sensitivity::search_sensitivity_section;
use super::table::table;
use crate::brief::Brief;
use crate::error::Result;
use crate::format::{count, fixed, general, percent, plural, sci, thousands};
use crate::plan::command::{self, CheckCommand};
use crate::plan::runnable::Runnable;
use crate::plan::verdict::ShapeVerdict;
use crate::plan::Plan;
use crate::report::output::written;
use crate::search::rank::{Distinct, Rank};
use crate::search::{Ranked, SearchReport};

/// A whole search written to `sink`: the brief, the budget, the verdict per shape, the ranked
/// `plans` as a table written row by row, the front and the sensitivity.
pub(super) fn write(r: &SearchReport, plans: &dyn Ranked, sink: &mut dyn io::Write) -> Result<()> {
    // The first plan, whether the report holds its plans or they are streamed (`--all`).
    let first = plans.walk().next();
    let mut out = brief_lines(&r.brief);
    out.push_str(&budget_lines(r));
    out.push_str(&answer_lines(r, first.as_ref()));
    out.push_str(&shapes_section(r));
    if let Some(k) = r.plans.iter().find_map(|p| p.kernel_figures.as_ref()) {
        out.push('\n');
        out.push_str(&super::brief::figures_lines(k));
    }
    out.push_str(&ranked_heading(r, plans, first.as_ref()));
    written(sink.write_all(out.as_bytes()))?;
    if plans.count() > 0 {
        written(write_plan_table(plans, sink))?;
    }
    let mut out = tie_lines(r, plans);
    if let Some(c) = r.commands.as_ref().filter(|c| c.show && plans.count() > 0) {
        out.push_str(&command_lines(c, &r.brief, plans));
    }
    if let Some(placement) = first.as_ref().and_then(|p| r.brief.placement(&p.layout)) {
        out.push('\n');
        out.push_str(&placement_lines(&placement, "of the first plan: "));
    }
    out.push_str(&v_schedule_lines(plans));
    out.push_str(&front::summary(r));
    if let Some(sensitivity) = &r.sensitivity {
        out.push_str(&search_sensitivity_section(sensitivity, r.plans.first()));
    }
    written(sink.write_all(out.as_bytes()))
}

/// The plans [`v_schedule_lines`] looks through, and the row numbers it names.
const V_NOTE_PLANS: usize = 1000;
const V_NOTE_ROWS: usize = 12;

/// The listed plans (of the first [`V_NOTE_PLANS`]) that run a V schedule, and what the
/// schedule does: its bubble against 1F1B's and interleaving's
/// ([`crate::cost::step_time::bubble`]) and its activations.
fn v_schedule_lines(plans: &dyn Ranked) -> String {
    use crate::cost::step::Schedule;
    let schedules: Vec<Option<Schedule>> = plans
        .walk()
        .take(V_NOTE_PLANS)
        .map(|p| p.step.map(|s| s.schedule))
        .collect();
    let mut out = String::new();
    for (schedule, why) in [
        (
            Schedule::ZeroBubbleV,
            "ZB-V: two chunks a GPU in a V, each backward split into input and weight gradients, the weight gradients run in the fill and drain ((p − 1)·max(0, t − 3w)/2 against 1F1B's (p − 1)·t and interleaving's (p − 1)·t/v, t a micro-batch's time on the slowest stage, w its weight gradients) at 1F1B's activations",
        ),
        (
            Schedule::DualPipeV,
            "DualPipeV: the V fed from both ends, (p − 1)·max(0, 2t − f − 3w)/2 of fill and drain at p + ½ micro-batches in flight, its all-to-alls hidden where the stack pairs the chunks",
        ),
    ] {
        let rows: Vec<String> = schedules
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == Some(schedule))
            .map(|(i, _)| format!("#{}", i + 1))
            .collect();
        if !rows.is_empty() {
            let shown = rows.len().min(V_NOTE_ROWS);
            let more = if rows.len() > shown {
                format!(" and {} more", rows.len() - shown)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "\n{}{more} run {schedule}: {why}",
                rows[..shown].join(", ")
            );
        }
    }
    out
}

/// `--show-commands`: each listed plan's `check` command, its whole step written out.
fn command_lines(c: &CheckCommand, brief: &Brief, plans: &dyn Ranked) -> String {
    let mut out = String::from("\ncommands that grade each plan again as the search did\n");
    for (i, p) in plans.walk().enumerate() {
        let text = match c.args(&p, brief) {
            Ok(args) => command::line(&args),
            Err(why) => format!("none: {why}"),
        };
        let _ = writeln!(out, "  #{:<3} {text}", i + 1);
    }
    out
}

/// The report's answer, first: the plan to act on and the model that graded it. Under the
/// plate, that is the best of the shapes' best plans that the detailed model passes (graded
/// as `check --detailed` would), with the command that grades it; or why none is.
fn answer_lines(r: &SearchReport, first: Option<&Plan>) -> String {
    let Some(first) = first else {
        return String::new();
    };
    let mut out = String::new();
    if first.step.is_some() && first.mfu.is_some() {
        let _ = writeln!(
            out,
            "answer    {}\n          {} days at {} MFU, {} GB/GPU, loss {}: plan #1, by the detailed models",
            plan_line(first),
            fixed(first.days, 2),
            percent(first.mfu.unwrap_or(0.0)),
            fixed(first.memory_gb.total, 2),
            fixed(first.loss, 5),
        );
        if let Some(Ok(args)) = r.commands.as_ref().map(|c| c.args(first, &r.brief)) {
            let _ = writeln!(out, "          {}", command::line(&args));
        }
        out.push_str(&critical_line(first));
        out.push('\n');
        return out;
    }
    if first.step.is_some() {
        // Detailed memory, the plate's days (the detailed time model needs the step).
        let _ = writeln!(
            out,
            "answer    {}\n          plan #1: its memory the detailed model's, its days the plate's; --detailed grades both in detail\n",
            plan_line(first),
        );
        return out;
    }
    let graded = graded_best(r);
    match graded.iter().find(|(_, v, _)| v.pass) {
        Some((p, v, instead)) => {
            let why = match instead {
                None => "the detailed model passes it".to_string(),
                Some(best) => format!(
                    "the detailed model passes it, not the plate's {} tokens",
                    count(best.tokens as f64)
                ),
            };
            let _ = writeln!(
                out,
                "answer    {}, {}\n          {} days at {} MFU, {} GB/GPU, loss {}: {why}",
                plan_line(p),
                step_text_short(v.step.as_ref()),
                fixed(v.days, 2),
                percent(v.mfu),
                fixed(v.memory, 2),
                fixed(p.loss, 5),
            );
            if let Some(Ok(args)) = r.commands.as_ref().map(|c| c.detailed_args(p)) {
                let _ = writeln!(out, "          {}", command::line(&args));
            }
            out.push_str(&critical_line(p));
            let _ = writeln!(
                out,
                "          the rest is the plate model's ({}) but where it says detailed",
                plate_terms(&r.brief)
            );
        }
        None if !graded.is_empty() => {
            let why: Vec<String> = graded
                .iter()
                .map(|(p, v, _)| format!("{}: {}", p.model, v.text))
                .collect();
            let _ = writeln!(
                out,
                "answer    none: the detailed model passes none of the plate's best plans ({})\n          search under it with --detailed; the rest is the plate model's ({}) but where it says detailed",
                why.join("; "),
                plate_terms(&r.brief)
            );
        }
        None => {
            let why = r
                .shapes
                .iter()
                .find_map(|v| v.best_plan.as_ref()?.runnable.as_ref()?.refused.clone())
                .unwrap_or_else(|| "no grade".into());
            let _ = writeln!(
                out,
                "answer    {}\n          plan #1, by the plate model alone ({}): the detailed model cannot grade it ({why})",
                plan_line(first),
                plate_terms(&r.brief)
            );
        }
    }
    out.push('\n');
    out
}

/// What a plan's batch costs past the critical batch, where the brief counts it: `past the
/// critical batch: 27.26 M tokens a step against 380.9 M; the loss counts 17.96 T of the 19.25
/// T tokens`; empty otherwise.
fn critical_line(p: &Plan) -> String {
    match &p.critical_batch {
        None => String::new(),
        Some(c) => format!(
            "          past the critical batch ({}): {} tokens a step against {}; the loss counts {} of the {} tokens ({} more for it)\n",
            c.law,
            count(c.batch_tokens),
            count(c.critical_tokens),
            count(c.effective_tokens),
            count(p.tokens as f64),
            percent(c.extra)
        ),
    }
}

/// What the plate model assumes, in a phrase.
fn plate_terms(brief: &Brief) -> String {
    format!(
        "16 bytes a parameter, 6ND at {} % MFU",
        general(brief.mfu * 100.0)
    )
}

/// The step of a runnable grade in words: `b1 full recompute`.
fn step_text_short(step: Option<&crate::cost::step::Step>) -> String {
    step.map_or_else(String::new, |s| {
        format!("b{} {} recompute", s.micro_batch, s.recompute.name())
    })
}

/// A plate plan as the detailed model grades it ([`Runnable`]).
struct DetailedVerdict {
    pass: bool,
    text: String,
    days: f64,
    mfu: f64,
    memory: f64,
    step: Option<crate::cost::step::Step>,
}

/// The detailed model's verdict on a runnable grade; `None` where it could not grade.
fn detailed_verdict(brief: &Brief, r: &Runnable) -> Option<DetailedVerdict> {
    let (days, mfu, memory) = (r.days?, r.mfu?, r.memory_gb?);
    let (pass, text) = match (r.fits, days <= brief.max_days, days <= brief.days_limit()) {
        (true, true, true) => (true, "fits, in time".to_string()),
        (true, true, false) => (false, "fits, over the cost limit".to_string()),
        (true, false, _) => (
            false,
            format!("fits, {} days over", fixed(days - brief.max_days, 1)),
        ),
        (false, _, _) => (
            false,
            format!("over the {} GB cap", general(brief.memory_cap_gb)),
        ),
    };
    Some(DetailedVerdict {
        pass,
        text,
        days,
        mfu,
        memory,
        step: r.step,
    })
}

/// Each shape's best plate plan as the detailed model grades it, or, where that one runs past
/// the limit, its layout on the most tokens the detailed model passes in time
/// ([`ShapeVerdict::detailed_best`]), with the best plan it stands for; passing first, each
/// group in the ranking's order.
fn graded_best(r: &SearchReport) -> Vec<(&Plan, DetailedVerdict, Option<&Plan>)> {
    let mut graded: Vec<(&Plan, DetailedVerdict, Option<&Plan>)> = r
        .shapes
        .iter()
        .filter_map(|v| {
            let best = v.best_plan.as_ref()?;
            let sooner = v.detailed_best.as_ref().and_then(|p| {
                let graded = detailed_verdict(&r.brief, p.runnable.as_ref()?)?;
                graded.pass.then_some((p, graded, Some(best)))
            });
            sooner.or_else(|| {
                Some((
                    best,
                    detailed_verdict(&r.brief, best.runnable.as_ref()?)?,
                    None,
                ))
            })
        })
        .collect();
    let key = |p: &Plan, v: &DetailedVerdict| {
        let lifetime = p.lifetime.map_or(0.0, |l| l.total_flops());
        rank_key(r.rank, p.loss, v.days, v.memory, lifetime)
    };
    graded.sort_by(|(p, v, _), (q, w, _)| w.pass.cmp(&v.pass).then(by_key(key(p, v), key(q, w))));
    graded
}

/// A plan's place under `rank`: the ranking's objective, then the other of loss and days
/// (loss after memory, days after lifetime FLOPs).
fn rank_key(rank: Rank, loss: f64, days: f64, memory: f64, lifetime: f64) -> (f64, f64) {
    match rank {
        Rank::Lifetime => (lifetime, days),
        Rank::Loss => (loss, days),
        Rank::Days | Rank::Cost => (days, loss),
        Rank::Memory => (memory, loss),
    }
}

/// Two [`rank_key`]s in order.
fn by_key(a: (f64, f64), b: (f64, f64)) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1))
}

/// The search's budget in FLOPs, and the compute-optimal split of it.
fn budget_lines(r: &SearchReport) -> String {
    let mut out = String::new();
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
        "optimum   {} parameters on {} tokens, loss {} ({which})",
        count(opt.params as f64),
        count(opt.tokens as f64),
        fixed(opt.loss, 4)
    );
    out.push_str(&lifetime_lines(r));
    out.push('\n');
    out
}

/// With the brief's inference tokens: the model of least lifetime FLOPs at the loss target
/// (Sardana et al. 2024) beside the compute-optimal one for that loss (each plan's own are in
/// its JSON, `lifetime`).
fn lifetime_lines(r: &SearchReport) -> String {
    let b = &r.brief;
    let Some(d_inf) = b.inference_tokens else {
        return String::new();
    };
    let (Some(best), Some(plain)) = (b.lifetime_optimal(), b.loss_optimal()) else {
        return format!(
            "lifetime  serving {} tokens: no model reaches loss {} under the law (its E is {}), so none is lifetime-optimal\n",
            count(d_inf as f64),
            b.loss_target,
            general(b.loss_law.e)
        );
    };
    let mut out = String::new();
    let model = |l: &crate::laws::Lifetime| {
        format!(
            "{} parameters on {} tokens ({} tokens a parameter): {} training + {} inference FLOPs",
            count(l.params),
            count(l.tokens),
            fixed(l.tokens / l.params, 1),
            sci(l.train_flops),
            sci(l.inference_flops)
        )
    };
    let plain = crate::laws::Lifetime::of(plain.params, plain.tokens, d_inf as f64);
    let _ = writeln!(
        out,
        "lifetime  serving {} tokens at loss {}: {} (least training plus inference, Sardana et al. 2024)",
        count(d_inf as f64),
        b.loss_target,
        model(&best)
    );
    let _ = writeln!(
        out,
        "          the compute-optimal model for that loss: {}, {} more in all",
        model(&plain),
        percent(plain.total_flops() / best.total_flops() - 1.0)
    );
    out
}

/// Each shape's verdict: a table of the shapes (the presets alone, and a count of the rest,
/// when a family has many), how the law grades mixtures of experts, the configurations rules
/// left out, the facets, each shape's best plan under the detailed model and the best shapes.
fn shapes_section(r: &SearchReport) -> String {
    let mut out = String::from("shapes\n");
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
    if let Some(line) = range_note(r) {
        out.push_str(&line);
    }
    out.push_str(&batch_lines(r, &listed));
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
    let found = r.shapes.iter().any(|v| v.best_plan.is_some());
    if found && r.shapes.iter().any(|v| !is_preset(&v.model)) {
        out.push_str(&best_shapes(r));
    }
    out
}

/// Which models made a plan's numbers, for a heading: `by the plate model`, `by the detailed
/// models`, or which made which.
fn made_by(p: &Plan) -> &'static str {
    // The detailed time model needs the detailed memory model's step: three cases.
    match (p.step.is_some(), p.mfu.is_some()) {
        (true, true) => "by the detailed models",
        (true, false) => "memory by the detailed model, days by the plate's",
        _ => "by the plate model",
    }
}

/// The lines above the plan table: which model made its numbers, how many plans it shows of
/// how many, ranked by what, and what was graded.
fn ranked_heading(r: &SearchReport, plans: &dyn Ranked, first: Option<&Plan>) -> String {
    let mut out = String::from("\n");
    let by = first.map_or(String::new(), |p| format!(" {}", made_by(p)));
    let steps = first.is_some_and(|p| p.step.is_some());
    if r.exact {
        let _ = writeln!(
            out,
            "plans{by}: the {} best by {} over every whole token count in the windows",
            thousands(plans.count()),
            r.rank.name(),
        );
        let _ = writeln!(
            out,
            "  (on the grid, {} of the {} plans graded pass: each shape and layout{} at {})",
            thousands(r.passing),
            thousands(r.evaluated),
            if steps { " and step" } else { "" },
            plural(r.grid.len(), "token count")
        );
    } else {
        let shown = if plans.count() == r.choices {
            format!("all {}", thousands(r.choices))
        } else {
            format!(
                "the {} best of {}",
                thousands(plans.count()),
                thousands(r.choices)
            )
        };
        let what = match r.distinct {
            Distinct::Plan => format!("passing {}", if r.passing == 1 { "plan" } else { "plans" }),
            Distinct::Layout if steps => {
                "passing layouts and steps, each at its best token count,".to_string()
            }
            Distinct::Layout => "passing layouts, each at its best token count,".to_string(),
            Distinct::Shape => "passing shapes, each at its best plan,".to_string(),
        };
        let _ = writeln!(out, "plans{by}: {shown} {what} by {}", r.rank.name());
        let _ = writeln!(
            out,
            "  ({} of the {} plans graded pass: each shape and layout{} at {})",
            thousands(r.passing),
            thousands(r.evaluated),
            if steps { " and step" } else { "" },
            plural(r.grid.len(), "token count")
        );
    }
    out
}

/// The most rows [`tie_lines`] looks through.
const TIE_ROWS: usize = 1000;

/// The rows from the first that tie with it on loss and days, when the ranking is by either
/// and there are several: the plate grades every layout of a shape and token count alike, so
/// its best rows often do, and the report says what orders them (docs/guide.md, Ties).
fn tie_lines(r: &SearchReport, plans: &dyn Ranked) -> String {
    if !matches!(r.rank, Rank::Loss | Rank::Days) {
        return String::new();
    }
    let mut walk = plans.walk().take(TIE_ROWS);
    let Some(first) = walk.next() else {
        return String::new();
    };
    let tied = 1 + walk
        .take_while(|p| p.loss == first.loss && p.days == first.days)
        .count();
    if tied < 2 {
        return String::new();
    }
    let paced = first
        .runnable
        .as_ref()
        .is_some_and(|g| g.days_per_token.is_some());
    let order = if paced {
        "the detailed model's pace, then memory"
    } else {
        "memory, then the smaller degrees"
    };
    format!("\n#1 to #{tied} tie on loss and days; among them the order is {order} (docs/guide.md, Ties)\n")
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

/// The brief's batch law ([`crate::plan::batch::LawBatch`]): each listed shape's batch and
/// learning rate and the run they are sized for; the shapes no layout trains at the law's
/// batch (batch-bound); the answer's batch against the law's, and a pipeline it cannot fill.
/// Nothing under a fixed target.
fn batch_lines(r: &SearchReport, listed: &[&ShapeVerdict]) -> String {
    let mut out = String::new();
    let mut beyond = Vec::new();
    // Shapes that reach the loss target: the run the law is sized for.
    for v in listed.iter().filter(|v| v.min_tokens_for_loss.is_some()) {
        let Some(b) = &v.batch else { continue };
        if out.is_empty() {
            let _ = writeln!(
                out,
                "  batch law {}: each shape's layouts aim at its optimum for the run that reaches loss {}, within {} %",
                b.law,
                r.brief.loss_target,
                general(r.brief.batch_tolerance * 100.0)
            );
        }
        let budget = match b.law {
            crate::laws::BatchLaw::DeepSeek => {
                format!(" (C = M·D = {} FLOPs)", sci(b.compute_flops))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "    {}: {} tokens a step ({} sequences), learning rate {}, for {} tokens{budget}; at most {} replicas of one sequence",
            v.model,
            count(b.optimal_batch_tokens),
            thousands(b.target_tokens / r.brief.seq_len.max(1)),
            sci(b.learning_rate),
            count(b.tokens),
            thousands(b.most_replicas)
        );
        if b.extrapolation.is_some() {
            beyond.push(v.model.as_str());
        }
    }
    // A shape that reaches the loss but has no layout the batch rule lets through: the
    // brief's GPUs need more replicas than the law's batch has sequences.
    for v in listed.iter().filter(|v| {
        v.min_tokens_for_loss.is_some()
            && v.token_window.is_none()
            && v.excluded
                .iter()
                .any(|e| e.rule == crate::cost::step::BatchTarget::RULE)
    }) {
        let Some(b) = &v.batch else { continue };
        let _ = writeln!(
            out,
            "    {} is batch-bound: the law's batch keeps at most {} replicas of one sequence busy, so {} GPUs need TP × CP × PP of at least {} a replica; fewer GPUs, or a batch past the law's (--global-batch-tokens), train it",
            v.model,
            thousands(b.most_replicas),
            thousands(r.brief.gpus),
            thousands(r.brief.gpus.div_ceil(b.most_replicas.max(1)))
        );
    }
    let law = r.brief.batch_law;
    if let (false, Some(range)) = (beyond.is_empty(), law.fitted()) {
        let (lo, hi) = range.span;
        let span = if range.what == "compute" {
            format!("budgets of {}–{} FLOPs", sci(lo), sci(hi))
        } else {
            format!("{}–{} tokens", count(lo), count(hi))
        };
        let _ = writeln!(
            out,
            "    {law} extrapolates for {}: fitted on {span} ({})",
            beyond.join(", "),
            range.source
        );
    }
    let first = r.plans.first();
    let law = first.and_then(|p| {
        let v = r.shapes.iter().find(|v| v.model == p.model)?;
        Some((p, p.step?, v.batch.as_ref()?))
    });
    if let Some((p, step, b)) = law {
        let l = p.layout;
        let rounds = step.rounds(l.dp);
        let _ = writeln!(
            out,
            "    the answer's batch: {} tokens ({:+.1} % from the law's {}), {} of {} × {} on each of {} replicas",
            count(step.global_batch_tokens as f64),
            (step.global_batch_tokens as f64 / b.optimal_batch_tokens - 1.0) * 100.0,
            count(b.optimal_batch_tokens),
            micro_batches(rounds),
            step.micro_batch,
            thousands(step.seq_len),
            thousands(l.dp)
        );
        // The law at the answer's own tokens: a run longer than the one the search sized
        // the batch for wants a larger batch.
        if let Some(own) = r
            .shapes
            .iter()
            .find(|v| v.model == p.model)
            .and_then(|v| v.batch.as_ref())
            .map(|b| b.at_tokens(&r.brief, p.tokens as f64))
        {
            if !own.accepts(&r.brief, step.global_batch_tokens) {
                let _ = writeln!(
                    out,
                    "    at the answer's own {} tokens the law asks {} tokens a step (learning rate {}): the search sizes each shape's batch for the run that reaches the loss; --global-batch-tokens {} grades this run at the law's batch",
                    count(p.tokens as f64),
                    count(own.optimal_batch_tokens),
                    sci(own.learning_rate),
                    own.target_tokens
                );
            }
        }
        if l.pp > 1 && rounds < l.pp {
            let p = l.pp as f64;
            let _ = writeln!(
                out,
                "    the batch binds the pipeline: {} a replica over {} stages idles (p − 1)/(m + p − 1) = {} of a 1F1B step; fewer GPUs, or a batch past the law's (--global-batch-tokens), fill it",
                micro_batches(rounds),
                l.pp,
                percent((p - 1.0) / (rounds as f64 + p - 1.0))
            );
        }
    }
    out
}

/// `1 micro-batch`, `13 micro-batches`.
fn micro_batches(n: u64) -> String {
    if n == 1 {
        "1 micro-batch".into()
    } else {
        format!("{} micro-batches", thousands(n))
    }
}

/// The most shapes [`range_note`] names; past it, it counts them.
const RANGE_NAMES: usize = 3;

/// Which shapes the brief's law grades beyond the runs it was fitted on
/// ([`crate::laws::loss::FittedRange`]): by their (active) parameters, their expansion, or
/// either end of the tokens that pass (else the fewest that reach the loss target), so their
/// losses are extrapolated (`check` says by how much, and whose runs they were). `None` when every shape
/// lies inside the range, or the law was given by its constants.
fn range_note(r: &SearchReport) -> Option<String> {
    let preset = r.brief.loss_law.preset()?;
    let range = preset.fitted();
    let beyond: Vec<&str> = r
        .shapes
        .iter()
        .filter_map(|v| {
            let size = crate::laws::loss::LawSize {
                params: v.active_params.unwrap_or(v.params) as f64,
                expansion: v.expansion.unwrap_or(1.0),
            };
            // Without a token count the tokens are taken as inside the range.
            let ends = match (v.token_window, v.min_tokens_for_loss) {
                (Some([lo, hi]), _) => [lo as f64, hi as f64],
                (None, Some(t)) => [t as f64; 2],
                (None, None) => [range.tokens.1; 2],
            };
            ends.iter()
                .any(|&t| range.beyond(size, t).is_some())
                .then_some(v.model.as_str())
        })
        .collect();
    let which = match beyond.split_last()? {
        (last, []) => last.to_string(),
        (last, rest) if beyond.len() <= RANGE_NAMES => format!("{} and {last}", rest.join(", ")),
        _ => format!(
            "{} of the {} shapes",
            thousands(beyond.len() as u64),
            thousands(r.shapes.len() as u64)
        ),
    };
    Some(format!(
        "  {} extrapolates for {which}: fitted on {}\n",
        preset.name(),
        range.describe()
    ))
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
                let m = s.rounds(l.dp);
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

/// Each listed shape's best plate plan under the detailed model (the default stack, check's
/// default step): what the plate's assumed MFU hides, as `check --memory detailed --time
/// detailed` would grade it. Empty when no listed shape has a plate plan.
fn runnable_lines(brief: &Brief, shapes: &[&ShapeVerdict]) -> String {
    let mut rows: Vec<(bool, Vec<String>)> = shapes
        .iter()
        .filter_map(|v| {
            let p = v.best_plan.as_ref()?;
            let r = p.runnable.as_ref()?;
            let layout = p.layout.describe();
            let Some(v) = detailed_verdict(brief, r) else {
                let why = r.refused.clone().unwrap_or_default();
                let blank = String::new;
                let row = vec![p.model.clone(), layout, blank(), blank(), blank()];
                return Some((false, [row, vec![format!("not graded: {why}")]].concat()));
            };
            Some((
                v.pass,
                vec![
                    p.model.clone(),
                    layout,
                    fixed(v.days, 2),
                    percent(v.mfu),
                    fixed(v.memory, 2),
                    v.text,
                ],
            ))
        })
        .collect();
    // The plans the detailed model passes first, as the answer above names the first.
    rows.sort_by_key(|(pass, _)| !pass);
    let rows: Vec<Vec<String>> = rows.into_iter().map(|(_, row)| row).collect();
    let Some(stack) = shapes
        .iter()
        .find_map(|v| Some(v.best_plan.as_ref()?.runnable.as_ref()?.stack))
    else {
        return String::new();
    };
    let batch = if brief.batch_law.is_fixed() {
        format!(
            "the batch nearest {} tokens",
            count(brief.batch_target_tokens as f64)
        )
    } else {
        format!("each shape's {} batch-law batch", brief.batch_law)
    };
    let mut out = format!(
        "\nbest plans under the detailed model ({} stack, b1 full recompute, {batch}; the plate assumes {} % MFU)\n",
        stack.name(),
        general(brief.mfu * 100.0)
    );
    if let Some(k) = crate::plan::kernel_figures(brief, stack) {
        out.push_str(&super::brief::figures_lines(&k));
    }
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
    let key = |p: &Plan| {
        let lifetime = p.lifetime.map_or(0.0, |l| l.total_flops());
        rank_key(rank, p.loss, p.days, p.memory_gb.total, lifetime)
    };
    best.sort_by(|a, b| by_key(key(a), key(b)));
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
