//! **The plan part**: one design graded against a brief ([`evaluate`]), the verdict on a whole
//! shape ([`verdict`]: its token window and lightest layout) and what would fix a failing
//! design ([`check`]). Uses `brief`, `cost`, `model` and the ground floor.
//!
//! A design (shape, tokens, layout) graded against a brief: the plan, with its three checks (and
//! a fourth, cost, when the brief sets a limit).
//!
//! A plan that fails is a normal result: `pass` is false and `reasons` says which check failed
//! and by how much. The checks (SPEC.md §1) are:
//!
//! | check | passes when |
//! |---|---|
//! | memory | per-GPU memory ≤ the brief's cap |
//! | days | days by 6ND ≤ the brief's limit |
//! | loss | predicted loss ≤ the brief's target |
//! | cost | GPU-hours × price ≤ the brief's `max_cost` (only when the brief sets one) |

pub mod batch;
pub mod calibrate;
pub mod check;
pub mod command;
pub mod limits;
pub mod pace;
pub mod runnable;
pub mod sensitivity;
pub mod verdict;

use serde::{Deserialize, Serialize};

use crate::brief::Brief;
use crate::cost::memory::{MemoryGb, MemoryModel, StageInfo};
use crate::cost::run::plate as time;
use crate::cost::run::reliability::Outage;
use crate::cost::run::spend::Spent;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::Options;
use crate::cost::step::stack::Stack;
use crate::cost::step::Step;
use crate::cost::step_time::micro_batch::MicroBatchCache;
use crate::cost::step_time::Breakdown;
use crate::error::Result;
use crate::format::{fixed, money};
use crate::model::layout::Layout;
use crate::model::{Architecture, Shape};
use crate::plan::limits::{cost_fits, days_fit, law_size, loss_meets, memory_fits, spent};
use crate::plan::pace::Pace;
use crate::plan::runnable::Runnable;

/// What to grade: a model shape trained on a whole number of tokens under a layout.
#[derive(Debug, Clone, Copy)]
pub struct Design<'a> {
    /// The model.
    pub shape: &'a Shape,
    /// Training tokens D.
    pub tokens: u64,
    /// The parallel layout, valid for `shape` on the brief's cluster.
    pub layout: Layout,
    /// How memory is computed (and, for the detailed model, the training step).
    pub memory: MemoryModel,
    /// How days are computed.
    pub time: &'a TimeModel,
}

/// The plate's time model, for designs that do not choose another.
pub static PLATE_TIME: TimeModel = TimeModel::Plate;

impl<'a> Design<'a> {
    /// A design graded by the plate model.
    pub fn plate(shape: &'a Shape, tokens: u64, layout: Layout) -> Self {
        Design {
            shape,
            tokens,
            layout,
            memory: MemoryModel::Plate,
            time: &PLATE_TIME,
        }
    }
}

/// Which checks a plan passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checks {
    /// Per-GPU memory within the cap.
    pub memory: bool,
    /// Training days within the limit.
    pub days: bool,
    /// Predicted loss at or below the target.
    pub loss: bool,
    /// Cost within the brief's limit (only when it sets one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<bool>,
}

impl Checks {
    /// Whether every check passes.
    pub fn all(&self) -> bool {
        self.memory && self.days && self.loss && self.cost != Some(false)
    }
}

