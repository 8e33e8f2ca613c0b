//! The pipeline of stages: how a model's layers spread over `pp` stages ([`stage_layers`]),
//! the kinds of stage that decide its peak and its pace ([`StageKinds`]), the MoE layers of a
//! stage, and the parameters one GPU of a stage holds ([`stage_params`], `Ψᵢ`), which the
//! memory and time models both read.
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

use crate::cost::step::stack::StageSplit;
use crate::cost::step::Schedule;
use crate::cost::step::Step;
use crate::error::Error;
use crate::error::Result;
use crate::model::hybrid::{Block, BlockCounts};
use crate::model::layout::Layout;
use crate::model::Shape;

/// Model chunks stage `i` of `stages.len()` can hold: one a layer, and on the first and the
/// last stage one more, holding only the embedding or the head (Megatron-Core's pipeline
/// layouts; Llama Team 2024, §3.3.2).
pub(crate) fn chunk_room(stages: &[u64], i: usize) -> u64 {
    let ends = i == 0 || i + 1 == stages.len();
    stages[i].saturating_add(u64::from(ends))
}

/// The deepest interleaving every stage of `stages` (layers each) allows, the fewest chunks
/// any stage can hold ([`chunk_room`]); 0 for no stage.
pub fn deepest_interleaving(stages: &[u64]) -> u64 {
    (0..stages.len())
        .map(|i| chunk_room(stages, i))
        .min()
        .unwrap_or(0)
}

/// The most kinds of stage a pipeline has ([`StageKinds`]): the first, the last, and one for
/// each run of equal stages between (the splits of [`crate::cost::memory::detailed`] make at
/// most two such runs: the even split's `⌊L/p⌋` and `⌊L/p⌋ + 1`).
pub const MAX_STAGE_KINDS: usize = 4;

/// One stage standing for a kind: its place in the pipeline and its layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StageKind {
    /// 0-based index of the stage.
    pub index: u64,
    /// Transformer layers on it.
    pub layers: u64,
}

/// A pipeline's stages by kind: the first stage, the last, and the first of each run of equal
/// stages between them. Every rule and cost of a stage depends on its layers, whether it is
/// the first or the last, and (through the micro-batches in flight, which fall with the
/// index) its place, so a stage of a run holds no more and runs no slower than the run's
/// first: the representatives decide the pipeline's peak memory, its slowest stage and the
/// deepest interleaving exactly, at a fixed size with no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageKinds {
    pp: u64,
    len: usize,
    kinds: [StageKind; MAX_STAGE_KINDS],
    /// [`StageKinds::deepest_interleaving`], worked out once.
    deepest: u64,
}

impl StageKinds {
    /// The kinds of the pipeline whose stages hold `stages` layers each; `None` for no stage
    /// or more kinds than [`MAX_STAGE_KINDS`] (never for the model's splits).
    pub fn of(stages: &[u64]) -> Option<StageKinds> {
        let mut kinds = [StageKind::default(); MAX_STAGE_KINDS];
        let mut len = 0;
        for (i, &layers) in stages.iter().enumerate() {
            // The second stage starts the middle run; a later middle stage equal to the one
            // before it belongs to that stage's run.
            if i > 1 && i + 1 < stages.len() && stages[i - 1] == layers {
                continue;
            }
            *kinds.get_mut(len)? = StageKind {
                index: i as u64,
                layers,
            };
            len += 1;
        }
        let mut kinds = StageKinds {
            pp: stages.len() as u64,
            len,
            kinds,
            deepest: 0,
        };
        kinds.deepest = kinds.kinds().iter().map(|k| kinds.room(k)).min()?;
        Some(kinds)
    }

    /// The representatives, in stage order.
    pub fn kinds(&self) -> &[StageKind] {
        &self.kinds[..self.len]
    }

    /// Stages in the pipeline.
    pub fn pp(&self) -> u64 {
        self.pp
    }

    /// Model chunks `kind` can hold ([`chunk_room`]).
    pub(crate) fn room(&self, kind: &StageKind) -> u64 {
        let ends = kind.index == 0 || kind.index + 1 == self.pp;
        kind.layers.saturating_add(u64::from(ends))
    }

    /// [`deepest_interleaving`] of the pipeline.
    pub fn deepest_interleaving(&self) -> u64 {
        self.deepest
    }
}

