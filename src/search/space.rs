//! The space a search walks: for each shape, every valid layout (with its CP degrees,
//! hybrid-sharding replicas and expert degrees, [`ParallelSpace`]) and every step of the memory
//! model ([`MemorySpace`]: micro-batches, recomputation, schedules, SP and TP overlap,
//! precisions), and each configuration of a shape in it ([`Config`], [`configurations`]).

use itertools::{iproduct, Itertools};

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::{Detailed, Options};
use crate::cost::step::pipeline::stage_kinds;
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::cost::step::stack::VSchedules;
use crate::cost::step::Recompute;
use crate::cost::step::{BatchTarget, Schedule, Step};
use crate::cost::step_time::micro_batch::MicroBatchCache;
use crate::error::{Error, Result};
use crate::model::layout::{layouts, layouts_with, ExpertSpace, Layout};
use crate::model::Shape;
use crate::plan::pace::Pace;
use crate::plan::verdict::{Exclusion, Exclusions};
use crate::search::progress::{until_stopped, Progress, Silent};

/// The memory models a search tries with each layout.
// One value a search, never held in bulk: its detailed variant's size (the options copied by
// value into every grade) costs nothing here.
#[allow(clippy::large_enum_variant)]
/// What a layout's global batch aims at when no step fixes it.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchAim {
    /// One target for every shape: the brief's `batch_target_tokens`.
    Fixed(BatchTarget),
    /// The brief's batch law's optimum for each shape ([`Brief::batch_target_for`]).
    Law(Box<Brief>),
}

impl BatchAim {
    /// The aim of `brief`: its batch law's where it names one, else its fixed target.
    pub fn of(brief: &Brief) -> BatchAim {
        if brief.batch_law.is_fixed() {
            BatchAim::Fixed(brief.batch_target())
        } else {
            BatchAim::Law(Box::new(brief.clone()))
        }
    }

    /// The target of `shape`'s layouts.
    pub fn target(&self, shape: &Shape) -> BatchTarget {
        match self {
            BatchAim::Fixed(t) => *t,
            BatchAim::Law(brief) => brief.batch_target_for(shape),
        }
    }
}