/// How far each check is from its limit; positive is headroom, negative is the shortfall.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Margins {
    /// Memory cap minus per-GPU memory, GB.
    pub memory_gb: f64,
    /// Day limit minus days.
    pub days: f64,
    /// Loss target minus predicted loss.
    pub loss: f64,
    /// Cost limit minus cost (only when the brief sets a limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// A graded design: the plan object of the JSON contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The model's name, for example `llama3-70b`.
    pub model: String,
    /// Parameters N, counted from the shape.
    pub params: u64,
    /// Parameters one token goes through, `N_active` (a mixture of experts' `k` routed
    /// experts, not all `E`), which the days, the FLOPs and MFU count; absent for a dense model,
    /// where it is N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_params: Option<u64>,
    /// The multi-token-prediction modules' parameters
    /// ([`crate::model::Shape::mtp_params`]), trained beside
    /// the model and not in `params`; absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtp_params: Option<u64>,
    /// The model's RoPE, norm ε and attention window, for a launcher (left out when they
    /// are Llama 3's).
    #[serde(default, skip_serializing_if = "Architecture::is_default")]
    pub architecture: Architecture,
    /// Training tokens D.
    pub tokens: u64,
    /// TP, PP, DP and ZeRO stage.
    pub layout: Layout,
    /// The training step (detailed memory model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// Per-GPU memory by component, GB.
    pub memory_gb: MemoryGb,
    /// The pipeline stage `memory_gb` is for, the one that needs the most (detailed model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_stage: Option<StageInfo>,
    /// The detailed memory model's settings (detailed model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_model: Option<Options>,
    /// Training FLOPs, 6·N·D.
    pub flops: f64,
    /// Training and inference FLOPs over the model's life, when the brief says how many
    /// tokens it will serve (`inference_tokens`: `2·N·D_inf`, Sardana et al. 2024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<crate::laws::Lifetime>,
    /// Days the run takes: by 6ND at the brief's MFU, or under the detailed time model the
    /// wall-clock days with failures and restarts.
    pub days: f64,
    /// Days by 6ND at the brief's assumed MFU (detailed time model only, to compare).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub days_plate: Option<f64>,
    /// Days of compute at the derived pace, before failures (detailed time model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_days: Option<f64>,
    /// Seconds per training step (detailed time model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_seconds: Option<f64>,
    /// Tokens per second over the cluster (detailed time model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_second: Option<f64>,
    /// Derived model FLOPs utilisation, `(6·N_matrix + 6·L·s·h) × tokens/s / (GPUs × peak)` (detailed
    /// time model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mfu: Option<f64>,
    /// Hardware FLOPs utilisation, recomputation included (detailed time model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hfu: Option<f64>,
    /// Seconds per step by where they go (detailed time model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<Breakdown>,
    /// Checkpoints, failures and goodput over the run (detailed time model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<Outage>,
    /// GPU-hours, cost, energy and emissions of the run's days (when the brief has a price or
    /// a power).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<Spent>,
    /// Predicted loss L(N, D) (at the effective tokens and parameters, `data`, when the law
    /// values repeats).
    pub loss: f64,
    /// What the plan's global batch costs past the critical batch, when the brief counts it
    /// (`--critical-batch`): the tokens that count toward its loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_batch: Option<BatchCost>,
    /// The epochs the tokens make of the brief's unique tokens and what the law grades them
    /// as, when the brief's law values repeats (Muennighoff et al. 2023).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataUse>,
    /// Which checks pass.
    pub checks: Checks,
    /// Headroom (positive) or shortfall (negative) of each check.
    pub margins: Margins,
    /// Whether every check passes.
    pub pass: bool,
    /// Why the plan fails, one sentence per failing check; empty when it passes.
    pub reasons: Vec<String>,
    /// A plate plan graded again by the detailed model (default stack and step): how it
    /// would run, and the key that ranks it first or last among the plans the plate grades
    /// equal (plate plans only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runnable: Option<Runnable>,
    /// Under the detailed time model, the kernel figures the step was timed on where some of
    /// them are not measured on this GPU ([`kernel_figures`]); absent where all are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_figures: Option<KernelFigures>,
}

/// The kernel figures a detailed step was timed on, where some were not measured on the
/// brief's GPU: which chip's, and which of its figures were derived, by which rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelFigures {
    /// The preset whose figures they are: the chip found for the brief
    /// ([`crate::cost::chip::Chip::on`]), or under the eager stack the H200 its curve was
    /// measured on.
    pub chip: String,
    /// What was derived rather than measured, one phrase each, with its rule.
    pub derived: Vec<String>,
}

