//! The step a plan runs, as every model above reads it — no cost is computed here:
//!
//! - this file: the [`Step`] (micro-batch, sequence, [`Recompute`], sequence parallelism, the
//!   [`Schedule`], the precision, the global batch) and the rules between it and a layout;
//! - [`precision`]: what BF16, FP8 and MXFP8 move and keep;
//! - [`stack`]: the software presets and the kernels they run;
//! - [`experts`]: a mixture of experts on the expert grid — its routes, its dispatcher;
//! - [`pipeline`]: the stages — their layers, their kinds, the parameters each holds;
//! - [`detailed`]: a step with the settings that are not part of it ([`detailed::Detailed`])
//!   and every rule a step keeps under a layout, checked once for memory and time alike.
//!
//! Uses `model` and the ground floor.
//!
//! The training step: micro-batch, sequence length, recomputation, sequence parallelism, the
//! pipeline schedule and the global batch, and the rules between them and the layout.
//!
//! With a global batch of `B` tokens, micro-batches of `b` sequences of `s` tokens and `DP`
//! data-parallel replicas, each replica runs `m = B / (b·s·DP)` micro-batches per step, which
//! must be a whole number ≥ 1. The pipeline schedule then decides how many micro-batches each
//! stage holds activations for at once (Narayanan et al., SC 2021, §2.2):
//!
//! - **1F1B** (PipeDream-Flush): stage `i` of `p` (0-based) runs `p − i` forward passes before
//!   its first backward, so it holds `min(p − i, m)` micro-batches; the first stage holds the most.
//! - **Interleaved 1F1B** with `v` model chunks per GPU: stage `i` runs
//!   `2·(p − i − 1) + (v − 1)·p + 1` chunk forwards before its first backward (Megatron-LM's
//!   schedule), each over `1/v` of its layers. On the first stage that is `1 + (p − 1)/(p·v)`
//!   times the activations of 1F1B, Korthikanti et al.'s interleaving penalty (§4.2.3).
//!   Megatron-LM requires `m` to be a multiple of `p`; each chunk needs at least one layer,
//!   except that one chunk of the first and of the last stage may hold only the embedding or
//!   the output head (chunks of a stage may differ by a layer, as Megatron-Core's pipeline
//!   layouts allow, and Llama 3's schedule did: Llama Team 2024, §3.3.2).

pub mod detailed;
pub mod experts;
pub mod pipeline;
pub mod precision;
pub mod stack;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::cost::step::pipeline::chunk_room;
use crate::cost::step::pipeline::StageKinds;
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
}

impl Default for BatchTarget {
    fn default() -> Self {
        BatchTarget {
            tokens: DEFAULT_GLOBAL_BATCH_TOKENS,
            tolerance: DEFAULT_BATCH_TOLERANCE,
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
                    "the whole rounds of b × s × DP = {micro_batch} × {} × {} tokens nearest the {}-token target, within {} % of it (--batch-target, --batch-tolerance), or a fixed --global-batch-tokens",
                    thousands(seq_len),
                    thousands(dp),
                    thousands(self.tokens),
                    general(self.tolerance * 100.0),
                ),
            )),
        }
    }
}

/// A pipeline schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Schedule {
    /// One forward, one backward (PipeDream-Flush).
    OneFOneB,
    /// Interleaved 1F1B with this many model chunks (virtual stages) per GPU, at least 2.
    Interleaved(u32),
}

impl Schedule {
    /// Model chunks per GPU: 1 for 1F1B.
    pub fn chunks(self) -> u64 {
        match self {
            Schedule::OneFOneB => 1,
            Schedule::Interleaved(v) => u64::from(v),
        }
    }

