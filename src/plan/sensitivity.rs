//! Sensitivity: how a graded design's days, MFU and verdict move when the inputs the model is
//! least sure of move within stated ranges, one at a time, everything else as given.
//!
//! The uncertain inputs ([`Input`]) and their ranges:
//!
//! | input | applies under | low | high | why this range |
//! |---|---|---|---|---|
//! | `--mfu` | the plate | 0.75 × the brief's | 1.25 × (at most 1) | [`MFU_FACTORS`] |
//! | `sustained` | the detailed model, a per-operation stack | 0.9 × the stack's | 1.1 × (within 0.5 – 1) | [`SUSTAINED_FACTORS`] |
//! | `--tp-overlap` | the detailed model, TP > 1 | 0 | 1 | [`OVERLAP_RANGE`] |
//! | `--pp-overlap` | the detailed model, PP > 1 | 0 | 1 | [`OVERLAP_RANGE`] |
//! | `--dp-overlap` | the detailed model, DP > 1 | 0 | 1 | [`OVERLAP_RANGE`] |
//! | `--failures-per-gpu-hour` | the detailed model | 0.5 × the brief's | 2 × | [`FAILURE_FACTORS`] |
//! | `--restart-minutes` | the detailed model | 5 | 30 (widened to hold the brief's) | [`RESTART_MINUTES`] |
//! | `batch_law_scale` | a brief with a batch law (`--batch-law`): the batch a search aims at, a plate plan's batch | 2/3 of the law's optimum | 1.5 × | [`crate::laws::batch::NEAR_OPTIMAL`] |
//! | `critical_batch_scale` | a brief that counts the critical batch (`--critical-batch`) | a third of the law's | twice | [`crate::laws::critical::RANGE`] |
//!
//! Each end is graded by [`evaluate`] itself, on a copy of the brief or of the time model's
//! options with that one value changed; nothing global moves. Under the plate, days are
//! `6·N·D / (GPUs × peak × MFU × 86,400)`, so the MFU row's days at the low end are the base
//! days × 1/0.75 exactly. Under the detailed model the MFU is the derived one, which the
//! calibration and the overlaps move and the failure figures do not (they stretch wall-clock
//! days, not the step).

use std::cmp::Ordering;

use serde::{Serialize, Serializer};

use crate::brief::Brief;
use crate::cost::chip::calibration::SUSTAINED;
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::stack::Stack;
use crate::cost::step::Step;
use crate::error::Result;
use crate::format::{fixed, general, money};
use crate::model::layout::Layout;
use crate::plan::{evaluate, Design, Plan};

/// The plate's assumed MFU, low and high, as factors of the brief's value (the high end at
/// most 1). The published runs of `data/published/runs.json` measured from 27 % (MT-NLG 530B
/// on 3,360 GPUs) to 57 % (torchtitan's Llama 2 13B) MFU, the recent large runs 41 – 53 %
/// (results/time-validation.md); a quarter either way of the default 40 % is 30 – 50 %, the
/// span a planner who has not yet measured the stack should allow.
pub const MFU_FACTORS: (f64, f64) = (0.75, 1.25);

/// The calibrated `sustained` of the plan's stack, low and high, as factors of its value
/// (clamped into [`SUSTAINED`]). With each family held out of the fit, the detailed model's
/// MFU is off by 2 to 4 points on runs of about 45 % (results/time-validation.md: up to 4.2
/// points, MaxText; 3.6, MT-NLG), 5 – 9 % of the value; a tenth either way covers every
/// held-out family's error.
pub const SUSTAINED_FACTORS: (f64, f64) = (0.9, 1.1);

/// An overlap's range: nothing hidden to everything its window allows. A stack's overlap is
/// what its software can do (Megatron-core's userbuffers, `--overlap-grad-reduce`); whether a
/// given run gets it depends on its kernels, its NCCL channels and its SMs, which the plan
/// cannot see, so the whole range is the honest one.
pub const OVERLAP_RANGE: (f64, f64) = (0.0, 1.0);

/// The failure rate, low and high, as factors of the brief's. The default is one run's rate
/// (Llama 3 405B: 419 interruptions in 54 days on 16,384 H100s, Llama Team 2024 §3.3.4); a
/// fleet's age, its cooling and the share of failures a job's watchdog catches move it, and
/// a factor of 2 either way is this tool's assumption of how far another cluster may be.
pub const FAILURE_FACTORS: (f64, f64) = (0.5, 2.0);

