//! What one GPU holds, by component: the result both memory models give.

use serde::{Deserialize, Serialize};

use crate::units::gb;

/// Memory one GPU needs, bytes, by component.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Memory {
    /// BF16 weights.
    pub weights: f64,
    /// Gradients (BF16 under the plate model).
    pub gradients: f64,
    /// FP32 master weights and Adam moments.
    pub optimizer: f64,
    /// Stored activations of the busiest pipeline stage.
    pub activations: f64,
    /// What only the detailed model counts; `None` under the plate model.
    pub detail: Option<Detail>,
}

/// The components only the detailed model has, and which stage they belong to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detail {
    /// Logits kept from the last stage's forward to its backward.
    pub logits: f64,
    /// The larger transient: recomputing one layer in backward, or the loss's forward peak.
    pub transient: f64,
    /// CUDA context, communication buffers and allocator fragmentation.
    pub reserve: f64,
    /// Transformer Engine's userbuffers for a step that overlaps TP communication
    /// ([`crate::cost::memory::buffers::userbuffers`]; 0 without the overlap), added last to
    /// the total and shown within the reserve.
    pub userbuffers: f64,
    /// The stage these figures are for: the one that needs the most.
    pub stage: StageInfo,
}

/// Where a stage sits in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StageRole {
    /// The only stage (no pipeline parallelism).
    Only,
    /// The first stage, with the input embedding.
    First,
    /// A stage between.
    Middle,
    /// The last stage, with the output head and the loss.
    Last,
}

impl StageRole {
    /// The role of stage `index` of `of`.
    pub fn of(index: u64, of: u64) -> Self {
        match (index, of) {
            (_, 1) => StageRole::Only,
            (0, _) => StageRole::First,
            (i, p) if i == p - 1 => StageRole::Last,
            _ => StageRole::Middle,
        }
    }
}

impl std::fmt::Display for StageRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StageRole::Only => "only",
            StageRole::First => "first",
            StageRole::Middle => "middle",
            StageRole::Last => "last",
        })
    }
}

/// Which pipeline stage a plan's memory is for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StageInfo {
    /// 0-based index of the stage.
    pub index: u64,
    /// Stages in the pipeline.
    pub of: u64,
    /// `only`, `first`, `middle` or `last`.
    pub role: StageRole,
    /// Transformer layers on the stage.
    pub layers: u64,
    /// Micro-batches' worth of the stage's layers whose activations it holds at once.
    pub in_flight: f64,
    /// Micro-batches per step for each replica, `m`.
    pub micro_batches: u64,
    /// Layers whose activations go to host memory (`--offload-activations`; absent for none).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub offloaded_layers: u64,
    /// Host memory the offloaded activations take per GPU, GB (absent for none).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub host_gb: f64,
    /// Host memory the offloaded optimizer takes per GPU, GB (`--offload-optimizer`; absent for
    /// none): [`crate::cost::step::optimizer_offload::host_bytes`].
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub optimizer_host_gb: f64,
}

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

impl Memory {
    /// The sum of every component, bytes.
    pub fn total(&self) -> f64 {
        let (extra, buffers) = self.detail.map_or((0.0, 0.0), |d| {
            (d.logits + d.transient + d.reserve, d.userbuffers)
        });
        // The userbuffers last: a step with the overlap needs its twin's bytes without it, plus
        // them, to the bit (the search adds them to the twin's).
        self.weights + self.gradients + self.optimizer + self.activations + extra + buffers
    }

    /// The same, in GB, as the plan JSON reports it.
    pub fn in_gb(&self) -> MemoryGb {
        MemoryGb {
            weights: gb(self.weights),
            gradients: gb(self.gradients),
            optimizer: gb(self.optimizer),
            activations: gb(self.activations),
            logits: self.detail.map(|d| gb(d.logits)),
            transient: self.detail.map(|d| gb(d.transient)),
            reserve: self.detail.map(|d| gb(d.reserve + d.userbuffers)),
            total: gb(self.total()),
        }
    }
}

/// Per-GPU memory in GB (10^9 bytes): the plan JSON's `memory_gb` object.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemoryGb {
    /// BF16 weights, GB.
    pub weights: f64,
    /// Gradients, GB.
    pub gradients: f64,
    /// FP32 master weights and Adam m and v, GB.
    pub optimizer: f64,
    /// Stored activations, GB.
    pub activations: f64,
    /// Logits kept for the loss's backward, GB (detailed model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logits: Option<f64>,
    /// Transient peak: recomputation working set or the loss's forward peak, GB (detailed only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transient: Option<f64>,
    /// CUDA context, communication buffers (with TP overlap, Transformer Engine's userbuffers),
    /// fragmentation, GB (detailed only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve: Option<f64>,
    /// Sum of the above, GB.
    pub total: f64,
}
