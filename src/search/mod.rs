//! **The search part**: every design of a brief — shapes × token grid × layouts — graded, ranked
//! and reduced to a Pareto front; shards and their merge; progress through a callback. Uses
//! `plan`, `brief`, `cost`, `model` and the ground floor; never reads a file or draws.
//!
//! The search: every (shape, tokens, TP, PP, ZeRO) on a token grid, graded in parallel, the
//! passing plans ranked and their Pareto front found.
//!
//! The plate model's checks separate — memory depends on (shape, layout), days and loss on
//! (shape, tokens) — so the hot loop works through the grid one token count at a time, computes
//! loss and days once for it, and pairs it with each layout of the shape whose memory (computed
//! once per layout) fits. Every candidate is graded by the same check functions as
//! [`crate::plan::evaluate`]; only the printed plans are graded again in full. The property
//! tests in `tests/properties.rs` compare the result with grading every candidate one by one.
//!
//! This is the only parallel code; the caller chooses the rayon pool it runs on. Each worker keeps its own top-K list and Pareto front;
//! they are merged at the end. Both are canonical under a total order, so the result is the
//! same, byte for byte, at any thread count.
//!
//! Every passing plan (`--all`) is not collected: [`search_all`] returns [`AllPlans`], which
//! makes them one at a time in ranking order from each configuration's interval of passing
//! grid counts (`src/search/ordered.rs`), so memory does not grow with them.

mod ordered;
pub mod pareto;
pub mod progress;
pub mod rank;
pub mod sensitivity;
pub mod shard;

use itertools::{iproduct, Either, Itertools};
use rayon::prelude::*;

use crate::brief::Brief;
use crate::cost::memory::buffers::userbuffers;
use crate::cost::memory::detailed::{StagePeaks, StageShares};
use crate::cost::memory::MemoryModel;
use crate::cost::run::plate as time;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::{Detailed, Options};
use crate::cost::step::pipeline::stage_kinds;
use crate::cost::step::pipeline::StageKinds;
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::cost::step::Recompute;
use crate::cost::step::{BatchTarget, Schedule, Step};
use crate::cost::step_time::micro_batch::MicroBatchCache;
use crate::cost::step_time::stage::Unsharded;
use crate::cost::step_time::Unscheduled;
use crate::cost::Machine;
use crate::error::{Error, Result};
use crate::laws::ComputeOptimal;
use crate::model::layout::{layouts, layouts_with, ExpertSpace, Layout};
use crate::model::Shape;
use crate::plan::limits::{loss, loss_meets, memory_fits, within_time_and_cost};
use crate::plan::pace::Pace;
use crate::plan::runnable::{detailed_grade, runnable_key, DetailedGrade};
use crate::plan::sensitivity::SearchSensitivity;
use crate::plan::verdict::{
    facet, layout_order, loss_bound, time_bound, verdict_because, Exclusion, Exclusions, Facet,
    Lightest, ShapeVerdict,
};
use crate::plan::{evaluate_cached, Design, Plan};
use crate::search::ordered::{Line, Merge};
use crate::search::pareto::{exact_front, last_on_front, Chain, Front};
use crate::search::progress::Progress;
use crate::search::rank::{tie_break, Candidate, ChoiceKey, Distinct, Rank, TopK};
use crate::units::gb;

/// Token counts to try: `min, min + step, …` up to `max` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenGrid {
    /// First token count.
    min: u64,
    /// Last token count (inclusive; the grid stops at the last step not past it).
    max: u64,
    /// Step between counts.
    step: u64,
}

impl Default for TokenGrid {
    /// 10^10 to 5 × 10^13 tokens in steps of 10^10: 5,000 counts.
    fn default() -> Self {
        TokenGrid {
            min: 10_000_000_000,
            max: 50_000_000_000_000,
            step: 10_000_000_000,
        }
    }
}

impl TokenGrid {
    /// The most counts a grid may have, so a typo cannot start a sweep of years.
    pub const MAX_POINTS: u64 = 100_000_000;

    /// A grid, checked: `1 ≤ min ≤ max`, `step ≥ 1`, at most [`Self::MAX_POINTS`] counts.
    pub fn new(min: u64, max: u64, step: u64) -> Result<Self> {
        if min == 0 {
            return Err(Error::invalid("--tokens-min", min, "a whole number ≥ 1"));
        }
        if max < min {
            return Err(Error::invalid(
                "--tokens-max",
                max,
                format!("at least --tokens-min ({min})"),
            ));
        }
        if step == 0 {
            return Err(Error::invalid("--tokens-step", step, "a whole number ≥ 1"));
        }
        let grid = TokenGrid { min, max, step };
        if grid.len() > Self::MAX_POINTS {
            return Err(Error::invalid(
                "--tokens-step",
                step,
                format!(
                    "a step giving at most {} token counts (this gives {})",
                    Self::MAX_POINTS,
                    grid.len()
                ),
            ));
        }
        Ok(grid)
    }

    /// This grid checked again, as [`Self::new`] checks it (for a grid read from a file).
    pub fn checked(self) -> Result<Self> {
        TokenGrid::new(self.min, self.max, self.step)
    }

    /// How many token counts the grid has.
    pub fn len(&self) -> u64 {
        (self.max - self.min) / self.step + 1
    }

    /// Whether the grid is empty (never, for a checked grid).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `i`-th token count.
    pub fn at(&self, i: u64) -> u64 {
        self.min + i * self.step
    }
}

/// The memory models a search tries with each layout.
#[derive(Debug, Clone, PartialEq)]
pub enum MemorySpace {
    /// The plate model alone.
    Plate,
    /// The detailed model with each of these steps.
    Detailed {
        /// The training steps to try.
        steps: Vec<Step>,
        /// The detailed model's settings.
        options: Options,
        /// Also every interleaving depth a layout allows: for each 1F1B step of a pipeline,
        /// `interleaved:V` for V from 2 to the most every stage allows (a chunk a layer, one
        /// more on the first and last stage for the embedding or the head), where the
        /// micro-batches are a multiple of the stages (Megatron-LM's rule).
        interleave: bool,
        /// The batch each layout aims at, when no step fixes it: each step's
        /// `global_batch_tokens` is then replaced, layout by layout, by the whole rounds of
        /// `b·s·DP` nearest the target ([`BatchTarget::resolve`]); `None` keeps the steps'
        /// own batches, which a layout they do not divide cannot train on.
        batch: Option<BatchTarget>,
        /// The context-parallel degrees and hybrid-sharding replicas tried with each
        /// (TP, PP, ZeRO) layout.
        parallel: ParallelSpace,
        /// Also, layout by layout, every micro-batch size that divides its local batch (the
        /// sequences a replica takes a step at `batch`'s target): for each step of one
        /// sequence a micro-batch, the same step at each such size (Megatron-LM's rule, and
        /// Calculon's space). Without `batch`, nothing.
        divisors: bool,
    },
}

/// The fewest tokens of a sequence each context-parallel rank keeps in the default space:
/// 4,096, the chunk NVIDIA's Llama 3.1 recipes run at CP 2 on 8,192 tokens (below it the
/// exchange of K and V outlasts the attention it hides behind).
pub const MIN_TOKENS_PER_CP_RANK: u64 = 4096;

/// The context-parallel degrees and hybrid-sharding replicas a detailed search tries with each
/// layout. Empty lists mean the defaults: CP 1 and each power of two that leaves every rank at
/// least [`MIN_TOKENS_PER_CP_RANK`] tokens of the longest sequence searched; one shard group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParallelSpace {
    /// CP degrees (empty: the default rule).
    pub cps: Vec<u64>,
    /// Hybrid-sharding replica counts (empty: 1).
    pub replicates: Vec<u64>,
    /// The EP and ETP degrees tried with each layout of a mixture of experts.
    pub experts: ExpertSpace,
}

impl ParallelSpace {
    /// The CP degrees for sequences of at most `seq_len` tokens.
    pub fn cps_for(&self, seq_len: u64) -> Vec<u64> {
        if !self.cps.is_empty() {
            return self.cps.clone();
        }
        std::iter::successors(Some(1u64), |&c| c.checked_mul(2))
            .take_while(|&c| c == 1 || seq_len / c >= MIN_TOKENS_PER_CP_RANK)
            .collect()
    }

    /// The replica counts.
    pub fn replicates(&self) -> Vec<u64> {
        if self.replicates.is_empty() {
            vec![1]
        } else {
            self.replicates.clone()
        }
    }
}

impl MemorySpace {
    /// The layouts of `shape` the space tries: the plate's (TP, PP, ZeRO) alone, or with each
    /// CP degree and replica count of the detailed space.
    pub fn layouts(&self, brief: &Brief, shape: &Shape) -> Vec<Layout> {
        match self {
            MemorySpace::Plate => layouts(brief, shape),
            MemorySpace::Detailed {
                steps, parallel, ..
            } => {
                let longest = steps
                    .iter()
                    .map(|s| s.seq_len)
                    .max()
                    .unwrap_or(brief.seq_len);
                layouts_with(
                    brief,
                    shape,
                    &parallel.cps_for(longest),
                    &parallel.replicates(),
                    &parallel.experts,
                )
            }
        }
    }

    /// Every memory model of the space, in step order, without the depths `interleave` adds
    /// per layout.
    pub fn models(&self) -> Vec<MemoryModel> {
        match self {
            MemorySpace::Plate => vec![MemoryModel::Plate],
            MemorySpace::Detailed { steps, options, .. } => steps
                .iter()
                .map(|&step| {
                    MemoryModel::Detailed(Detailed {
                        step,
                        options: *options,
                    })
                })
                .collect(),
        }
    }

    /// The memory models of the space for `layout` of `shape`, in step order: [`models`]
    /// and, with `interleave`, every interleaving depth the layout allows.
    ///
    /// [`models`]: MemorySpace::models
    pub fn models_for(&self, shape: &Shape, layout: &Layout) -> Vec<MemoryModel> {
        self.steps_for(shape, layout)
            .into_iter()
            .filter_map(|step| step.ok())
            .collect()
    }

    /// [`MemorySpace::models_for`], with the steps the batch rule turns away as the errors
    /// that say why (after the others). Sequence parallelism with TP 1, beside the same step
    /// without it, is that step (Megatron-LM turns it off), so it is left out.
    pub fn steps_for(&self, shape: &Shape, layout: &Layout) -> Vec<Result<MemoryModel>> {
        let MemorySpace::Detailed { options, .. } = self else {
            return self.models().into_iter().map(Ok).collect();
        };
        let (mut steps, mut refused, mut extra) = (Vec::new(), Vec::new(), Vec::new());
        self.steps_into(shape, layout, &mut steps, &mut refused, &mut extra);
        let refused: Vec<Error> = refused.iter().map(|s| self.refusal(s, layout)).collect();
        steps
            .into_iter()
            .map(|step| {
                Ok(MemoryModel::Detailed(Detailed {
                    step,
                    options: *options,
                }))
            })
            .chain(refused.into_iter().map(Err))
            .collect()
    }

    /// Why the batch rule turns `step` away under `layout` ([`BatchTarget::resolve`]'s error).
    fn refusal(&self, step: &Step, layout: &Layout) -> Error {
        match self {
            MemorySpace::Detailed {
                batch: Some(target),
                ..
            } => target
                .resolve(step.micro_batch, step.seq_len, layout.dp)
                .err(),
            _ => None,
        }
        .expect("a step the batch rule refused")
    }

    /// The steps of [`MemorySpace::steps_for`] into `steps` and those the batch rule refuses
    /// into `refused` ([`MemorySpace::refusal`] says why; `extra`: room for the micro-batch
    /// sizes a layout adds; all three cleared first), so a search reuses the buffers from
    /// layout to layout. Nothing for the plate's space.
    fn steps_into(
        &self,
        shape: &Shape,
        layout: &Layout,
        all: &mut Vec<Step>,
        refused: &mut Vec<Step>,
        extra: &mut Vec<Step>,
    ) {
        all.clear();
        refused.clear();
        extra.clear();
        let MemorySpace::Detailed {
            steps,
            options,
            interleave,
            batch,
            divisors,
            ..
        } = self
        else {
            return;
        };
        if let (true, Some(target)) = (*divisors, batch) {
            for s in steps.iter().filter(|s| s.micro_batch == 1) {
                let local = target
                    .nearest(1, s.seq_len, layout.dp)
                    .map_or(0, |g| g / (s.seq_len * layout.dp));
                for d in local_batch_divisors(local) {
                    let t = Step {
                        micro_batch: d,
                        ..*s
                    };
                    if !steps.contains(&t) {
                        extra.push(t);
                    }
                }
            }
        }
        for s in steps.iter().chain(extra.iter()) {
            // Sequence parallelism and the TP overlap that needs it are nothing at TP 1: such
            // a step is left out where the space has it without them.
            let without = Step {
                sequence_parallel: false,
                tp_comm_overlap: false,
                ..*s
            };
            if (s.sequence_parallel || s.tp_comm_overlap)
                && layout.tp == 1
                && (steps.contains(&without) || extra.contains(&without))
            {
                continue;
            }
            match batch {
                None => all.push(*s),
                Some(target) => match target.resolved(s.micro_batch, s.seq_len, layout.dp) {
                    Some(global_batch_tokens) => all.push(Step {
                        global_batch_tokens,
                        ..*s
                    }),
                    None => refused.push(*s),
                },
            }
        }
        all.sort_unstable();
        all.dedup();
        if !(*interleave && layout.pp >= 2) {
            return;
        }
        // The deepest interleaving every stage allows (Step's rule).
        let deepest = stage_kinds(shape, layout, options.stages)
            .map_or(0, |k| k.deepest_interleaving())
            .min(u64::from(u32::MAX)) as u32;
        // Whether the step's micro-batches are a multiple of the stages.
        let interleaves = |s: &Step| {
            s.micro_batch
                .checked_mul(s.seq_len)
                .and_then(|t| t.checked_mul(layout.dp))
                .filter(|&t| t > 0 && s.global_batch_tokens % t == 0)
                .is_some_and(|t| (s.global_batch_tokens / t) % layout.pp == 0)
        };
        let n = all.len();
        if all.iter().any(|s| s.schedule != Schedule::OneFOneB) {
            // Schedules given by name may repeat the depths: sorted and deduplicated.
            for i in 0..n {
                let s = all[i];
                if s.schedule == Schedule::OneFOneB && interleaves(&s) {
                    for v in 2..=deepest {
                        all.push(Step {
                            schedule: Schedule::Interleaved(v),
                            ..s
                        });
                    }
                }
            }
            all.sort_unstable();
            all.dedup();
            return;
        }
        // Every step 1F1B: each run of steps equal but for TP overlap, precision and batch,
        // followed by its depths in order, is the order sorting them all gives (the schedule
        // comes before the overlap, the precision and the batch in a step's order), with
        // nothing to deduplicate. The 1F1B steps move to `extra` (no longer needed) and are
        // written back run by run, each followed by its depths.
        std::mem::swap(all, extra);
        all.clear();
        let mut start = 0;
        while start < n {
            let same = |s: &Step, t: &Step| {
                (s.micro_batch, s.seq_len, s.recompute, s.sequence_parallel)
                    == (t.micro_batch, t.seq_len, t.recompute, t.sequence_parallel)
            };
            let run = &extra[start..n];
            let end = start + run.iter().take_while(|s| same(s, &run[0])).count();
            let run = &extra[start..end];
            all.extend_from_slice(run);
            if deepest >= 2 {
                // The run's steps that interleave, at depth 2, then each deeper depth in turn.
                let first = all.len();
                all.extend(run.iter().filter(|s| interleaves(s)).map(|s| Step {
                    schedule: Schedule::Interleaved(2),
                    ..*s
                }));
                let width = all.len() - first;
                for v in 3..=deepest {
                    for i in first..first + width {
                        let s = Step {
                            schedule: Schedule::Interleaved(v),
                            ..all[i]
                        };
                        all.push(s);
                    }
                }
            }
            start = end;
        }
    }
}