/// Minutes from a failure to training again, low and high (widened to include the brief's
/// own value). The default 10 is an assumption (Llama 3 reports interruptions, not what each
/// cost); 5 minutes is an automated restart from a checkpoint still in host memory, 30 a
/// restart that waits for a node to be drained and replaced and reloads from shared storage.
pub const RESTART_MINUTES: (f64, f64) = (5.0, 30.0);

/// An input whose value the plan depends on and nobody knows exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Input {
    /// The brief's assumed MFU (the plate).
    Mfu,
    /// The calibrated `sustained` of the plan's stack (the detailed model).
    Sustained,
    /// The TP communication hidden behind the layer's GEMMs.
    TpOverlap,
    /// The pipeline sends hidden behind compute.
    PpOverlap,
    /// The DP communication hidden behind compute.
    DpOverlap,
    /// Unexpected interruptions per GPU-hour.
    FailureRate,
    /// Minutes from a failure to training again.
    RestartMinutes,
    /// A factor on the critical batch's law (its loss, not its days).
    CriticalBatch,
    /// A factor on the batch law's optimum, the batch plans aim at.
    BatchLaw,
}

impl Input {
    /// Every input, in the order the module's table lists them.
    pub const ALL: [Input; 9] = [
        Input::Mfu,
        Input::Sustained,
        Input::TpOverlap,
        Input::PpOverlap,
        Input::DpOverlap,
        Input::FailureRate,
        Input::RestartMinutes,
        Input::CriticalBatch,
        Input::BatchLaw,
    ];

