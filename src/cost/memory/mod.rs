//! What a GPU holds: the plate model of SPEC.md §3 ([`mod@plate`]), and a detailed model of a real
//! training step stage by stage ([`detailed`]), with the activations a layer keeps by
//! recomputation mode ([`activations`]) and the communication buffers ([`buffers`]), selected
//! by [`MemoryModel`]. Uses [`crate::cost::step`].

pub mod activations;
mod breakdown;
pub mod buffers;
pub mod detailed;
pub mod plate;

use crate::cost::step::Step;
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::Shape;

pub use breakdown::{Detail, Memory, MemoryGb, StageInfo, StageRole};
pub use plate::{
    activation_bytes, params_per_gpu, plate, ACTIVATION_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES,
    WEIGHT_BYTES,
};

/// How memory is computed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MemoryModel {
    /// SPEC.md's plate model at the brief's sequence length.
    Plate,
    /// The detailed model of one training step.
    Detailed(crate::cost::step::detailed::Detailed),
}

impl MemoryModel {
    /// Per-GPU memory of `shape` under `layout`, or why the step does not go with the layout;
    /// the plate's activations are of one sequence of `seq_len` tokens (the detailed model's
    /// step names its own).
    pub fn memory(&self, seq_len: u64, shape: &Shape, layout: &Layout) -> Result<Memory> {
        match self {
            MemoryModel::Plate => Ok(plate(shape, layout, seq_len)),
            MemoryModel::Detailed(d) => d.memory(shape, layout),
        }
    }

    /// The step's global batch in tokens, under the detailed model (the plate's has no step).
    pub fn global_batch_tokens(&self) -> Option<u64> {
        self.step().map(|s| s.global_batch_tokens)
    }

    /// The training step, under the detailed model.
    pub fn step(&self) -> Option<&Step> {
        match self {
            MemoryModel::Plate => None,
            MemoryModel::Detailed(d) => Some(&d.step),
        }
    }
}
