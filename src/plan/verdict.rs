//! Whether a shape can pass the brief at all, and for which tokens: its exact token window.
//!
//! Under the plate model the three checks separate. Memory depends only on the layout, days
//! only rise and loss only falls with the tokens D. So a shape passes, with some layout, for
//! exactly the whole numbers of tokens in `[D_lo, D_hi]`, where
//!
//! - `D_lo` is the fewest tokens that reach the loss target: `(B / (target − E − A/N^α))^(1/β)`
//!   (see [`crate::laws::LossLaw::tokens_for_loss`]), rounded up;
//! - `D_hi` is the most tokens the day limit allows: `C / (6·N)` (see [`crate::cost::run::plate::max_tokens`]),
//!   rounded down;
//!
//! provided some layout fits in memory. Both ends are solved in closed form and then settled to
//! the exact whole number by the same check functions the plans use, so the window and the
//! graded plans can never disagree about a token count.

use serde::{Deserialize, Serialize};

use crate::brief::Brief;
use crate::cost::memory;
use crate::cost::run::plate as time;
use crate::cost::step::Step;
use crate::format::{count, fixed, money};
use crate::laws::LawSize;
use crate::model::layout::{layouts, Layout};
use crate::model::Shape;
use crate::plan::batch::LawBatch;
use crate::plan::limits::{law_size, loss, loss_meets, memory_fits, within_time_and_cost};
use crate::plan::pace::Pace;
use crate::plan::Plan;
use crate::units::gb;

/// What the search says of one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeVerdict {
    /// The model's name.
    pub model: String,
    /// Parameters N.
    pub params: u64,
    /// A mixture of experts's active parameters `N_act`, which its loss and days count
    /// (absent for a dense model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_params: Option<u64>,
    /// A mixture of experts's expansion ([`Shape::expansion`]), which a law with expert terms
    /// grades (absent for a dense model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expansion: Option<f64>,
    /// `[fewest, most]` whole tokens with which the shape passes every check, or `null`.
    pub token_window: Option<[u64; 2]>,
    /// Days at both ends of the token window, or `null`.
    pub days_window: Option<[f64; 2]>,
    /// Loss with unlimited tokens: `E + A/N^α`, or on repeated data the law's limit
    /// ([`crate::brief::Brief::loss_floor`]).
    pub loss_floor: f64,
    /// Fewest whole tokens that reach the loss target, or `null` if none do.
    pub min_tokens_for_loss: Option<u64>,
    /// Most whole tokens that fit in the day limit (0 if not even one does).
    pub max_tokens_in_time: u64,
    /// The layout with the least per-GPU memory (ties: smaller TP, PP, ZeRO), or `null` if the
    /// cluster admits no layout for this shape.
    pub min_memory_layout: Option<Layout>,
    /// Its training step, under the detailed memory model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_memory_step: Option<Step>,
    /// Per-GPU memory of that layout, GB.
    pub min_memory_gb: Option<f64>,
    /// Why the shape can never pass, or `null` if it can.
    pub reason: Option<String>,
    /// The shape's best passing plan on the grid under the search's ranking (searches only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_plan: Option<Plan>,
    /// Where the detailed model fits `best_plan` but puts it past the day (or cost) limit: the
    /// same layout on the most tokens it passes in time under the detailed model
    /// (`⌊days limit / its days per token⌋`), where that still reaches the loss target (a plate
    /// search's answer, [`crate::plan::runnable`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_best: Option<Plan>,
    /// Configurations the search left out for a reason other than memory, days or loss (a
    /// global batch no layout's micro-batches make, a schedule the stages do not allow, a time
    /// model without figures for the GPU), by rule; empty when none were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<Exclusion>,
    /// A detailed search over more than one context-parallel degree or precision: the verdict
    /// the shape gets from each one's configurations alone, so a report says why a degree
    /// never passes and what a precision buys; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facets: Vec<Facet>,
    /// The brief's batch law for the shape ([`LawBatch`]): the batch its layouts aim at and
    /// why; absent under a fixed target.
    #[serde(rename = "batch_law", default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<LawBatch>,
}