    /// The name a user types: the flag that sets it, or for `sustained` the calibration's
    /// field (`--calibration FILE` sets it, as `stacks.<stack>`).
    pub fn name(self) -> &'static str {
        match self {
            Input::Mfu => "--mfu",
            Input::Sustained => "sustained",
            Input::TpOverlap => "--tp-overlap",
            Input::PpOverlap => "--pp-overlap",
            Input::DpOverlap => "--dp-overlap",
            Input::FailureRate => "--failures-per-gpu-hour",
            Input::RestartMinutes => "--restart-minutes",
            Input::CriticalBatch => "critical_batch_scale",
            Input::BatchLaw => "batch_law_scale",
        }
    }

    /// `value` as the reports print it: three decimals for `sustained`, three significant
    /// figures in scientific notation for a failure rate, else as a person writes it.
    pub fn show(self, value: f64) -> String {
        match self {
            Input::Sustained | Input::CriticalBatch | Input::BatchLaw => fixed(value, 3),
            Input::FailureRate if value != 0.0 => format!("{value:.2e}"),
            _ => general(value),
        }
    }

    /// The inputs that apply under `time` with the design's `stack` (the detailed memory
    /// model's; `None` under the plate's): the plate's MFU alone, or the detailed model's
    /// others (`sustained` for a stack costed by operation, not the eager stack's curve).
    pub fn applying(time: &TimeModel, stack: Option<Stack>) -> Vec<Input> {
        match time {
            TimeModel::Plate => vec![Input::Mfu],
            TimeModel::Detailed(_) => Input::ALL
                .into_iter()
                .filter(|&i| !matches!(i, Input::Mfu | Input::CriticalBatch | Input::BatchLaw))
                .filter(|&i| {
                    i != Input::Sustained || stack.is_none_or(|s| s.settings().per_operation)
                })
                .collect(),
        }
    }

    /// Why this input cannot move a design of `layout` and `step` on `stack`, if it cannot: an
    /// overlap of a communication the layout does not have or the step does not overlap, or
    /// `sustained` on a stack at the eager curve.
    pub fn idle(
        self,
        layout: &Layout,
        step: Option<&Step>,
        stack: Option<Stack>,
    ) -> Option<&'static str> {
        match self {
            Input::Sustained if stack.is_some_and(|s| !s.settings().per_operation) => {
                Some("the eager stack's compute follows its efficiency curve, which the calibration does not scale")
            }
            Input::TpOverlap if layout.tp == 1 => Some("TP 1 has no TP collectives"),
            Input::TpOverlap if step.is_some_and(|s| !s.tp_comm_overlap) => {
                Some("the step does not overlap TP communication (--tp-comm-overlap off)")
            }
            Input::PpOverlap if layout.pp == 1 => Some("PP 1 sends nothing between stages"),
            Input::BatchLaw if step.is_some() => {
                Some("the plan's step fixes its global batch; a search aims at the law's batch anew")
            }
            Input::DpOverlap if layout.dp == 1 => Some("DP 1 has no DP collectives"),
            _ => None,
        }
    }

    /// The input's value in `brief` and `time` for `stack` (0 for an input the time model
    /// does not have).
    pub fn base(self, brief: &Brief, time: &TimeModel, stack: Option<Stack>) -> f64 {
        let opts = match time {
            TimeModel::Detailed(opts) => Some(opts),
            TimeModel::Plate => None,
        };
        match (self, opts) {
            (Input::Mfu, _) => brief.mfu,
            (Input::CriticalBatch, _) => brief.critical_batch_scale,
            (Input::BatchLaw, _) => brief.batch_law_scale,
            (_, None) => 0.0,
            (Input::Sustained, Some(o)) => o.calibration.sustained_for(stack.unwrap_or_default()),
            (Input::TpOverlap, Some(o)) => o.tp_overlap,
            (Input::PpOverlap, Some(o)) => o.pp_overlap,
            (Input::DpOverlap, Some(o)) => o.dp_overlap,
            (Input::FailureRate, Some(_)) => brief.reliability.failures_per_gpu_hour,
            (Input::RestartMinutes, Some(_)) => brief.reliability.restart_minutes,
        }
    }

    /// The inputs of the brief's laws that have a range: the critical batch where the brief
    /// counts it, the batch law's optimum where it names one.
    pub fn of_laws(brief: &Brief) -> impl Iterator<Item = Input> {
        [
            (!brief.critical_batch.is_off()).then_some(Input::CriticalBatch),
            (!brief.batch_law.is_fixed()).then_some(Input::BatchLaw),
        ]
        .into_iter()
        .flatten()
    }

    /// The range's ends for a base value `base` (module docs; each constant says why).
    pub fn range(self, base: f64) -> (f64, f64) {
        match self {
            Input::Mfu => (base * MFU_FACTORS.0, (base * MFU_FACTORS.1).min(1.0)),
            Input::Sustained => (
                (base * SUSTAINED_FACTORS.0).max(SUSTAINED.0),
                (base * SUSTAINED_FACTORS.1).min(SUSTAINED.1),
            ),
            Input::TpOverlap | Input::PpOverlap | Input::DpOverlap => OVERLAP_RANGE,
            Input::FailureRate => (base * FAILURE_FACTORS.0, base * FAILURE_FACTORS.1),
            Input::RestartMinutes => (RESTART_MINUTES.0.min(base), RESTART_MINUTES.1.max(base)),
            Input::CriticalBatch => (
                base * crate::laws::critical::RANGE.0,
                base * crate::laws::critical::RANGE.1,
            ),
            Input::BatchLaw => (
                base * crate::laws::batch::NEAR_OPTIMAL.0,
                base * crate::laws::batch::NEAR_OPTIMAL.1,
            ),
        }
    }

    /// Copies of `brief` and `time` with this input at `value` (for `sustained`, `stack`'s
    /// own calibrated value), everything else as it was.
    pub fn moved(
        self,
        brief: &Brief,
        time: &TimeModel,
        stack: Option<Stack>,
        value: f64,
    ) -> (Brief, TimeModel) {
        let mut brief = brief.clone();
        let mut time = time.clone();
        match (&mut time, self) {
            (_, Input::Mfu) => brief.mfu = value,
            (_, Input::FailureRate) => brief.reliability.failures_per_gpu_hour = value,
            (_, Input::RestartMinutes) => brief.reliability.restart_minutes = value,
            (_, Input::CriticalBatch) => brief.critical_batch_scale = value,
            (_, Input::BatchLaw) => brief.batch_law_scale = value,
            (TimeModel::Plate, _) => {}
            (TimeModel::Detailed(opts), Input::Sustained) => {
                opts.calibration
                    .stacks
                    .set(stack.unwrap_or_default(), value);
            }
            (TimeModel::Detailed(opts), Input::TpOverlap) => opts.tp_overlap = value,
            (TimeModel::Detailed(opts), Input::PpOverlap) => opts.pp_overlap = value,
            (TimeModel::Detailed(opts), Input::DpOverlap) => opts.dp_overlap = value,
        }
        (brief, time)
    }
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Input {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The stack of a design's memory model (`None` under the plate's).
pub fn stack_of(memory: &MemoryModel) -> Option<Stack> {
    match memory {
        MemoryModel::Plate => None,
        MemoryModel::Detailed(d) => Some(d.options.stack),
    }
}

