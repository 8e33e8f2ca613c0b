//! What `merge` checks in a partial before it trusts it ([`Partial::check`]): each value a
//! shard wrote worked out again, from its own brief and grid, with the library's functions.

use std::collections::HashMap;

use crate::brief::Brief;
use crate::cost::run::plate;
use crate::cost::run::TimeModel;
use crate::error::{Error, Result};
use crate::format::{exact, fixed, general, thousands};
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::plan::limits::{
    cost_fits, days_fit, loss_meets, memory_fits, spent, within_time_and_cost,
};
use crate::plan::pace::Pace;
use crate::plan::verdict::ShapeVerdict;
use crate::plan::Plan;
use crate::search::pareto::Chain;
use crate::search::rank::{Distinct, Rank};
use crate::search::report::MAX_FRONT_RUNS;
use crate::units::BYTES_PER_GB;

use crate::search::shard::{candidate, key, memory_model, run_window, Key, Partial};

impl Partial {
    /// What errors about this partial call it: the file it was read from, else `shard I/N`.
    pub fn name(&self) -> String {
        if self.source.is_empty() {
            format!("shard {}/{}", self.shard[0], self.shard[1])
        } else {
            self.source.clone()
        }
    }

    /// Checks what this partial says against what its own brief and grid give, as a merge must
    /// before it trusts a file that may have been edited by hand: each value is worked out
    /// again with the library's own functions where the partial carries what they need.
    ///
    /// - **The shapes**: one verdict for each of this shard's places (`i mod N = I − 1`), in
    ///   order; each verdict's loss floor, fewest tokens for the loss target and (under the
    ///   plate's time model) most tokens in time as the brief's law and limits give them, and
    ///   its token window between the two.
    /// - **Each plan** (`plans`, `front`, a verdict's `best_plan`, an exact run's first): its
    ///   shape's, passing every check, its tokens in its shape's window (and on the grid, where
    ///   the grid gave it), its loss the law's (never below the floor), its plate days and
    ///   FLOPs 6·N·D's, its layout one the brief's machine allows ([`Layout::with`] where the
    ///   shape is known from its name or the file, [`Layout::on_cluster`] otherwise), its
    ///   memory the memory model's where the shape is known.
    /// - **No plan twice**, in `plans` or on the front.
    /// - **The front is a front**: sorted by days rising and loss falling, and reaching every
    ///   passing plan the partial knows of — its plans, and each shape's fastest and slowest
    ///   passing plan on the grid — so a front cut short is seen; an exact front as many runs
    ///   as it says (all, or exactly [`MAX_FRONT_RUNS`]), in order, from the fastest passing
    ///   plan of any shape.
    /// - **The counts add up**: the plans the best `top` of the `choices`, the choices the
    ///   passing plans (or at most them), a front exactly when some plan passes, every
    ///   configuration graded at each count of the grid.
    ///
    /// Errors name the file ([`Partial::name`]), the field and its value.
    pub fn check(&self) -> Result<()> {
        self.brief.validate()?;
        self.grid.checked()?;
        Reading::new(self)?.check()
    }
}