    /// Parses `1f1b` or `interleaved:V`.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                "--schedule",
                text,
                "1f1b or interleaved:V with V ≥ 2 chunks",
            )
        };
        match text.trim().to_ascii_lowercase().as_str() {
            "1f1b" => Ok(Schedule::OneFOneB),
            other => {
                let v = other.strip_prefix("interleaved:").ok_or_else(bad)?;
                match v.parse::<u32>() {
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

    /// Micro-batches per step for each replica, `m = B / (b·s·DP)`, checked against the layout
    /// and the layers per stage; the error names the rule broken.
    pub fn micro_batches(&self, layout: &Layout, stage_layers: &[u64]) -> Result<u64> {
        let m = self.micro_batches_before_schedule(layout)?;
        self.interleaving_allowed(layout, stage_layers, m)?;
        Ok(m)
    }

    /// [`Step::micro_batches`] of the pipeline `kinds`.
    pub fn micro_batches_in(&self, layout: &Layout, kinds: &StageKinds) -> Result<u64> {
        let m = self.micro_batches_before_schedule(layout)?;
        self.interleaving_allowed_in(layout, kinds, m)?;
        Ok(m)
    }

    /// [`Step::micro_batches`] before the schedule's rules.
    fn micro_batches_before_schedule(&self, layout: &Layout) -> Result<u64> {
        if self.micro_batch == 0 || self.seq_len == 0 {
            return Err(Error::invalid(
                "--micro-batch × --seq-len",
                self.micro_batch * self.seq_len,
                "at least one token",
            ));
        }
        if layout.cp > 1 && self.seq_len % (2 * layout.cp) != 0 {
            return Err(Error::invalid(
                "--cp",
                layout.cp,
                format!(
                    "a degree whose 2 × cp chunks divide the {}-token sequence (context parallelism splits it into 2·CP chunks, rank i taking chunks i and 2·CP − 1 − i, to balance causal attention)",
                    self.seq_len
                ),
            ));
        }
        if self.sequence_parallel && layout.tp == 1 {
            return Err(Error::invalid(
                "--sequence-parallel",
                "on",
                "off when tp = 1: sequence parallelism splits over the TP group",
            ));
        }
        if self.tp_comm_overlap && !self.sequence_parallel {
            return Err(Error::invalid(
                "--tp-comm-overlap",
                "on",
                "off without sequence parallelism: the overlap pipelines sequence parallelism's all-gathers and reduce-scatters with the GEMMs (Megatron-LM refuses --tp-comm-overlap without --sequence-parallel)",
            ));
        }
        let per_micro_batch = self
            .micro_batch
            .checked_mul(self.seq_len)
            .and_then(|t| t.checked_mul(layout.dp))
            .filter(|&t| {
                t > 0 && self.global_batch_tokens % t == 0 && self.global_batch_tokens >= t
            })
            .ok_or_else(|| {
                Error::invalid(
                    "--global-batch-tokens",
                    self.global_batch_tokens,
                    format!(
                        "a whole multiple of b × s × DP = {} × {} × {}",
                        self.micro_batch, self.seq_len, layout.dp
                    ),
                )
            })?;
        Ok(self.global_batch_tokens / per_micro_batch)
    }

    /// The interleaved schedule's rules, for `m` micro-batches a step (the last checks of
    /// [`Step::micro_batches`], which 1F1B always keeps): a pipeline, micro-batches a multiple
    /// of its stages, and no more chunks than a stage has room for.
    pub fn interleaving_allowed(
        &self,
        layout: &Layout,
        stage_layers: &[u64],
        m: u64,
    ) -> Result<()> {
        match StageKinds::of(stage_layers) {
            Some(kinds) => self.interleaving_allowed_in(layout, &kinds, m),
            None => self.interleaving_allowed_slow(layout, stage_layers, m),
        }
    }

    /// [`Step::interleaving_allowed`] of the pipeline `kinds` (the same rules: a stage short of
    /// room is short as its run's first is, and the first short kind has the first short
    /// stage's layers).
    #[inline]
    pub fn interleaving_allowed_in(
        &self,
        layout: &Layout,
        kinds: &StageKinds,
        m: u64,
    ) -> Result<()> {
        if let Schedule::Interleaved(v) = self.schedule {
            if self.interleaves_in(layout, kinds, m) {
                return Ok(());
            }
            let few = kinds.kinds().iter().find(|k| kinds.room(k) < u64::from(v));
            return self.interleaving_refused(layout, m, few.map(|k| k.layers));
        }
        Ok(())
    }

    /// Whether [`Step::interleaving_allowed_in`] lets the step's schedule be, without the
    /// reason when it does not: 1F1B always; `v` chunks where the pipeline has two stages or
    /// more, the `m` micro-batches are a multiple of them and every stage has room for `v`
    /// chunks ([`StageKinds::deepest_interleaving`]).
    #[inline]
    pub fn interleaves_in(&self, layout: &Layout, kinds: &StageKinds, m: u64) -> bool {
        match self.schedule {
            Schedule::OneFOneB => true,
            Schedule::Interleaved(v) => {
                layout.pp >= 2 && m % layout.pp == 0 && kinds.deepest_interleaving() >= u64::from(v)
            }
        }
    }

    /// Why an interleaved step is refused: the first rule it breaks.
    #[cold]
    fn interleaving_refused(&self, layout: &Layout, m: u64, short: Option<u64>) -> Result<()> {
        if layout.pp < 2 {
            return Err(Error::invalid(
                "--schedule",
                self.schedule,
                "1f1b when pp = 1",
            ));
        }
        if m % layout.pp != 0 {
            return Err(Error::invalid(
                "--schedule",
                self.schedule,
                format!(
                    "1f1b, or {m} micro-batches a multiple of pp = {}",
                    layout.pp
                ),
            ));
        }
        if let Some(few) = short {
            return Err(Error::invalid(
                "--schedule",
                self.schedule,
                format!("at most as many chunks as every stage has layers, one more on the first and last stage, whose extra chunk holds the embedding or the head (a stage has {few})"),
            ));
        }
        Ok(())
    }

    /// [`Step::interleaving_allowed`] stage by stage, for a pipeline of more kinds than
    /// [`StageKinds`] holds.
    fn interleaving_allowed_slow(
        &self,
        layout: &Layout,
        stage_layers: &[u64],
        m: u64,
    ) -> Result<()> {
        if let Schedule::Interleaved(v) = self.schedule {
            let v = u64::from(v);
            let short = (0..stage_layers.len()).find(|&i| chunk_room(stage_layers, i) < v);
            return self.interleaving_refused(layout, m, short.map(|i| stage_layers[i]));
        }
        Ok(())
    }

    /// Micro-batches' worth of one stage's layers whose activations stage `stage` holds at
    /// once, for `m` micro-batches over `pp` stages: `min(p − i, m)` for 1F1B; for `v` chunks,
    /// `min(2(p − i − 1) + (v − 1)p + 1, m·v)` chunk forwards of `1/v` of the layers each.
    pub fn in_flight(&self, stage: u64, pp: u64, m: u64) -> f64 {
        match self.schedule {
            Schedule::OneFOneB => (pp - stage).min(m) as f64,
            Schedule::Interleaved(v) => {
                let v = u64::from(v);
                let warmup = (2 * (pp - stage - 1))
                    .saturating_add((v - 1).saturating_mul(pp))
                    .saturating_add(1);
                let chunks = warmup.min(m.saturating_mul(v));
                chunks as f64 / v as f64
            }
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
    use crate::brief::Brief;
    use crate::cost::step::pipeline::deepest_interleaving;
    use crate::cost::step::pipeline::MAX_STAGE_KINDS;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    fn step(b: u64, schedule: Schedule) -> Step {
        Step {
            micro_batch: b,
            seq_len: 8192,
            recompute: Recompute::Full,
            sequence_parallel: true,
            schedule,
            tp_comm_overlap: true,
            precision: Precision::Bf16,
            global_batch_tokens: 16 * 1024 * 1024,
        }
    }

    fn layout(tp: u64, pp: u64) -> Layout {
        crate::model::layout::layout_70b(tp, pp, 1)
    }

    #[test]
    fn a_pipeline_s_stage_kinds_decide_what_its_every_stage_would() {
        use crate::cost::step::pipeline::stage_layers;
        use crate::cost::step::stack::StageSplit;
        // Every split of up to 130 layers over every PP: at most four kinds, the same deepest
        // interleaving, and the same verdict on every depth (the first short stage's layers in
        // the error) as the stage-by-stage rule.
        for split in [StageSplit::Even, StageSplit::Llama3, StageSplit::Balanced] {
            for layers in 1..=130u64 {
                for pp in 1..=layers.min(40) {
                    let Ok(stages) = stage_layers(layers, pp, split) else {
                        continue;
                    };
                    let kinds = StageKinds::of(&stages).unwrap();
                    assert!(kinds.kinds().len() <= MAX_STAGE_KINDS);
                    assert_eq!(kinds.deepest_interleaving(), deepest_interleaving(&stages));
                    let l = Layout { pp, ..layout(1, 1) };
                    for v in 2..=kinds.deepest_interleaving() as u32 + 1 {
                        let s = step(1, Schedule::Interleaved(v));
                        for m in [pp, pp + 1] {
                            let fast = s.interleaving_allowed_in(&l, &kinds, m);
                            let slow = s.interleaving_allowed_slow(&l, &stages, m);
                            assert_eq!(
                                fast.map_err(|e| e.to_string()),
                                slow.map_err(|e| e.to_string()),
                                "{split:?} {layers} layers, pp {pp}, v {v}, m {m}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn micro_batches_follow_from_the_global_batch() {
        // 16 Mi tokens = 2,048 sequences of 8,192; DP = 2048 / (8·4) = 64: 32 each.
        assert_eq!(
            step(1, Schedule::OneFOneB)
                .micro_batches(&layout(8, 4), &[20; 4])
                .unwrap(),
            32
        );
        assert_eq!(
            step(4, Schedule::OneFOneB)
                .micro_batches(&layout(8, 4), &[20; 4])
                .unwrap(),
            8
        );
    }

    #[test]
    fn a_global_batch_that_does_not_divide_is_refused() {
        // DP = 256 at TP 8, PP 1: b = 16 needs 256 × 16 × 8192 = 32 Mi tokens.
        let e = step(16, Schedule::OneFOneB)
            .micro_batches(&layout(8, 1), &[80])
            .unwrap_err();
        assert!(
            e.to_string().contains("b × s × DP = 16 × 8192 × 256"),
            "{e}"
        );
    }

    #[test]
    fn interleaving_needs_a_layer_per_chunk_and_whole_rounds() {
        let s = step(1, Schedule::Interleaved(2));
        assert_eq!(s.micro_batches(&layout(8, 4), &[20; 4]).unwrap(), 32);
        assert!(s.micro_batches(&layout(8, 1), &[80]).is_err());
        let three = Step {
            schedule: Schedule::Interleaved(3),
            ..s
        };
        assert!(three.micro_batches(&layout(8, 4), &[20; 4]).is_ok());
        let too_many = Step {
            schedule: Schedule::Interleaved(21),
            ..s
        };
        assert!(too_many.micro_batches(&layout(8, 4), &[20; 4]).is_err());
        // 2,048 sequences at b = 1 over DP = 64 is 32 micro-batches, not a multiple of PP = 3.
        let b = Brief {
            gpus: 1536,
            ..Brief::default()
        };
        let odd = Layout::new(
            &b,
            &preset("70b").unwrap(),
            8,
            3,
            ZeroStage::new(1).unwrap(),
        )
        .unwrap();
        assert!(s.micro_batches(&odd, &[26, 27, 27]).is_err());
    }

    #[test]
    fn sequence_parallelism_needs_tp() {
        assert!(step(1, Schedule::OneFOneB)
            .micro_batches(&layout(1, 16), &[5; 16])
            .is_err());
    }

    #[test]
    fn the_first_stage_holds_the_most_and_interleaving_adds_the_korthikanti_penalty() {
        let s = step(1, Schedule::OneFOneB);
        assert_eq!(s.in_flight(0, 8, 32), 8.0);
        assert_eq!(s.in_flight(7, 8, 32), 1.0);
        assert_eq!(s.in_flight(0, 8, 3), 3.0);
        // p = 8, v = 4: (2·7 + 3·8 + 1) / 4 = 39/4 = 8 · (1 + 7/32).
        let i = Step {
            schedule: Schedule::Interleaved(4),
            ..s
        };
        assert_eq!(i.in_flight(0, 8, 32), 8.0 * (1.0 + 7.0 / 32.0));
    }

    #[test]
    fn schedules_parse_and_print() {
        assert_eq!(Schedule::parse("1F1B").unwrap(), Schedule::OneFOneB);
        assert_eq!(
            Schedule::parse("interleaved:4").unwrap(),
            Schedule::Interleaved(4)
        );
        assert_eq!(Schedule::Interleaved(4).to_string(), "interleaved:4");
        assert!(Schedule::parse("interleaved:1").is_err());
        assert!(Schedule::parse("gpipe").is_err());
    }
}