/// A design graded with the inputs at one setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Days the run takes (`null` when it never ends: failures come faster than a checkpoint
    /// interval and a restart).
    pub days: Option<f64>,
    /// MFU: derived from the step under the detailed time model, the brief's assumed one under
    /// the plate (`null` when the run could not be graded).
    pub mfu: Option<f64>,
    /// The predicted loss (`null` when the run could not be graded).
    pub loss: Option<f64>,
    /// Whether every check passes.
    pub pass: bool,
    /// The checks that fail: `memory`, `days`, `loss`, `cost`.
    pub failing: Vec<&'static str>,
    /// Why the design could not be graded at this setting, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Point {
    /// The point of a grade: the plan under `brief`, or the error that stopped it.
    fn of(brief: &Brief, graded: Result<Plan>) -> Point {
        match graded {
            Ok(p) => {
                let failing = [
                    ("memory", p.checks.memory),
                    ("days", p.checks.days),
                    ("loss", p.checks.loss),
                    ("cost", p.checks.cost != Some(false)),
                ]
                .into_iter()
                .filter(|&(_, ok)| !ok)
                .map(|(name, _)| name)
                .collect();
                Point {
                    days: Some(p.days),
                    mfu: Some(p.mfu.unwrap_or(brief.mfu)),
                    loss: Some(p.loss),
                    pass: p.pass,
                    failing,
                    error: None,
                }
            }
            Err(e) => Point {
                days: None,
                mfu: None,
                loss: None,
                pass: false,
                failing: vec!["days"],
                error: Some(e.to_string()),
            },
        }
    }
}

/// One input at the two ends of its range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The input, by the name a user types (`--dp-overlap`, `sustained`).
    pub input: Input,
    /// Its value in the brief and time model as given.
    pub base: f64,
    /// The low end of its range.
    pub low: f64,
    /// The high end of its range.
    pub high: f64,
    /// The design graded with the input at `low`.
    pub at_low: Point,
    /// The design graded with the input at `high`.
    pub at_high: Point,
    /// `|days at high − days at low|` (`null` when an end never ends).
    pub swing_days: Option<f64>,
}

impl Row {
    /// The ends, low first: (value, point).
    pub fn ends(&self) -> [(f64, &Point); 2] {
        [(self.low, &self.at_low), (self.high, &self.at_high)]
    }
}

/// An input left out because it cannot move this design.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unmoved {
    /// The input.
    pub input: Input,
    /// Why it cannot move the design.
    pub why: &'static str,
}

/// A design's sensitivity to its uncertain inputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    /// The stack whose calibrated `sustained` the `sustained` row moves (`null` under the
    /// plate's memory model).
    pub stack: Option<Stack>,
    /// The design as given.
    pub base: Point,
    /// One row per input that applies, largest swing in days first (an end that never ends
    /// swings most), ties by name.
    pub rows: Vec<Row>,
    /// Inputs of the time model that cannot move this design, and why.
    pub unmoved: Vec<Unmoved>,
    /// One sentence for each end of a range where the verdict differs from the base's, in
    /// the rows' order; empty when none does.
    pub flips: Vec<String>,
}

/// Which end of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    /// The low end.
    Low,
    /// The high end.
    High,
}

/// A search run again with one input at one end of its range, whose first plan is not the
/// first plan as given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankChange {
    /// The input moved.
    pub input: Input,
    /// Which end of its range.
    pub end: End,
    /// Its value there.
    pub value: f64,
    /// The plan that then ranks first (`null`: no plan passes).
    pub first: Option<Plan>,
    /// Whether that plan is the first plan's shape, layout and step on other tokens (its
    /// window moved with the days), rather than another design.
    pub same_layout: bool,
}