/// A shape's verdict from the configurations of one context-parallel degree or one
/// precision alone: the same checks ([`verdict_because`]) on that part of the space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Facet {
    /// `cp` or `precision`.
    pub dimension: String,
    /// The degree or the precision (`1`, `fp8`, …).
    pub value: String,
    /// Valid configurations with it.
    pub configurations: u64,
    /// Of those, how many fit in memory.
    pub fitting: u64,
    /// `[fewest, most]` whole tokens with which it passes, or `null`.
    pub token_window: Option<[u64; 2]>,
    /// Most whole tokens its fastest fitting configuration trains in the day limit.
    pub max_tokens_in_time: u64,
    /// Its fastest fitting configuration's days per token (failures included), or `null`.
    pub days_per_token: Option<f64>,
    /// That configuration's layout.
    pub fastest_layout: Option<Layout>,
    /// And its training step.
    pub fastest_step: Option<Step>,
    /// The least per-GPU memory of its configurations, GB.
    pub min_memory_gb: Option<f64>,
    /// Why it never passes, or `null`.
    pub reason: Option<String>,
}

/// Configurations of a shape that one rule left out of a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exclusion {
    /// The input or rule that turned them away, as its error names it (`global batch`,
    /// `--schedule`, …).
    pub rule: String,
    /// How many (layout, training step) configurations.
    pub count: u64,
    /// The first one's reason, in full.
    pub example: String,
}

/// Tallies errors into [`Exclusion`]s by rule, in the order the rules are first met.
#[derive(Debug, Clone, Default)]
pub struct Exclusions(Vec<Exclusion>);

impl Exclusions {
    /// Counts one configuration turned away by `error`.
    pub fn add(&mut self, error: &crate::error::Error) {
        self.count(error.rule_name(), || error.to_string());
    }

    /// Counts one configuration turned away by the rule `rule`, the error `make` gives made
    /// only when it is the rule's first (a search turns many away by one rule, and an error's
    /// message is worth writing once).
    pub fn add_lazily(&mut self, rule: &str, make: impl FnOnce() -> crate::error::Error) {
        self.count(rule, || {
            let error = make();
            debug_assert_eq!(error.rule_name(), rule);
            error.to_string()
        });
    }

    fn count(&mut self, rule: &str, example: impl FnOnce() -> String) {
        match self.0.iter_mut().find(|e| e.rule == rule) {
            Some(e) => e.count += 1,
            None => self.0.push(Exclusion {
                rule: rule.to_string(),
                count: 1,
                example: example(),
            }),
        }
    }

    /// The tallies.
    pub fn into_vec(self) -> Vec<Exclusion> {
        self.0
    }
}

