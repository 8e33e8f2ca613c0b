//! The three checks of SPEC.md §1 against the brief's limits, and the loss they test.

use crate::brief::Brief;
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

/// The loss check.
pub fn loss_meets(brief: &Brief, loss: f64) -> bool {
    loss <= brief.loss_target
}

/// Predicted loss of `shape` trained on `tokens` under the brief's law.
pub fn loss(brief: &Brief, shape: &Shape, tokens: u64) -> f64 {
    brief.loss_law.loss(shape.params() as f64, tokens as f64)
}