/// What the detailed time model's step under `stack` on `brief`'s GPU rests on that was not
/// measured there, or `None` where everything was: for a stack costed by operation, the
/// chip's derived figures ([`crate::cost::chip::Chip::derived_figures`]); for the eager
/// stack, its curve, measured on an H200 (`data/calibration/`) and taken as a fraction of
/// peak elsewhere — on the H100 SXM and H800, the H200's die and clocks, as its own.
pub fn kernel_figures(brief: &Brief, stack: Stack) -> Option<KernelFigures> {
    let machine = brief.machine();
    let chip = crate::cost::chip::Chip::on(&machine);
    if stack.settings().per_operation {
        let chip = chip?;
        let derived = chip.derived_figures();
        return (!derived.is_empty()).then(|| KernelFigures {
            chip: chip.name.to_string(),
            derived,
        });
    }
    let name = chip.map(|c| c.name);
    if matches!(name, Some("h200" | "h100-sxm" | "h800")) {
        return None;
    }
    let here = name.map_or_else(
        || format!("a GPU of {} TFLOP/s", machine.peak_tflops),
        |n| format!("the {n}"),
    );
    Some(KernelFigures {
        chip: "h200".to_string(),
        derived: vec![format!(
            "the eager curve: measured on an H200 (data/calibration), not on {here}; its \
             fractions of peak are taken as this GPU's"
        )],
    })
}

/// What a plan's global batch costs past the critical batch (McCandlish et al. 2018,
/// [`crate::laws::critical`]): a run of `D` tokens at a batch of `B` reaches the loss of the
/// `x` tokens with `x·(1 + B/B_crit(x)) = D`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchCost {
    /// The law of the critical batch (`zhang`).
    pub law: crate::laws::CriticalBatch,
    /// The plan's global batch, tokens (its step's; a plate plan's, the batch it aims at).
    pub batch_tokens: f64,
    /// The critical batch at the tokens that count, `B_crit(x)`.
    pub critical_tokens: f64,
    /// `x`, the tokens that count toward the loss.
    pub effective_tokens: f64,
    /// `D/x − 1 = B/B_crit(x)`: how many more tokens than the loss law's the run trains.
    pub extra: f64,
    /// Where the run is beyond the runs the law was fitted on, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extrapolation: Option<String>,
}

impl BatchCost {
    /// The cost of a plan of `shape` on `tokens` on `memory`'s step under `brief`, `None` when
    /// the brief does not count the critical batch.
    pub fn of(
        brief: &Brief,
        shape: &Shape,
        tokens: u64,
        memory: &MemoryModel,
    ) -> Option<BatchCost> {
        let law = brief.critical_batch;
        if law.is_off() {
            return None;
        }
        let batch = limits::plan_batch_tokens(brief, shape, tokens, memory);
        let x = brief.batch_effective_tokens(tokens as f64, batch);
        let critical = law.critical_tokens(x, brief.critical_batch_scale)?;
        Some(BatchCost {
            law,
            batch_tokens: batch,
            critical_tokens: critical,
            effective_tokens: x,
            extra: batch / critical,
            extrapolation: law.extrapolation(x),
        })
    }
}

/// What a plan's tokens and parameters are worth under a law that values repeats
/// ([`crate::laws::LossLaw::effective`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DataUse {
    /// Passes over the unique tokens, `D / U` (1 or less: nothing repeated).
    pub epochs: f64,
    /// `D'`, the tokens the law grades.
    pub effective_tokens: f64,
    /// `N'`, the parameters the law grades.
    pub effective_params: f64,
}

/// Grades `design` against `brief`. An error means the design's training step does not go with
/// its layout (for example a global batch that does not divide); a design that merely fails a
/// check is a plan with `pass` false.
pub fn evaluate(brief: &Brief, design: &Design) -> Result<Plan> {
    evaluate_graded(brief, design, &|| {
        runnable::detailed_grade(brief, design.shape, &design.layout).map_err(|e| e.to_string())
    })
}