/// A search's sensitivity: its first plan graded again at each end of each range, and the
/// searches run again there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchSensitivity {
    /// The first plan's sensitivity (`null` when no plan passes).
    pub plan: Option<Sensitivity>,
    /// The inputs of the search's time model, each moved to both ends of its range and the
    /// whole search run again (an end at the base value is the search as given, not run).
    pub inputs: Vec<Input>,
    /// Searches run again.
    pub searches: u64,
    /// Each end of a range where another plan (or none) would rank first, in `inputs`'
    /// order, low before high; empty when the first plan stays first everywhere.
    pub changes: Vec<RankChange>,
}

/// Whether two plans are the same design: shape, tokens, layout, step and memory model (their
/// grades may differ).
pub fn same_design(a: &Plan, b: &Plan) -> bool {
    a.tokens == b.tokens && same_layout(a, b)
}

/// Whether two plans are the same shape, layout, step and memory model, on any tokens.
pub fn same_layout(a: &Plan, b: &Plan) -> bool {
    a.model == b.model
        && a.params == b.params
        && a.layout == b.layout
        && a.step == b.step
        && a.memory_model == b.memory_model
}

/// `design` graded again with each uncertain input that applies at the low and at the high
/// end of its range, the others as given; an error only if the design itself cannot be
/// graded (as [`evaluate`] says).
pub fn sensitivity(brief: &Brief, design: &Design) -> Result<Sensitivity> {
    let base = Point::of(brief, Ok(evaluate(brief, design)?));
    let stack = stack_of(&design.memory);
    let mut rows = Vec::new();
    let mut unmoved = Vec::new();
    // Every input of the time model and of the brief's laws, so that one this design cannot
    // move is named with why. The law's batch moves a plate plan's batch, which counts only
    // past the critical batch; a detailed plan's step fixes its own (listed as unmoved).
    let mut inputs = Input::applying(design.time, None);
    let law_moves = design.memory.step().is_some() || !brief.critical_batch.is_off();
    inputs.extend(Input::of_laws(brief).filter(|&i| i != Input::BatchLaw || law_moves));
    for input in inputs {
        if let Some(why) = input.idle(&design.layout, design.memory.step(), stack) {
            unmoved.push(Unmoved { input, why });
            continue;
        }
        let value = input.base(brief, design.time, stack);
        let (low, high) = input.range(value);
        let at = |v: f64| {
            let (b, time) = input.moved(brief, design.time, stack, v);
            let moved = Design {
                time: &time,
                ..*design
            };
            Point::of(&b, evaluate(&b, &moved))
        };
        let (at_low, at_high) = (at(low), at(high));
        let swing_days = match (at_low.days, at_high.days) {
            (Some(a), Some(b)) => Some((b - a).abs()),
            _ => None,
        };
        rows.push(Row {
            input,
            base: value,
            low,
            high,
            at_low,
            at_high,
            swing_days,
        });
    }
    rows.sort_by(|a, b| by_swing(a.swing_days, b.swing_days).then(a.input.cmp(&b.input)));
    let flips = flips(brief, &base, &rows);
    Ok(Sensitivity {
        stack,
        base,
        rows,
        unmoved,
        flips,
    })
}

/// Larger swings first, a run that never ends (`None`) the largest.
fn by_swing(a: Option<f64>, b: Option<f64>) -> Ordering {
    let key = |x: Option<f64>| x.unwrap_or(f64::INFINITY);
    key(b).total_cmp(&key(a))
}

