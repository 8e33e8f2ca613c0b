//! The proven bounds that decide a configuration without weighing it: a 1F1B step over the
//! cap with no larger micro-batch or batch, its own sibling or a smaller micro-batch's
//! ([`no_lighter`], [`OverCap`]), the interleaved depths of a 1F1B step over the cap
//! ([`decide_depths`]), and a depth slower at every token count than another of its layout and
//! step ([`slower_than`]).

use crate::cost::step::detailed::Detailed;
use crate::cost::step::pipeline::StageKinds;
use crate::cost::step::{Schedule, Step};
use crate::error::Result;
use crate::model::layout::Layout;
use crate::search::weigh::shared::Depths;

/// Whether the step `s` needs at least the memory of the 1F1B step `w` under any one layout,
/// so that `s` is over the cap wherever `w` is: the two differ at most in `s`'s micro-batch
/// (no smaller), its global batch (no smaller) and its schedule.
///
/// Every stage's stored activations are `c·b·min(p − i, m)` bytes for the `m = B/(b·s·DP)`
/// micro-batches of a global batch of `B` tokens (`c`, a layer's bytes a token, times the
/// stage's layers and `s`; [`Step::in_flight`]): non-decreasing in `b` (`c·b·(p − i)` while
/// `m ≥ p − i`, then `c·B/(s·DP)`) and in `B`; an interleaved schedule holds no fewer, nor
/// does a V schedule (`c·b·min(p, m)` on every stage for ZB-V, `c·b·min(p + ½, m)` for
/// DualPipeV, no less than the first stage's under 1F1B). The
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
pub(crate) fn slower_than(days_per_token: f64, fastest: f64) -> bool {
    fastest > 0.0 && days_per_token > fastest * (1.0 + 4.0 * f64::EPSILON)
}

/// Whether every interleaved and V step of the 1F1B step `d` (found over the cap in `layout`,
/// whose stages are `kinds`), to `deepest` chunks and the V schedules `depths` names, is valid
/// and so decided over the cap with it: each holds no fewer activations ([`no_lighter`]) and
/// comes after it in the step order, so none is the lightest. The rules an interleaved step
/// adds to its 1F1B step's (the stack has the schedule; the micro-batches a multiple of the
/// stages; as many chunks as every stage has room for) refuse a deeper interleaving wherever
/// they refuse a shallower one, so the deepest standing stands for all; each V schedule is
/// tried by its own rules. Where one does not stand, each step is weighed on its own.
pub(crate) fn decide_depths(
    d: &Detailed,
    depths: &Depths,
    layout: &Layout,
    kinds: &StageKinds,
) -> bool {
    let Ok(m) = d.unscheduled_pipeline_in(layout, kinds) else {
        return false;
    };
    let settings = d.options.stack.settings();
    let stands = |schedule: Schedule| {
        let step = Step { schedule, ..d.step };
        schedule.runs_with(&settings) && step.interleaves_in(layout, kinds, m)
    };
    // The rules' plain tests ([`Detailed::schedule_allowed`], [`Step::interleaves_in`]): where
    // they fail, each step is weighed for its own error, worked out once.
    (depths.deepest < 2 || stands(Schedule::Interleaved(depths.deepest)))
        && (!depths.zbv || stands(Schedule::ZeroBubbleV))
        && (!depths.dualpipev || stands(Schedule::DualPipeV))
}

/// The 1F1B steps of one layout found over the cap, and what the last step looked up among
/// them gave: a step's schedules come one after another, so each step is looked up once.
#[derive(Default)]
pub(crate) struct OverCap {
    steps: Vec<Step>,
    /// The slot of the step looked up last (its step under 1F1B: [`Shared`]), whether one
    /// over the cap is no heavier ([`no_lighter`], which does not read the schedule), and then
    /// its micro-batches, where it has them.
    last: Option<(u32, bool, Option<u64>)>,
}

impl OverCap {
    pub(crate) fn clear(&mut self) {
        self.steps.clear();
        self.last = None;
    }

    /// Records the 1F1B step `step`, weighed over the cap.
    pub(crate) fn push(&mut self, step: Step) {
        self.steps.push(step);
        self.last = None;
    }

    /// `Some` where a 1F1B step over the cap decides `d`'s step (of slot `slot`) over it
    /// unweighed: `Ok(None)` where the step is valid, or why it is not (the rules `peak_bytes`
    /// checks, in its order); `None` where the step must be weighed.
    pub(crate) fn decide(
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