/// Layers on each of `pp` stages of `shape` (its multi-token-prediction depths weigh on the
/// last stage under [`StageSplit::Loss`]).
pub fn shape_stages(shape: &Shape, pp: u64, split: StageSplit) -> Result<Vec<u64>> {
    split_stages(u64::from(shape.layers), u64::from(shape.mtp), pp, split)
}

/// Layers on each of `pp` stages of a model with `layers` layers and no multi-token
/// prediction.
pub fn stage_layers(layers: u64, pp: u64, split: StageSplit) -> Result<Vec<u64>> {
    split_stages(layers, 0, pp, split)
}

/// Layers on each of `pp` stages of a model with `layers` layers and `mtp` prediction depths.
fn split_stages(layers: u64, mtp: u64, pp: u64, split: StageSplit) -> Result<Vec<u64>> {
    if pp == 0 || pp > layers {
        return Err(Error::invalid(
            "pp",
            pp,
            format!("1 to the {layers} layers"),
        ));
    }
    match split {
        StageSplit::Even => {
            let (base, extra) = (layers / pp, layers % pp);
            Ok((0..pp).map(|i| base + u64::from(i >= pp - extra)).collect())
        }
        StageSplit::Llama3 if pp == 1 => Ok(vec![layers]),
        StageSplit::Llama3 => {
            let middle = (layers + 2) / pp;
            if (layers + 2) % pp != 0 || middle < 2 {
                return Err(Error::invalid(
                    "--stages",
                    "llama3",
                    format!(
                        "pp dividing layers + 2 = {} (so first and last hold one fewer)",
                        layers + 2
                    ),
                ));
            }
            Ok((0..pp)
                .map(|i| {
                    if i == 0 || i == pp - 1 {
                        middle - 1
                    } else {
                        middle
                    }
                })
                .collect())
        }
        // Where L + 2 units do not divide evenly, or leave an end stage without a layer, the
        // layers alone spread evenly.
        StageSplit::Balanced if pp == 1 || (layers + 2) % pp != 0 || (layers + 2) / pp < 2 => {
            split_stages(layers, mtp, pp, StageSplit::Even)
        }
        StageSplit::Balanced => {
            let units = (layers + 2) / pp;
            Ok((0..pp)
                .map(|i| units - u64::from(i == 0 || i == pp - 1))
                .collect())
        }
        StageSplit::Loss => {
            // The last stage's share after its `1 + 2D` units, at least one layer.
            let extra = 1 + 2 * mtp;
            let units = layers + extra;
            if pp == 1 || units % pp != 0 || units / pp <= extra {
                return split_stages(layers, mtp, pp, StageSplit::Even);
            }
            let per = units / pp;
            Ok((0..pp)
                .map(|i| if i == pp - 1 { per - extra } else { per })
                .collect())
        }
    }
}

/// Parameters one GPU of a stage holds, `Ψᵢ`: the stage's layers' matrices (and their
/// column-parallel biases) split over TP and their norm vectors (and row-parallel biases)
/// whole, the input embedding (first stage) and the output head (last stage) split over TP by
/// vocabulary, the final norm (last stage) and a learned position table (first stage, as
/// Megatron-LM's `LanguageModelEmbedding` holds it) whole. Tied embeddings on one stage are one matrix;
/// over several stages the last keeps its own copy of the head, as Megatron-LM does.
///
/// The last stage's `layers` count its multi-token-prediction layers ([`mtp_on_stage`]); it
/// holds their projections (`2h·h` each, column-parallel) and three norms each too, and,
/// when it is not the first, a copy of the input embedding the modules read (Megatron-core
/// builds it on the stage that runs them and keeps it in step with the first stage's, beside
/// its own output layer even when the two are tied).
#[inline]
pub fn stage_params(shape: &Shape, tp: u64, layers: u64, first: bool, last: bool) -> f64 {
    let (h, e) = (shape.hidden as f64, shape.embedding_params() as f64);
    let l = layers as f64;
    let head = last && !(first && shape.tied_embeddings);
    let mtp = if last { f64::from(shape.mtp) } else { 0.0 };
    let mtp_embedding = mtp > 0.0 && !first;
    let split = l * shape.layer_split_params() as f64
        + if first || mtp_embedding { e } else { 0.0 }
        + if head { e } else { 0.0 }
        + mtp * 2.0 * h * h;
    let norm = shape.norm_params() as f64;
    let whole = l * shape.layer_whole_params() as f64
        + if last { norm } else { 0.0 }
        + if first {
            shape.position_params() as f64
        } else {
            0.0
        }
        + mtp * 3.0 * norm;
    split / tp as f64 + whole
}