// One space a search, built once: the detailed variant's size costs nothing.
#[allow(clippy::large_enum_variant)]
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
        /// Also the V schedules the stack runs ([`crate::cost::step::stack::VSchedules`]): for
        /// each 1F1B step of a pipeline whose stages have room for two chunks each, ZB-V and
        /// DualPipeV where the micro-batches are at least the schedule's fewest
        /// ([`Schedule::fewest_micro_batches`]).
        v_schedules: bool,
        /// The batch each layout aims at, when no step fixes it: each step's
        /// `global_batch_tokens` is then replaced, layout by layout, by the whole rounds of
        /// `b·s·DP` nearest the target ([`BatchTarget::resolve`]); `None` keeps the steps'
        /// own batches, which a layout they do not divide cannot train on.
        batch: Option<BatchAim>,
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
        let refused: Vec<Error> = refused
            .iter()
            .map(|s| self.refusal(shape, s, layout))
            .collect();
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

    /// Why the batch rule turns `step` of `shape` away under `layout`
    /// ([`BatchTarget::resolve`]'s error).
    pub(crate) fn refusal(&self, shape: &Shape, step: &Step, layout: &Layout) -> Error {
        match self {
            MemorySpace::Detailed {
                batch: Some(aim), ..
            } => aim
                .target(shape)
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
    pub(crate) fn steps_into(
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
            v_schedules,
            batch,
            divisors,
            ..
        } = self
        else {
            return;
        };
        let batch = batch.as_ref().map(|aim| aim.target(shape));
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
        // A hybrid's stages run one chunk each, whatever schedules were named
        // ([`crate::cost::step::detailed::Detailed::hybrid_schedule_allowed`]).
        if shape.hybrid.is_some() {
            all.retain(|s| s.schedule.chunks() == 1);
        }
        if !((*interleave || *v_schedules) && layout.pp >= 2) {
            return;
        }
        // The deepest interleaving every stage allows (Step's rule); the V schedules need two.
        let deepest = stage_kinds(shape, layout, options.stages)
            .map_or(0, |k| k.deepest_interleaving())
            .min(u64::from(u32::MAX)) as u32;
        // A hybrid's stages are its blocks in one chunk each (Megatron-core's `MambaStack`):
        // no interleaving ([`crate::cost::step::detailed::Detailed::hybrid_schedule_allowed`]).
        let interleave_to = if *interleave && shape.hybrid.is_none() {
            deepest
        } else {
            0
        };
        // The micro-batches of a step, where they are whole.
        let micro_batches = |s: &Step| {
            s.micro_batch
                .checked_mul(s.seq_len)
                .and_then(|t| t.checked_mul(layout.dp))
                .filter(|&t| t > 0 && s.global_batch_tokens % t == 0)
                .map(|t| s.global_batch_tokens / t)
        };
        // Whether the step's micro-batches are a multiple of the stages.
        let interleaves = |s: &Step| micro_batches(s).is_some_and(|m| m % layout.pp == 0);
        // The V schedules the space adds, and whether a step's micro-batches are enough.
        let runs = options.stack.settings().v_schedules;
        let adds_v = *v_schedules && deepest >= 2;
        let vs =
            [Schedule::ZeroBubbleV, Schedule::DualPipeV].map(|v| (v, adds_v && v.runs_on(runs)));
        let vs = vs.iter().filter(|(_, on)| *on).map(|&(v, _)| v);
        let v_runs = |s: &Step, schedule: Schedule| {
            micro_batches(s).is_some_and(|m| m >= schedule.fewest_micro_batches(layout.pp))
        };
        let n = all.len();
        if all.iter().any(|s| s.schedule != Schedule::OneFOneB) {
            // Schedules given by name may repeat the depths: sorted and deduplicated.
            for i in 0..n {
                let s = all[i];
                if s.schedule != Schedule::OneFOneB {
                    continue;
                }
                if interleaves(&s) {
                    for v in 2..=interleave_to {
                        all.push(Step {
                            schedule: Schedule::Interleaved(v),
                            ..s
                        });
                    }
                }
                for schedule in vs.clone().filter(|&v| v_runs(&s, v)) {
                    all.push(Step { schedule, ..s });
                }
            }
            all.sort_unstable();
            all.dedup();
            return;
        }
        // Every step 1F1B: each run of steps equal but for TP overlap, precision and batch,
        // followed by its depths in order and then its V schedules (ZB-V, then DualPipeV), is
        // the order sorting them all gives (the schedule comes before the overlap, the
        // precision and the batch in a step's order), with nothing to deduplicate. The 1F1B
        // steps move to `extra` (no longer needed) and are written back run by run, each
        // followed by its depths and V schedules.
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
            if interleave_to >= 2 {
                // The run's steps that interleave, at depth 2, then each deeper depth in turn.
                let first = all.len();
                all.extend(run.iter().filter(|s| interleaves(s)).map(|s| Step {
                    schedule: Schedule::Interleaved(2),
                    ..*s
                }));
                let width = all.len() - first;
                for v in 3..=interleave_to {
                    for i in first..first + width {
                        let s = Step {
                            schedule: Schedule::Interleaved(v),
                            ..all[i]
                        };
                        all.push(s);
                    }
                }
            }
            for schedule in vs.clone() {
                all.extend(
                    run.iter()
                        .filter(|s| v_runs(s, schedule))
                        .map(|s| Step { schedule, ..*s }),
                );
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
    let machine = brief.machine();
    if let Some(chip) = crate::cost::chip::Chip::on(&machine) {
        if stack.settings().per_operation {
            crate::cost::chip::recipe_runs(chip, stack, precision)?;
        }
    }
    precision
        .supported_on(crate::cost::chip::formats(&machine))
        .map_err(|_| {
            Error::invalid(
                "--precisions",
                precision,
                "precisions the GPU has tensor cores for (brief.fp8_tflops > 0; mxfp8 needs brief.mxfp8, Blackwell or MI355X; nvfp4 brief.nvfp4, Blackwell; mxfp4 brief.mxfp4, Blackwell or MI355X)",
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
                v_schedules,
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
                    v_schedules,
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
        let options = options.on_gpu(brief.mxfp8);
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
            v_schedules: options.stack.settings().v_schedules != VSchedules::None,
            options,
            batch: Some(BatchAim::of(brief)),
            parallel: ParallelSpace::default(),
            divisors: true,
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
    /// The runnable-first key ([`crate::search::rank::Candidate::prefer`]): for a plate configuration, its days
    /// per token under the detailed model when it fits there (+∞ when not); 0 otherwise.
    pub prefer: f64,
}

impl Config {
    /// Its step's global batch in tokens (`None` for the plate's, which has no step): what
    /// besides the shape its loss depends on where the brief counts the critical batch.
    pub fn global_batch(&self) -> Option<u64> {
        self.model.global_batch_tokens()
    }
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
    let excluded = for_each_configuration(brief, shape, space, time, |c| configs.push(c), &Silent);
    (configs, excluded)
}

/// Each valid configuration of [`configurations_counted`] to `visit`, in the same order, and
/// the ones left out, without holding them; the rest left unvisited once `progress` is
/// [`stopping`](crate::search::progress::stopping).
pub(crate) fn for_each_configuration(
    brief: &Brief,
    shape: &Shape,
    space: &MemorySpace,
    time: &TimeModel,
    mut visit: impl FnMut(Config),
    progress: &dyn Progress,
) -> Vec<Exclusion> {
    let machine = brief.machine();
    let mut excluded = Exclusions::default();
    let mut cache = MicroBatchCache::default();
    for layout in until_stopped(space.layouts(brief, shape), progress) {
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
            v_schedules: false,
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
}