/// The smallest `d ≥ 1` with `pred(d)`, for `pred` false then true as `d` grows, searched from
/// `guess` by galloping then bisection. `None` if `pred` is false up to `u64::MAX`.
pub fn first_true(guess: u64, pred: impl Fn(u64) -> bool) -> Option<u64> {
    let guess = guess.max(1);
    // Invariant once found: pred(hi) is true and pred(lo) is false (lo = 0 stands for "below 1").
    let (mut lo, mut hi);
    if pred(guess) {
        hi = guess;
        let mut step = 1u64;
        loop {
            let below = hi.saturating_sub(step);
            if below == 0 {
                lo = 0;
                break;
            }
            if pred(below) {
                hi = below;
                step = step.saturating_mul(2);
            } else {
                lo = below;
                break;
            }
        }
    } else {
        lo = guess;
        let mut step = 1u64;
        loop {
            if lo == u64::MAX {
                return None;
            }
            let above = lo.saturating_add(step);
            if pred(above) {
                hi = above;
                break;
            }
            lo = above;
            step = step.saturating_mul(2);
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// The largest `d ≥ 1` with `pred(d)`, for `pred` true then false as `d` grows; `None` if
/// `pred(1)` is false.
pub fn last_true(guess: u64, pred: impl Fn(u64) -> bool) -> Option<u64> {
    match first_true(guess.saturating_add(1), |d| !pred(d)) {
        None => Some(u64::MAX),
        Some(d) if d <= 1 => None,
        Some(d) => Some(d - 1),
    }
}

/// A continuous estimate as a whole-number starting guess (saturating, NaN as 1).
fn guess(x: f64) -> u64 {
    if x.is_nan() {
        1
    } else {
        x.clamp(1.0, u64::MAX as f64) as u64
    }
}

/// How many tokens a shape needs for the loss target and can have within the day limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBounds {
    /// Loss with unlimited tokens: `E + A/N^α`, or on repeated data the law's limit
    /// ([`crate::brief::Brief::loss_floor`]).
    pub loss_floor: f64,
    /// The continuous solution of `L(N, D) = target`, or `None` when the floor is not below it.
    pub needed: Option<f64>,
    /// Fewest whole tokens that reach the target; `None` if none do or more than a u64 holds.
    pub min_tokens_for_loss: Option<u64>,
    /// Most whole tokens within the day limit (0 if not even one).
    pub max_tokens_in_time: u64,
}

impl ShapeVerdict {
    /// What the brief's law grades the shape by ([`law_size`]).
    pub fn law_size(&self) -> LawSize {
        LawSize {
            params: self.active_params.unwrap_or(self.params) as f64,
            expansion: self.expansion.unwrap_or(1.0),
        }
    }
}

/// The token bounds of `shape` under `brief` at `pace`: closed form, then settled to the whole
/// token by the check functions themselves.
pub fn token_bounds(brief: &Brief, shape: &Shape, pace: Pace) -> TokenBounds {
    let n = law_size(shape);
    let (needed, min_tokens_for_loss) = loss_bound(brief, shape);
    TokenBounds {
        loss_floor: brief.loss_floor(n),
        needed,
        min_tokens_for_loss,
        max_tokens_in_time: time_bound(brief, shape, pace),
    }
}

/// The loss side of [`token_bounds`], the same at every pace: the real-valued tokens the law
/// needs for the target and the fewest whole tokens that meet it (`None` when none do).
pub fn loss_bound(brief: &Brief, shape: &Shape) -> (Option<f64>, Option<u64>) {
    let needed = brief.tokens_for_loss(law_size(shape), brief.loss_target);
    let fewest =
        needed.and_then(|d| first_true(guess(d), |t| loss_meets(brief, loss(brief, shape, t))));
    (needed, fewest)
}

/// The fewest whole tokens with which `shape` reaches the loss target when a run of `t`
/// tokens trains at a global batch of `batch_of(t)`, the brief's critical batch counted
/// ([`Brief::loss_at_batch`]): from the law's tokens needed at the batch
/// ([`crate::laws::CriticalBatch::tokens_needed`]), settled to the whole token by the loss
/// check; `None` when no count reaches it.
pub fn fewest_tokens_with(
    brief: &Brief,
    shape: &Shape,
    batch_of: &dyn Fn(u64) -> f64,
) -> Option<u64> {
    let n = law_size(shape);
    let needed = brief.tokens_for_loss(n, brief.loss_target)?;
    let at_batch = brief.critical_batch.tokens_needed(
        needed,
        batch_of(guess(needed)),
        brief.critical_batch_scale,
    );
    first_true(guess(at_batch), |t| {
        loss_meets(brief, brief.loss_at_batch(n, t as f64, batch_of(t)))
    })
}

/// The fewest whole tokens with which `shape` on `memory`'s step reaches the loss target:
/// [`loss_bound`]'s where the brief does not count the critical batch, else
/// [`fewest_tokens_with`] the plan's batch ([`crate::plan::limits::plan_batch_tokens`]).
pub fn fewest_tokens_on(brief: &Brief, shape: &Shape, memory: &memory::MemoryModel) -> Option<u64> {
    if brief.critical_batch.is_off() {
        return loss_bound(brief, shape).1;
    }
    fewest_tokens_with(brief, shape, &|t| {
        crate::plan::limits::plan_batch_tokens(brief, shape, t, memory)
    })
}

/// The time side of [`token_bounds`]: the most whole tokens that fit in the day limit (and the
/// cost limit, when the brief sets one: cost is linear in days) at `pace` (0 if not even one
/// does). It falls as the pace slows.
pub fn time_bound(brief: &Brief, shape: &Shape, pace: Pace) -> u64 {
    // The plate's 6·N·D counts the parameters a token goes through.
    let n = shape.active_params() as f64;
    let days_of = |t: u64| pace.run_days(brief, shape.active_params(), t);
    let most = match pace {
        Pace::Plate => time::max_tokens(brief.budget_flops(), n),
        Pace::PerToken(k) => brief.days_limit() / k,
    };
    last_true(guess(most), |t| within_time_and_cost(brief, days_of(t))).unwrap_or(0)
}

/// What a verdict says of a shape the rules leave without any configuration.
fn no_layout_reason(brief: &Brief) -> String {
    format!(
        "layout: no layout and training step fits the rules on {} GPUs",
        brief.gpus
    )
}

/// The configuration with the least per-GPU memory a search found for a shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lightest {
    /// Per-GPU memory, bytes.
    pub bytes: f64,
    /// Its layout.
    pub layout: Layout,
    /// Its training step, under the detailed memory model.
    pub step: Option<Step>,
}

/// The verdict for `shape` under `brief`, given the lightest configuration the memory model
/// admits for it (`None` when it admits none) and the pace of its fastest configuration that
/// fits.
pub fn verdict(
    brief: &Brief,
    shape: &Shape,
    lightest: Option<Lightest>,
    pace: Pace,
) -> ShapeVerdict {
    verdict_because(brief, shape, lightest, pace, || no_layout_reason(brief))
}

/// [`verdict`], with `no_layout` saying why the rules leave no configuration when `lightest`
/// is `None` (the search names the rule its first layout and step break).
pub fn verdict_because(
    brief: &Brief,
    shape: &Shape,
    lightest: Option<Lightest>,
    pace: Pace,
    no_layout: impl FnOnce() -> String,
) -> ShapeVerdict {
    let n = shape.active_params() as f64;
    let days_of = |t: f64| pace.days(time::days(brief.cluster_flops_per_second(), n, t), t as u64);
    let bounds = token_bounds(brief, shape, pace);
    let TokenBounds {
        loss_floor,
        needed,
        min_tokens_for_loss,
        max_tokens_in_time,
    } = bounds;

    let mut reasons = Vec::new();
    match (needed, min_tokens_for_loss) {
        (None, _) => reasons.push(format!(
            "loss: {} = {} is not below the {} target, however many tokens",
            match (brief.loss_law.repetition, brief.unique_tokens) {
                (Some(_), Some(_)) => {
                    "on the repeated data its floor E + A/N'^α + B/(U·(1 + R_D*))^β"
                }
                _ => "its floor E + A/N^α",
            },
            fixed(loss_floor, 6),
            brief.loss_target
        )),
        (Some(d), lo) if lo.is_none_or(|lo| lo > max_tokens_in_time) => {
            let d = lo.map_or(d, |lo| lo as f64);
            reasons.push(match brief.binding_cost_limit() {
                Some((limit, days)) => format!(
                    "cost: reaching loss {} takes {} tokens ({} days), but the {} cost limit allows {} days, {} tokens",
                    brief.loss_target,
                    count(d),
                    fixed(days_of(d), 1),
                    money(limit),
                    fixed(days, 1),
                    count(max_tokens_in_time as f64)
                ),
                None => format!(
                    "days: reaching loss {} takes {} tokens ({} days), but {} days allow only {}",
                    brief.loss_target,
                    count(d),
                    fixed(days_of(d), 1),
                    fixed(brief.max_days, 1),
                    count(max_tokens_in_time as f64)
                ),
            })
        }
        _ => {}
    }
    match lightest {
        None => reasons.push(no_layout()),
        Some(l) if !memory_fits(brief, l.bytes) => reasons.push(over_the_cap(brief, &l)),
        Some(_) => {}
    }

    let token_window = match (reasons.is_empty(), min_tokens_for_loss) {
        (true, Some(lo)) => Some([lo, max_tokens_in_time]),
        _ => None,
    };
    ShapeVerdict {
        model: shape.name.clone(),
        params: shape.params(),
        active_params: shape.experts.as_ref().map(|_| shape.active_params()),
        expansion: shape.experts.as_ref().map(|_| shape.expansion()),
        token_window,
        days_window: token_window
            .map(|[lo, hi]| [lo, hi].map(|t| pace.run_days(brief, shape.active_params(), t))),
        loss_floor,
        min_tokens_for_loss,
        max_tokens_in_time,
        min_memory_layout: lightest.map(|l| l.layout),
        min_memory_step: lightest.and_then(|l| l.step),
        min_memory_gb: lightest.map(|l| gb(l.bytes)),
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        best_plan: None,
        detailed_best: None,
        excluded: Vec::new(),
        facets: Vec::new(),
        batch: LawBatch::of(brief, shape),
    }
}

/// Why nothing fits: even the lightest configuration `l` is over the brief's memory cap.
pub fn over_the_cap(brief: &Brief, l: &Lightest) -> String {
    let cp = if l.layout.cp > 1 {
        format!(" × CP {}", l.layout.cp)
    } else {
        String::new()
    };
    format!(
        "memory: even the lightest layout (TP {}{cp} × PP {}, ZeRO {}) needs {} GB per GPU, over the {} GB cap",
        l.layout.tp,
        l.layout.pp,
        l.layout.zero,
        fixed(gb(l.bytes), 1),
        fixed(brief.memory_cap_gb, 1)
    )
}

/// The verdict of one facet (`dimension` = `value`) of a shape's space from its tallies: the
/// lightest configuration with it and, when one fits, the pace of its fastest that fits.
#[allow(clippy::too_many_arguments)]
pub fn facet(
    brief: &Brief,
    shape: &Shape,
    dimension: &str,
    value: String,
    configurations: u64,
    fitting: u64,
    lightest: Option<Lightest>,
    fastest: Option<(Layout, Option<Step>, Pace)>,
) -> Facet {
    let (window, max_tokens, reason) = match (fastest, lightest) {
        // Where the brief counts the critical batch, the loss bound is the fastest
        // configuration's batch's: the facet's window is that configuration's.
        (Some((_, Some(step), pace)), _) if !brief.critical_batch.is_off() => {
            let v = verdict_because(brief, shape, lightest, pace, String::new);
            let lo = fewest_tokens_with(brief, shape, &|_| step.global_batch_tokens as f64);
            match (v.token_window, lo) {
                (Some([_, hi]), Some(lo)) if lo <= hi => (Some([lo, hi]), hi, None),
                (Some([_, hi]), lo) => (
                    None,
                    hi,
                    Some(format!(
                        "days: past the critical batch, its fastest layout's {} tokens a step need {} tokens for loss {}, more than the {} its days allow",
                        count(step.global_batch_tokens as f64),
                        lo.map_or("more".into(), |t| count(t as f64)),
                        brief.loss_target,
                        count(hi as f64)
                    )),
                ),
                (None, _) => (None, v.max_tokens_in_time, v.reason),
            }
        }
        (Some((_, _, pace)), _) => {
            let v = verdict_because(brief, shape, lightest, pace, String::new);
            (v.token_window, v.max_tokens_in_time, v.reason)
        }
        (None, Some(l)) => (None, 0, Some(over_the_cap(brief, &l))),
        (None, None) => (None, 0, Some("layout: no valid configuration".into())),
    };
    Facet {
        dimension: dimension.into(),
        value,
        configurations,
        fitting,
        token_window: window,
        max_tokens_in_time: max_tokens,
        days_per_token: fastest.and_then(|(_, _, p)| p.days_per_token()),
        fastest_layout: fastest.map(|(l, _, _)| l),
        fastest_step: fastest.and_then(|(_, s, _)| s),
        min_memory_gb: lightest.map(|l| gb(l.bytes)),
        reason,
    }
}

/// The lightest of `configs` (memory bytes, layout, step), ties to the smaller TP, PP, ZeRO,
/// then the smaller step.
pub fn lightest<'a>(
    configs: impl IntoIterator<Item = (f64, &'a Layout, Option<&'a Step>)>,
) -> Option<Lightest> {
    configs
        .into_iter()
        .min_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| layout_order(a.1, b.1))
                .then_with(|| a.2.cmp(&b.2))
        })
        .map(|(bytes, layout, step)| Lightest {
            bytes,
            layout: *layout,
            step: step.copied(),
        })
}

