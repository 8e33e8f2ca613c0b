//! The step a plan runs, as every model above reads it — no cost is computed here:
//!
//! - this file: the [`Step`] (micro-batch, sequence, [`Recompute`], sequence parallelism, the
//!   [`Schedule`], the precision, the global batch) and the batch a plan asks for;
//! - [`precision`]: what BF16, FP8 and MXFP8 move and keep;
//! - [`recipe`]: the FP8 scaling recipes, FP8 weights and the optimizer state's precision;
//! - [`stack`]: the software presets and the kernels they run;
//! - [`experts`]: a mixture of experts on the expert grid — its routes, its dispatcher;
//! - [`graphs`]: CUDA graphs and the host-side floor of a mixture of experts' step;
//! - [`pipeline`]: the stages — their layers, their kinds, the parameters each holds — and
//!   the micro-batches a step takes in them;
//! - [`detailed`]: a step with the settings that are not part of it ([`detailed::Detailed`])
//!   and every rule a step keeps under a layout, checked once for memory and time alike.
//!
//! Uses `model` and the ground floor.
//!
//! The training step: micro-batch, sequence length, recomputation, sequence parallelism, the
//! pipeline schedule and the global batch ([`pipeline`] has the rules between them and the
//! layout).

pub mod detailed;
pub mod experts;
pub mod graphs;
pub mod muon;
pub mod offload;
pub mod optimizer_offload;
pub mod pipeline;
pub mod precision;
pub mod recipe;
pub mod stack;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::error::{Error, Result};
use crate::model::layout::Layout;

/// Tokens per optimizer step when none is given (flags, plate plans' launchers): 16 Mi,
/// Llama 3 405B's 2,048 sequences of 8,192 (Dubey et al. 2024, §3.4.1).
pub const DEFAULT_GLOBAL_BATCH_TOKENS: u64 = 16 * 1024 * 1024;

/// How far from its target a chosen global batch may be when none is fixed: a quarter either
/// side, so that 1,536 GPUs at DP 192 (12 Mi tokens a round of micro-batches of 8,192) can
/// still train near Llama 3's 16 Mi, as a quarter-smaller batch does no harm the loss law sees.
pub const DEFAULT_BATCH_TOLERANCE: f64 = 0.25;

/// The global batch a plan asks for when none is fixed: whole rounds of `b·s·DP`-token
/// micro-batches, as many as come nearest `tokens`, accepted within `tolerance` of it. One
/// rule for the detailed search, `check` and the launchers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchTarget {
    /// Tokens per optimizer step aimed at (default Llama 3's 16 Mi).
    pub tokens: u64,
    /// The largest `|G − T| / T` accepted, a fraction in [0, 1).
    pub tolerance: f64,
    /// The batch law that set `tokens` (`deepseek`, `step`: [`crate::laws::batch`]), which a
    /// refusal names; `None` for the brief's fixed target.
    pub law: Option<&'static str>,
}

impl Default for BatchTarget {
    fn default() -> Self {
        BatchTarget {
            tokens: DEFAULT_GLOBAL_BATCH_TOKENS,
            tolerance: DEFAULT_BATCH_TOLERANCE,
            law: None,
        }
    }
}

impl BatchTarget {
    /// The rule [`BatchTarget::resolve`]'s error names.
    pub const RULE: &'static str = "global batch";

    /// [`BatchTarget::resolve`]'s batch, or `None` where it refuses (without writing why).
    pub fn resolved(&self, micro_batch: u64, seq_len: u64, dp: u64) -> Option<u64> {
        self.nearest(micro_batch, seq_len, dp)
            .filter(|&g| self.accepts(g))
    }

    /// The whole number of `u = b·s·DP`-token rounds nearest the target, at least one: with
    /// `T = q·u + r`, `q·u` when `2r ≤ u` (ties go to the smaller batch), else `(q + 1)·u`.
    /// `None` when `u` is zero or the batch passes 2^64 tokens.
    pub fn nearest(&self, micro_batch: u64, seq_len: u64, dp: u64) -> Option<u64> {
        let unit = micro_batch.checked_mul(seq_len)?.checked_mul(dp)?;
        if unit == 0 {
            return None;
        }
        let (q, r) = (self.tokens / unit, self.tokens % unit);
        let rounds = if q == 0 || r.saturating_mul(2) > unit {
            q + 1
        } else {
            q
        };
        rounds.checked_mul(unit)
    }

    /// Whether `tokens` is within the tolerance of the target: `|G − T| ≤ tolerance · T`.
    pub fn accepts(&self, tokens: u64) -> bool {
        (tokens as f64 - self.tokens as f64).abs() <= self.tolerance * self.tokens as f64
    }

