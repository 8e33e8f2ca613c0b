//! The physics: pure functions from a shape, a layout, a step and the hardware's figures to
//! what a training step holds, how long it takes and what a whole run costs. Each formula is
//! one small function with its source in its doc comment.
//!
//! Six parts, each a folder that uses only the ones before it (`tests/architecture.rs`):
//!
//! - [`step`]: the step a plan runs — micro-batch, schedule, recomputation, precision, the
//!   software [`step::stack`] — its pipeline of stages ([`step::pipeline`]), a mixture of
//!   experts' routes ([`step::experts`]) and the rules they keep together
//!   ([`step::detailed`]). It computes no cost: every part above reads it.
//! - [`chip`]: what a step costs on a chip — a GPU's kernel figures, each operation's time
//!   ([`chip::operations`]), the eager curve, the calibration, the FLOPs per token.
//! - [`links`]: what a step sends — the topology and ring collectives, each parallelism's
//!   exchanges and the experts' dispatch ([`links::exchanges`]).
//! - [`memory`]: what a GPU holds — the plate's formula, activations by recomputation mode,
//!   the detailed model stage by stage.
//! - [`step_time`]: how the schedule composes the step — one micro-batch's compute, the
//!   slowest stage with its traffic, the data-parallel traffic and the optimizer, the bubble.
//! - [`run`]: what a whole run costs — the plate's days by 6ND, the detailed days with
//!   failures ([`run::reliability`]), GPU-hours, money and energy ([`run::spend`]).
//!
//! The part takes the parameter types it needs — a [`links::topology::Topology`], a
//! [`run::reliability::Reliability`], a [`Machine`] — never the whole brief, and it never
//! reads a file or sees a flag. What a model reaches (the loss laws) is not a cost: it is
//! [`crate::laws`], which nothing here reads. Uses `model` and the ground floor.

pub mod chip;
pub mod links;
pub mod memory;
pub mod run;
pub mod step;
pub mod step_time;

use crate::model::layout::Cluster;
use links::topology::Topology;
use run::reliability::Reliability;

/// The hardware a training step runs on, as the detailed time model sees it: the cluster's
/// GPUs and nodes, one GPU's peak, the links, and how often things fail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Machine {
    /// GPUs, and GPUs per node.
    pub cluster: Cluster,
    /// Dense BF16 peak per GPU, TFLOP/s.
    pub peak_tflops: f64,
    /// Dense FP8 peak per GPU, TFLOP/s; 0 without FP8.
    pub fp8_tflops: f64,
    /// Whether the GPU runs MXFP8.
    pub mxfp8: bool,
    /// Dense FP4 peak per GPU, TFLOP/s; 0 without FP4.
    pub fp4_tflops: f64,
    /// Whether the GPU runs NVFP4.
    pub nvfp4: bool,
    /// Whether the GPU runs MXFP4.
    pub mxfp4: bool,
    /// Links and memory bandwidth.
    pub topology: Topology,
    /// Failures, checkpoints and restarts.
    pub reliability: Reliability,
}