/// Every divisor of `local` above 1, in pairs `(d, local / d)` up to the square root (none
/// for 0 or 1).
fn local_batch_divisors(local: u64) -> impl Iterator<Item = u64> {
    (1..)
        .take_while(move |d| d * d <= local)
        .filter(move |d| local % d == 0)
        .flat_map(move |d| [d, local / d])
        .filter(|&d| d > 1)
        .dedup()
}

/// Refuses, by name and once, a precision the GPU or the stack cannot train in, before a
/// search over it starts (`--precisions`, a workshop search's `precisions`).
pub fn searchable_precision(brief: &Brief, stack: Stack, precision: Precision) -> Result<()> {
    if !stack.settings().trains(precision) {
        return Err(Error::invalid(
            "--precisions",
            precision,
            format!("precisions the {stack} stack trains in (it has no {precision} recipe)"),
        ));
    }
    precision
        .supported_on(brief.fp8_tflops, brief.mxfp8)
        .map_err(|_| {
            Error::invalid(
                "--precisions",
                precision,
                "precisions the GPU has tensor cores for (brief.fp8_tflops > 0; mxfp8 needs brief.mxfp8, Blackwell)",
            )
        })
}

impl MemorySpace {
    /// The space with each of its steps in each of `precisions` (none: unchanged) and the
    /// context-parallel degrees and replicas of `parallel`; the plate's space is unchanged.
    pub fn with_parallel(self, precisions: &[Precision], parallel: ParallelSpace) -> Self {
        match self {
            MemorySpace::Plate => MemorySpace::Plate,
            MemorySpace::Detailed {
                steps,
                options,
                interleave,
                batch,
                divisors,
                ..
            } => {
                let mut steps: Vec<Step> = if precisions.is_empty() {
                    steps
                } else {
                    iproduct!(steps, precisions.iter().copied())
                        .map(|(s, precision)| Step { precision, ..s })
                        .collect()
                };
                steps.sort();
                steps.dedup();
                MemorySpace::Detailed {
                    steps,
                    options,
                    interleave,
                    batch,
                    parallel,
                    divisors,
                }
            }
        }
    }
}

/// Micro-batch sizes a detailed search tries when none are given.
pub const DEFAULT_MICRO_BATCHES: [u64; 3] = [1, 2, 4];
/// Recomputation modes a detailed search tries when none are given.
pub const DEFAULT_RECOMPUTE: [Recompute; 3] =
    [Recompute::None, Recompute::Selective, Recompute::Full];

impl MemorySpace {
    /// The detailed search's default space under `options`: every default micro-batch and
    /// recomputation, sequence parallelism on and off, TP communication overlapped and not
    /// (where the stack overlaps it, with sequence parallelism), 1F1B and (where the stack
    /// interleaves) every interleaving depth, at the brief's sequence, each layout at the
    /// global batch nearest the brief's target.
    pub fn detailed_defaults(brief: &Brief, options: Options) -> Self {
        let overlaps = options.stack.overlaps_tp();
        let mut steps: Vec<Step> = iproduct!(
            DEFAULT_MICRO_BATCHES,
            DEFAULT_RECOMPUTE,
            [true, false],
            [false, true]
        )
        .filter(|&(_, _, sp, overlap)| !overlap || (sp && overlaps))
        .map(
            |(micro_batch, recompute, sequence_parallel, tp_comm_overlap)| Step {
                micro_batch,
                seq_len: brief.seq_len,
                recompute,
                sequence_parallel,
                schedule: Schedule::OneFOneB,
                tp_comm_overlap,
                precision: Precision::Bf16,
                global_batch_tokens: brief.batch_target_tokens,
            },
        )
        .collect();
        steps.sort();
        MemorySpace::Detailed {
            steps,
            interleave: options.stack.settings().interleaving,
            options,
            batch: Some(brief.batch_target()),
            parallel: ParallelSpace::default(),
            divisors: true,
        }
    }
}

/// What to search and how to report it.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// Token counts to try.
    pub grid: TokenGrid,
    /// The order of the reported plans.
    pub rank: Rank,
    /// How many plans to report; `None` for every passing plan.
    pub top: Option<usize>,
    /// The memory models to try with each layout.
    pub memory: MemorySpace,
    /// How days are computed.
    pub time: TimeModel,
    /// Rank over every whole token count in the shapes' windows rather than over the grid.
    pub exact: bool,
    /// What a row of the ranked list stands for: every plan, or each (shape, layout, step)
    /// or each shape once, at its best token count.
    pub distinct: Distinct,
    /// Thin the Pareto front to one plan per distinct choice too (the best under the
    /// ranking), as `--distinct` given by name asks; the front's plans are otherwise kept.
    pub distinct_front: bool,
}

impl Default for SearchOptions {
    /// The default grid, ranked by loss, the top 10, the plate model.
    fn default() -> Self {
        SearchOptions {
            grid: TokenGrid::default(),
            rank: Rank::Loss,
            top: Some(10),
            memory: MemorySpace::Plate,
            time: TimeModel::Plate,
            exact: false,
            distinct: Distinct::Plan,
            distinct_front: false,
        }
    }
}

/// One way to run a shape: a layout, a memory model (with its step), the memory it needs and,
/// under the detailed time model, its pace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// The layout.
    pub layout: Layout,
    /// The memory model and step.
    pub model: MemoryModel,
    /// Per-GPU memory, bytes.
    pub bytes: f64,
    /// How days grow with tokens.
    pub pace: Pace,
    /// The runnable-first key ([`Candidate::prefer`]): for a plate configuration, its days
    /// per token under the detailed model when it fits there (+∞ when not); 0 otherwise.
    pub prefer: f64,
}

/// Every valid configuration of `shape`: each layout with each memory model of the space whose
/// step goes with it, with its memory and pace under `time`.
pub fn configurations(
    brief: &Brief,
    shape: &Shape,
    space: &MemorySpace,
    time: &TimeModel,
) -> Vec<Config> {
    configurations_counted(brief, shape, space, time).0
}

/// [`configurations`], and the configurations left out, by the rule that left them out: the
/// batch rule, a step the layout's stages do not allow, a time model that cannot grade it.
pub fn configurations_counted(
    brief: &Brief,
    shape: &Shape,
    space: &MemorySpace,
    time: &TimeModel,
) -> (Vec<Config>, Vec<Exclusion>) {
    let mut configs = Vec::new();
    let excluded = for_each_configuration(brief, shape, space, time, |c| configs.push(c));
    (configs, excluded)
}

/// Each valid configuration of [`configurations_counted`] to `visit`, in the same order, and
/// the ones left out, without holding them.
fn for_each_configuration(
    brief: &Brief,
    shape: &Shape,
    space: &MemorySpace,
    time: &TimeModel,
    mut visit: impl FnMut(Config),
) -> Vec<Exclusion> {
    let machine = brief.machine();
    let mut excluded = Exclusions::default();
    let mut cache = MicroBatchCache::default();
    for layout in space.layouts(brief, shape) {
        for model in space.steps_for(shape, &layout) {
            let config = model.and_then(|model| {
                let bytes = model.memory(brief.seq_len, shape, &layout)?.total();
                let run =
                    time.run_time_cached(&machine, shape, &layout, &model, 1, Some(&mut cache))?;
                let pace = Pace::from_days_per_token(run.map(|r| r.days_per_token));
                Ok(Config {
                    layout,
                    model,
                    bytes,
                    pace,
                    prefer: 0.0,
                })
            });
            match config {
                Ok(c) => visit(c),
                Err(e) => excluded.add(&e),
            }
        }
    }
    excluded.into_vec()
}

/// A worker's room for a shape's kept configurations and slower depths ([`Weighed`]), reused
/// from shape to shape and, on each thread, from search to search ([`Buffers::take`]).
#[derive(Default)]
struct Buffers {
    configs: Vec<Config>,
    slower: Vec<f64>,
}

/// The most a thread keeps in its [`Buffers`] between shapes, bytes: a search of huge shapes
/// lets its larger buffers go rather than hold them for the process's life.
const MAX_KEPT_BYTES: usize = 64 << 20;

thread_local! {
    /// Each thread's [`Buffers`], between the shapes it searches.
    static BUFFERS: std::cell::RefCell<Buffers> = std::cell::RefCell::default();
    /// Each thread's [`Scratch`], between the shapes it weighs.
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

impl Buffers {
    /// This thread's buffers, as its last shape left them (empty the first time), so a search
    /// repeated in one process (the Python package, the workshop's server, a bench) neither
    /// grows them again nor has the system take their pages back and fault them in again.
    fn take() -> Buffers {
        BUFFERS.with_borrow_mut(std::mem::take)
    }

    /// Keeps these buffers for this thread's next shape (not beyond [`MAX_KEPT_BYTES`]).
    fn keep(self) {
        let bytes = self.configs.capacity() * std::mem::size_of::<Config>()
            + self.slower.capacity() * std::mem::size_of::<f64>();
        if bytes <= MAX_KEPT_BYTES {
            BUFFERS.with_borrow_mut(|b| *b = self);
        }
    }
}

/// A configuration of the layout being weighed that fits and is kept
/// ([`weighed_configurations`]): its step's place, its memory and its pace (with the layout and
/// the step, its [`Config`]).
struct Kept {
    place: u32,
    bytes: f64,
    pace: Pace,
}

/// Whether `model`'s step interleaves: one of its step's depths beside the 1F1B step.
fn is_depth(model: &MemoryModel) -> bool {
    model
        .step()
        .is_some_and(|s| s.schedule != Schedule::OneFOneB)
}

/// What [`weighed_configurations`] works in while it weighs a shape, kept on each thread from
/// shape to shape and search to search, as [`Buffers`] are: each holds no more than one set of
/// degrees' steps and slots (a few thousand at most), so it is kept whole.
#[derive(Default)]
struct Scratch {
    shared: Shared,
    /// The layout's steps, those the batch rule refused, and room to build them.
    steps: Vec<Step>,
    refused: Vec<Step>,
    extra: Vec<Step>,
    /// The steps as memory models, each configuration's own.
    models: Vec<MemoryModel>,
    /// The layout's kept configurations, while its slower depths are found.
    kept: Vec<Kept>,
    over: OverCap,
    cache: MicroBatchCache,
}

/// What the search keeps of a shape's configurations: those that fit in memory (with their
/// pace), how many there are in all, the lightest, and the rules that left others out.
struct Weighed {
    /// The configurations that fit in memory and were kept.
    fitting: Vec<Config>,
    /// The days a token of the kept configurations left out of `fitting` as slower depths
    /// ([`slower_than`]), when asked for.
    slower: Vec<f64>,
    /// The fastest configuration that fits ([`pace_order`]'s first).
    fastest: Option<Config>,
    /// How many valid configurations were weighed in full (the rest decided by a bound).
    graded: u64,
    /// Every valid configuration, when none fits (the verdict then names the fastest).
    unfit: Option<Config>,
    /// How many valid configurations there are.
    all: u64,
    /// The lightest valid configuration.
    lightest: Option<Lightest>,
    /// The configurations left out, by rule.
    excluded: Vec<Exclusion>,
    /// The tallies of each context-parallel degree and precision.
    tallies: Tallies,
}

/// Makes `current` the configuration (`bytes`, `layout`, `step`) if that is lighter
/// ([`lightest`]'s order; the first on a tie), in place.
fn lighten(current: &mut Option<Lightest>, bytes: f64, layout: &Layout, step: Option<&Step>) {
    let lighter = |l: &Lightest| {
        bytes
            .total_cmp(&l.bytes)
            .then_with(|| layout_order(layout, &l.layout))
            .then_with(|| step.cmp(&l.step.as_ref()))
            .is_lt()
    };
    if current.as_ref().is_none_or(lighter) {
        *current = Some(Lightest {
            bytes,
            layout: *layout,
            step: step.copied(),
        });
    }
}

/// Makes `current` the configuration `c` if that comes first in [`pace_order`], in place.
fn quicken(current: &mut Option<Config>, c: &Config) {
    // The pace decides but on a tie (`pace_order`'s first key).
    let first = |f: &Config| match c.pace.key().total_cmp(&f.pace.key()) {
        std::cmp::Ordering::Equal => pace_order(c, f).is_lt(),
        by_pace => by_pace.is_lt(),
    };
    if current.as_ref().is_none_or(first) {
        *current = Some(*c);
    }
}

/// One context-parallel degree's or precision's share of a shape's configurations.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    configurations: u64,
    fitting: u64,
    lightest: Option<Lightest>,
    /// The fastest that fits (the first in `pace_order`).
    fastest: Option<Config>,
}

/// The tallies of each context-parallel degree and each precision, in the order first met.
#[derive(Debug, Default)]
struct Tallies {
    cp: Vec<(u64, Tally)>,
    precision: Vec<(Precision, Tally)>,
}

impl Tallies {
    /// Counts a valid configuration of `bytes`; `fits` when it fits (with its pace).
    fn count(&mut self, layout: &Layout, model: &MemoryModel, bytes: f64, fits: Option<&Config>) {
        let step = model.step();
        for tally in self.of(layout, model) {
            tally.configurations += 1;
            lighten(&mut tally.lightest, bytes, layout, step);
            if let Some(c) = fits {
                tally.fitting += 1;
                quicken(&mut tally.fastest, c);
            }
        }
    }

    /// Counts a valid configuration that does not fit and is no lighter than one counted
    /// before it with the same CP degree and precision (its lightest stands).
    /// `n` such configurations of the same precision.
    fn count_heavier(&mut self, layout: &Layout, model: &MemoryModel, n: u64) {
        for tally in self.of(layout, model) {
            tally.configurations += n;
        }
    }

    /// The tallies of `layout`'s CP degree and `model`'s precision.
    fn of(&mut self, layout: &Layout, model: &MemoryModel) -> [&mut Tally; 2] {
        let precision = model.step().map_or(Precision::Bf16, |s| s.precision);
        fn of<K: PartialEq>(tallies: &mut Vec<(K, Tally)>, key: K) -> &mut Tally {
            let i = match tallies.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    tallies.push((key, Tally::default()));
                    tallies.len() - 1
                }
            };
            &mut tallies[i].1
        }
        [
            of(&mut self.cp, layout.cp),
            of(&mut self.precision, precision),
        ]
    }

    /// Each facet's verdict, for a dimension searched at more than one value.
    fn facets(&self, brief: &Brief, shape: &Shape) -> Vec<Facet> {
        let one = |dimension: &str, value: String, t: &Tally| {
            facet(
                brief,
                shape,
                dimension,
                value,
                t.configurations,
                t.fitting,
                t.lightest,
                t.fastest
                    .map(|c| (c.layout, c.model.step().copied(), c.pace)),
            )
        };
        let mut facets = Vec::new();
        if self.cp.len() > 1 {
            let mut cps = self.cp.clone();
            cps.sort_by_key(|(c, _)| *c);
            facets.extend(cps.iter().map(|(c, t)| one("cp", c.to_string(), t)));
        }
        if self.precision.len() > 1 {
            let mut precisions = self.precision.clone();
            precisions.sort_by_key(|(p, _)| *p);
            facets.extend(
                precisions
                    .iter()
                    .map(|(p, t)| one("precision", p.to_string(), t)),
            );
        }
        facets
    }
}

