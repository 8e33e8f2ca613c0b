//! The physics: pure functions from a shape, a layout and the hardware's figures to memory,
//! time and loss. Each formula is one small function with its source in its doc comment.
//!
//! - [`scaling`]: the loss law and the compute-optimal model.
//! - [`time`]: the plate's days by 6ND at an assumed MFU.
//! - [`memory`]: bytes per GPU, [`memory::plate`] (SPEC.md §2) and [`memory::detailed`]
//!   (per pipeline stage), with [`activations`] by recomputation mode and [`step`] (the
//!   training step: micro-batches, schedule, pipeline split).
//! - [`step_time`]: the detailed step time (compute by operation, [`compute`], on a [`chip`]'s
//!   kernel figures, or at the eager [`efficiency`] curve; collectives over a [`topology`]) and
//!   failures ([`reliability`]), under a software [`stack`] and a [`calibration`].
//! - [`moe`]: a mixture-of-experts layer on the expert grid: its routes, its MoE layers per
//!   stage, the all-to-all.
//! - [`spend`]: GPU-hours, cost, energy and emissions of a run's days.
//!
//! The cost part takes the parameter types it needs — a [`scaling::LossLaw`], a
//! [`topology::Topology`], a [`reliability::Reliability`], a [`Machine`] — never the whole
//! brief, and it never reads a file or sees a flag. Uses `model` and the ground floor.

pub mod activations;
pub mod calibration;
pub mod chip;
pub mod compute;
pub mod efficiency;
pub mod memory;
pub mod moe;
pub mod precision;
pub mod reliability;
pub mod scaling;
pub mod spend;
pub mod stack;
pub mod step;
pub mod step_time;
pub mod time;
pub mod topology;

use crate::model::layout::Cluster;
use reliability::Reliability;
use topology::Topology;

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
    /// Links and memory bandwidth.
    pub topology: Topology,
    /// Failures, checkpoints and restarts.
    pub reliability: Reliability,
}
