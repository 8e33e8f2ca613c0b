//! The three checks of SPEC.md §1 against the brief's limits, the loss they test, and the
//! fourth, cost, when the brief sets a limit.

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::run::spend::Spent;
use crate::laws::LawSize;
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::units::BYTES_PER_GB;

/// The memory check: `bytes` per GPU within the brief's cap.
pub fn memory_fits(brief: &Brief, bytes: f64) -> bool {
    bytes <= brief.memory_cap_gb * BYTES_PER_GB
}

/// The days check.
pub fn days_fit(brief: &Brief, days: f64) -> bool {
    days <= brief.max_days
}

/// The spend of a run on `layout` taking `days` (`None` unless the brief has a price or a
/// power): every GPU of the layout held for the run's days.
pub fn spent(brief: &Brief, layout: &Layout, days: f64) -> Option<Spent> {
    brief
        .spend
        .reported()
        .then(|| brief.spend.of(layout.gpus(), days))
}

/// The cost check of a run that costs `cost`, when the brief sets a limit (it then has a
/// price, so the cost is known).
pub fn cost_fits(brief: &Brief, cost: Option<f64>) -> Option<bool> {
    brief.max_cost.map(|limit| cost.is_some_and(|c| c <= limit))
}

/// Whether a run of `days` on the brief's GPUs passes the days check and, when the brief sets
/// a cost limit, the cost check: what the token window's upper end keeps to.
pub fn within_time_and_cost(brief: &Brief, days: f64) -> bool {
    days_fit(brief, days) && cost_fits(brief, brief.spend.cost_of(brief.gpus, days)) != Some(false)
}

/// The loss check.
pub fn loss_meets(brief: &Brief, loss: f64) -> bool {
    loss <= brief.loss_target
}

/// The global batch, tokens, a plan of `shape` on `tokens` trains at: its step's under the
/// detailed memory model; under the plate's, which has no step, the batch it aims at, the
/// brief's target or its batch law's optimum for the plan's run, unrounded (within the
/// target's bounds), so that the tokens that count grow with the tokens trained (the law's
/// batch grows as `D^p`, `p` at most 0.571, slower than the critical batch lets it waste; a
/// batch rounded to the token would make the loss a sawtooth in the tokens).
pub fn plan_batch_tokens(brief: &Brief, shape: &Shape, tokens: u64, memory: &MemoryModel) -> f64 {
    if let Some(step) = memory.step() {
        return step.global_batch_tokens as f64;
    }
    match brief
        .batch_law
        .optimal_batch(&brief.law_inputs(shape, tokens as f64))
    {
        None => brief.batch_target_tokens as f64,
        Some(b) => brief.scaled_law_batch(b),
    }
}

/// Predicted loss of `shape` trained on `tokens` on `memory`'s step: [`loss`], or where the
/// brief counts the critical batch, the loss of the tokens the plan's batch
/// ([`plan_batch_tokens`]) makes count, as [`crate::plan::evaluate`] grades it.
pub fn config_loss(brief: &Brief, shape: &Shape, tokens: u64, memory: &MemoryModel) -> f64 {
    if brief.critical_batch.is_off() {
        return loss(brief, shape, tokens);
    }
    let batch = plan_batch_tokens(brief, shape, tokens, memory);
    brief.loss_at_batch(law_size(shape), tokens as f64, batch)
}

/// Predicted loss of `shape` trained on `tokens` under the brief's law.
pub fn loss(brief: &Brief, shape: &Shape, tokens: u64) -> f64 {
    brief.loss(law_size(shape), tokens as f64)
}

/// What the brief's law grades `shape` by: N for a dense model; for a mixture of experts its
/// active parameters `N_act` and its expansion ([`Shape::expansion`]). A law with expert terms
/// (Ludziejewski et al. 2025, written in `N_act` and the number of experts) reads both; a law
/// fitted on dense models reads `N_act` alone: an MoE with N total and N_act active
/// parameters does at least as well as a dense model of N_act (its experts add capacity at the
/// same compute; Clark et al. 2022, Fig. 1; Ludziejewski et al. 2025, Table 4), so its loss
/// graded on N_act is an upper bound — a target it meets is met.
pub fn law_size(shape: &Shape) -> LawSize {
    LawSize {
        params: shape.active_params() as f64,
        expansion: shape.expansion(),
    }
}