    /// The global batch for micro-batches of `micro_batch` sequences of `seq_len` over `dp`
    /// replicas: [`BatchTarget::nearest`] when [`BatchTarget::accepts`] it, else an error that
    /// names the nearest batch and the rule.
    pub fn resolve(&self, micro_batch: u64, seq_len: u64, dp: u64) -> Result<u64> {
        use crate::format::{general, thousands};
        match self.nearest(micro_batch, seq_len, dp) {
            Some(g) if self.accepts(g) => Ok(g),
            nearest => Err(Error::invalid(
                BatchTarget::RULE,
                nearest.map_or_else(|| "none".to_string(), |g| format!("{} tokens", thousands(g))),
                format!(
                    "the whole rounds of b × s × DP = {micro_batch} × {} × {} tokens nearest the {}-token target{}, within {} % of it ({}, --batch-tolerance), or a fixed --global-batch-tokens",
                    thousands(seq_len),
                    thousands(dp),
                    thousands(self.tokens),
                    self.law.map_or(String::new(), |l| format!(" of the {l} batch law")),
                    general(self.tolerance * 100.0),
                    if self.law.is_some() { "--batch-law" } else { "--batch-target" },
                ),
            )),
        }
    }
}

/// A pipeline schedule.
///
/// The two V schedules put two chunks of layers on each of the `p` GPUs, in a V: GPU `r`
/// runs the model's chunks `r` and `2p − 1 − r` of `2p` (Qi et al. 2024, "Zero Bubble
/// Pipeline Parallelism", §6; DeepSeek-AI, `deepseek-ai/DualPipe` README), and split each
/// backward into the input-gradient pass B and the weight-gradient pass W, which they run
/// later to fill the pipeline's bubble ([`crate::cost::step_time`] costs them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Schedule {
    /// One forward, one backward (PipeDream-Flush).
    OneFOneB,
    /// Interleaved 1F1B with this many model chunks (virtual stages) per GPU, at least 2.
    Interleaved(u32),
    /// ZB-V (Qi et al. 2024, §6): the V of two chunks a GPU, zero bubble when the forward,
    /// the input gradient and the weight gradient take as long as each other, at 1F1B's
    /// peak activations (PyTorch's `ScheduleZBVZeroBubble`).
    ZeroBubbleV,
    /// DualPipeV (DeepSeek-AI's DualPipe cut in half, Sea AI Lab): the V of two chunks a GPU,
    /// fed from both ends, each forward chunk paired with a backward chunk whose
    /// all-to-alls it can hide (PyTorch's `ScheduleDualPipeV`; `deepseek-ai/DualPipe`).
    DualPipeV,
}

impl Schedule {
    /// Model chunks per GPU: 1 for 1F1B, 2 for the V schedules.
    pub fn chunks(self) -> u64 {
        match self {
            Schedule::OneFOneB => 1,
            Schedule::Interleaved(v) => u64::from(v),
            Schedule::ZeroBubbleV | Schedule::DualPipeV => 2,
        }
    }

    /// Whether the schedule is one of the V schedules (two chunks a GPU in a V, the backward
    /// split into input and weight gradients).
    pub fn is_v(self) -> bool {
        matches!(self, Schedule::ZeroBubbleV | Schedule::DualPipeV)
    }

    /// The fewest micro-batches a V schedule runs over `pp` GPUs: `2p` for DualPipeV
    /// (PyTorch's `ScheduleDualPipeV` raises below as many micro-batches as stages,
    /// `deepseek-ai/DualPipe`'s asserts `≥ 2·ranks`), `2p − 1` for ZB-V (PyTorch's
    /// `ScheduleZBVZeroBubble` runs at least `2p − 1`, idling the ones it adds); 1 for the
    /// others.
    pub fn fewest_micro_batches(self, pp: u64) -> u64 {
        match self {
            Schedule::DualPipeV => 2 * pp,
            Schedule::ZeroBubbleV => (2 * pp).saturating_sub(1),
            Schedule::OneFOneB | Schedule::Interleaved(_) => 1,
        }
    }

    /// Whether a stack with `settings` runs this schedule: 1F1B always, interleaving where it
    /// interleaves, a V schedule where it has it ([`Schedule::runs_on`]).
    pub fn runs_with(self, settings: &crate::cost::step::stack::Settings) -> bool {
        match self {
            Schedule::Interleaved(_) => settings.interleaving,
            _ => self.runs_on(settings.v_schedules),
        }
    }

    /// Whether a stack whose V schedules are `v` runs this schedule (every one but the V
    /// schedules, and those it has).
    pub fn runs_on(self, v: crate::cost::step::stack::VSchedules) -> bool {
        use crate::cost::step::stack::VSchedules;
        match v {
            VSchedules::None => !self.is_v(),
            VSchedules::Torch => true,
            VSchedules::DualPipe => self != Schedule::ZeroBubbleV,
        }
    }