/// The plate model's lightest layout for `shape`: what [`verdict`] is given for a plate search.
pub fn plate_lightest(brief: &Brief, shape: &Shape) -> Option<Lightest> {
    let all = layouts(brief, shape);
    let weighed: Vec<f64> = all
        .iter()
        .map(|l| memory::plate(shape, l, brief.seq_len).total())
        .collect();
    lightest(
        weighed
            .into_iter()
            .zip(&all)
            .map(|(bytes, l)| (bytes, l, None)),
    )
}

/// Orders layouts by TP, then PP, then CP, then ZeRO stage, then replicas, then EP and ETP:
/// the tie-break when all else is equal.
pub fn layout_order(a: &Layout, b: &Layout) -> std::cmp::Ordering {
    (a.tp, a.pp, a.cp, a.zero, a.replicate, a.ep, a.etp).cmp(&(
        b.tp,
        b.pp,
        b.cp,
        b.zero,
        b.replicate,
        b.ep,
        b.etp,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::preset;
    use crate::plan::limits::days_fit;

    #[test]
    fn first_and_last_true_find_the_edges_from_any_guess() {
        for guess in [1, 2, 999, 1000, 1001, 5000, 1 << 40] {
            assert_eq!(first_true(guess, |d| d >= 1000), Some(1000));
            assert_eq!(last_true(guess, |d| d <= 1000), Some(1000));
        }
        assert_eq!(first_true(7, |_| true), Some(1));
        assert_eq!(first_true(7, |_| false), None);
        assert_eq!(last_true(7, |_| false), None);
        assert_eq!(last_true(7, |_| true), Some(u64::MAX));
    }

    #[test]
    fn llama3_8b_never_passes_its_loss_floor_is_above_the_target() {
        let s = preset("8b").unwrap();
        let v = verdict(
            &Brief::default(),
            &s,
            plate_lightest(&Brief::default(), &s),
            Pace::Plate,
        );
        assert_eq!(v.token_window, None);
        assert!(
            v.loss_floor > 1.992 && v.loss_floor < 1.993,
            "{}",
            v.loss_floor
        );
        assert!(v.reason.unwrap().starts_with("loss: its floor"));
    }

    #[test]
    fn the_window_edges_are_exact_whole_tokens() {
        let b = Brief::default();
        for name in ["70b", "405b"] {
            let s = preset(name).unwrap();
            let [lo, hi] = verdict(&b, &s, plate_lightest(&b, &s), Pace::Plate)
                .token_window
                .unwrap();
            assert!(loss_meets(&b, loss(&b, &s, lo)) && !loss_meets(&b, loss(&b, &s, lo - 1)));
            let n = s.params() as f64;
            assert!(days_fit(
                &b,
                time::days(b.cluster_flops_per_second(), n, hi as f64)
            ));
            assert!(!days_fit(
                &b,
                time::days(b.cluster_flops_per_second(), n, (hi + 1) as f64)
            ));
        }
    }

    /// The reason `model` never passes `brief`; panics if it can.
    fn reason(brief: Brief, model: &str) -> String {
        let s = preset(model).unwrap();
        let v = verdict(&brief, &s, plate_lightest(&brief, &s), Pace::Plate);
        assert_eq!(v.token_window, None);
        v.reason.unwrap()
    }

    #[test]
    fn a_month_too_short_is_the_reason() {
        let r = reason(
            Brief {
                max_days: 5.0,
                ..Brief::default()
            },
            "405b",
        );
        assert!(r.starts_with("days: reaching loss 1.955 takes"), "{r}");
    }

    #[test]
    fn a_target_just_above_the_floor_is_a_matter_of_days_not_of_the_floor() {
        // 70B's floor is 1.900865; reaching 1.901 needs about 4.4e19 tokens, more than a u64.
        let b = Brief {
            loss_target: 1.901,
            ..Brief::default()
        };
        assert_eq!(
            token_bounds(&b, &preset("70b").unwrap(), Pace::Plate).min_tokens_for_loss,
            None
        );
        let r = reason(b, "70b");
        assert!(r.starts_with("days: reaching loss 1.901 takes 4"), "{r}");
    }

    #[test]
    fn a_cap_too_small_is_the_reason() {
        let r = reason(
            Brief {
                memory_cap_gb: 0.5,
                ..Brief::default()
            },
            "405b",
        );
        assert!(r.starts_with("memory: even the lightest layout"), "{r}");
    }

    /// A brief under Muennighoff et al.'s law with `unique` distinct tokens.
    fn data_limited(unique: u64, target: f64) -> Brief {
        Brief {
            loss_law: crate::laws::LossLawPreset::Muennighoff.law(),
            unique_tokens: Some(unique),
            loss_target: target,
            ..Brief::default()
        }
    }

    #[test]
    fn a_window_under_repeated_data_starts_at_the_first_whole_token_that_reaches_the_target() {
        // 8B on 200B unique tokens aiming at 2.15: reached only by repeating (about 2.4
        // epochs); the bisected tokens settled to the whole token by the loss itself.
        let shape = preset("8b").unwrap();
        let b = data_limited(200_000_000_000, 2.15);
        let (needed, fewest) = loss_bound(&b, &shape);
        let (d, t) = (needed.unwrap(), fewest.unwrap());
        assert!(d > 200e9, "{d}");
        let n = shape.params() as f64;
        assert!(b.loss(n, t as f64) <= 2.15 && b.loss(n, (t - 1) as f64) > 2.15);
        let e = b.effective(n, t as f64).unwrap();
        assert!(e.epochs > 2.0 && e.tokens < t as f64, "{e:?}");
        // Unlimited unique tokens reach it sooner.
        let unlimited = Brief {
            unique_tokens: None,
            ..b.clone()
        };
        assert!(loss_bound(&unlimited, &shape).1.unwrap() < t);
    }

    #[test]
    fn a_target_below_what_the_unique_data_can_give_is_the_floor_s_reason() {
        // 70B on 50B unique tokens: repeats saturate at 50e9·(1 + 15.39) effective tokens,
        // and parameters past the data's optimum U_N = 2.549e9 decay to N' = 15.997e9, so
        // the floor is 2.093972 (worked in Python), far above the 1.947 of unlimited data.
        let b = data_limited(50_000_000_000, 2.0);
        let r = reason(b, "70b");
        assert!(
            r.starts_with(
                "loss: on the repeated data its floor E + A/N'^α + B/(U·(1 + R_D*))^β = 2.093972 "
            ),
            "{r}"
        );
    }
}