/// The multi-token-prediction layers on stage `index` of `pp`, `(layers, MoE layers)`: all
/// `D` of them on the last stage, after its own (Megatron-core's placement without a
/// `--pipeline-model-parallel-layout`), MoE when the model's last layer is; none elsewhere.
#[inline]
pub fn mtp_on_stage(shape: &Shape, index: u64, pp: u64) -> (u64, u64) {
    if index + 1 != pp || shape.mtp == 0 {
        return (0, 0);
    }
    let d = u64::from(shape.mtp);
    (d, if shape.mtp_is_moe() { d } else { 0 })
}

/// [`stage_params`] of a stage whose `layers` include `moe` MoE layers, leaving out their
/// routed experts ([`stage_expert_params`]): an MoE layer's attention and shared experts split
/// over TP, its norms, router and gate whole ([`Shape::moe_layer_split_params`],
/// [`Shape::moe_layer_whole_params`]). [`stage_params`] itself when `moe` is 0.
#[inline]
pub fn stage_params_with(
    shape: &Shape,
    tp: u64,
    layers: u64,
    moe: u64,
    first: bool,
    last: bool,
) -> f64 {
    let dense = stage_params(shape, tp, layers - moe, first, last);
    if moe == 0 {
        return dense;
    }
    let m = moe as f64;
    dense
        + m * shape.moe_layer_split_params() as f64 / tp as f64
        + m * shape.moe_layer_whole_params() as f64
}

/// Routed-expert parameters one GPU holds for `moe` MoE layers: `L_moe · E · P_expert /
/// (EP · ETP)` — each rank of the EP group holds `E/EP` experts, each split over ETP
/// (Megatron-core's `TEGroupedMLP`; an expert's down-projection bias, gpt-oss's, is counted
/// split with the rest).
#[inline]
pub fn stage_expert_params(shape: &Shape, layout: &Layout, moe: u64) -> f64 {
    let Some(e) = &shape.experts else {
        return 0.0;
    };
    moe as f64 * f64::from(e.routed) * shape.expert_params() as f64
        / (layout.ep * layout.etp) as f64
}

/// The kinds of stage of `layout`'s pipeline of `shape` under `split` ([`StageKinds`]).
pub fn stage_kinds(shape: &Shape, layout: &Layout, split: StageSplit) -> Result<StageKinds> {
    let layers = shape_stages(shape, layout.pp, split)?;
    Ok(kinds_of(&layers))
}

/// The kinds of the stages [`stage_layers`] gives, which make at most [`MAX_STAGE_KINDS`].
pub(crate) fn kinds_of(layers: &[u64]) -> StageKinds {
    StageKinds::of(layers).expect("stage_layers gives one to four kinds of stage")
}

/// Of the layers stage `index` of `pp` keeps in BF16 under FP8
/// ([`crate::cost::step::recipe::Bf16Layers::on_stage`]: the model's first `start` on the
/// first stage, its last `end` on the last), the mixtures of experts, at most `moe`, the
/// stage's own (0 for a dense shape).
pub fn moe_bf16_layers(
    shape: &Shape,
    bf16: crate::cost::step::recipe::Bf16Layers,
    (index, pp): (u64, u64),
    stage_layers: u64,
    moe: u64,
) -> u64 {
    if moe == 0 || bf16.is_none() {
        return 0;
    }
    let l = u64::from(shape.layers);
    let start = u64::from(bf16.start).min(stage_layers);
    let end = u64::from(bf16.end).min(stage_layers);
    let first = if index == 0 {
        moe_layers_in(shape, 0, start)
    } else {
        0
    };
    let last = if index + 1 == pp {
        moe_layers_in(shape, l.saturating_sub(end), end)
    } else {
        0
    };
    (first + last).min(moe)
}

/// MoE layers among layers `start .. start + n` of `shape` (0 for a dense shape).
pub fn moe_layers_in(shape: &Shape, start: u64, n: u64) -> u64 {
    let Some(e) = &shape.experts else {
        return 0;
    };
    let clamp = |x: u64| u32::try_from(x.min(u64::from(shape.layers))).unwrap_or(shape.layers);
    let (lo, hi) = (clamp(start), clamp(start.saturating_add(n)));
    u64::from(e.layers.count(hi) - e.layers.count(lo))
}