    /// Parses `1f1b`, `interleaved:V`, `zbv` or `dualpipev`; `interleaved:1`, one chunk a
    /// stage (Megatron-core's interleaved schedule at a virtual size of 1, as launch configs
    /// often write it), is 1F1B: the same bubble, the same micro-batches in flight. DualPipe
    /// itself, which keeps two copies of every GPU's parameters, is refused by name:
    /// DualPipeV is its one-copy form with the same bubble.
    pub fn parse(text: &str) -> Result<Self> {
        const ACCEPTED: &str =
            "1f1b, interleaved:V with V ≥ 1 chunks (interleaved:1 is 1f1b), zbv or dualpipev";
        let bad = || Error::invalid("--schedule", text, ACCEPTED);
        match text.trim().to_ascii_lowercase().as_str() {
            "1f1b" => Ok(Schedule::OneFOneB),
            "zbv" | "zb-v" | "zbvzerobubble" => Ok(Schedule::ZeroBubbleV),
            "dualpipev" => Ok(Schedule::DualPipeV),
            "dualpipe" => Err(Error::invalid(
                "--schedule",
                text,
                format!(
                    "{ACCEPTED}: DualPipe keeps two copies of each GPU's parameters, which trainplan does not plan; dualpipev is its one-copy V form with the same bubble"
                ),
            )),
            other => {
                let v = other.strip_prefix("interleaved:").ok_or_else(bad)?;
                match v.parse::<u32>() {
                    Ok(1) => Ok(Schedule::OneFOneB),
                    Ok(v) if v >= 2 => Ok(Schedule::Interleaved(v)),
                    _ => Err(bad()),
                }
            }
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::OneFOneB => f.write_str("1f1b"),
            Schedule::Interleaved(v) => write!(f, "interleaved:{v}"),
            Schedule::ZeroBubbleV => f.write_str("zbv"),
            Schedule::DualPipeV => f.write_str("dualpipev"),
        }
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Schedule::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Schedule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One training step's shape. Ordered field by field, the search's last tie-break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Step {
    /// Sequences per micro-batch, b.
    pub micro_batch: u64,
    /// Tokens per sequence, s.
    pub seq_len: u64,
    /// What is recomputed in backward.
    pub recompute: Recompute,
    /// Sequence parallelism with TP (Korthikanti et al. §4.2.2).
    pub sequence_parallel: bool,
    /// The pipeline schedule.
    pub schedule: Schedule,
    /// The precision of the matrix products (plan files written before it read as BF16).
    #[serde(default)]
    pub precision: Precision,
    /// Tokens per optimizer step across all replicas.
    pub global_batch_tokens: u64,
    /// TP communication overlapped with the GEMMs: Megatron-core's `--tp-comm-overlap`
    /// (Transformer Engine's userbuffers split each sequence-parallel all-gather and
    /// reduce-scatter into `t` chunks, pipelined with the GEMM that consumes or produces
    /// them). It needs sequence parallelism (Megatron-LM's `arguments.py` refuses it without)
    /// and a stack that has it ([`crate::cost::step::stack::Settings::tp_overlap`]); plan files
    /// written before it read as off, and `export --plan` then takes the stack's default.
    /// Last in the order, so that a step and the same step overlapped sit side by side: the
    /// overlapped one needs the other's memory plus TE's userbuffers, so a search weighs once.
    #[serde(default)]
    pub tp_comm_overlap: bool,
}

impl Step {
    /// Micro-batches each of `dp` replicas runs a step, `G / (b·s·DP)` (0 for a step that
    /// holds no whole round).
    pub fn rounds(&self, dp: u64) -> u64 {
        let per_round = self
            .micro_batch
            .saturating_mul(self.seq_len)
            .saturating_mul(dp)
            .max(1);
        self.global_batch_tokens / per_round
    }

    /// The step a design is graded with when none is given (`check` without step flags, the
    /// workshop, the launchers of plate plans, and the runnable-first tie-break of a plate
    /// search): one sequence of `seq_len` a micro-batch, full recomputation (what the plate
    /// assumes), sequence parallelism with TP, 1F1B, TP communication overlapped where `stack`
    /// does it ([`Step::stack_overlap`]), and the batch `target` gives the layout.
    pub fn default_for(
        layout: &Layout,
        seq_len: u64,
        target: &BatchTarget,
        stack: Stack,
    ) -> Result<Step> {
        let tokens = target.resolve(1, seq_len, layout.dp)?;
        Ok(Step::default_with_batch(layout, seq_len, tokens, stack))
    }

    /// [`Step::default_for`] at a global batch of `global_batch_tokens`, as given.
    pub fn default_with_batch(
        layout: &Layout,
        seq_len: u64,
        global_batch_tokens: u64,
        stack: Stack,
    ) -> Step {
        let sequence_parallel = layout.tp > 1;
        Step {
            micro_batch: 1,
            seq_len,
            recompute: Recompute::Full,
            sequence_parallel,
            schedule: Schedule::OneFOneB,
            tp_comm_overlap: Step::stack_overlap(stack, sequence_parallel),
            precision: Precision::Bf16,
            global_batch_tokens,
        }
    }

    /// Whether a step overlaps TP communication when none is said: where `stack` has the
    /// overlap ([`crate::cost::step::stack::Settings::tp_overlap`] above 0, as Megatron-core's and
    /// NeMo's recipes turn it on) and the step runs sequence parallelism, which it needs.
    pub fn stack_overlap(stack: Stack, sequence_parallel: bool) -> bool {
        sequence_parallel && stack.overlaps_tp()
    }

    /// This step under 1F1B: what its every schedule shares (the key of the parts of memory
    /// and time a search works out once for all of them).
    pub fn unscheduled(&self) -> Step {
        Step {
            schedule: Schedule::OneFOneB,
            ..*self
        }
    }
}

/// What an MoE layer recomputes beyond the step's recomputation, as Megatron-core's
/// `--recompute-modules` names it (`transformer_config.py`, `recompute_modules`): its routed
/// part's activation function (`moe_act`: SwiGLU's output, the down projection's input, is
/// recomputed from the up projection's output), or the whole MoE layer (`moe`: only the layer's
/// input is kept; the router, the dispatch, the experts and the combine run again in the
/// backward).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MoeRecompute {
    /// Nothing beyond the step's recomputation.
    #[default]
    None,
    /// SwiGLU's output of every route (`moe_act`).
    Act,
    /// The whole MoE layer (`moe`).
    Layer,
}

impl MoeRecompute {
    /// Whether this is [`MoeRecompute::None`] (for serde's `skip_serializing_if`).
    pub fn is_none(&self) -> bool {
        *self == MoeRecompute::None
    }
}

/// Which activations are recomputed in backward instead of kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recompute {
    /// Keep every activation.
    None,
    /// Recompute the attention core (Korthikanti et al. §5).
    Selective,
    /// Keep each layer's input only and recompute the layer.
    Full,
    /// torchtitan's op-level policy: keep the outputs of attention and of every other matrix
    /// product (the Q, V, gate and down projections), recompute the rest.
    SelectiveOp,
    /// torchtitan's layer-level policy: every other layer fully recomputed, the rest kept.
    SelectiveLayer,
    /// MaxText's `save_qkv_proj` policy: keep the layer's input and the Q, K and V
    /// projections' outputs, recompute the rest.
    SaveQkv,
}