/// Two numbers worked out by the same functions, perhaps on different machines (a `powf` may
/// differ in its last bits): equal to 10⁻⁹.
fn agrees(a: f64, b: f64) -> bool {
    a.is_finite() && b.is_finite() && (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// `a` at most `b`, to the same 10⁻⁹.
fn at_most(a: f64, b: f64) -> bool {
    a <= b + 1e-9 * b.abs()
}

/// A partial being checked, with what its checks share.
struct Reading<'a> {
    p: &'a Partial,
    brief: &'a Brief,
    distinct: Distinct,
    /// Each verdict's shape, where its name gives it (a preset or a dimension name whose
    /// parameter counts are the verdict's).
    shapes: Vec<Option<Shape>>,
    /// Whether the plans were timed by the plate's 6ND (`Some(true)`) or the detailed model,
    /// as the exact front's time model or the first plan says; `None` without either.
    plate: Option<bool>,
}

impl<'a> Reading<'a> {
    fn new(p: &'a Partial) -> Result<Self> {
        let plate = match &p.exact_front {
            Some(f) => Some(matches!(f.time, TimeModel::Plate)),
            None => p
                .plans
                .iter()
                .chain(&p.front)
                .map(|ip| ip.plan.days_plate.is_none())
                .next(),
        };
        let shapes = p
            .shapes
            .iter()
            .map(|v| {
                let v = &v.verdict;
                crate::model::preset(&v.model).ok().filter(|s| {
                    s.name == v.model
                        && s.params() == v.params
                        && s.active_params() == v.active_params.unwrap_or(v.params)
                })
            })
            .collect();
        Rank::from_name("rank", &p.rank)?;
        Ok(Reading {
            p,
            brief: &p.brief,
            distinct: Distinct::from_name("distinct", &p.distinct)?,
            shapes,
            plate,
        })
    }

    /// The error for `field` of this partial.
    fn bad(&self, field: impl std::fmt::Display, value: impl ToString, why: String) -> Error {
        Error::invalid(format!("{}: {field}", self.p.name()), value, why)
    }

    fn check(&self) -> Result<()> {
        self.shard_places()?;
        for (k, v) in self.p.shapes.iter().enumerate() {
            self.verdict(k, &v.verdict)?;
        }
        let on_grid = !self.p.exact;
        for (list, name) in [(&self.p.plans, "plans"), (&self.p.front, "front")] {
            let mut seen: HashMap<Key, usize> = HashMap::new();
            for (k, ip) in list.iter().enumerate() {
                let field = format!("{name}[{k}]");
                // The grid's front is on the grid even in an exact search.
                let grid = on_grid || name == "front";
                self.plan(
                    &format!("{field}.plan"),
                    ip.shape_index,
                    &ip.plan,
                    None,
                    grid,
                )?;
                if let Some(first) = seen.insert(key(&candidate(ip, &self.p.brief)), k) {
                    return Err(self.bad(
                        &field,
                        describe(&ip.plan),
                        format!("each plan once: it is {name}[{first}] too"),
                    ));
                }
            }
        }
        self.front()?;
        self.counts()?;
        self.exact_front()
    }

    /// Verdict `k` of `shapes`, `v`: its counts, loss floor, token bounds and window as the
    /// brief gives them, its lightest layout and its best plan.
    fn verdict(&self, k: usize, v: &ShapeVerdict) -> Result<()> {
        let field = format!("shapes[{k}].verdict");
        let brief = self.brief;
        let active = v.active_params.unwrap_or(v.params);
        let sized = v.params >= 1
            && (1..=v.params).contains(&active)
            && v.expansion.is_none_or(|e| e.is_finite() && e >= 1.0);
        if !sized {
            return Err(self.bad(
                format!("{field}.params"),
                v.params,
                format!(
                    "at least 1, with active_params ({active}) from 1 to it and an expansion of at least 1, as a shape's counts are"
                ),
            ));
        }
        let n = v.law_size();
        let floor = brief.loss_floor(n);
        if !agrees(v.loss_floor, floor) {
            return Err(self.bad(
                format!("{field}.loss_floor"),
                v.loss_floor,
                format!(
                    "{}, the floor of the partial's loss law for {} ({} parameters{})",
                    fixed(floor, 6),
                    v.model,
                    thousands(n.params as u64),
                    if n.expansion != 1.0 { " active" } else { "" }
                ),
            ));
        }
        let meets = |t: u64| loss_meets(brief, brief.loss(n, t as f64));
        let fewest = match v.min_tokens_for_loss {
            Some(m) => m >= 1 && meets(m) && (m == 1 || !meets(m - 1)),
            None => !meets(u64::MAX),
        };
        if !fewest {
            return Err(self.bad(
                format!("{field}.min_tokens_for_loss"),
                v.min_tokens_for_loss.map_or("null".to_string(), thousands),
                format!(
                    "the fewest whole tokens with which {} reaches the brief's loss target {} under its law (null when none do)",
                    v.model, brief.loss_target
                ),
            ));
        }
        let m = v.max_tokens_in_time;
        let fits = |t: u64| within_time_and_cost(brief, Pace::Plate.run_days(brief, active, t));
        if self.plate == Some(true) && !((m == 0 || fits(m)) && (m == u64::MAX || !fits(m + 1))) {
            return Err(self.bad(
                format!("{field}.max_tokens_in_time"),
                thousands(m),
                format!(
                    "the most whole tokens {} trains within the brief's limits at 6·N·D (the plate's time model)",
                    v.model
                ),
            ));
        }
        let window = match (v.token_window, v.days_window, &v.reason) {
            (Some([lo, hi]), Some([d_lo, d_hi]), None) => {
                let days_agree = match self.plate {
                    Some(true) => {
                        agrees(d_lo, Pace::Plate.run_days(brief, active, lo))
                            && agrees(d_hi, Pace::Plate.run_days(brief, active, hi))
                    }
                    // Days are the tokens times one pace.
                    _ => d_lo > 0.0 && agrees(d_lo * hi as f64, d_hi * lo as f64),
                };
                Some(lo) == v.min_tokens_for_loss
                    && hi == m
                    && lo <= hi
                    && days_agree
                    && within_time_and_cost(brief, d_hi)
            }
            (None, None, Some(_)) => true,
            _ => false,
        };
        if !window {
            return Err(self.bad(
                format!("{field}.token_window"),
                v.token_window
                    .map_or("null".to_string(), |[lo, hi]| format!("[{lo}, {hi}]")),
                format!(
                    "[min_tokens_for_loss, max_tokens_in_time] with the days at both ends within the brief's limits and no reason, or null with the reason {} never passes",
                    v.model
                ),
            ));
        }
        if let Some(l) = &v.min_memory_layout {
            self.layout(
                &format!("{field}.min_memory_layout"),
                l,
                self.shapes[k].as_ref(),
            )?;
        }
        if let Some(best) = &v.best_plan {
            let index = self.p.shapes[k].index;
            self.plan(
                &format!("{field}.best_plan"),
                index,
                best,
                None,
                !self.p.exact,
            )?;
        }
        Ok(())
    }

    /// One verdict for each of this shard's places, in order.
    fn shard_places(&self) -> Result<()> {
        let [i, n] = self.p.shard;
        if !(1..=n).contains(&i) {
            return Err(self.bad("shard", format!("{i}/{n}"), "I/N with 1 ≤ I ≤ N".into()));
        }
        let total = self.p.shapes_total as u64;
        let mine = if total >= i { (total - i) / n + 1 } else { 0 };
        for (k, v) in self.p.shapes.iter().enumerate() {
            let want = (k as u64) < mine;
            // Below `mine`, no overflow: the place is below the total.
            if !want || v.index as u64 != i - 1 + k as u64 * n {
                return Err(self.bad(
                    format!("shapes[{k}].index"),
                    v.index,
                    format!(
                        "{}: {}, each once, in order",
                        if want {
                            (i - 1 + k as u64 * n).to_string()
                        } else {
                            "no verdict".to_string()
                        },
                        self.places()
                    ),
                ));
            }
        }
        if self.p.shapes.len() as u64 != mine {
            return Err(self.bad(
                "shapes",
                format!("{} verdicts", self.p.shapes.len()),
                format!("{mine}: {}, each with its verdict", self.places()),
            ));
        }
        Ok(())
    }

    /// This shard's places in words: `shard 1/2 holds places 0, 2, … of the search's 7 shapes`.
    fn places(&self) -> String {
        let [i, n] = self.p.shard;
        let total = self.p.shapes_total as u64;
        let places: Vec<String> = (0..3)
            .map(|k: u64| (i - 1).saturating_add(k.saturating_mul(n)))
            .take_while(|&place| place < total)
            .map(|place| place.to_string())
            .collect();
        let more = if (i - 1).saturating_add(n.saturating_mul(3)) < total {
            ", …"
        } else {
            ""
        };
        format!(
            "shard {i}/{n} holds {} of the search's {total} shapes (one in every {n})",
            if places.is_empty() {
                "none".to_string()
            } else {
                format!("places {}{more}", places.join(", "))
            }
        )
    }

    /// The verdict of the shape at place `index`, and its position in `shapes`.
    fn verdict_at(&self, index: usize) -> Option<(usize, &'a ShapeVerdict)> {
        let k = self
            .p
            .shapes
            .binary_search_by_key(&index, |v| v.index)
            .ok()?;
        Some((k, &self.p.shapes[k].verdict))
    }

    /// One plan of the shape at place `index`, `given` its shape where the file carries it.
    fn plan(
        &self,
        field: &str,
        index: usize,
        plan: &Plan,
        given: Option<&Shape>,
        on_grid: bool,
    ) -> Result<()> {
        let brief = self.brief;
        let Some((k, v)) = self.verdict_at(index) else {
            return Err(self.bad(
                format!(
                    "{}.shape_index",
                    field.rsplit_once('.').map_or(field, |f| f.0)
                ),
                index,
                format!("the place of a shape this shard holds: {}", self.places()),
            ));
        };
        let active = v.active_params.unwrap_or(v.params);
        if plan.model != v.model
            || plan.params != v.params
            || plan.active_params.unwrap_or(plan.params) != active
        {
            return Err(self.bad(
                format!("{field}.params"),
                format!("{} of {}", thousands(plan.params), plan.model),
                format!(
                    "{} of {}: the shape at place {index}, as its verdict says",
                    thousands(v.params),
                    v.model
                ),
            ));
        }
        if let Some(s) = given {
            if s.name != v.model || s.params() != v.params {
                return Err(self.bad(
                    field.replace(".first", ".shape"),
                    format!("{} of {}", thousands(s.params()), s.name),
                    format!(
                        "{} of {}: the shape at place {index}, as its verdict says",
                        thousands(v.params),
                        v.model
                    ),
                ));
            }
        }
        let shape = given.or(self.shapes[k].as_ref());
        let t = plan.tokens;
        let in_window = v
            .token_window
            .is_some_and(|[lo, hi]| (lo..=hi).contains(&t));
        let grid = &self.p.grid;
        let last = grid.at(grid.len() - 1);
        let grid_ok =
            !on_grid || ((grid.min..=last).contains(&t) && (t - grid.min) % grid.step == 0);
        if !in_window || !grid_ok {
            return Err(self.bad(
                format!("{field}.tokens"),
                thousands(t),
                match v.token_window {
                    Some([lo, hi]) if on_grid => format!(
                        "a count of the grid ({} to {} in steps of {}) in {}'s token window, {} to {}",
                        thousands(grid.min),
                        thousands(last),
                        thousands(grid.step),
                        v.model,
                        thousands(lo),
                        thousands(hi)
                    ),
                    Some([lo, hi]) => format!(
                        "a count in {}'s token window, {} to {}",
                        v.model,
                        thousands(lo),
                        thousands(hi)
                    ),
                    None => format!(
                        "none: {}'s verdict says no token count passes, so no plan of it does",
                        v.model
                    ),
                },
            ));
        }
        let n = v.law_size();
        let floor = brief.loss_floor(n);
        let law = brief.loss(n, t as f64);
        // NaN is below every floor.
        if plan.loss.is_nan() || plan.loss < floor {
            return Err(self.bad(
                format!("{field}.loss"),
                plan.loss,
                format!(
                    "at least {}, the floor of the partial's loss law for {}: no number of tokens trains below it ({} on {} tokens)",
                    fixed(floor, 6),
                    v.model,
                    fixed(law, 6),
                    thousands(t)
                ),
            ));
        }
        if !agrees(plan.loss, law) {
            return Err(self.bad(
                format!("{field}.loss"),
                plan.loss,
                format!(
                    "{}, the partial's loss law for {} on {} tokens",
                    fixed(law, 6),
                    v.model,
                    thousands(t)
                ),
            ));
        }
        let plate_days = Pace::Plate.run_days(brief, active, t);
        let (days_field, days) = match plan.days_plate {
            Some(d) => ("days_plate", d),
            None => ("days", plan.days),
        };
        if self
            .plate
            .is_some_and(|plate| plate != plan.days_plate.is_none())
            || !agrees(days, plate_days)
        {
            return Err(self.bad(
                format!("{field}.{days_field}"),
                days,
                format!(
                    "{}, 6·N·D at the brief's {} MFU on its {} GPUs (the plate's days{})",
                    fixed(plate_days, 6),
                    brief.mfu,
                    thousands(brief.gpus),
                    match self.plate {
                        Some(true) => ", under the plate's time model as the partial's other plans",
                        Some(false) => " beside the detailed model's, as the partial's other plans",
                        None => "",
                    }
                ),
            ));
        }
        let flops = plate::training_flops(active as f64, t as f64);
        if !agrees(plan.flops, flops) {
            return Err(self.bad(
                format!("{field}.flops"),
                plan.flops,
                format!(
                    "{}, 6·N·D for {} on {} tokens",
                    exact(flops),
                    v.model,
                    thousands(t)
                ),
            ));
        }
        let memory = &plan.memory_gb;
        let spend = spent(brief, &plan.layout, plan.days).and_then(|s| s.cost);
        let passes = plan.pass
            && plan.checks.all()
            && plan.reasons.is_empty()
            && memory.total >= 0.0
            && memory_fits(brief, memory.total * BYTES_PER_GB * (1.0 - 1e-12))
            && plan.days > 0.0
            && days_fit(brief, plan.days)
            && loss_meets(brief, plan.loss)
            && cost_fits(brief, spend) != Some(false)
            && plan.runnable.as_ref().is_none_or(|r| {
                let k = r.key();
                k == f64::INFINITY || (k.is_finite() && k > 0.0)
            });
        if !passes {
            return Err(self.bad(
                field,
                describe(plan),
                format!(
                    "a plan that passes the partial's brief ({} GB cap, {} days, loss {}): a partial keeps passing plans only",
                    general(brief.memory_cap_gb),
                    general(brief.max_days),
                    brief.loss_target
                ),
            ));
        }
        if plan.step.is_some() != plan.memory_model.is_some() {
            return Err(self.bad(
                format!("{field}.memory_model"),
                if plan.memory_model.is_some() {
                    "given"
                } else {
                    "absent"
                },
                "beside a step (the detailed memory model), or absent with it (the plate's)".into(),
            ));
        }
        if let Some(step) = plan.step.filter(|s| s.seq_len != brief.seq_len) {
            return Err(self.bad(
                format!("{field}.step.seq_len"),
                step.seq_len,
                format!("{}, the brief's sequence", brief.seq_len),
            ));
        }
        self.layout(&format!("{field}.layout"), &plan.layout, shape)?;
        if let Some(shape) = shape {
            let model = memory_model(plan, brief);
            let again = model
                .memory(brief.seq_len, shape, &plan.layout)?
                .in_gb()
                .total;
            if !agrees(memory.total, again) {
                return Err(self.bad(
                    format!("{field}.memory_gb.total"),
                    memory.total,
                    format!(
                        "{} GB, what the {} memory model gives {} under {}",
                        fixed(again, 3),
                        if plan.step.is_some() {
                            "detailed"
                        } else {
                            "plate's"
                        },
                        v.model,
                        plan.layout.describe()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A layout of the shape at place `index` (`shape`, where known): the one the brief's
    /// machine gives its degrees.
    fn layout(&self, field: &str, layout: &Layout, shape: Option<&Shape>) -> Result<()> {
        let again = match shape {
            Some(s) => Layout::with(self.brief, s, layout.degrees(), layout.zero),
            None => layout.on_cluster(self.brief),
        };
        let why = match again {
            Ok(l) if l == *layout => return Ok(()),
            Ok(l) => format!(
                "{}: DP is what TP × CP × PP leave of the brief's {} GPUs",
                l.describe(),
                thousands(self.brief.gpus)
            ),
            Err(Error::Layout(rule)) => rule,
            Err(e) => e.to_string(),
        };
        Err(self.bad(
            field,
            layout.describe(),
            format!(
                "a layout the brief's machine ({} GPUs, {} a node) allows{}: {why}",
                thousands(self.brief.gpus),
                self.brief.gpus_per_node,
                shape.map_or(String::new(), |s| format!(" for {}", s.name))
            ),
        ))
    }

    /// The front: sorted by days rising and loss falling, and reaching every passing plan the
    /// partial knows of on the grid.
    fn front(&self) -> Result<()> {
        let front = &self.p.front;
        for (k, pair) in front.windows(2).enumerate() {
            let (a, b) = (&pair[0].plan, &pair[1].plan);
            if !(b.days > a.days && b.loss < a.loss) {
                return Err(self.bad(
                    format!("front[{}].plan", k + 1),
                    format!("{} days at loss {}", b.days, b.loss),
                    format!(
                        "after front[{k}]'s {} days at loss {}: a front sorted by days rising and loss falling, no point dominated",
                        a.days, a.loss
                    ),
                ));
            }
        }
        let reached = |loss: f64, days: f64| {
            front
                .iter()
                .any(|q| at_most(q.plan.loss, loss) && at_most(q.plan.days, days))
        };
        let cut = |what: String| {
            self.bad(
                "front",
                format!("{} points", front.len()),
                format!("a front that reaches {what}; search --shard writes the whole front"),
            )
        };
        if !self.p.exact {
            let best = self
                .p
                .shapes
                .iter()
                .filter_map(|v| v.verdict.best_plan.as_ref());
            for plan in self.p.plans.iter().map(|ip| &ip.plan).chain(best) {
                if !reached(plan.loss, plan.days) {
                    return Err(cut(format!(
                        "every plan the partial keeps, {} among them",
                        describe(plan)
                    )));
                }
            }
        }
        // Each shape's first and last passing counts of the grid, at its fastest pace, pass:
        // the front reaches both.
        let grid = &self.p.grid;
        let last = grid.at(grid.len() - 1);
        for v in self.p.shapes.iter().map(|v| &v.verdict) {
            let (Some([lo, hi]), Some([d_lo, _])) = (v.token_window, v.days_window) else {
                continue;
            };
            // The counts of the grid in the window: the first at or after `lo`, the last at or
            // before `hi`.
            let from = lo
                .saturating_sub(grid.min)
                .div_ceil(grid.step)
                .checked_mul(grid.step)
                .and_then(|x| x.checked_add(grid.min));
            let to = grid.min + hi.min(last).saturating_sub(grid.min) / grid.step * grid.step;
            let Some(from) = from.filter(|&from| hi >= grid.min && from <= to) else {
                continue;
            };
            let active = v.active_params.unwrap_or(v.params);
            let days = |t: u64| match self.plate {
                Some(true) => Pace::Plate.run_days(self.brief, active, t),
                _ => d_lo / lo as f64 * t as f64,
            };
            for t in [from, to] {
                let loss = self.brief.loss(v.law_size(), t as f64);
                if !reached(loss, days(t)) {
                    return Err(cut(format!(
                        "{}'s passing plan on {} tokens ({} days, loss {})",
                        v.model,
                        thousands(t),
                        fixed(days(t), 3),
                        fixed(loss, 6)
                    )));
                }
            }
        }
        Ok(())
    }

    /// The counts: the plans the best `top` of the choices, the choices the passing plans
    /// (or at most them), a front exactly when some plan passes, every configuration graded at
    /// each count of the grid.
    fn counts(&self) -> Result<()> {
        let p = self.p;
        let plans = p.plans.len() as u64;
        let top = p.top.map_or(u64::MAX, |t| t as u64);
        let (field, value, why) = if p.evaluated % self.p.grid.len() != 0 {
            (
                "evaluated",
                p.evaluated,
                format!(
                    "a multiple of the grid's {} token counts: each configuration is graded at every count",
                    thousands(p.grid.len())
                ),
            )
        } else if self.distinct == Distinct::Plan && p.choices != p.passing {
            (
                "choices",
                p.choices,
                format!(
                    "{}, the passing plans: each plan is a choice of its own (distinct plan)",
                    p.passing
                ),
            )
        } else if !p.exact && p.choices > p.passing {
            (
                "choices",
                p.choices,
                format!(
                    "at most the {} passing plans: each choice has one",
                    p.passing
                ),
            )
        } else if !(p.exact && self.distinct == Distinct::Plan) && plans != p.choices.min(top) {
            (
                "plans",
                plans,
                format!(
                    "{}, the best {} of the {} passing choices the partial counts (choices)",
                    p.choices.min(top),
                    p.top.map_or("all".to_string(), |t| t.to_string()),
                    p.choices
                ),
            )
        } else if p.front.is_empty() != (p.passing == 0) {
            (
                "front",
                p.front.len() as u64,
                format!(
                    "{}: a front exactly when some plan of the grid passes ({} do)",
                    if p.passing == 0 {
                        "none"
                    } else {
                        "at least one point"
                    },
                    p.passing
                ),
            )
        } else {
            return Ok(());
        };
        Err(self.bad(field, value, why))
    }

    /// The exact front: as many runs as it says, each of its shape, in order from the fastest
    /// passing plan of any shape.
    fn exact_front(&self) -> Result<()> {
        let Some(f) = &self.p.exact_front else {
            return if self.p.exact {
                Err(self.bad(
                    "exact_front",
                    "null",
                    "the exact front of an exact search (exact is true)".into(),
                ))
            } else {
                Ok(())
            };
        };
        if !self.p.exact {
            return Err(self.bad(
                "exact_front",
                format!("{} runs", f.runs.len()),
                "none: the search was not exact (exact is false)".into(),
            ));
        }
        if let TimeModel::Detailed(options) = &f.time {
            options.validate()?;
        }
        let n = f.runs.len();
        if n > MAX_FRONT_RUNS || (!f.complete && n != MAX_FRONT_RUNS) {
            return Err(self.bad(
                "exact_front.runs",
                format!("{n} runs"),
                format!(
                    "{}: complete is {}",
                    if f.complete {
                        format!("at most {MAX_FRONT_RUNS}")
                    } else {
                        format!("the first {MAX_FRONT_RUNS} of the shard's front")
                    },
                    f.complete
                ),
            ));
        }
        let mut ends: Option<(f64, f64)> = None;
        for (k, run) in f.runs.iter().enumerate() {
            let field = format!("exact_front.runs[{k}]");
            self.plan(
                &format!("{field}.first"),
                run.shape_index,
                &run.first,
                Some(&run.shape),
                false,
            )?;
            let (_, v) = self
                .verdict_at(run.shape_index)
                .expect("checked with its first plan");
            let paced = match (run.days_per_token, &f.time) {
                (None, TimeModel::Plate) => true,
                (Some(k), TimeModel::Detailed(_)) => {
                    k.is_finite() && k > 0.0 && agrees(run.first.days, k * run.first.tokens as f64)
                }
                _ => false,
            };
            if !paced {
                return Err(self.bad(
                    format!("{field}.days_per_token"),
                    run.days_per_token.map_or("null".to_string(), |k| k.to_string()),
                    "null under the plate's time model, else the days of its first plan over its tokens".into(),
                ));
            }
            let w = run_window(self.brief, run);
            let in_window = v.token_window.is_some_and(|[_, hi]| {
                run.first.tokens <= run.last_tokens && run.last_tokens <= hi
            });
            if !in_window {
                return Err(self.bad(
                    format!("{field}.last_tokens"),
                    thousands(run.last_tokens),
                    format!(
                        "from its first plan's {} tokens to the end of {}'s token window",
                        thousands(run.first.tokens),
                        v.model
                    ),
                ));
            }
            let (first_days, first_loss) = (w.days(run.first.tokens), w.loss(run.first.tokens));
            if let Some((days, loss)) = ends {
                if !(at_most(days, first_days) && first_loss < loss) {
                    return Err(self.bad(
                        format!("{field}.first"),
                        format!("{} days at loss {}", first_days, first_loss),
                        format!(
                            "after the run before it, which ends at {days} days and loss {loss}: runs sorted by days, the loss falling"
                        ),
                    ));
                }
            }
            ends = Some((w.days(run.last_tokens), w.loss(run.last_tokens)));
        }
        // The front starts at the fastest passing plan of any shape and, when complete, ends
        // at the lowest loss of any.
        let windows = || {
            self.p.shapes.iter().filter_map(|v| {
                let v = &v.verdict;
                Some((v, v.token_window?, v.days_window?))
            })
        };
        let fastest = windows().map(|(_, _, [d, _])| d).min_by(f64::total_cmp);
        let lowest = windows()
            .map(|(v, [_, hi], _)| self.brief.loss(v.law_size(), hi as f64))
            .min_by(f64::total_cmp);
        let starts = match (f.runs.first(), fastest) {
            (Some(run), Some(d)) => agrees(run.first.days, d),
            (None, None) => true,
            _ => false,
        };
        let ends_well = !f.complete
            || match (ends, lowest) {
                (Some((_, l)), Some(low)) => agrees(l, low),
                (None, None) => true,
                _ => false,
            };
        if !starts || !ends_well {
            return Err(self.bad(
                "exact_front.runs",
                format!("{n} runs"),
                format!(
                    "runs from the fastest passing plan of any shape ({} days) to the lowest loss of any ({}): search --shard writes the whole front",
                    fastest.map_or("none".to_string(), |d| fixed(d, 3)),
                    lowest.map_or("none".to_string(), |l| fixed(l, 6))
                ),
            ));
        }
        Ok(())
    }
}

/// A plan in a few words, for errors: `llama3-405b on 860,000,000,000 tokens, TP 2 × PP 1 × DP
/// 1,024, ZeRO 3`.
fn describe(plan: &Plan) -> String {
    format!(
        "{} on {} tokens, {}",
        plan.model,
        thousands(plan.tokens),
        plan.layout.describe()
    )
}