/// What the schedules of each step of one layout share, worked out once, when first needed:
/// the memory of the stages before their activations ([`StagePeaks`]) and the step time before
/// the pipeline's sends and bubble ([`Unscheduled`]), by the step with its schedule set to
/// 1F1B. The inner `None` where working it out failed: such a step is graded the whole way,
/// for its error.
struct Slot {
    stages: Option<Option<StagePeaks>>,
    time: Option<Option<Unscheduled>>,
    /// Whether the slot's interleaved steps were decided over the cap, all at once, when its
    /// 1F1B step was found over it ([`Shared::depths`]).
    over: bool,
    /// The fewest days a token among the slot's interleaved steps kept so far (+∞ for none).
    fastest_depth: f64,
}

impl Slot {
    /// The stage sums of `d`'s step (worked out the first time, from the slot's `share`;
    /// `kinds`: the layout's stages, `None` where the split refuses the layout, and so every
    /// step's stages fail).
    fn stages(
        &mut self,
        share: &mut Share,
        d: &Detailed,
        shape: &Shape,
        layout: &Layout,
        kinds: Option<&StageKinds>,
    ) -> Option<&StagePeaks> {
        self.stages
            .get_or_insert_with(|| {
                let shares = share.stages.get_or_insert_with(|| {
                    kinds.and_then(|k| d.stage_shares_in(shape, layout, k).ok())
                });
                Some(d.stage_peaks_of(shares.as_ref()?, layout))
            })
            .as_ref()
    }
}

/// What a slot's step needs whatever the layout's ZeRO stage and replicas, worked out once for
/// the layouts of the same degrees (they come one after another): its stages' memory
/// ([`StageShares`]) and step time ([`Unsharded`]) before the sharded state and its traffic.
/// The inner `None` where working it out failed, as in [`Slot`].
#[derive(Default)]
struct Share {
    stages: Option<Option<StageShares>>,
    time: Option<Option<Unsharded>>,
}

/// A slot's interleaved steps that come after its 1F1B step in a layout's steps: how many, and
/// the deepest interleaving among them.
#[derive(Debug, Clone, Copy, Default)]
struct Depths {
    count: u64,
    deepest: u32,
    /// Whether the slot's 1F1B step has come (its interleaved steps are counted from then).
    after_1f1b: bool,
}

/// The slots of one layout's steps, and which slot each step has: worked out once for the
/// layouts that share their degrees (their steps are the same), the slots emptied for each
/// layout; kept between layouts so a search allocates per shape, not per configuration.
#[derive(Default)]
struct Shared {
    slots: Vec<Slot>,
    /// Each slot's [`Share`], kept from layout to layout of the same degrees.
    shares: Vec<Share>,
    /// Each step's slot, by its place in the layout's steps.
    slot_of: Vec<u32>,
    /// Whether each step, by its place, overlaps TP communication right after the same step
    /// without the overlap, on a stack that has it (so the two are valid together and the
    /// overlap needs the same memory but TE's userbuffers, [`userbuffers`]).
    overlaps_the_step_before: Vec<bool>,
    /// How many slots the steps have.
    count: usize,
    /// Each slot's interleaved steps after its 1F1B step ([`Depths`]).
    depths: Vec<Depths>,
    /// The slots of the run of steps being assigned, by their step under 1F1B.
    run: Vec<(Step, u32)>,
}

impl Shared {
    /// Gives each of `steps` the slot of its step under 1F1B. A layout's steps come in runs
    /// equal in micro-batch, sequence, recomputation and sequence parallelism, each run's
    /// 1F1B steps first (the schedule follows those in a step's order): a step's 1F1B sibling
    /// is looked for in its run only (in steps in another order, a step would get a slot of
    /// its own, the same work twice, never a wrong one). `overlappable`: whether the stack
    /// overlaps TP communication.
    fn assign(&mut self, steps: &[Step], overlappable: bool) {
        self.slot_of.clear();
        self.run.clear();
        self.overlaps_the_step_before.clear();
        self.depths.clear();
        self.shares.clear();
        self.count = 0;
        let run_of = |s: &Step| (s.micro_batch, s.seq_len, s.recompute, s.sequence_parallel);
        for (i, s) in steps.iter().enumerate() {
            if i > 0 && run_of(&steps[i - 1]) != run_of(s) {
                self.run.clear();
            }
            let key = s.unscheduled();
            let slot = match self.run.iter().find(|(k, _)| *k == key) {
                Some(&(_, slot)) => slot,
                None => {
                    let slot = self.count as u32;
                    self.count += 1;
                    self.run.push((key, slot));
                    self.depths.push(Depths::default());
                    self.shares.push(Share::default());
                    slot
                }
            };
            self.slot_of.push(slot);
            let depths = &mut self.depths[slot as usize];
            match s.schedule {
                Schedule::OneFOneB => depths.after_1f1b = true,
                Schedule::Interleaved(v) if depths.after_1f1b => {
                    depths.count += 1;
                    depths.deepest = depths.deepest.max(v);
                }
                Schedule::Interleaved(_) => {}
            }
            self.overlaps_the_step_before.push(
                overlappable
                    && s.tp_comm_overlap
                    && s.sequence_parallel
                    && i > 0
                    && steps[i - 1]
                        == Step {
                            tp_comm_overlap: false,
                            ..*s
                        },
            );
        }
    }

    /// Empties every slot, for the next layout.
    fn empty(&mut self) {
        self.slots.clear();
        self.slots.resize_with(self.count, || Slot {
            stages: None,
            time: None,
            over: false,
            fastest_depth: f64::INFINITY,
        });
    }

    /// The slot of the step at `place` in the layout's steps.
    fn slot(&mut self, place: usize) -> &mut Slot {
        &mut self.slots[self.slot_of[place] as usize]
    }

    /// The slot of the step at `place` and its [`Share`].
    fn slot_and_share(&mut self, place: usize) -> (&mut Slot, &mut Share) {
        let i = self.slot_of[place] as usize;
        (&mut self.slots[i], &mut self.shares[i])
    }
}

/// The pace of the fitting step `d` from its slot's [`Unscheduled`] part (worked out the first
/// time, from the slot's `share`), with the run's `goodput` when the machine's reliability
/// gives one for the shape.
#[allow(clippy::too_many_arguments)]
fn slot_pace(
    (slot, share): (&mut Slot, &mut Share),
    time: &TimeModel,
    machine: &Machine,
    shape: &Shape,
    layout: &Layout,
    d: &Detailed,
    kinds: Option<&StageKinds>,
    goodput: Option<f64>,
    cache: &mut MicroBatchCache,
) -> Result<Option<f64>> {
    let base = slot.time.get_or_insert_with(|| {
        let kinds = kinds?;
        let part = share.time.get_or_insert_with(|| {
            time.unsharded_in(machine, shape, layout, d, kinds, cache)
                .ok()
                .flatten()
        });
        time.unscheduled_of(machine, layout, d, part.as_ref()?)
    });
    match (base, goodput) {
        (Some(base), Some(goodput)) => time.days_per_token_on(layout, d, base, goodput),
        (Some(base), None) => Ok(time
            .run_time_on(machine, shape, layout, d, base, 1)?
            .map(|r| r.days_per_token)),
        _ => Ok(time
            .run_time_cached(
                machine,
                shape,
                layout,
                &MemoryModel::Detailed(*d),
                1,
                Some(cache),
            )?
            .map(|r| r.days_per_token)),
    }
}

/// Whether the step `s` needs at least the memory of the 1F1B step `w` under any one layout,
/// so that `s` is over the cap wherever `w` is: the two differ at most in `s`'s micro-batch
/// (no smaller), its global batch (no smaller) and its schedule.
///
/// Every stage's stored activations are `c·b·min(p − i, m)` bytes for the `m = B/(b·s·DP)`
/// micro-batches of a global batch of `B` tokens (`c`, a layer's bytes a token, times the
/// stage's layers and `s`; [`Step::in_flight`]): non-decreasing in `b` (`c·b·(p − i)` while
/// `m ≥ p − i`, then `c·B/(s·DP)`) and in `B`; an interleaved schedule holds no fewer. The
/// weights, gradients and optimizer state do not depend on the step, and the transient (a
/// layer's backward working set or the loss's peak, with the logits on the last stage) grows in
/// proportion to `b`. So a larger micro-batch needs more by at least the working set's
/// `4·f·s·Δb/t` bytes (megabytes; the sums' rounding is a millionth of a byte), and is never
/// the lightest; one of the same micro-batch (a larger batch or an interleaved schedule) needs
/// no less, and comes after `w` in the step order, which breaks ties. TP overlap's userbuffers
/// ([`userbuffers`], `∝ b`) are no fewer where `s` overlaps whenever `w` does.
fn no_lighter(s: &Step, w: &Step) -> bool {
    (s.seq_len, s.recompute, s.sequence_parallel, s.precision)
        == (w.seq_len, w.recompute, w.sequence_parallel, w.precision)
        && s.tp_comm_overlap >= w.tp_comm_overlap
        && s.micro_batch >= w.micro_batch
        && s.global_batch_tokens >= w.global_batch_tokens
}

/// Whether a configuration of `days_per_token` is slower, at every token count, than one of
/// `fastest` of the same layout and step but its interleaving depth, so that it can be no
/// distinct choice's best, nor the shape's, nor on the front, nor the first plan of any
/// ranking but memory's: only the passing count needs it.
/// Both take `t·k` days for `t` tokens (rounded to the nearest double, relative error at most
/// `u = 2⁻⁵³`); `k` above `f·(1 + 2⁻⁵⁰)` as computed (at least `f·(1 + 2⁻⁵¹)`) gives
/// `fl(t·k) ≥ t·k·(1 − u) > t·f·(1 + u) ≥ fl(t·f)`, so the
/// slower one takes strictly more days (and no less cost) at each count: its window lies in
/// the faster one's (the same loss, fewer days), and there the faster one ranks first under
/// loss, days and cost alike, before any tie-break. Under `--distinct layout` and `shape` both
/// are one choice ([`Distinct::key_of`]: every depth counts as one step).
fn slower_than(days_per_token: f64, fastest: f64) -> bool {
    fastest > 0.0 && days_per_token > fastest * (1.0 + 4.0 * f64::EPSILON)
}

/// Whether every interleaved step of the 1F1B step `d` (found over the cap in `layout`, whose
/// stages are `kinds`), to `deepest` chunks, is valid and so decided over the cap with it:
/// each holds no fewer activations ([`no_lighter`]) and comes after it in the step order, so
/// none is the lightest. The rules an interleaved step adds to its 1F1B step's (the stack has
/// the schedule; the micro-batches a multiple of the stages; as many chunks as every stage has
/// room for) refuse a deeper interleaving wherever they refuse a shallower one, so the
/// deepest standing stands for all; where it does not, each step is weighed on its own.
fn decide_depths(d: &Detailed, deepest: u32, layout: &Layout, kinds: &StageKinds) -> bool {
    let deep = Step {
        schedule: Schedule::Interleaved(deepest),
        ..d.step
    };
    // The rules' plain tests ([`Detailed::schedule_allowed`], [`Step::interleaves_in`]): where
    // they fail, each step is weighed for its own error, worked out once.
    d.options.stack.settings().interleaving
        && d.unscheduled_pipeline_in(layout, kinds)
            .is_ok_and(|m| deep.interleaves_in(layout, kinds, m))
}

/// The 1F1B steps of one layout found over the cap, and what the last step looked up among
/// them gave: a step's schedules come one after another, so each step is looked up once.
#[derive(Default)]
struct OverCap {
    steps: Vec<Step>,
    /// The slot of the step looked up last (its step under 1F1B: [`Shared`]), whether one
    /// over the cap is no heavier ([`no_lighter`], which does not read the schedule), and then
    /// its micro-batches, where it has them.
    last: Option<(u32, bool, Option<u64>)>,
}

impl OverCap {
    fn clear(&mut self) {
        self.steps.clear();
        self.last = None;
    }

    /// Records the 1F1B step `step`, weighed over the cap.
    fn push(&mut self, step: Step) {
        self.steps.push(step);
        self.last = None;
    }

    /// `Some` where a 1F1B step over the cap decides `d`'s step (of slot `slot`) over it
    /// unweighed: `Ok(None)` where the step is valid, or why it is not (the rules `peak_bytes`
    /// checks, in its order); `None` where the step must be weighed.
    fn decide(
        &mut self,
        d: &Detailed,
        slot: u32,
        layout: &Layout,
        kinds: &StageKinds,
    ) -> Option<Result<Option<f64>>> {
        let (over, m) = match self.last {
            Some((s, over, m)) if s == slot => (over, m),
            _ => {
                let over = self.steps.iter().any(|w| no_lighter(&d.step, w));
                let m = over
                    .then(|| d.unscheduled_pipeline_in(layout, kinds).ok())
                    .flatten();
                self.last = Some((slot, over, m));
                (over, m)
            }
        };
        over.then(|| {
            let m = m.map_or_else(|| d.unscheduled_pipeline_in(layout, kinds), Ok);
            d.schedule_allowed()
                .and(m)
                .and_then(|m| d.step.interleaving_allowed_in(layout, kinds, m))
                .map(|()| None)
        })
    }
}

