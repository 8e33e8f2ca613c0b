//! The pipeline of stages: how a model's layers spread over `pp` stages ([`stage_layers`]),
//! the kinds of stage that decide its peak and its pace ([`StageKinds`]), the MoE layers of a
//! stage, and the parameters one GPU of a stage holds ([`stage_params`], `Ψᵢ`), which the
//! memory and time models both read.

use crate::cost::step::stack::StageSplit;
use crate::error::Error;
use crate::error::Result;
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

/// Layers on each of `pp` stages of a model with `layers` layers.
pub fn stage_layers(layers: u64, pp: u64, split: StageSplit) -> Result<Vec<u64>> {
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
            stage_layers(layers, pp, StageSplit::Even)
        }
        StageSplit::Balanced => {
            let units = (layers + 2) / pp;
            Ok((0..pp)
                .map(|i| units - u64::from(i == 0 || i == pp - 1))
                .collect())
        }
    }
}

/// Parameters one GPU of a stage holds, `Ψᵢ`: the stage's layers' matrices (and their
/// column-parallel biases) split over TP and their RMSNorm vectors (and row-parallel biases)
/// whole, the input embedding (first stage) and the output head (last stage) split over TP by
/// vocabulary, the final norm (last stage) whole. Tied embeddings on one stage are one matrix;
/// over several stages the last keeps its own copy of the head, as Megatron-LM does.
#[inline]
pub fn stage_params(shape: &Shape, tp: u64, layers: u64, first: bool, last: bool) -> f64 {
    let (h, e) = (shape.hidden as f64, shape.embedding_params() as f64);
    let l = layers as f64;
    let head = last && !(first && shape.tied_embeddings);
    let split = l * shape.layer_split_params() as f64
        + if first { e } else { 0.0 }
        + if head { e } else { 0.0 };
    let whole = l * shape.layer_whole_params() as f64 + if last { h } else { 0.0 };
    split / tp as f64 + whole
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
    let layers = stage_layers(u64::from(shape.layers), layout.pp, split)?;
    Ok(kinds_of(&layers))
}

/// The kinds of the stages [`stage_layers`] gives, which make at most [`MAX_STAGE_KINDS`].
pub(crate) fn kinds_of(layers: &[u64]) -> StageKinds {
    StageKinds::of(layers).expect("stage_layers gives one to four kinds of stage")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::step::experts::tests::mixtral;
    use crate::model::LayerSet;

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
}