/// MoE layers on the stage of `stages` (layers per stage) at `index`, counted as the most that
/// any stage of its run holds — the run of equal stages [`crate::cost::step::pipeline::StageKinds`] lets
/// the first stand for — so the run's representative never holds or runs less than a stage of
/// it. Exact where every stage of the run holds the same number (every layer MoE, or MoE from
/// a layer on); for an interleaved rule (Llama 4's every second layer) at most one layer more
/// than a stage of the run holds.
pub fn moe_layers_of_run(shape: &Shape, stages: &[u64], index: u64) -> u64 {
    if shape.experts.is_none() {
        return 0;
    }
    let i = index as usize;
    let last = stages.len() - 1;
    let start: u64 = stages[..i].iter().sum();
    let layers = stages[i];
    let mut most = moe_layers_in(shape, start, layers);
    // A middle stage's run: the following middle stages of the same layers.
    if i != 0 && i != last {
        let mut at = start + layers;
        for &n in stages[i + 1..last].iter().take_while(|&&n| n == layers) {
            most = most.max(moe_layers_in(shape, at, n));
            at += n;
        }
    }
    most
}

/// The blocks of each kind a hybrid model's stage of `stages` at `index` runs
/// ([`crate::model::hybrid`]): of the run of equal stages [`StageKinds`] lets it stand for,
/// the one with the most MoE blocks, then the most Mamba-2 blocks, then the most attention
/// blocks (the costliest kinds first), so the representative is a stage of the run, its
/// blocks as many as its layers. Exact for a stage of its own (the first, the last, or PP
/// 1). All zero for a shape without a pattern.
pub fn blocks_of_run(shape: &Shape, stages: &[u64], index: u64) -> BlockCounts {
    let Some(hybrid) = &shape.hybrid else {
        return BlockCounts::default();
    };
    let of = |start: u64, n: u64| hybrid.counts_in(start, n);
    let weight = |c: &BlockCounts| (c.moe, c.mamba, c.attention);
    let i = index as usize;
    let last = stages.len() - 1;
    let start: u64 = stages[..i].iter().sum();
    let layers = stages[i];
    let mut most = of(start, layers);
    if i != 0 && i != last {
        let mut at = start + layers;
        for &n in stages[i + 1..last].iter().take_while(|&&n| n == layers) {
            let c = of(at, n);
            if weight(&c) > weight(&most) {
                most = c;
            }
            at += n;
        }
    }
    most
}

/// The parameters one GPU of a hybrid model's stage holds outside its routed experts: its
/// `blocks`' ([`Shape::block_params`]), split over TP or whole, and as [`stage_params`] the
/// embedding on the first stage and the head and final norm on the last.
pub fn hybrid_stage_params(
    shape: &Shape,
    tp: u64,
    blocks: BlockCounts,
    first: bool,
    last: bool,
) -> f64 {
    let (split, whole) = blocks_sum(shape, blocks, |p| (p.split as f64, p.whole as f64));
    let embeddings = stage_params(shape, tp, 0, first, last);
    split / tp as f64 + whole + embeddings
}

/// The matrices of a hybrid stage's `blocks` on one GPU of TP `tp` that a low-precision
/// step keeps copies of (its routed experts' apart).
pub fn hybrid_stage_matrices(shape: &Shape, tp: u64, blocks: BlockCounts) -> f64 {
    blocks_sum(shape, blocks, |p| (p.matrices as f64, 0.0)).0 / tp as f64
}

/// A stage's hidden matrices on one GPU of TP `tp`, the routed experts' apart: what Muon steps
/// with one moment ([`crate::cost::step::muon`]). Its `layers` dense layers' matrices less
/// the `moe` MoE layers' routed experts (their dense part: attention, shared experts), or a
/// hybrid stage's `blocks`' ([`hybrid_stage_matrices`]); and each MoE layer's router, `E·h`,
/// whole on every TP rank.
pub fn stage_hidden_matrices(
    shape: &Shape,
    tp: u64,
    layers: u64,
    moe: u64,
    blocks: Option<BlockCounts>,
) -> f64 {
    let t = tp as f64;
    let layers_part = match blocks {
        Some(c) => hybrid_stage_matrices(shape, tp, c),
        None if moe == 0 => layers as f64 * shape.layer_matrix_params() as f64 / t,
        None => {
            (layers - moe) as f64 * shape.layer_matrix_params() as f64 / t
                + moe as f64 * crate::model::moe_dense_part(shape).layer_matrix_params() as f64 / t
        }
    };
    let router = shape
        .experts
        .as_ref()
        .map_or(0.0, |e| f64::from(e.routed) * shape.hidden as f64);
    layers_part + moe as f64 * router
}

