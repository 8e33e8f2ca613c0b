//! What a layout's steps share, worked out once: the steps and stage kinds per (TP, CP, PP,
//! DP), and a step's stage sums and unscheduled time per slot for all its interleaving depths,
//! found by the step's place ([`Shared`], [`Slot`], [`Share`]).

use crate::cost::memory::detailed::{StagePeaks, StageShares};
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::Detailed;
use crate::cost::step::pipeline::StageKinds;
use crate::cost::step::{Schedule, Step};
use crate::cost::step_time::micro_batch::MicroBatchCache;
use crate::cost::step_time::stage::Unsharded;
use crate::cost::step_time::Unscheduled;
use crate::cost::Machine;
use crate::error::Result;
use crate::model::layout::Layout;
use crate::model::Shape;

/// What the schedules of each step of one layout share, worked out once, when first needed:
/// the memory of the stages before their activations ([`StagePeaks`]) and the step time before
/// the pipeline's sends and bubble ([`Unscheduled`]), by the step with its schedule set to
/// 1F1B. The inner `None` where working it out failed: such a step is graded the whole way,
/// for its error.
pub(crate) struct Slot {
    stages: Option<Option<StagePeaks>>,
    time: Option<Option<Unscheduled>>,
    /// Whether the slot's interleaved steps were decided over the cap, all at once, when its
    /// 1F1B step was found over it ([`Shared::depths`]).
    pub(crate) over: bool,
    /// The fewest days a token among the slot's interleaved steps kept so far (+∞ for none).
    pub(crate) fastest_depth: f64,
}

impl Slot {
    /// The stage sums of `d`'s step (worked out the first time, from the slot's `share`;
    /// `kinds`: the layout's stages, `None` where the split refuses the layout, and so every
    /// step's stages fail).
    pub(crate) fn stages(
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
pub(crate) struct Share {
    stages: Option<Option<StageShares>>,
    time: Option<Option<Unsharded>>,
}

/// A slot's interleaved and V steps that come after its 1F1B step in a layout's steps: how
/// many, the deepest interleaving among them (0 for none), and the V schedules among them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Depths {
    pub(crate) count: u64,
    pub(crate) deepest: u32,
    pub(crate) zbv: bool,
    pub(crate) dualpipev: bool,
    /// Whether the slot's 1F1B step has come (its interleaved steps are counted from then).
    after_1f1b: bool,
}

/// The slots of one layout's steps, and which slot each step has: worked out once for the
/// layouts that share their degrees (their steps are the same), the slots emptied for each
/// layout; kept between layouts so a search allocates per shape, not per configuration.
#[derive(Default)]
pub(crate) struct Shared {
    slots: Vec<Slot>,
    /// Each slot's [`Share`], kept from layout to layout of the same degrees.
    shares: Vec<Share>,
    /// Each step's slot, by its place in the layout's steps.
    pub(crate) slot_of: Vec<u32>,
    /// Whether each step, by its place, overlaps TP communication right after the same step
    /// without the overlap, on a stack that has it (so the two are valid together and the
    /// overlap needs the same memory but TE's userbuffers, [`userbuffers`]).
    pub(crate) overlaps_the_step_before: Vec<bool>,
    /// How many slots the steps have.
    count: usize,
    /// Each slot's interleaved steps after its 1F1B step ([`Depths`]).
    pub(crate) depths: Vec<Depths>,
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
    #[inline]
    pub(crate) fn assign(&mut self, steps: &[Step], overlappable: bool) {
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
            // A slot shares its unscheduled time, whose all-to-alls DualPipeV's paired chunks
            // hide on a stack that pairs them (`moe_layer_comm`): DualPipeV steps keep a slot
            // of their own.
            let key = match s.schedule {
                Schedule::DualPipeV => *s,
                _ => s.unscheduled(),
            };
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
                Schedule::ZeroBubbleV if depths.after_1f1b => {
                    depths.count += 1;
                    depths.zbv = true;
                }
                Schedule::DualPipeV if depths.after_1f1b => {
                    depths.count += 1;
                    depths.dualpipev = true;
                }
                Schedule::Interleaved(_) | Schedule::ZeroBubbleV | Schedule::DualPipeV => {}
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
    #[inline]
    pub(crate) fn empty(&mut self) {
        self.slots.clear();
        self.slots.resize_with(self.count, || Slot {
            stages: None,
            time: None,
            over: false,
            fastest_depth: f64::INFINITY,
        });
    }

    /// The slot of the step at `place` in the layout's steps.
    #[inline]
    pub(crate) fn slot(&mut self, place: usize) -> &mut Slot {
        &mut self.slots[self.slot_of[place] as usize]
    }

    /// The slot of the step at `place` and its [`Share`].
    #[inline]
    pub(crate) fn slot_and_share(&mut self, place: usize) -> (&mut Slot, &mut Share) {
        let i = self.slot_of[place] as usize;
        (&mut self.slots[i], &mut self.shares[i])
    }
}

/// The pace of the fitting step `d` from its slot's [`Unscheduled`] part (worked out the first
/// time, from the slot's `share`), with the run's `goodput` when the machine's reliability
/// gives one for the shape.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn slot_pace(
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