/// [`configurations_counted`] as the search needs it: memory first, and the step time only of
/// the configurations that fit (a configuration over the cap can never be part of a plan; its
/// pace is wanted only when none fits, for the verdict's fastest, and then every one is timed).
/// A time model turns a configuration away only for what the search refuses before it starts
/// (a GPU without kernel or FP8 figures), so the count of valid configurations is the same.
///
/// Of the configurations that fit, `fitting` keeps those `keep` accepts and `fastest` names
/// the fastest of all. A step no lighter than a 1F1B step over the cap ([`no_lighter`]: its
/// interleaved siblings, as an interleaved schedule holds at least 1F1B's activations on every
/// stage, the first stage's `p − i + (p − 1)/v ≥ p − i` micro-batches ([`Step::in_flight`]);
/// and every larger micro-batch of it) is decided over the cap unweighed ([`OverCap`]): counted,
/// and never the lightest, since that 1F1B step is no heavier and comes first in the step order
/// (the micro-batch, then the schedule, then the batch), so it was weighed before. A 1F1B
/// step's own interleaved steps are decided with it, all at once ([`decide_depths`]), and
/// passed over where they come.
///
/// With `depths_by_pace` (a search whose choices count every depth of a step as one, or that
/// lists one plan, ranked by anything but memory), a kept
/// interleaved configuration slower than another depth of its layout and step
/// ([`slower_than`]) leaves `fitting` for `slower`, its days a token alone.
///
/// It works in `scratch` (a thread's [`SCRATCH`]): nothing in it outlives the shape, each part
/// emptied or worked out again before it is read.
#[allow(clippy::too_many_arguments)]
fn weighed_configurations(
    brief: &Brief,
    shape: &Shape,
    space: &MemorySpace,
    time: &TimeModel,
    keep: &dyn Fn(&Config) -> bool,
    depths_by_pace: bool,
    buffers: Buffers,
    scratch: &mut Scratch,
) -> Weighed {
    let Buffers {
        configs: mut fitting,
        mut slower,
    } = buffers;
    let Scratch {
        shared,
        steps,
        refused,
        extra,
        models: detailed,
        kept,
        over,
        cache,
    } = scratch;
    // Micro-batches are kept by degrees and step, not by shape.
    cache.clear();
    let machine = brief.machine();
    let mut excluded = Exclusions::default();
    fitting.clear();
    let mut fastest: Option<Config> = None;
    let mut fit = 0u64;
    let mut lightest_one: Option<Lightest> = None;
    let mut tallies = Tallies::default();
    let mut all = 0u64;
    let mut graded = 0u64;
    // Failures cost the same share of any run of a shape on the machine.
    let goodput = machine
        .reliability
        .outage(shape.params(), machine.cluster.gpus, 1.0)
        .ok()
        .map(|o| o.goodput);
    let plate_models = match space {
        MemorySpace::Plate => space.models(),
        MemorySpace::Detailed { .. } => Vec::new(),
    };
    // Whether the stack overlaps TP communication (a step may then ask for it).
    let overlappable = match space {
        MemorySpace::Detailed { options, .. } => options.stack.overlaps_tp(),
        MemorySpace::Plate => false,
    };
    // The degrees (TP, CP, PP, DP) whose steps and stage kinds the buffers hold.
    let mut steps_of = None;
    let mut kinds = None;
    // The days a token of the kept slower depths.
    slower.clear();
    for layout in space.layouts(brief, shape) {
        over.clear();
        kept.clear();
        // The layout's steps and its stage kinds (`None`: the split refuses the layout, and
        // each step is graded the whole way for its error) depend on its degrees alone, not
        // on its ZeRO stage or replicas: worked out once for the layouts that share them,
        // which come one after another.
        if let MemorySpace::Detailed { options, .. } = space {
            let degrees = (layout.tp, layout.cp, layout.pp, layout.dp);
            if steps_of != Some(degrees) {
                space.steps_into(shape, &layout, steps, refused, extra);
                detailed.clear();
                detailed.extend(steps.iter().map(|&step| {
                    MemoryModel::Detailed(Detailed {
                        step,
                        options: *options,
                    })
                }));
                kinds = stage_kinds(shape, &layout, options.stages).ok();
                shared.assign(steps, overlappable);
                steps_of = Some(degrees);
            }
            shared.empty();
        }
        let models = match space {
            MemorySpace::Detailed { .. } => &*detailed,
            MemorySpace::Plate => &plate_models,
        };
        // What the step before gave, when that was no error.
        let mut last: Option<Option<f64>> = None;
        for (place, model) in models.iter().enumerate() {
            let weighed = match model {
                MemoryModel::Detailed(d) => {
                    // An interleaved step whose 1F1B step was found over the cap was counted
                    // with it ([`decide_depths`]).
                    if d.step.schedule != Schedule::OneFOneB && shared.slot(place).over {
                        last = Some(None);
                        continue;
                    }
                    // A step overlapping TP communication right after the same step without the
                    // overlap (the overlap is last in a step's order) needs its memory and TE's
                    // userbuffers, added last as `Memory::total` adds them ([`Shared::assign`]).
                    // Over the cap, it is decided unweighed: no lighter than the sibling, which
                    // comes first in the step order and so stays the lightest on a tie.
                    let sibling = last.filter(|_| shared.overlaps_the_step_before[place]);
                    let decided = match sibling {
                        Some(weighed) => Some(Ok(weighed
                            .map(|b| {
                                b + userbuffers(d.options.stack, &d.step, shape.hidden, &layout)
                            })
                            .filter(|&b| memory_fits(brief, b)))),
                        None => kinds
                            .as_ref()
                            .and_then(|k| over.decide(d, shared.slot_of[place], &layout, k)),
                    };
                    let weighed = match decided {
                        Some(decided) => decided,
                        None => {
                            let (slot, share) = shared.slot_and_share(place);
                            let stages = slot.stages(share, d, shape, &layout, kinds.as_ref());
                            let bytes = d.schedule_allowed().and_then(|()| match stages {
                                Some(stages) => d.peak_bytes(stages, &layout).map(Some),
                                None => d.memory(shape, &layout).map(|m| Some(m.total())),
                            });
                            if let (Ok(Some(b)), Schedule::OneFOneB) = (&bytes, d.step.schedule) {
                                if !memory_fits(brief, *b) {
                                    over.push(d.step);
                                }
                            }
                            bytes
                        }
                    };
                    last = weighed.as_ref().ok().copied();
                    let over_cap = last.is_some_and(|b| b.is_none_or(|b| !memory_fits(brief, b)));
                    if over_cap && d.step.schedule == Schedule::OneFOneB {
                        let depths = shared.depths[shared.slot_of[place] as usize];
                        if let (true, Some(k)) = (depths.count > 0, kinds.as_ref()) {
                            if decide_depths(d, depths.deepest, &layout, k) {
                                shared.slot(place).over = true;
                                all += depths.count;
                                tallies.count_heavier(&layout, model, depths.count);
                            }
                        }
                    }
                    weighed
                }
                MemoryModel::Plate => model
                    .memory(brief.seq_len, shape, &layout)
                    .map(|m| Some(m.total())),
            };
            let bytes = match weighed {
                Ok(Some(bytes)) => bytes,
                Ok(None) => {
                    // Decided over the cap by a 1F1B step's peak ([`OverCap`]).
                    all += 1;
                    tallies.count_heavier(&layout, model, 1);
                    continue;
                }
                Err(e) => {
                    excluded.add(&e);
                    continue;
                }
            };
            graded += 1;
            // Only a configuration that fits is timed; one the time model refuses is left out.
            let config = if memory_fits(brief, bytes) {
                let days_per_token = match model {
                    MemoryModel::Detailed(d) => slot_pace(
                        shared.slot_and_share(place),
                        time,
                        &machine,
                        shape,
                        &layout,
                        d,
                        kinds.as_ref(),
                        goodput,
                        cache,
                    ),
                    MemoryModel::Plate => time
                        .run_time_cached(&machine, shape, &layout, model, 1, Some(cache))
                        .map(|r| r.map(|r| r.days_per_token)),
                };
                match days_per_token {
                    Ok(k) => Some(Config {
                        layout,
                        model: *model,
                        bytes,
                        pace: Pace::from_days_per_token(k),
                        prefer: 0.0,
                    }),
                    Err(e) => {
                        excluded.add(&e);
                        continue;
                    }
                }
            } else {
                None
            };
            all += 1;
            lighten(&mut lightest_one, bytes, &layout, model.step());
            tallies.count(&layout, model, bytes, config.as_ref());
            if let Some(c) = &config {
                fit += 1;
                quicken(&mut fastest, c);
                if keep(c) {
                    if depths_by_pace {
                        // Kept aside until the layout's fastest depths are known.
                        if is_depth(model) {
                            let slot = shared.slot(place);
                            slot.fastest_depth = slot.fastest_depth.min(c.pace.key());
                        }
                        kept.push(Kept {
                            place: place as u32,
                            bytes,
                            pace: c.pace,
                        });
                    } else {
                        fitting.push(*c);
                    }
                }
            }
        }
        // The layout's kept configurations in their order, but each interleaved one slower
        // than the fastest depth of its step: its days a token only, for the passing count.
        for k in kept.iter() {
            let place = k.place as usize;
            let depth = is_depth(&models[place]);
            if depth && slower_than(k.pace.key(), shared.slot(place).fastest_depth) {
                slower.push(k.pace.key());
            } else {
                fitting.push(Config {
                    layout,
                    model: models[place],
                    bytes: k.bytes,
                    pace: k.pace,
                    prefer: 0.0,
                });
            }
        }
        // The steps the batch rule turned away, after the others (as `steps_for` lists them),
        // each rule's message written once.
        for s in refused.iter() {
            excluded.add_lazily(BatchTarget::RULE, || space.refusal(s, &layout));
        }
    }
    if fit == 0 && all > 0 {
        // Nothing fits: the verdict names the fastest of all, so every one is timed.
        let (mut unfit, mut all, mut lightest) = (None::<Config>, 0u64, None);
        let excluded = for_each_configuration(brief, shape, space, time, |c| {
            all += 1;
            lighten(&mut lightest, c.bytes, &c.layout, c.model.step());
            quicken(&mut unfit, &c);
        });
        return Weighed {
            fitting,
            slower,
            fastest: None,
            all,
            graded: all,
            lightest,
            unfit,
            excluded,
            tallies,
        };
    }
    Weighed {
        fitting,
        slower,
        fastest,
        unfit: None,
        all,
        graded,
        lightest: lightest_one,
        excluded: excluded.into_vec(),
        tallies,
    }
}

/// The order plans of one token count come in under every ranking but memory: fewer days,
/// then the tie-break (runnable first, less memory, smaller TP, PP, ZeRO, smaller step).
fn pace_order(a: &Config, b: &Config) -> std::cmp::Ordering {
    a.pace
        .key()
        .total_cmp(&b.pace.key())
        .then(a.prefer.total_cmp(&b.prefer))
        .then(a.bytes.total_cmp(&b.bytes))
        .then_with(|| layout_order(&a.layout, &b.layout))
        .then_with(|| a.model.step().cmp(&b.model.step()))
}

/// The places of `configs` in [`pace_order`], found without moving them: the sort moves
/// small integer keys (each f64 in `f64::total_cmp`'s order: pace, the runnable key, memory),
/// with the whole order on ties. Under the detailed time model, paces rarely tie: the keys
/// are the pace and the place alone, in one integer, with the whole order on a tie of pace.
fn pace_order_of(configs: &[Config]) -> Vec<u32> {
    fn ordered(x: f64) -> u64 {
        let bits = x.to_bits() as i64;
        ((bits ^ ((((bits >> 63) as u64) >> 1) as i64)) as u64) ^ (1 << 63)
    }
    if configs.iter().all(|c| matches!(c.pace, Pace::PerToken(_))) {
        let mut keys: Vec<u128> = configs
            .iter()
            .enumerate()
            .map(|(i, c)| (u128::from(ordered(c.pace.key())) << 32) | i as u128)
            .collect();
        keys.sort_unstable();
        order_ties(&mut keys, configs, |a, b| a >> 32 == b >> 32, |&k| k as u32);
        return keys.iter().map(|&k| k as u32).collect();
    }
    let mut keys: Vec<(u64, u64, u64, u32)> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (pace, prefer, bytes) =
                (ordered(c.pace.key()), ordered(c.prefer), ordered(c.bytes));
            (pace, prefer, bytes, i as u32)
        })
        .collect();
    keys.sort_unstable();
    // Keys equal but for the place (rare: the same pace and memory).
    order_ties(
        &mut keys,
        configs,
        |a, b| (a.0, a.1, a.2) == (b.0, b.1, b.2),
        |k| k.3,
    );
    keys.iter().map(|k| k.3).collect()
}

/// Puts each run of sorted `keys` that `same` holds equal into [`pace_order`] (`place`: the
/// key's configuration's place in `configs`).
fn order_ties<K>(
    keys: &mut [K],
    configs: &[Config],
    same: impl Fn(&K, &K) -> bool,
    place: impl Fn(&K) -> u32,
) {
    let mut start = 0;
    while start < keys.len() {
        let run = keys[start..]
            .iter()
            .take_while(|k| same(k, &keys[start]))
            .count();
        if run > 1 {
            keys[start..start + run].sort_unstable_by(|a, b| {
                pace_order(&configs[place(a) as usize], &configs[place(b) as usize])
            });
        }
        start += run;
    }
}

/// The order under the memory ranking: less memory, then fewer days, then the rest.
fn memory_order(a: &Config, b: &Config) -> std::cmp::Ordering {
    a.bytes
        .total_cmp(&b.bytes)
        .then(a.pace.key().total_cmp(&b.pace.key()))
        .then(a.prefer.total_cmp(&b.prefer))
        .then_with(|| layout_order(&a.layout, &b.layout))
        .then_with(|| a.model.step().cmp(&b.model.step()))
}

/// The verdict on `shape` from its configurations (`fitting` those that fit in memory, fastest
/// first, `excluded` the tallies of those the rules left out): the lightest for memory, the
/// fastest that fits for the token window, and, when the rules leave no configuration at all,
/// the rule that broke.
fn shape_verdict(
    brief: &Brief,
    shape: &Shape,
    weighed: &Weighed,
    fastest: Option<&Config>,
    options: &SearchOptions,
) -> ShapeVerdict {
    let excluded = &weighed.excluded;
    let fastest = fastest.or(weighed.unfit.as_ref());
    let pace = fastest.map_or(Pace::Plate, |c| c.pace);
    verdict_because(brief, shape, weighed.lightest, pace, || {
        match excluded.first() {
            // The rule that left the configurations out, as the space offered them (the batch
            // resolved layout by layout), not as the raw steps read.
            Some(e) => format!(
                "layout: no layout and training step go together, for example: {}",
                e.example
            ),
            None => no_configuration(brief, shape, options),
        }
    })
}

/// Why a shape has no configuration at all: the rule its first layout and step break.
fn no_configuration(brief: &Brief, shape: &Shape, options: &SearchOptions) -> String {
    let first_error = iproduct!(
        options.memory.layouts(brief, shape),
        options.memory.models()
    )
    .find_map(|(layout, model)| {
        let memory = model.memory(brief.seq_len, shape, &layout).err();
        memory.or_else(|| {
            options
                .time
                .run_time(&brief.machine(), shape, &layout, &model, 1)
                .err()
        })
    });
    match first_error {
        Some(e) => format!("layout: no layout and training step go together, for example: {e}"),
        None => format!(
            "layout: no TP × PP divides the {} GPUs within the layout rules",
            brief.gpus
        ),
    }
}

/// A shape's configurations that fit in memory, in both orders, and how many there are in all.
struct Fitting {
    /// The configurations, as weighed.
    configs: Vec<Config>,
    /// Their places in [`pace_order`], fastest first ([`Fitting::by_pace`]).
    order: Vec<u32>,
    by_memory: Vec<Config>,
    /// The days a token of the kept configurations left out of `configs` as slower than
    /// another depth of their layout and step ([`slower_than`]), fewest first: they count
    /// among the passing plans and can be nothing else.
    slower: Vec<f64>,
    all: u64,
    /// Of `all`, how many were weighed in full (the rest decided by a bound).
    graded: u64,
}

impl Fitting {
    /// The configurations fastest first ([`pace_order`]).
    fn by_pace(&self) -> impl ExactSizeIterator<Item = &Config> + '_ {
        self.order.iter().map(|&i| &self.configs[i as usize])
    }
}