/// `Σ count · part(block)` over the four kinds.
fn blocks_sum(
    shape: &Shape,
    c: BlockCounts,
    part: impl Fn(crate::model::BlockParams) -> (f64, f64),
) -> (f64, f64) {
    [
        (Block::Mamba, c.mamba),
        (Block::Attention, c.attention),
        (Block::Mlp, c.mlp),
        (Block::Moe, c.moe),
    ]
    .iter()
    .fold((0.0, 0.0), |(a, b), &(block, n)| {
        let (x, y) = part(shape.block_params(block));
        (a + n as f64 * x, b + n as f64 * y)
    })
}

/// The rules between a step and its pipeline: the micro-batches a step takes, which
/// interleaving its stages allow, and how many micro-batches a stage holds in flight.
impl Step {
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
        if self.schedule == Schedule::OneFOneB || self.interleaves_in(layout, kinds, m) {
            return Ok(());
        }
        let v = self.schedule.chunks();
        let few = kinds.kinds().iter().find(|k| kinds.room(k) < v);
        self.interleaving_refused(layout, m, few.map(|k| k.layers))
    }

    /// Whether [`Step::interleaving_allowed_in`] lets the step's schedule be, without the
    /// reason when it does not: 1F1B always; `v` chunks where the pipeline has two stages or
    /// more, the `m` micro-batches are a multiple of them and every stage has room for `v`
    /// chunks ([`StageKinds::deepest_interleaving`]); a V schedule where the pipeline has two
    /// stages or more, every stage room for two chunks and the `m` micro-batches are at
    /// least [`Schedule::fewest_micro_batches`].
    #[inline]
    pub fn interleaves_in(&self, layout: &Layout, kinds: &StageKinds, m: u64) -> bool {
        match self.schedule {
            Schedule::OneFOneB => true,
            Schedule::Interleaved(v) => {
                layout.pp >= 2 && m % layout.pp == 0 && kinds.deepest_interleaving() >= u64::from(v)
            }
            Schedule::ZeroBubbleV | Schedule::DualPipeV => {
                layout.pp >= 2
                    && m >= self.schedule.fewest_micro_batches(layout.pp)
                    && kinds.deepest_interleaving() >= 2
            }
        }
    }

    /// Why an interleaved or V step is refused: the first rule it breaks (none: `Ok`).
    #[cold]
    fn interleaving_refused(&self, layout: &Layout, m: u64, short: Option<u64>) -> Result<()> {
        if layout.pp < 2 {
            return Err(Error::invalid(
                "--schedule",
                self.schedule,
                "1f1b when pp = 1",
            ));
        }
        let fewest = self.schedule.fewest_micro_batches(layout.pp);
        if self.schedule.is_v() && m < fewest {
            return Err(Error::invalid(
                "--schedule",
                self.schedule,
                format!(
                    "1f1b or interleaving, or at least {fewest} micro-batches a step for {} over pp = {} (the step has {m})",
                    self.schedule, layout.pp
                ),
            ));
        }
        if !self.schedule.is_v() && m % layout.pp != 0 {
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
        if self.schedule == Schedule::OneFOneB {
            return Ok(());
        }
        let v = self.schedule.chunks();
        let short = (0..stage_layers.len()).find(|&i| chunk_room(stage_layers, i) < v);
        self.interleaving_refused(layout, m, short.map(|i| stage_layers[i]))
    }

    /// Micro-batches' worth of one stage's layers whose activations stage `stage` holds at
    /// once, for `m` micro-batches over `pp` stages: `min(p − i, m)` for 1F1B; for `v` chunks,
    /// `min(2(p − i − 1) + (v − 1)p + 1, m·v)` chunk forwards of `1/v` of the layers each.
    ///
    /// The V schedules hold as much on every GPU: ZB-V `p` micro-batches of a GPU's layers
    /// (Qi et al. 2024, §6: "a peak activations memory of pM_B", balanced over the workers),
    /// DualPipeV `2p + 1` chunk micro-batches of half a GPU's layers, `p + ½` (the DualPipe
    /// README: "PP+1" activations per device of PP/2 devices, counted in stages of `1/(2p)` of
    /// the model).
    pub fn in_flight(&self, stage: u64, pp: u64, m: u64) -> f64 {
        match self.schedule {
            Schedule::OneFOneB => (pp - stage).min(m) as f64,
            Schedule::ZeroBubbleV => pp.min(m) as f64,
            Schedule::DualPipeV => (2 * pp + 1).min(2 * m) as f64 / 2.0,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::cost::step::experts::tests::mixtral;
    use crate::cost::step::precision::Precision;
    use crate::cost::step::Recompute;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;
    use crate::model::LayerSet;

    #[test]
    fn the_first_stage_holds_a_learned_position_table_whole() {
        // A GPT-style block: the first stage adds the embedding split over TP and the
        // 2,048-row table whole; the last, the final LayerNorm's 2h.
        let mut spec: crate::model::ShapeSpec = crate::model::preset("8b").unwrap().into();
        spec.style = crate::model::Style::gpt(2048);
        let shape = spec.build().unwrap();
        let h = shape.hidden as f64;
        let middle = stage_params(&shape, 8, 4, false, false);
        let first = stage_params(&shape, 8, 4, true, false);
        let last = stage_params(&shape, 8, 4, false, true);
        assert_eq!(
            first - middle,
            shape.embedding_params() as f64 / 8.0 + 2048.0 * h
        );
        assert_eq!(
            last - middle,
            shape.embedding_params() as f64 / 8.0 + 2.0 * h
        );
    }

    #[test]
    fn the_v_schedules_hold_as_much_on_every_gpu() {
        let step = |schedule| Step {
            schedule,
            ..Step::default_with_batch(
                &layout(8, 8),
                8192,
                1 << 24,
                crate::cost::step::stack::Stack::Torchtitan,
            )
        };
        for i in 0..8 {
            assert_eq!(step(Schedule::ZeroBubbleV).in_flight(i, 8, 64), 8.0);
            assert_eq!(step(Schedule::DualPipeV).in_flight(i, 8, 64), 8.5);
        }
        // Never more than the step's micro-batches.
        assert_eq!(step(Schedule::DualPipeV).in_flight(0, 8, 4), 4.0);
        assert_eq!(Schedule::DualPipeV.fewest_micro_batches(8), 16);
        assert_eq!(Schedule::ZeroBubbleV.fewest_micro_batches(8), 15);
    }

    #[test]
    fn a_stage_counts_the_moe_layers_of_its_run() {
        let mut s = mixtral();
        // DeepSeek's rule: dense first three, MoE after. 32 layers on 4 stages of 8.
        s.experts.as_mut().unwrap().layers = LayerSet::Every { first: 3, step: 1 };
        let stages = [8, 8, 8, 8];
        assert_eq!(moe_layers_of_run(&s, &stages, 0), 5);
        assert_eq!(moe_layers_of_run(&s, &stages, 1), 8);
        assert_eq!(moe_layers_of_run(&s, &stages, 3), 8);
        // Llama 4's rule, every second layer from the second, on stages of 3: the first
        // middle stage (layers 3..6) holds 2 (3 and 5), the next (6..9) 1; its run counts 2.
        s.experts.as_mut().unwrap().layers = LayerSet::Every { first: 1, step: 2 };
        let stages = [3, 3, 3, 3, 20];
        assert_eq!(moe_layers_in(&s, 6, 3), 1);
        assert_eq!(moe_layers_of_run(&s, &stages, 1), 2);
        assert_eq!(moe_layers_of_run(&s, &stages, 0), 1);
        assert_eq!(moe_layers_of_run(&s, &stages, 4), 10);
        // A dense shape has none.
        let dense = crate::model::preset("8b").unwrap();
        assert_eq!(moe_layers_of_run(&dense, &[16, 16], 1), 0);
    }

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
        for split in [
            StageSplit::Even,
            StageSplit::Llama3,
            StageSplit::Balanced,
            StageSplit::Loss,
        ] {
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
}