impl Recompute {
    /// All modes, in order.
    pub const ALL: [Recompute; 6] = [
        Recompute::None,
        Recompute::Selective,
        Recompute::Full,
        Recompute::SelectiveOp,
        Recompute::SelectiveLayer,
        Recompute::SaveQkv,
    ];

    /// The name a user types.
    pub fn name(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
            Recompute::SelectiveOp => "selective-op",
            Recompute::SelectiveLayer => "selective-layer",
            Recompute::SaveQkv => "save-qkv",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v_schedules_read_by_their_names_and_dualpipe_is_named_apart() {
        assert_eq!(Schedule::parse("zbv").unwrap(), Schedule::ZeroBubbleV);
        assert_eq!(
            Schedule::parse("ZBVZeroBubble").unwrap(),
            Schedule::ZeroBubbleV
        );
        assert_eq!(Schedule::parse("DualPipeV").unwrap(), Schedule::DualPipeV);
        for s in [Schedule::ZeroBubbleV, Schedule::DualPipeV] {
            assert_eq!(Schedule::parse(&s.to_string()).unwrap(), s);
            assert_eq!(s.chunks(), 2);
        }
        let e = Schedule::parse("dualpipe").unwrap_err().to_string();
        assert!(e.contains("two copies"), "{e}");
    }

    #[test]
    fn schedules_parse_and_print() {
        assert_eq!(Schedule::parse("1F1B").unwrap(), Schedule::OneFOneB);
        assert_eq!(
            Schedule::parse("interleaved:4").unwrap(),
            Schedule::Interleaved(4)
        );
        assert_eq!(Schedule::Interleaved(4).to_string(), "interleaved:4");
        assert_eq!(
            Schedule::parse("interleaved:1").unwrap(),
            Schedule::OneFOneB
        );
        assert!(Schedule::parse("interleaved:0").is_err());
        assert!(Schedule::parse("gpipe").is_err());
    }
}