/// Everything a search found.
#[derive(Debug, Clone)]
pub struct SearchReport {
    /// The brief searched.
    pub brief: Brief,
    /// The token grid searched.
    pub grid: TokenGrid,
    /// The ranking of `plans`.
    pub rank: Rank,
    /// Whether `plans` (and each shape's best) come from the exact token windows rather than
    /// the grid.
    pub exact: bool,
    /// `C = GPUs × peak × MFU × days × 86,400`, FLOPs.
    pub budget_flops: f64,
    /// The compute-optimal model for the budget.
    pub compute_optimal: ComputeOptimal,
    /// One verdict per shape searched, in the order given.
    pub shapes: Vec<ShapeVerdict>,
    /// What a row of `plans` stands for.
    pub distinct: Distinct,
    /// Distinct choices that pass (rows `plans` could hold; for [`Distinct::Plan`] the
    /// passing plans).
    pub choices: u64,
    /// The best passing plans (or all of them), ranked.
    pub plans: Vec<Plan>,
    /// The Pareto front on (loss, days) of the plans on the grid, sorted by days.
    pub front: Vec<Plan>,
    /// With `exact`, the Pareto front over every whole token count in the windows, as runs
    /// sorted by days (`None` without `exact`).
    pub front_runs: Option<FrontRuns>,
    /// Candidates graded.
    pub evaluated: u64,
    /// Valid configurations (layout and step) of every shape, each decided: weighed in full,
    /// or ruled out by a bound proven to give what weighing it would.
    pub configurations: u64,
    /// Of `configurations`, those weighed in full (`None` in a merge of shards, whose files
    /// do not record it).
    pub graded: Option<u64>,
    /// Candidates that passed every check.
    pub passing: u64,
    /// With `--sensitivity`: the first plan graded again and the search run again with each
    /// uncertain input at the ends of its range ([`sensitivity::sensitivity`]); `None`
    /// otherwise.
    pub sensitivity: Option<SearchSensitivity>,
}

impl SearchReport {
    /// Whether some plan passes: on the grid, or, with `exact`, at a whole token count in a
    /// shape's window (which the grid may miss: a window between two grid counts, or past the
    /// grid's end).
    pub fn any_pass(&self) -> bool {
        let runs = self.front_runs.as_ref();
        self.passing > 0 || !self.plans.is_empty() || runs.is_some_and(|f| !f.runs.is_empty())
    }
}

/// The ranked plans of a search, walked best first as often as a report needs (the text
/// report walks them twice: once to size its columns, once to print them).
pub trait Ranked {
    /// How many plans there are.
    fn count(&self) -> u64;
    /// The plans, best first.
    fn walk(&self) -> Box<dyn Iterator<Item = Plan> + '_>;
}

/// Plans held in a list, as a report holds its top K.
impl Ranked for &[Plan] {
    fn count(&self) -> u64 {
        self.len() as u64
    }
    fn walk(&self) -> Box<dyn Iterator<Item = Plan> + '_> {
        Box::new(self.iter().cloned())
    }
}

/// A run of the exact Pareto front: plans of one shape and configuration at consecutive token
/// counts, every one on the front (but for counts whose loss or days `f64` rounds to a
/// neighbour's, see [`crate::search::pareto::Segment`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FrontRun {
    /// The run's first plan, the one with the fewest tokens and days.
    pub first: Plan,
    /// The run's last plan on the front, the one with the lowest loss.
    pub last: Plan,
    /// Days per token along the run under the detailed time model (`null`: the plate's 6ND
    /// at the assumed MFU), so the plans between the ends can be told without grading them.
    pub days_per_token: Option<f64>,
}

/// The exact front's runs, sorted by days: all of them, or the first [`MAX_FRONT_RUNS`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct FrontRuns {
    /// The runs.
    pub runs: Vec<FrontRun>,
    /// Whether these are all the runs; if not, the front carries on past the last.
    pub complete: bool,
}

/// The most runs of an exact front a search finds. Neighbouring shapes of a dense family trade
/// the front count by count where their curves meet (the default family's front has hundreds
/// of millions of runs), and nobody reads past a few thousand.
pub const MAX_FRONT_RUNS: usize = 10_000;

/// A fitting configuration of a shape over its passing token window (or, in a merge of
/// shards, a run of a shard's exact front). The fastest of a shape's are the only plans of it
/// that can stand on the Pareto front, since every other configuration at the same tokens has
/// the same loss and no fewer days.
#[derive(Clone, Copy)]
pub(crate) struct Window<'a> {
    pub(crate) brief: &'a Brief,
    pub(crate) shape: &'a Shape,
    /// The shape's place in the search's list.
    pub(crate) index: usize,
    pub(crate) layout: Layout,
    pub(crate) model: MemoryModel,
    /// Per-GPU memory, GB, as the plans report it.
    pub(crate) memory: f64,
    /// The runnable-first key, [`Candidate::prefer`].
    pub(crate) prefer: f64,
    pub(crate) pace: Pace,
    pub(crate) tokens: (u64, u64),
}

impl Chain for Window<'_> {
    fn tokens(&self) -> (u64, u64) {
        self.tokens
    }
    fn loss(&self, tokens: u64) -> f64 {
        loss(self.brief, self.shape, tokens)
    }
    fn days(&self, tokens: u64) -> f64 {
        self.pace
            .run_days(self.brief, self.shape.active_params(), tokens)
    }
    /// Loss and days depend on a dense shape only through its parameter count, and on the
    /// configuration only through its pace; a mixture of experts's also on its expansion, so
    /// it shares its curve with none.
    fn curve(&self) -> Option<(u64, u64)> {
        if self.shape.experts.is_some() {
            return None;
        }
        Some((self.shape.params(), self.pace.key().to_bits()))
    }
}

impl Window<'_> {
    /// The plan at `tokens`, in compact form.
    pub(crate) fn candidate(&self, tokens: u64) -> Candidate {
        Candidate {
            shape: self.index,
            tokens,
            layout: self.layout,
            model: self.model,
            loss: self.loss(tokens),
            days: self.days(tokens),
            memory: self.memory,
            prefer: self.prefer,
        }
    }
}

/// The window of every fitting configuration of each shape that passes somewhere, fastest
/// first within a shape (the first of a shape is the one [`Window`] means for the front; the
/// plate's bounds are solved once a shape, all its configurations sharing the pace).
fn windows<'a>(
    brief: &'a Brief,
    shapes: &'a [Shape],
    fitting: &[Fitting],
    offset: usize,
) -> Vec<Window<'a>> {
    let per_shape: Vec<Vec<Window<'a>>> = shapes
        .par_iter()
        .zip(fitting)
        .enumerate()
        .map(|(s, (shape, fit))| shape_windows(brief, shape, fit, offset + s))
        .collect();
    per_shape.into_iter().flatten().collect()
}

/// One shape's configuration windows, fastest configuration first ([`windows`]).
fn shape_windows<'a>(
    brief: &'a Brief,
    shape: &'a Shape,
    fit: &Fitting,
    index: usize,
) -> Vec<Window<'a>> {
    // The loss bound is the same for every configuration of the shape; the time bound falls
    // as the pace slows, so past the first configuration (fastest first) whose window is
    // empty every later one's is too.
    let (_, Some(lo)) = loss_bound(brief, shape) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut plate_bound = None;
    for config in fit.by_pace() {
        let window = config_window(brief, shape, index, config, lo, &mut plate_bound);
        if window.tokens.0 > window.tokens.1 {
            break;
        }
        out.push(window);
    }
    out
}

/// The window of `config` of `shape` (the shape's `index`-th), from `lo` tokens, the loss's
/// bound, to the most its pace trains within the days (`plate_bound`: the plate pace's, worked
/// out once for every plate configuration); empty where `lo` is past it.
fn config_window<'a>(
    brief: &'a Brief,
    shape: &'a Shape,
    index: usize,
    config: &Config,
    lo: u64,
    plate_bound: &mut Option<u64>,
) -> Window<'a> {
    let hi = match config.pace {
        Pace::Plate => *plate_bound.get_or_insert_with(|| time_bound(brief, shape, Pace::Plate)),
        pace => time_bound(brief, shape, pace),
    };
    Window {
        brief,
        shape,
        index,
        layout: config.layout,
        model: config.model,
        memory: gb(config.bytes),
        prefer: config.prefer,
        pace: config.pace,
        tokens: (lo, hi),
    }
}

/// Token counts one unit of parallel work covers.
const CHUNK: u64 = 256;

/// What one worker has found so far.
struct Found {
    top: TopK,
    front: Front,
    passing: u64,
    /// The best passing candidate of each shape under the ranking.
    best: Vec<Option<Candidate>>,
}

impl Found {
    fn merge(mut self, other: Found) -> Found {
        self.top = self.top.merge(other.top);
        self.front = self.front.merge(other.front);
        self.passing += other.passing;
        let rank = self.top.rank();
        for (mine, theirs) in self.best.iter_mut().zip(other.best) {
            *mine = better(rank, *mine, theirs);
        }
        self
    }
}

/// The better of two candidates under `rank`.
fn better(rank: Rank, a: Option<Candidate>, b: Option<Candidate>) -> Option<Candidate> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if rank.compare(&y, &x).is_lt() { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The grid's indices inside `[lo, hi]` tokens, as a half-open range.
fn grid_range(grid: &TokenGrid, [lo, hi]: [u64; 2]) -> std::ops::Range<u64> {
    let first = lo.saturating_sub(grid.min).div_ceil(grid.step);
    let end = if hi < grid.min {
        0
    } else {
        ((hi - grid.min) / grid.step + 1).min(grid.len())
    };
    first..end.max(first)
}

impl Line for Window<'_> {
    fn span(&self) -> (u64, u64) {
        self.tokens
    }
    fn at(&self, tokens: u64) -> Candidate {
        self.candidate(tokens)
    }
}

/// The best `top` plans over every whole token count in the shapes' windows, exactly: each
/// fitting configuration's passing tokens form an interval (the fewest that reach the loss to
/// the most its pace allows), along which every ranking is monotone, so a merge of the
/// intervals in ranking order ([`Merge`]) yields the best plans one by one. Also each shape's
/// best.
fn exact_top(
    windows: &[Window],
    rank: Rank,
    top: usize,
    shapes: std::ops::Range<usize>,
) -> (Vec<Candidate>, Vec<Option<Candidate>>) {
    let merge = Merge::new(windows, rank);
    let mut best: Vec<Option<Candidate>> = vec![None; shapes.len()];
    for &first in merge.firsts() {
        let local = first.shape - shapes.start;
        best[local] = better(rank, best[local], Some(first));
    }
    (merge.take(top).collect(), best)
}

/// Each distinct choice's best plan under `rank` among `windows` (the fitting configurations'
/// exact windows): each window's first, on the grid's counts or with `exact` over every whole
/// count ([`Merge::firsts`], exact under `f64` plateaus), then the best of those that are one
/// choice ([`Distinct::same`]).
/// Each choice of a shape: its first configuration's best plan (`None`: its line is empty, and
/// so is every later one's), the best so far, and whether it is settled. Kept from shape to
/// shape by a worker, so its tables are allocated once, not once a shape.
#[derive(Default)]
struct Choices {
    /// Each key's place in `found`.
    ids: crate::hash::FastMap<ChoiceKey, u32>,
    /// Each configuration's choice, by its place among the shape's configurations.
    of: Vec<u32>,
    /// Each choice's first best, best so far and whether it is settled (`None` until one of
    /// its configurations is walked).
    found: Vec<Option<Choice>>,
}

/// A choice's first configuration's best plan, its best so far, and whether it is settled.
type Choice = (Option<Candidate>, Option<Candidate>, bool);

impl Choices {
    /// Gives each of `configs` (of the shape at `index`) its choice under `distinct`, in the
    /// order they are held (so the keys are made reading them in turn, not in pace order).
    fn assign(&mut self, configs: &[Config], index: usize, distinct: Distinct) {
        self.ids.clear();
        self.of.clear();
        self.found.clear();
        for c in configs {
            let key = distinct.key_of(index, &c.layout, c.model.step(), 0);
            let next = self.ids.len() as u32;
            self.of.push(*self.ids.entry(key).or_insert(next));
        }
        self.found.resize(self.ids.len(), None);
    }
}

/// [`distinct_firsts`] of one shape's configurations on the grid, ranked by loss, days or
/// cost, without walking every configuration's line. Its kept configurations come fastest
/// first and share the loss curve and the window's low end, while a slower configuration's
/// window ends no later. So within a choice the first configuration `f` (its best plan `p`)
/// beats every later `g` whose days at `p`'s tokens exceed `p`'s: by loss, `g`'s best is at a
/// higher loss, or on `p`'s loss plateau at `p`'s tokens, where it takes those days; by days,
/// `g`'s best takes at least its days at the window's low end, which are `p`'s tokens. Those
/// days only grow along the configurations, so the first such `g` ends the choice; the
/// configurations before it are walked and compared in full (ties of days).
#[allow(clippy::too_many_arguments)]
fn distinct_firsts_of_shape(
    brief: &Brief,
    shape: &Shape,
    fit: &Fitting,
    index: usize,
    grid: &TokenGrid,
    rank: Rank,
    distinct: Distinct,
    choices: &mut Choices,
) -> Vec<Candidate> {
    debug_assert!(rank != Rank::Memory);
    let (_, Some(lo)) = loss_bound(brief, shape) else {
        return Vec::new();
    };
    let cluster_flops = brief.cluster_flops_per_second();
    let n = shape.active_params() as f64;
    choices.assign(&fit.configs, index, distinct);
    let mut plate_bound = None;
    for &i in &fit.order {
        let choice = &mut choices.found[choices.of[i as usize] as usize];
        let config = &fit.configs[i as usize];
        if let Some((first, _, settled)) = choice {
            let Some(first) = *first else { continue };
            if *settled {
                continue;
            }
            let plate_days = time::days(cluster_flops, n, first.tokens as f64);
            if config.pace.days(plate_days, first.tokens) > first.days {
                *settled = true;
                continue;
            }
        }
        let window = config_window(brief, shape, index, config, lo, &mut plate_bound);
        let best = (window.tokens.0 <= window.tokens.1)
            .then(|| grid_lines(std::iter::once(window), grid).pop())
            .flatten()
            .and_then(|line| ordered::first(&line, rank));
        match choice {
            Some((_, kept, _)) => *kept = better(rank, *kept, best),
            None => *choice = Some((best, best, best.is_none())),
        }
    }
    // In no order: a top list's order is total.
    choices
        .found
        .iter()
        .filter_map(|c| c.and_then(|(_, best, _)| best))
        .collect()
}

fn distinct_firsts(
    windows: &[Window],
    grid: &TokenGrid,
    rank: Rank,
    exact: bool,
    distinct: Distinct,
) -> Vec<Candidate> {
    let firsts: Vec<Candidate> = if exact {
        ordered::firsts(windows, rank)
    } else {
        let lines = grid_lines(windows.iter().copied(), grid);
        ordered::firsts(&lines, rank)
    };
    let mut best: std::collections::BTreeMap<ChoiceKey, Candidate> = Default::default();
    for c in firsts {
        let slot = best.entry(distinct.key(&c)).or_insert(c);
        *slot = better(rank, Some(*slot), Some(c)).expect("two candidates");
    }
    best.into_values().collect()
}

/// The windows' grid counts as lines whose positions are the grid's indices (windows with no
/// grid count left out).
fn grid_lines<'a>(
    windows: impl Iterator<Item = Window<'a>>,
    grid: &TokenGrid,
) -> Vec<GridLine<'a>> {
    windows
        .filter_map(|window| {
            let (lo, hi) = window.tokens;
            let range = grid_range(grid, [lo, hi]);
            (!range.is_empty()).then(|| GridLine {
                window,
                grid: *grid,
                span: (range.start, range.end - 1),
            })
        })
        .collect()
}