/// A sentence for each end whose verdict is not the base's.
fn flips(brief: &Brief, base: &Point, rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    for row in rows {
        for (value, point) in row.ends() {
            if point.pass == base.pass {
                continue;
            }
            let setting = format!("{} {}", row.input, row.input.show(value));
            out.push(match (point.days, &point.error) {
                (None, Some(e)) => format!("the plan never ends with {setting}: {e}"),
                (days, _) => {
                    let days = days.map_or("?".into(), |d| fixed(d, 1));
                    if point.pass {
                        format!("the plan passes with {setting}: {days} days")
                    } else if let (["loss"], Some(loss)) = (point.failing.as_slice(), point.loss) {
                        format!(
                            "the plan fails with {setting}: loss {}, above the {} target",
                            fixed(loss, 4),
                            brief.loss_target
                        )
                    } else if point.failing == ["days"] {
                        format!(
                            "the plan fails with {setting}: {days} days, over the {}-day limit",
                            general(brief.max_days)
                        )
                    } else if let (["cost"], Some(limit)) =
                        (point.failing.as_slice(), brief.max_cost)
                    {
                        format!(
                            "the plan fails with {setting}: {days} days, over the {} cost limit",
                            money(limit)
                        )
                    } else {
                        format!(
                            "the plan fails with {setting}: {days} days ({} fail)",
                            point.failing.join(", ")
                        )
                    }
                }
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::chip::calibration::Calibration;
    use crate::cost::step::detailed::{Detailed, Options};
    use crate::cost::step::Step;
    use crate::cost::step_time::options::TimeOptions;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    fn plate(model: &str, tokens: u64, tp: u64, pp: u64, zero: u8) -> Sensitivity {
        let b = Brief::default();
        let shape = preset(model).unwrap();
        let layout = Layout::new(&b, &shape, tp, pp, ZeroStage::new(zero).unwrap()).unwrap();
        sensitivity(&b, &Design::plate(&shape, tokens, layout)).unwrap()
    }

    fn detailed(b: &Brief, model: &str, tokens: u64, tp: u64, pp: u64, zero: u8) -> Sensitivity {
        let shape = preset(model).unwrap();
        let layout = Layout::new(b, &shape, tp, pp, ZeroStage::new(zero).unwrap()).unwrap();
        let step =
            Step::default_for(&layout, b.seq_len, &b.batch_target(), Stack::default()).unwrap();
        let time = TimeModel::Detailed(TimeOptions::default());
        let design = Design {
            shape: &shape,
            tokens,
            layout,
            memory: MemoryModel::Detailed(Detailed {
                step,
                options: Options::default(),
            }),
            time: &time,
        };
        sensitivity(b, &design).unwrap()
    }

    #[test]
    fn under_the_plate_only_the_mfu_moves_and_days_scale_as_its_inverse() {
        // 70B on 4.96 T tokens at 40 % MFU: 29.99 days (the README's plan). At 0.75 × 40 % =
        // 30 % MFU the same FLOPs take 1/0.75 as long, 39.99 days, and fail the 30-day limit;
        // at 1.25 × = 50 % they take 1/1.25 as long, 23.99 days.
        let s = plate("70b", 4_960_000_000_000, 8, 1, 3);
        assert_eq!(s.rows.len(), 1);
        let row = &s.rows[0];
        assert_eq!(row.input, Input::Mfu);
        assert_eq!((row.base, row.low, row.high), (0.4, 0.4 * 0.75, 0.4 * 1.25));
        let base = s.base.days.unwrap();
        let (low, high) = (row.at_low.days.unwrap(), row.at_high.days.unwrap());
        assert!((low / base - 1.0 / 0.75).abs() < 1e-12, "{low} {base}");
        assert!((high / base - 1.0 / 1.25).abs() < 1e-12, "{high} {base}");
        assert_eq!(row.at_low.mfu, Some(0.4 * 0.75));
        assert!(s.base.pass && !row.at_low.pass && row.at_high.pass);
        assert_eq!(row.at_low.failing, ["days"]);
        assert_eq!(
            s.flips,
            ["the plan fails with --mfu 0.3: 40.0 days, over the 30-day limit"]
        );
        assert!(s.unmoved.is_empty());
    }

    #[test]
    fn the_plate_s_mfu_never_rises_past_one() {
        assert_eq!(Input::Mfu.range(0.9), (0.9 * 0.75, 1.0));
        // sustained stays within its bounds, restarts widen to hold the brief's value.
        assert_eq!(Input::Sustained.range(0.95).1, 1.0);
        assert_eq!(Input::Sustained.range(0.52).0, 0.5);
        assert_eq!(Input::RestartMinutes.range(60.0), (5.0, 60.0));
    }

    #[test]
    fn a_detailed_plan_without_dp_overlap_takes_at_least_as_long() {
        // The README's detailed 405B plan: TP 2, PP 1, DP 1,024, ZeRO 3 on 2,048 GPUs.
        let b = Brief::default();
        let s = detailed(&b, "405b", 800_000_000_000, 2, 1, 3);
        let names: Vec<&str> = s.rows.iter().map(|r| r.input.name()).collect();
        assert!(!names.contains(&"--mfu") && !names.contains(&"--pp-overlap"));
        assert_eq!(s.unmoved.len(), 1);
        assert_eq!(s.unmoved[0].input, Input::PpOverlap);
        let dp = s.rows.iter().find(|r| r.input == Input::DpOverlap).unwrap();
        assert_eq!((dp.low, dp.high, dp.base), (0.0, 1.0, 1.0));
        let base = s.base.days.unwrap();
        assert!(dp.at_low.days.unwrap() >= base);
        assert_eq!(dp.at_high.days, s.base.days);
        // Less hidden communication, a lower derived MFU.
        assert!(dp.at_low.mfu.unwrap() <= s.base.mfu.unwrap());
        // Failures stretch the days but not the step: the MFU stays.
        let f = s
            .rows
            .iter()
            .find(|r| r.input == Input::FailureRate)
            .unwrap();
        assert_eq!(f.at_high.mfu, s.base.mfu);
        assert!(f.at_high.days.unwrap() > base && f.at_low.days.unwrap() < base);
        // A lower sustained, slower compute.
        let c = s.rows.iter().find(|r| r.input == Input::Sustained).unwrap();
        let shipped = Calibration::default().sustained_for(Stack::MegatronTe);
        assert!((c.low - shipped * 0.9).abs() < 1e-12 && (c.high - shipped * 1.1).abs() < 1e-12);
        assert!(c.at_low.days.unwrap() > base && c.at_high.days.unwrap() < base);
    }

    #[test]
    fn rows_are_sorted_by_swing_largest_first_then_by_name() {
        let s = detailed(&Brief::default(), "70b", 4_000_000_000_000, 8, 4, 1);
        assert_eq!(s.rows.len(), 6);
        for pair in s.rows.windows(2) {
            let (a, b) = (pair[0].swing_days.unwrap(), pair[1].swing_days.unwrap());
            assert!(
                a > b || (a == b && pair[0].input < pair[1].input),
                "{a} {b}"
            );
        }
        assert_eq!(by_swing(None, Some(1e9)), Ordering::Less);
    }

    #[test]
    fn a_run_that_never_ends_at_an_end_is_a_result_not_an_error() {
        // 70B on 2,048 GPUs failing every 1,000 s at base (1.8e-3 a GPU-hour): Young's interval
        // √(2 · 3.95 s · 1,000 s) = 89 s, so each failure costs 44 s + a 600-s restart, 64 % of
        // the time between failures. At twice the rate, 500 s apart, a failure costs more than
        // the time between two: the run never ends.
        let mut b = Brief::default();
        b.reliability.failures_per_gpu_hour = 3600.0 / (1000.0 * 2048.0);
        let s = detailed(&b, "70b", 4_000_000_000_000, 8, 1, 3);
        let first = &s.rows[0];
        assert_eq!(first.input, Input::FailureRate);
        assert_eq!((first.at_high.days, first.swing_days), (None, None));
        assert!(first.at_low.days.is_some() && !first.at_high.pass);
        let e = first.at_high.error.as_deref().unwrap();
        assert!(e.contains("never ends"), "{e}");
    }

    #[test]
    fn the_eager_stack_has_no_sustained_to_move() {
        let inputs = Input::applying(
            &TimeModel::Detailed(TimeOptions::default()),
            Some(Stack::Eager),
        );
        assert!(!inputs.contains(&Input::Sustained) && inputs.contains(&Input::DpOverlap));
        assert_eq!(Input::applying(&TimeModel::Plate, None), [Input::Mfu]);
        // A design on it names sustained as an input it cannot move.
        let b = Brief::default();
        let shape = preset("8b").unwrap();
        let layout = Layout::new(&b, &shape, 1, 1, ZeroStage::new(1).unwrap()).unwrap();
        let time = TimeModel::Detailed(TimeOptions::for_stack(Stack::Eager));
        let design = Design {
            shape: &shape,
            tokens: 1_000_000_000_000,
            layout,
            memory: MemoryModel::Detailed(Detailed {
                step: Step::default_for(&layout, b.seq_len, &b.batch_target(), Stack::Eager)
                    .unwrap(),
                options: Options::for_stack(Stack::Eager),
            }),
            time: &time,
        };
        let s = sensitivity(&b, &design).unwrap();
        assert!(s.unmoved.iter().any(|u| u.input == Input::Sustained));
        assert!(s.rows.iter().all(|r| r.input != Input::Sustained));
    }
}