/// [`evaluate`], with a plate plan's detailed grade (its `runnable`) from `grade`, which a
/// caller grading many token counts of one layout may answer from what it has kept.
pub fn evaluate_graded(
    brief: &Brief,
    design: &Design,
    grade: &dyn Fn() -> std::result::Result<runnable::DetailedGrade, String>,
) -> Result<Plan> {
    evaluate_cached(brief, design, grade, None)
}

/// [`evaluate_graded`], each micro-batch's compute from `cache` when given (one for the design's
/// shape, machine and time options: [`TimeModel::run_time_cached`]), for a caller grading many
/// designs of one shape; the same plan.
pub fn evaluate_cached(
    brief: &Brief,
    design: &Design,
    grade: &dyn Fn() -> std::result::Result<runnable::DetailedGrade, String>,
    cache: Option<&mut MicroBatchCache>,
) -> Result<Plan> {
    let shape = design.shape;
    let n = shape.params();
    // What a token goes through: the plate's 6·N·D counts it (N for a dense model).
    let n_active = shape.active_params();
    let d = design.tokens;
    if let Some(step) = design.memory.step() {
        step.precision
            .supported_on(crate::cost::chip::formats(&brief.machine()))?;
    }
    let mem = design.memory.memory(brief.seq_len, shape, &design.layout)?;
    let plate_days = time::days(brief.cluster_flops_per_second(), n_active as f64, d as f64);
    let run = design.time.run_time_cached(
        &brief.machine(),
        shape,
        &design.layout,
        &design.memory,
        d,
        cache,
    )?;
    let days = Pace::from_days_per_token(run.map(|r| r.days_per_token)).days(plate_days, d);
    let critical_batch = BatchCost::of(brief, shape, d, &design.memory);
    // The tokens that count toward the loss: all of them, or those the batch makes count.
    let counted = critical_batch
        .as_ref()
        .map_or(d as f64, |c| c.effective_tokens);
    let loss = brief.loss(law_size(shape), counted);
    let spend = spent(brief, &design.layout, days);
    let checks = Checks {
        memory: memory_fits(brief, mem.total()),
        days: days_fit(brief, days),
        loss: loss_meets(brief, loss),
        cost: cost_fits(brief, spend.and_then(|s| s.cost)),
    };
    let memory_gb = mem.in_gb();
    let margins = Margins {
        memory_gb: brief.memory_cap_gb - memory_gb.total,
        days: brief.max_days - days,
        loss: brief.loss_target - loss,
        cost: brief
            .max_cost
            .zip(spend.and_then(|s| s.cost))
            .map(|(limit, c)| limit - c),
    };
    let mut reasons = Vec::new();
    if !checks.memory {
        reasons.push(format!(
            "memory: {} GB per GPU exceeds the {} GB cap by {} GB",
            fixed(memory_gb.total, 1),
            fixed(brief.memory_cap_gb, 1),
            fixed(-margins.memory_gb, 1)
        ));
    }
    if !checks.days {
        reasons.push(format!(
            "days: {} days exceed the {}-day limit by {} days",
            fixed(days, 1),
            fixed(brief.max_days, 1),
            fixed(-margins.days, 1)
        ));
    }
    if !checks.loss {
        reasons.push(format!(
            "loss: {} is above the {} target by {}",
            fixed(loss, 4),
            brief.loss_target,
            fixed(-margins.loss, 4)
        ));
    }
    if let (Some(false), Some(limit), Some(short)) = (checks.cost, brief.max_cost, margins.cost) {
        reasons.push(format!(
            "cost: {} exceeds the {} limit by {}",
            money(limit - short),
            money(limit),
            money(-short)
        ));
    }
    Ok(Plan {
        model: shape.name.clone(),
        params: n,
        active_params: (n_active != n).then_some(n_active),
        mtp_params: (shape.mtp > 0).then(|| shape.mtp_params()),
        architecture: shape.architecture.clone(),
        tokens: d,
        layout: design.layout,
        step: design.memory.step().copied(),
        memory_gb,
        worst_stage: mem.detail.map(|detail| detail.stage),
        memory_model: match design.memory {
            MemoryModel::Plate => None,
            MemoryModel::Detailed(d) => Some(d.options),
        },
        flops: time::training_flops(n_active as f64, d as f64),
        lifetime: brief.lifetime(n_active as f64, d as f64),
        days,
        days_plate: run.map(|_| plate_days),
        compute_days: run.map(|r| r.compute_days),
        step_seconds: run.map(|r| r.step.step_seconds),
        tokens_per_second: run.map(|r| r.step.tokens_per_second),
        mfu: run.map(|r| r.step.mfu),
        hfu: run.map(|r| r.step.hfu),
        breakdown: run.map(|r| r.step.breakdown),
        failures: run.map(|r| r.outage),
        spend,
        loss,
        critical_batch,
        // The epochs are of the tokens trained; what the law grades, of those that count.
        data: brief.effective(law_size(shape), counted).map(|e| DataUse {
            epochs: brief
                .effective(law_size(shape), d as f64)
                .map_or(e.epochs, |t| t.epochs),
            effective_tokens: e.tokens,
            effective_params: e.params,
        }),
        checks,
        margins,
        pass: checks.all(),
        reasons,
        runnable: (design.memory == MemoryModel::Plate && run.is_none())
            .then(|| Runnable::from_grade(brief, &grade(), d)),
        kernel_figures: match (run, design.memory) {
            (Some(_), MemoryModel::Detailed(m)) => kernel_figures(brief, m.options.stack),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    fn grade(model: &str, tokens: u64, tp: u64, pp: u64, zero: u8) -> Plan {
        let b = Brief::default();
        let shape = preset(model).unwrap();
        let layout = Layout::new(&b, &shape, tp, pp, ZeroStage::new(zero).unwrap()).unwrap();
        evaluate(&b, &Design::plate(&shape, tokens, layout)).unwrap()
    }

    #[test]
    fn the_starting_plan_fails_memory_and_days_and_passes_loss() {
        let p = grade("70b", 15_000_000_000_000, 1, 1, 0);
        assert!((p.memory_gb.total - 1139.6).abs() < 0.05);
        assert!((p.days - 90.7).abs() < 0.05);
        assert_eq!(
            p.checks,
            Checks {
                memory: false,
                days: false,
                loss: true,
                cost: None
            }
        );
        assert!(!p.pass);
        assert_eq!(p.reasons.len(), 2);
        assert_eq!(
            p.reasons[0],
            "memory: 1,139.6 GB per GPU exceeds the 72.0 GB cap by 1,067.6 GB"
        );
        assert_eq!(
            p.reasons[1],
            "days: 90.7 days exceed the 30.0-day limit by 60.7 days"
        );
    }

    #[test]
    fn the_contract_s_example_plan_passes() {
        // The example: 70B on 4.96e12 tokens, TP 8, PP 1, DP 256, ZeRO 3.
        let p = grade("70b", 4_960_000_000_000, 8, 1, 3);
        assert!(p.pass, "{:?}", p.reasons);
        assert_eq!(p.layout.dp, 256);
        assert!(p.reasons.is_empty());
        assert!(p.margins.days > 0.0 && p.margins.days < 0.01);
    }

    #[test]
    fn margins_are_headroom_or_shortfall() {
        let p = grade("8b", 1_000_000_000_000, 1, 1, 0);
        assert!((p.margins.memory_gb - (72.0 - p.memory_gb.total)).abs() < 1e-12);
        assert!(p.margins.loss < 0.0 && !p.checks.loss);
    }
}