/// A window's passing counts on a token grid: its positions are the grid's indices.
struct GridLine<'a> {
    window: Window<'a>,
    grid: TokenGrid,
    span: (u64, u64),
}

impl Line for GridLine<'_> {
    fn span(&self) -> (u64, u64) {
        self.span
    }
    fn at(&self, i: u64) -> Candidate {
        self.window.candidate(self.grid.at(i))
    }
}

/// Every passing plan on a search's grid in ranking order, made one at a time as it is walked
/// (`search --all`), so memory holds one line for each fitting configuration of each shape
/// that passes, however many plans pass: a k-way merge (`src/search/ordered.rs`) of each configuration's
/// passing grid counts, which form an interval (the loss falls and the days rise with the
/// tokens). The plans are exactly those, and in the order, that [`search`] with `top: None`
/// collects and sorts (the property tests compare the two).
pub struct AllPlans<'a> {
    brief: &'a Brief,
    shapes: &'a [Shape],
    time: &'a TimeModel,
    rank: Rank,
    lines: Vec<GridLine<'a>>,
    count: u64,
}

impl<'a> AllPlans<'a> {
    /// Every passing plan on `options`' grid of the search of `shapes` under `brief` whose
    /// fitting configurations' exact windows ([`windows`]) are `windows`: each window's grid
    /// counts, the passing ones of its configuration.
    fn new(
        brief: &'a Brief,
        shapes: &'a [Shape],
        options: &'a SearchOptions,
        windows: Vec<Window<'a>>,
    ) -> Self {
        let lines = grid_lines(windows.into_iter(), &options.grid);
        let count = lines.iter().map(|l| l.span.1 - l.span.0 + 1).sum();
        AllPlans {
            brief,
            shapes,
            time: &options.time,
            rank: options.rank,
            lines,
            count,
        }
    }
}

impl Ranked for AllPlans<'_> {
    fn count(&self) -> u64 {
        self.count
    }
    fn walk(&self) -> Box<dyn Iterator<Item = Plan> + '_> {
        // A plate plan's detailed grade depends on its shape and layout alone: kept, so the
        // plans of one layout (every token count of it) grade it once.
        type Key = (usize, u64, u64, u8);
        type Grade = std::result::Result<DetailedGrade, String>;
        let kept = std::cell::RefCell::new(std::collections::HashMap::<Key, Grade>::new());
        let micro_batches = MicroBatches::default();
        let merge = Merge::new(&self.lines, self.rank);
        Box::new(merge.map(move |c| {
            let l = c.layout;
            let shape = &self.shapes[c.shape];
            let detailed = || {
                kept.borrow_mut()
                    .entry((c.shape, l.tp, l.pp, l.zero.get()))
                    .or_insert_with(|| {
                        detailed_grade(self.brief, shape, &l).map_err(|e| e.to_string())
                    })
                    .clone()
            };
            grade_with(self.brief, shape, self.time, &c, &micro_batches, &detailed)
        }))
    }
}

/// [`search`] on the grid for every passing plan, without holding them: the report (its
/// `plans` empty, everything else as [`search`] gives it) and the plans, made one at a time in
/// ranking order whenever they are walked. `options.top` and `options.exact` are not used.
pub fn search_all<'a>(
    brief: &'a Brief,
    shapes: &'a [Shape],
    options: &'a SearchOptions,
    progress: &dyn Progress,
) -> (SearchReport, AllPlans<'a>) {
    // The best plan of each shape, the front and the counts do not depend on K.
    let one = SearchOptions {
        top: Some(1),
        exact: false,
        ..options.clone()
    };
    let (mut report, windows) =
        search_in_blocks(brief, shapes, &one, progress, block_for(&one), true);
    report.plans.clear();
    let all = AllPlans::new(brief, shapes, options, windows);
    debug_assert_eq!(all.count, report.passing);
    (report, all)
}

/// Shapes searched at a time: the configurations of one block are held at once.
const BLOCK: usize = 4096;

/// Shapes searched at a time in a detailed space, where a shape has tens of thousands of
/// fitting configurations or more (every CP degree, precision and interleaving depth): a
/// block's configurations are what the search holds, so this keeps memory flat in the family.
const DETAILED_BLOCK: usize = 128;

/// The block size for `options`: [`BLOCK`] for the plate's few configurations a shape,
/// [`DETAILED_BLOCK`] for the detailed space.
fn block_for(options: &SearchOptions) -> usize {
    match options.memory {
        MemorySpace::Plate => BLOCK,
        MemorySpace::Detailed { .. } => DETAILED_BLOCK,
    }
}

/// Every shape's verdict and the configurations that fit it, in both orders. Each verdict
/// bounds, in closed form, the tokens with which any configuration can pass: fewer miss the
/// loss, more miss the days even at the fastest pace that fits.
fn shape_configurations(
    brief: &Brief,
    shapes: &[Shape],
    options: &SearchOptions,
) -> (Vec<ShapeVerdict>, Vec<Fitting>) {
    shapes
        .par_iter()
        .map(|shape| shape_configuration(brief, shape, options, false, Buffers::default()))
        .unzip()
}

/// One shape's verdict and the configurations that fit it, in both orders
/// ([`shape_configurations`]).
fn shape_configuration(
    brief: &Brief,
    shape: &Shape,
    options: &SearchOptions,
    depths_by_pace: bool,
    buffers: Buffers,
) -> (ShapeVerdict, Fitting) {
    // A configuration too slow to train the tokens the loss needs within the days
    // can be no plan at any token count (days grow with tokens): it is left out of
    // what the search walks, but for the fastest, which the verdict names.
    let needed = loss_bound(brief, shape).1;
    // `Pace::run_days` at those tokens, the plate's days worked out once.
    let plate_days = needed.map(|lo| {
        let days = time::days(
            brief.cluster_flops_per_second(),
            shape.active_params() as f64,
            lo as f64,
        );
        (lo, days)
    });
    let keep = |c: &Config| {
        plate_days.is_some_and(|(lo, days)| within_time_and_cost(brief, c.pace.days(days, lo)))
    };
    let mut weighed = SCRATCH.with_borrow_mut(|scratch| {
        weighed_configurations(
            brief,
            shape,
            &options.memory,
            &options.time,
            &keep,
            depths_by_pace,
            buffers,
            scratch,
        )
    });
    let mut configs = std::mem::take(&mut weighed.fitting);
    let fastest = weighed.fastest;
    if let (true, Some(f)) = (configs.is_empty(), fastest) {
        configs.push(f);
    }
    // Two configurations are never equal in this order (the layout and step break
    // every tie), so an unstable sort gives the stable one's order.
    let mut order = pace_order_of(&configs);
    let first = order.first().map(|&i| &configs[i as usize]);
    let mut verdict = shape_verdict(brief, shape, &weighed, first, options);
    verdict.excluded = weighed.excluded;
    verdict.facets = weighed.tallies.facets(brief, shape);
    // Among layouts the plate grades equal, runnable first: each fitting layout of a
    // shape that can pass graded once by the detailed model (default stack and step).
    // The verdict does not depend on it: every plate configuration has the same pace.
    let plate = options.memory == MemorySpace::Plate && options.time == TimeModel::Plate;
    if plate && verdict.token_window.is_some() {
        for c in &mut configs {
            c.prefer = runnable_key(brief, &detailed_grade(brief, shape, &c.layout));
        }
        order.sort_by(|&a, &b| pace_order(&configs[a as usize], &configs[b as usize]));
    }
    // The memory order is needed only to rank by memory.
    let mut by_memory = match options.rank {
        Rank::Memory => configs.clone(),
        _ => Vec::new(),
    };
    by_memory.sort_by(memory_order);
    let (all, graded) = (weighed.all, weighed.graded);
    // Slower than a positive pace, so positive, where a double's bits order as its value.
    let mut slower = std::mem::take(&mut weighed.slower);
    slower.sort_unstable_by_key(|k| k.to_bits());
    (
        verdict,
        Fitting {
            configs,
            order,
            by_memory,
            slower,
            all,
            graded,
        },
    )
}

/// The work of a block of shapes starting at `offset`: each shape's grid counts inside its
/// window, in chunks. Only these are graded one by one; the rest fail exactly as the window
/// says (the property tests compare with grading everything).
fn window_work(
    grid: &TokenGrid,
    verdicts: &[ShapeVerdict],
    offset: usize,
) -> Vec<(usize, u64, u64)> {
    verdicts
        .iter()
        .enumerate()
        .filter_map(|(s, v)| Some((offset + s, grid_range(grid, v.token_window?))))
        .flat_map(|(s, range)| {
            let chunks = (range.end - range.start).div_ceil(CHUNK);
            (0..chunks).map(move |c| {
                let first = range.start + c * CHUNK;
                (s, first, (first + CHUNK).min(range.end))
            })
        })
        .collect()
}

/// The front's points (sorted by days) thinned, when asked, to each distinct choice's best
/// under `rank`, still sorted by days.
pub(crate) fn thin_front(
    points: Vec<Candidate>,
    rank: Rank,
    distinct: Distinct,
    thin: bool,
) -> Vec<Candidate> {
    if !thin || distinct == Distinct::Plan {
        return points;
    }
    let mut kept: Vec<Candidate> = Vec::new();
    for c in &points {
        match kept.iter_mut().find(|k| distinct.same(k, c)) {
            Some(k) if rank.compare(c, k).is_lt() => *k = *c,
            Some(_) => {}
            None => kept.push(*c),
        }
    }
    kept.sort_by(|a, b| a.days.total_cmp(&b.days).then_with(|| tie_break(a, b)));
    kept
}

/// The full plan of a passing candidate, graded again by [`evaluate`] (`micro_batches`: each
/// shape's micro-batches, worked out once for all the plans graded).
fn grade(
    brief: &Brief,
    shapes: &[Shape],
    time: &TimeModel,
    c: &Candidate,
    micro_batches: &MicroBatches,
) -> Plan {
    let shape = &shapes[c.shape];
    grade_with(brief, shape, time, c, micro_batches, &|| {
        detailed_grade(brief, shape, &c.layout).map_err(|e| e.to_string())
    })
}

/// Each shape's [`MicroBatchCache`] (by its place) for grading many plans: a front holds many
/// token counts of few configurations.
type MicroBatches = std::cell::RefCell<crate::hash::FastMap<usize, MicroBatchCache>>;

/// [`grade`], a plate plan's detailed grade (its `runnable`) from `detailed`.
fn grade_with(
    brief: &Brief,
    shape: &Shape,
    time: &TimeModel,
    c: &Candidate,
    micro_batches: &MicroBatches,
    detailed: &dyn Fn() -> std::result::Result<DetailedGrade, String>,
) -> Plan {
    let design = Design {
        shape,
        tokens: c.tokens,
        layout: c.layout,
        memory: c.model,
        time,
    };
    let mut caches = micro_batches.borrow_mut();
    let cache = caches.entry(c.shape).or_default();
    let plan = evaluate_cached(brief, &design, detailed, Some(cache))
        .expect("configurations() kept only valid steps");
    debug_assert!(plan.pass && plan.loss == c.loss && plan.days == c.days);
    plan
}

/// Grades the grid's token counts `range` of shape `s` (`fit` its configurations that can
/// pass) into `found` (`local`: the shape's place in `found.best`): the passing count, the
/// top plans, the shape's best and the front's candidates.
#[allow(clippy::too_many_arguments)]
fn walk_grid(
    brief: &Brief,
    shape: &Shape,
    s: usize,
    fit: &Fitting,
    range: std::ops::Range<u64>,
    options: &SearchOptions,
    found: &mut Found,
    local: usize,
) {
    let grid = options.grid;
    let top = options.top.unwrap_or(usize::MAX);
    let cluster_flops = brief.cluster_flops_per_second();
    let n = shape.active_params() as f64;
    for i in range {
        let tokens = grid.at(i);
        let loss = loss(brief, shape, tokens);
        if !loss_meets(brief, loss) {
            continue;
        }
        let plate_days = time::days(cluster_flops, n, tokens as f64);
        let days_of = |c: &Config| c.pace.days(plate_days, tokens);
        // Days rise with the pace, so the configurations that pass are a prefix of
        // `by_pace`. They share the loss; under any ranking but memory they come in
        // `by_pace`'s order, so only the first `top` can be among the best, and only the
        // first (fewest days) can stand on the front.
        let passing = fit
            .order
            .partition_point(|&i| within_time_and_cost(brief, days_of(&fit.configs[i as usize])));
        if passing == 0 {
            continue;
        }
        let candidate = |c: &Config| Candidate {
            shape: s,
            tokens,
            layout: c.layout,
            model: c.model,
            loss,
            days: days_of(c),
            memory: gb(c.bytes),
            prefer: c.prefer,
        };
        // Under --exact the ranking and each shape's best come from the windows; only the
        // grid's front and count are wanted from this loop.
        if !options.exact {
            let mut best = if options.rank == Rank::Memory {
                let fits = fit
                    .by_memory
                    .iter()
                    .filter(|c| within_time_and_cost(brief, days_of(c)));
                Either::Left(fits.take(top).map(candidate))
            } else {
                Either::Right(fit.by_pace().take(passing.min(top)).map(candidate))
            };
            let first_best = best.next();
            if let Some(c) = first_best {
                found.top.push(c);
            }
            best.for_each(|c| found.top.push(c));
            found.best[local] = better(options.rank, found.best[local], first_best);
        }
        found
            .front
            .insert(candidate(&fit.configs[fit.order[0] as usize]));
        // The slower depths pass where their days do, `t·k` as `Pace::days` reckons them.
        let slower = fit
            .slower
            .partition_point(|&k| within_time_and_cost(brief, tokens as f64 * k));
        found.passing += (passing + slower) as u64;
    }
}

/// Searches a block of shapes at once, in one go: each shape's configurations are weighed, its
/// grid walked and its distinct choices found by the same worker, and then let go, so nothing
/// waits on a whole block and memory holds the workers' shapes only. What it gives is what the
/// block-by-block search gives (the merges are order-free); it serves the searches that keep
/// nothing of a shape's configurations once walked (not `--exact`, not merged windows, and
/// `--distinct` only where [`distinct_firsts_of_shape`] answers).
fn search_streaming(
    brief: &Brief,
    shapes: &[Shape],
    options: &SearchOptions,
    progress: &dyn Progress,
) -> Streamed {
    let grid = options.grid;
    let empty = || Streamed {
        found: Found {
            top: TopK::new(options.rank, options.top),
            front: Front::new(),
            passing: 0,
            best: Vec::new(),
        },
        best: Vec::new(),
        verdicts: Vec::new(),
        distinct: TopK::new(options.rank, options.top),
        choices: 0,
        evaluated: 0,
        configurations: 0,
        graded: 0,
        scratch: Choices::default(),
    };
    let mut streamed = shapes
        .par_iter()
        .enumerate()
        .fold(empty, |mut acc, (s, shape)| {
            if crate::search::progress::interrupted() {
                return acc;
            }
            let buffers = Buffers::take();
            // A slower depth can be in a top list of plans (`--distinct plan`) but for the
            // first, or the lightest under the memory ranking.
            let depths_by_pace = options.rank != Rank::Memory
                && (options.distinct != Distinct::Plan || options.top == Some(1));
            let (verdict, fit) =
                shape_configuration(brief, shape, options, depths_by_pace, buffers);
            acc.evaluated = acc
                .evaluated
                .saturating_add(fit.all.saturating_mul(grid.len()));
            acc.configurations += fit.all;
            acc.graded += fit.graded;
            if let Some(window) = verdict.token_window {
                acc.found.best.push(None);
                walk_grid(
                    brief,
                    shape,
                    s,
                    &fit,
                    grid_range(&grid, window),
                    options,
                    &mut acc.found,
                    0,
                );
                if let Some(best) = acc.found.best.pop().flatten() {
                    acc.best.push((s, best));
                }
            }
            if options.distinct != Distinct::Plan {
                for c in distinct_firsts_of_shape(
                    brief,
                    shape,
                    &fit,
                    s,
                    &grid,
                    options.rank,
                    options.distinct,
                    &mut acc.scratch,
                ) {
                    acc.choices += 1;
                    acc.distinct.push(c);
                }
            }
            acc.verdicts.push((s, verdict));
            Buffers {
                configs: fit.configs,
                slower: fit.slower,
            }
            .keep();
            progress.advance(1);
            acc
        })
        .reduce(empty, Streamed::merge);
    streamed.verdicts.sort_unstable_by_key(|(s, _)| *s);
    // Stopped part way, the report is of the shapes searched from the first on, as a search
    // by blocks stops.
    let searched = streamed
        .verdicts
        .iter()
        .enumerate()
        .take_while(|(i, (s, _))| i == s)
        .count();
    streamed.verdicts.truncate(searched);
    streamed
}

/// What [`search_streaming`] gathers: the grid's plans, each shape's best and verdict (by its
/// place), the distinct choices and the counts.
struct Streamed {
    found: Found,
    best: Vec<(usize, Candidate)>,
    verdicts: Vec<(usize, ShapeVerdict)>,
    distinct: TopK,
    choices: u64,
    evaluated: u64,
    configurations: u64,
    graded: u64,
    /// The worker's table for [`distinct_firsts_of_shape`].
    scratch: Choices,
}

impl Streamed {
    fn merge(mut self, other: Streamed) -> Streamed {
        self.found = self.found.merge(other.found);
        self.best.extend(other.best);
        self.verdicts.extend(other.verdicts);
        self.distinct = self.distinct.merge(other.distinct);
        self.choices += other.choices;
        self.evaluated = self.evaluated.saturating_add(other.evaluated);
        self.configurations += other.configurations;
        self.graded += other.graded;
        self
    }
}

/// Searches every shape in `shapes` under `brief` (which must be valid) on the current rayon
/// thread pool, reporting progress in shapes searched.
pub fn search(
    brief: &Brief,
    shapes: &[Shape],
    options: &SearchOptions,
    progress: &dyn Progress,
) -> SearchReport {
    search_in_blocks(brief, shapes, options, progress, block_for(options), false).0
}

/// [`search`], `block` shapes at a time; with `keep_windows`, also every fitting
/// configuration's exact window (for [`search_all`]).
fn search_in_blocks<'a>(
    brief: &'a Brief,
    shapes: &'a [Shape],
    options: &SearchOptions,
    progress: &dyn Progress,
    block_size: usize,
    keep_windows: bool,
) -> (SearchReport, Vec<Window<'a>>) {
    let grid = options.grid;
    let top = options.top.unwrap_or(usize::MAX);
    // Shapes are searched a block at a time, so memory holds one block's configurations and
    // grows with the shapes' verdicts and best plans only, however large the family.
    let mut verdicts: Vec<ShapeVerdict> = Vec::with_capacity(shapes.len());
    let mut found = Found {
        top: TopK::new(options.rank, options.top),
        front: Front::new(),
        passing: 0,
        best: vec![None; shapes.len()],
    };
    let mut exact = TopK::new(options.rank, options.top);
    let mut distinct = TopK::new(options.rank, options.top);
    let mut choices = 0u64;
    let mut exact_windows = Vec::new();
    let mut kept = Vec::new();
    let mut evaluated = 0u64;
    let (mut configurations, mut graded) = (0u64, 0u64);
    progress.start(shapes.len() as u64);
    // Whether each shape can be searched whole by one worker and let go.
    let streaming = !options.exact
        && !keep_windows
        && (options.distinct == Distinct::Plan || options.rank != Rank::Memory);
    if streaming {
        let streamed = search_streaming(brief, shapes, options, progress);
        verdicts.extend(streamed.verdicts.into_iter().map(|(_, v)| v));
        found.top = streamed.found.top;
        found.front = streamed.found.front;
        found.passing = streamed.found.passing;
        for (s, best) in streamed.best {
            found.best[s] = Some(best);
        }
        distinct = streamed.distinct;
        choices = streamed.choices;
        evaluated = streamed.evaluated;
        configurations = streamed.configurations;
        graded = streamed.graded;
    }
    // By blocks, where the search keeps what a block's configurations give (`--exact`, merged
    // windows, a distinct ranking by memory).
    let by_blocks = if streaming { 0 } else { shapes.len() };
    for block in (0..by_blocks).step_by(block_size.max(1)) {
        if crate::search::progress::interrupted() {
            break;
        }
        let block = block..(block + block_size.max(1)).min(shapes.len());
        let (block_verdicts, fitting) =
            shape_configurations(brief, &shapes[block.clone()], options);
        evaluated = fitting.iter().fold(evaluated, |n, f| {
            n.saturating_add(f.all.saturating_mul(grid.len()))
        });
        configurations += fitting.iter().map(|f| f.all).sum::<u64>();
        graded += fitting.iter().map(|f| f.graded).sum::<u64>();
        let work = window_work(&grid, &block_verdicts, block.start);
        let empty = || Found {
            top: TopK::new(options.rank, options.top),
            front: Front::new(),
            passing: 0,
            best: vec![None; block.len()],
        };
        let part = work
            .par_iter()
            .fold(empty, |mut found, &(s, first, last)| {
                let local = s - block.start;
                let fit = &fitting[local];
                walk_grid(
                    brief,
                    &shapes[s],
                    s,
                    fit,
                    first..last,
                    options,
                    &mut found,
                    local,
                );
                found
            })
            .reduce(empty, Found::merge);
        found.top = found.top.merge(part.top);
        found.front = found.front.merge(part.front);
        found.passing += part.passing;
        for (global, best) in found.best[block.clone()].iter_mut().zip(part.best) {
            *global = better(options.rank, *global, best);
        }
        if keep_windows {
            kept.extend(windows(
                brief,
                &shapes[block.clone()],
                &fitting,
                block.start,
            ));
        }
        if options.distinct != Distinct::Plan && !options.exact && options.rank != Rank::Memory {
            let firsts: Vec<Vec<Candidate>> = shapes[block.clone()]
                .par_iter()
                .zip(&fitting)
                .enumerate()
                .map(|(s, (shape, fit))| {
                    distinct_firsts_of_shape(
                        brief,
                        shape,
                        fit,
                        block.start + s,
                        &grid,
                        options.rank,
                        options.distinct,
                        &mut Choices::default(),
                    )
                })
                .collect();
            // Choices are per shape, so the shapes' firsts are the block's.
            for c in firsts.into_iter().flatten() {
                choices += 1;
                distinct.push(c);
            }
        } else if options.distinct != Distinct::Plan {
            let block_windows = windows(brief, &shapes[block.clone()], &fitting, block.start);
            let firsts = distinct_firsts(
                &block_windows,
                &grid,
                options.rank,
                options.exact,
                options.distinct,
            );
            choices += firsts.len() as u64;
            firsts.into_iter().for_each(|c| distinct.push(c));
        }
        if options.exact {
            let block_windows = windows(brief, &shapes[block.clone()], &fitting, block.start);
            let (plans, best) = exact_top(&block_windows, options.rank, top, block.clone());
            plans.into_iter().for_each(|c| exact.push(c));
            found.best[block.clone()].copy_from_slice(&best);
            // Only each shape's fastest configuration can stand on the front.
            exact_windows.extend(
                block_windows
                    .into_iter()
                    .dedup_by(|a, b| a.index == b.index),
            );
        }
        verdicts.extend(block_verdicts);
        progress.advance(block.len() as u64);
    }
    progress.finish();

    let micro_batches = MicroBatches::default();
    let grade = |c: &Candidate| grade(brief, shapes, &options.time, c, &micro_batches);
    let budget_flops = brief.budget_flops();
    let plans = if options.distinct != Distinct::Plan {
        distinct.into_sorted()
    } else if options.exact {
        exact.into_sorted()
    } else {
        found.top.into_sorted()
    };
    let best = found.best;
    let front_runs = options.exact.then(|| {
        let tie = |(a, ta): (usize, u64), (b, tb): (usize, u64)| {
            tie_break(
                &exact_windows[a].candidate(ta),
                &exact_windows[b].candidate(tb),
            )
        };
        let front = exact_front(&exact_windows, tie, MAX_FRONT_RUNS);
        FrontRuns {
            runs: front
                .runs
                .iter()
                .map(|run| {
                    let window = &exact_windows[run.chain];
                    FrontRun {
                        first: grade(&window.candidate(run.first)),
                        last: grade(&window.candidate(last_on_front(window, run))),
                        days_per_token: window.pace.days_per_token(),
                    }
                })
                .collect(),
            complete: front.complete,
        }
    });
    let report = SearchReport {
        brief: brief.clone(),
        grid,
        rank: options.rank,
        exact: options.exact,
        budget_flops,
        compute_optimal: ComputeOptimal::for_budget(
            &brief.loss_law,
            budget_flops,
            brief.unique_tokens.map(|u| u as f64),
        ),
        shapes: verdicts
            .into_iter()
            .zip(&best)
            .map(|(mut v, best)| {
                v.best_plan = best.as_ref().map(grade);
                v
            })
            .collect(),
        distinct: options.distinct,
        choices: if options.distinct == Distinct::Plan {
            found.passing
        } else {
            choices
        },
        plans: plans.iter().map(grade).collect(),
        front: thin_front(
            found.front.into_points(),
            options.rank,
            options.distinct,
            options.distinct_front,
        )
        .iter()
        .map(grade)
        .collect(),
        front_runs,
        evaluated,
        configurations,
        graded: Some(graded),
        passing: found.passing,
        sensitivity: None,
    };
    (report, kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_depths_run_from_2_to_the_largest_stage_where_the_micro_batches_allow() {
        let brief = Brief::default();
        let shape = crate::model::preset("70b").unwrap();
        let step = Step {
            micro_batch: 1,
            seq_len: 8192,
            recompute: Recompute::Full,
            sequence_parallel: true,
            schedule: Schedule::OneFOneB,
            tp_comm_overlap: true,
            precision: crate::cost::step::precision::Precision::Bf16,
            global_batch_tokens: 16 * 1024 * 1024,
        };
        let space = MemorySpace::Detailed {
            steps: vec![step],
            options: Options::default(),
            interleave: true,
            batch: None,
            parallel: Default::default(),
            divisors: false,
        };
        let schedules = |tp, pp| -> Vec<u64> {
            let l = Layout::new(
                &brief,
                &shape,
                tp,
                pp,
                crate::model::layout::ZeroStage::new(1).unwrap(),
            )
            .unwrap();
            space
                .models_for(&shape, &l)
                .iter()
                .map(|m| m.step().unwrap().schedule.chunks())
                .collect()
        };
        // PP 4 of 80 layers: 20 a stage; DP 64 gives 32 micro-batches, a multiple of 4.
        assert_eq!(schedules(8, 4), (1..=20).collect::<Vec<u64>>());
        // PP 1 has no pipeline to interleave.
        assert_eq!(schedules(8, 1), [1]);
        // PP 16 at DP 16: 128 micro-batches, 5 layers a stage.
        assert_eq!(schedules(8, 16), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn the_default_space_overlaps_tp_communication_and_not_where_the_stack_can_with_sequence_parallelism(
    ) {
        let brief = Brief::default();
        let shape = crate::model::preset("70b").unwrap();
        let layout = |tp| {
            Layout::new(
                &brief,
                &shape,
                tp,
                1,
                crate::model::layout::ZeroStage::new(1).unwrap(),
            )
            .unwrap()
        };
        // (SP, overlap) of the b1, no-recompute 1F1B steps of a layout under `stack`.
        let kinds = |stack: Stack, tp| -> Vec<(bool, bool)> {
            MemorySpace::detailed_defaults(&brief, Options::for_stack(stack))
                .models_for(&shape, &layout(tp))
                .iter()
                .filter_map(|m| m.step().copied())
                .filter(|s| s.micro_batch == 1 && s.recompute == Recompute::None)
                .map(|s| (s.sequence_parallel, s.tp_comm_overlap))
                .collect()
        };
        // Megatron-core: overlap on and off with SP, off without it.
        assert_eq!(
            kinds(Stack::MegatronTe, 8),
            [(false, false), (true, false), (true, true)]
        );
        // Llama 3's stack has no TP overlap; at TP 1 neither SP nor the overlap is anything.
        assert_eq!(kinds(Stack::Llama3, 8), [(false, false), (true, false)]);
        assert_eq!(kinds(Stack::MegatronTe, 1), [(false, false)]);
    }
    use crate::model::presets;
    use crate::search::progress::Silent;

    #[test]
    fn searching_a_block_at_a_time_changes_nothing() {
        use crate::model::family::Family;
        use crate::report::export::Format;
        let family = Family::llama("40..120:20", "8192..16384:2048", "3..4:0.5").unwrap();
        let mut shapes = presets();
        shapes.extend(family.shapes().unwrap());
        let b = Brief::default();
        for exact in [false, true] {
            let options = SearchOptions {
                exact,
                top: Some(7),
                ..SearchOptions::default()
            };
            let json = |block| {
                let (r, _) = search_in_blocks(&b, &shapes, &options, &Silent, block, false);
                let e = Format::Json.exporter();
                (e.search(&r).unwrap(), e.front(&r).unwrap())
            };
            assert_eq!(json(1), json(BLOCK));
            assert_eq!(json(4), json(BLOCK));
        }
    }

    #[test]
    fn two_shapes_of_one_size_give_the_front_of_one() {
        // Equal parameter counts make equal curves; the exact front must not crawl along them a
        // token at a time, and the tie goes to the first shape.
        let seventy = crate::model::preset("70b").unwrap();
        let twin = Shape {
            name: "twin".into(),
            ..seventy.clone()
        };
        let options = SearchOptions {
            exact: true,
            top: Some(1),
            ..SearchOptions::default()
        };
        let alone = search(
            &Brief::default(),
            std::slice::from_ref(&seventy),
            &options,
            &Silent,
        );
        let both = search(&Brief::default(), &[seventy, twin], &options, &Silent);
        let runs = |r: &SearchReport| {
            let f = r.front_runs.as_ref().unwrap();
            assert!(f.complete);
            f.runs
                .iter()
                .map(|run| (run.first.model.clone(), run.first.tokens, run.last.tokens))
                .collect::<Vec<_>>()
        };
        assert_eq!(runs(&both), runs(&alone));
        assert_eq!(runs(&both).len(), 1);
    }

    #[test]
    fn a_search_after_others_on_the_same_thread_gives_what_it_gives_on_a_fresh_one() {
        // Each thread keeps its buffers and scratch from search to search: a search of 70B
        // after searches of a larger family and of another brief, on the same thread, reports
        // byte for byte what it reports on a thread that has searched nothing.
        use crate::model::family::Family;
        use crate::report::export::Format;
        let stack = Stack::MegatronTe;
        let options = |b: &Brief| SearchOptions {
            memory: MemorySpace::detailed_defaults(b, Options::for_stack(stack)),
            time: TimeModel::Detailed(crate::cost::step_time::options::TimeOptions::for_stack(
                stack,
            )),
            top: Some(3),
            ..SearchOptions::default()
        };
        let brief = Brief {
            gpus: 2048,
            ..Brief::default()
        };
        let small = Brief {
            gpus: 512,
            ..Brief::default()
        };
        let family = Family::llama("40..120:40", "8192..16384:8192", "3..4:1")
            .unwrap()
            .shapes()
            .unwrap();
        let seventy = [crate::model::preset("70b").unwrap()];
        let json = |b: &Brief, shapes: &[Shape]| {
            let r = search(b, shapes, &options(b), &Silent);
            Format::Json.exporter().search(&r).unwrap()
        };
        let one_thread = || {
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap()
        };
        let fresh = one_thread().install(|| json(&brief, &seventy));
        let after = one_thread().install(|| {
            json(&brief, &family);
            json(&small, &seventy);
            json(&brief, &seventy)
        });
        assert_eq!(after, fresh);
    }

    /// Llama 3 8B on 2^20 GPUs for a year at a 2.0 loss target passes near 10^15 tokens and
    /// beyond, where `f64` rounds runs of neighbouring token counts to one loss.
    #[test]
    fn each_shape_searched_whole_by_one_worker_gives_what_the_blocks_give() {
        // The streaming search (each shape weighed, walked and its distinct choices found by
        // [`distinct_firsts_of_shape`]) against the block search, which walks every
        // configuration's line (`keep_windows` keeps it on that path): the same report, byte
        // for byte, on a small family in the detailed space, by every ranking it serves and
        // each kind of distinct choice; and on the plate's space with its loss plateaus.
        use crate::model::family::Family;
        use crate::report::export::Format;
        let family = Family::llama("40..120:40", "8192..16384:8192", "3..4:1").unwrap();
        let mut shapes = presets();
        shapes.extend(family.shapes().unwrap());
        let detailed = |b: &Brief| {
            let options = Options::for_stack(Stack::MegatronTe);
            (
                MemorySpace::detailed_defaults(b, options),
                TimeModel::Detailed(crate::cost::step_time::options::TimeOptions::for_stack(
                    Stack::MegatronTe,
                )),
            )
        };
        let mut priced = Brief::default();
        priced.spend.price_per_gpu_hour = Some(2.0);
        for (b, (memory, time)) in [
            (priced.clone(), detailed(&priced)),
            (plateau_brief(), (MemorySpace::Plate, TimeModel::Plate)),
        ] {
            for (rank, distinct, top) in iproduct!(
                [Rank::Loss, Rank::Days, Rank::Cost],
                [Distinct::Plan, Distinct::Layout, Distinct::Shape],
                [Some(1), Some(40)]
            ) {
                let options = SearchOptions {
                    rank,
                    distinct,
                    top,
                    memory: memory.clone(),
                    time: time.clone(),
                    ..SearchOptions::default()
                };
                let json = |keep_windows| {
                    let (r, _) = search_in_blocks(&b, &shapes, &options, &Silent, 4, keep_windows);
                    let e = Format::Json.exporter();
                    (
                        e.search(&r).unwrap(),
                        e.front(&r).unwrap(),
                        r.configurations,
                    )
                };
                let streamed = json(false);
                assert!(streamed.2 > 0);
                assert_eq!(streamed, json(true), "{rank:?} {distinct:?} {top:?}");
            }
        }
    }

    fn plateau_brief() -> Brief {
        Brief {
            gpus: 1 << 20,
            max_days: 365.0,
            loss_target: 2.0,
            ..Brief::default()
        }
    }

    #[test]
    fn every_passing_plan_streams_in_order_across_loss_plateaus() {
        let b = plateau_brief();
        let shapes = vec![crate::model::preset("8b").unwrap()];
        let first = 1_000_000_000_000_000;
        // The grid has plateaus: neighbouring counts with the same loss.
        let l = |t: u64| loss(&b, &shapes[0], t);
        assert!((first..first + 300).any(|t| l(t) == l(t + 1)));
        for rank in [Rank::Loss, Rank::Days, Rank::Memory] {
            let options = SearchOptions {
                grid: TokenGrid::new(first, first + 300, 1).unwrap(),
                rank,
                top: None,
                ..SearchOptions::default()
            };
            let collected = search(&b, &shapes, &options, &Silent);
            let (_, all) = search_all(&b, &shapes, &options, &Silent);
            assert!(collected.passing > 1000);
            assert_eq!(all.walk().collect::<Vec<_>>(), collected.plans, "{rank:?}");
        }
    }

    #[test]
    fn an_exact_ranking_by_loss_takes_a_loss_plateau_fewest_days_first() {
        // The best loss is held by a run of counts; the best plan is the run's first (fewest
        // tokens, so fewest days), and the plans after it follow the run upwards.
        let b = plateau_brief();
        let shapes = vec![crate::model::preset("8b").unwrap()];
        let options = SearchOptions {
            exact: true,
            top: Some(5),
            ..SearchOptions::default()
        };
        let r = search(&b, &shapes, &options, &Silent);
        let best = &r.plans[0];
        assert!(loss(&b, &shapes[0], best.tokens - 1) > best.loss);
        for pair in r.plans.windows(2) {
            assert_eq!(pair[1].loss, best.loss);
            assert!(pair[1].tokens == pair[0].tokens + 1 && pair[1].days >= pair[0].days);
        }
    }

    #[test]
    fn the_default_grid_has_5000_counts() {
        let g = TokenGrid::default();
        assert_eq!(g.len(), 5000);
        assert_eq!(g.at(4999), 50_000_000_000_000);
    }

    #[test]
    fn a_grid_is_checked() {
        assert!(TokenGrid::new(0, 10, 1).is_err());
        assert!(TokenGrid::new(10, 9, 1).is_err());
        assert!(TokenGrid::new(1, 10, 0).is_err());
        assert!(TokenGrid::new(1, u64::MAX, 1).is_err());
        assert_eq!(TokenGrid::new(5, 12, 3).unwrap().len(), 3); // 5, 8, 11
    }

    #[test]
    fn the_default_search_grades_every_candidate_and_the_best_is_70b_at_the_month_s_end() {
        let r = search(
            &Brief::default(),
            &presets(),
            &SearchOptions::default(),
            &Silent,
        );
        // 5,000 token counts × (8B: 4 TP × 6 PP × 4 ZeRO + 70B: 4 × 7 × 4 + 405B: 4 × 7 × 4).
        assert_eq!(r.evaluated, 5000 * (96 + 112 + 112));
        assert_eq!(r.plans.len(), 10);
        let best = &r.plans[0];
        assert_eq!(
            (best.model.as_str(), best.tokens),
            ("llama3-70b", 4_960_000_000_000)
        );
        assert!(r.plans.iter().all(|p| p.pass));
    }
}

#[cfg(test)]
mod weighed_tests {
    use super::*;
    use crate::cost::step::stack::Stack;
    use crate::cost::step_time::options::TimeOptions;
    use crate::plan::verdict::lightest;

    /// The detailed space of the default brief with CP 1 and 2 and both precisions.
    fn cp_and_fp8(brief: &Brief) -> (MemorySpace, TimeModel) {
        let options = Options::for_stack(Stack::MegatronTe);
        let space = MemorySpace::detailed_defaults(brief, options).with_parallel(
            &[Precision::Bf16, Precision::Fp8],
            ParallelSpace {
                cps: vec![1, 2],
                replicates: vec![1, 2],
                experts: ExpertSpace::default(),
            },
        );
        (
            space,
            TimeModel::Detailed(TimeOptions::for_stack(Stack::MegatronTe)),
        )
    }

    #[test]
    fn a_slower_depth_takes_more_days_at_every_token_count() {
        // The least pace `slower_than` calls slower, found bit by bit, against token counts
        // from one to the largest a double holds exactly and beyond.
        for fastest in [1.0e-12, 3.7e-10, 1.0 / 3.0, 8.9e-9, 1.0] {
            let mut k = fastest;
            while !slower_than(k, fastest) {
                k = f64::from_bits(k.to_bits() + 1);
            }
            assert!(k.to_bits() - fastest.to_bits() <= 64, "{fastest}");
            for t in [
                1u64,
                3,
                1_000_000_007,
                15_000_000_000_000,
                (1 << 53) - 1,
                u64::MAX,
            ] {
                let t = t as f64;
                assert!(t * k > t * fastest, "{fastest} at {t}");
            }
        }
        assert!(!slower_than(1.0, 1.0));
        assert!(!slower_than(2.0, 0.0), "only slower than a positive pace");
    }

    #[test]
    fn sorting_by_integer_keys_gives_the_pace_order() {
        // Every configuration of 70B, then the same with paces and memory made to tie in
        // threes (the runs the whole order breaks), and with a negative zero and infinities.
        let brief = Brief::default();
        let (space, time) = cp_and_fp8(&brief);
        let shape = crate::model::preset("70b").unwrap();
        let all = configurations(&brief, &shape, &space, &time);
        let mut tied = all.clone();
        for (i, c) in tied.iter_mut().enumerate() {
            c.pace = Pace::from_days_per_token(Some([1e-9, 0.0, -0.0, f64::INFINITY][i % 12 / 3]));
            c.bytes = [7e10, 8e10][i % 2];
        }
        for mut configs in [all, tied] {
            let mut expected = configs.clone();
            expected.sort_by(pace_order);
            configs.reverse();
            let sorted: Vec<Config> = pace_order_of(&configs)
                .iter()
                .map(|&i| configs[i as usize])
                .collect();
            assert_eq!(sorted, expected);
        }
    }

    /// [`weighed_configurations`] keeping every configuration that fits, each depth in full.
    fn weigh_every_one(
        brief: &Brief,
        shape: &Shape,
        space: &MemorySpace,
        time: &TimeModel,
    ) -> Weighed {
        weighed_configurations(
            brief,
            shape,
            space,
            time,
            &|_| true,
            false,
            Buffers::default(),
            &mut Scratch::default(),
        )
    }

    #[test]
    fn what_the_search_weighs_is_what_grading_every_configuration_gives() {
        // Memory first, the step time only where it fits, each micro-batch's compute and the
        // parts a step's schedules share worked out once: the same configurations, bit for bit.
        let brief = Brief::default();
        let (space, time) = cp_and_fp8(&brief);
        for name in ["70b", "405b"] {
            let shape = crate::model::preset(name).unwrap();
            let (all, excluded) = configurations_counted(&brief, &shape, &space, &time);
            let weighed = weigh_every_one(&brief, &shape, &space, &time);
            let fits: Vec<Config> = all
                .iter()
                .filter(|c| memory_fits(&brief, c.bytes))
                .copied()
                .collect();
            assert!(fits.len() > 1000, "{name}: {}", fits.len());
            assert_eq!(weighed.fitting, fits, "{name}");
            assert_eq!(weighed.all, all.len() as u64);
            assert_eq!(weighed.excluded, excluded);
            let lightest_of_all =
                lightest(all.iter().map(|c| (c.bytes, &c.layout, c.model.step())));
            assert_eq!(weighed.lightest, lightest_of_all);
            // Each CP degree's and precision's count, lightest and fastest too, though the
            // bounds leave configurations over the cap unweighed.
            let mut tallies = Tallies::default();
            for c in &all {
                let fits = memory_fits(&brief, c.bytes).then_some(c);
                tallies.count(&c.layout, &c.model, c.bytes, fits);
            }
            assert_eq!(
                weighed.tallies.facets(&brief, &shape),
                tallies.facets(&brief, &shape),
                "{name}"
            );
            assert!(
                weighed.graded < weighed.all,
                "{name}: the bounds decide some"
            );
        }
    }

    #[test]
    fn each_cp_degree_and_precision_gets_its_own_verdict() {
        let brief = Brief::default();
        let (space, time) = cp_and_fp8(&brief);
        let shape = crate::model::preset("70b").unwrap();
        let weighed = weigh_every_one(&brief, &shape, &space, &time);
        let facets = weighed.tallies.facets(&brief, &shape);
        let named: Vec<(&str, &str)> = facets
            .iter()
            .map(|f| (f.dimension.as_str(), f.value.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("cp", "1"),
                ("cp", "2"),
                ("precision", "bf16"),
                ("precision", "fp8")
            ]
        );
        // Each dimension's facets share out the configurations and the fitting ones.
        for dimension in ["cp", "precision"] {
            let of = facets.iter().filter(|f| f.dimension == dimension);
            assert_eq!(
                of.clone().map(|f| f.configurations).sum::<u64>(),
                weighed.all
            );
            let fitting = of.map(|f| f.fitting).sum::<u64>();
            assert_eq!(fitting, weighed.fitting.len() as u64);
        }
        // A facet's fastest is the fastest fitting configuration with that value: the
        // shape's fastest overall is the fastest of one CP degree and one precision.
        let fastest = weighed
            .fitting
            .iter()
            .min_by(|a, b| pace_order(a, b))
            .unwrap();
        let k = fastest.pace.days_per_token();
        let cp = facets
            .iter()
            .find(|f| f.dimension == "cp" && f.value == fastest.layout.cp.to_string())
            .unwrap();
        assert_eq!(cp.days_per_token, k);
        assert_eq!(cp.fastest_layout, Some(fastest.layout));
        // FP8's fastest is faster than BF16's, and so trains more tokens in the month.
        let [bf16, fp8] = ["bf16", "fp8"].map(|p| {
            facets
                .iter()
                .find(|f| f.dimension == "precision" && f.value == p)
                .unwrap()
        });
        assert!(fp8.days_per_token.unwrap() < bf16.days_per_token.unwrap());
        assert!(fp8.max_tokens_in_time > bf16.max_tokens_in_time);
        assert_eq!(fp8.fastest_step.unwrap().precision, Precision::Fp8);
    }

    #[test]
    fn at_131072_tokens_on_16384_gpus_cp_1_fails_on_days_and_longer_cp_passes() {
        // The batch target (16 Mi tokens) holds 128 sequences of 131,072, so at CP 1 the
        // 16,384 GPUs need TP × PP = 128: a pipeline of 16 stages with one micro-batch a step,
        // nearly all bubble. Splitting the sequence lets DP stay at 128 with a shorter pipeline.
        let brief = Brief {
            gpus: 16_384,
            seq_len: 131_072,
            max_days: 90.0,
            ..Brief::default()
        };
        let options = Options::for_stack(Stack::MegatronTe);
        let space = MemorySpace::detailed_defaults(&brief, options);
        let time = TimeModel::Detailed(TimeOptions::for_stack(Stack::MegatronTe));
        let shape = crate::model::preset("405b").unwrap();
        let facets = weigh_every_one(&brief, &shape, &space, &time)
            .tallies
            .facets(&brief, &shape);
        let cp = |v: &str| facets.iter().find(|f| f.dimension == "cp" && f.value == v);
        let one = cp("1").unwrap();
        assert!(one.token_window.is_none());
        assert!(
            one.reason.as_deref().unwrap().starts_with("days:"),
            "{one:?}"
        );
        let layout = one.fastest_layout.unwrap();
        assert_eq!((layout.tp, layout.pp, layout.dp), (8, 16, 128));
        for passing in ["16", "32"] {
            assert!(cp(passing).unwrap().token_window.is_some(), "CP {passing}");
        }
    }
}
