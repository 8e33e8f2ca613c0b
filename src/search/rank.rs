//! Ranking passing plans, with every tie broken so the order is total and the output is the
//! same at any thread count.

use std::cmp::Ordering;

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::step::{Schedule, Step};
use crate::error::{Error, Result};
use crate::model::layout::Layout;
use crate::plan::verdict::layout_order;

/// A passing plan in compact form, as the search's hot loop keeps it; the full
/// [`crate::plan::Plan`] is graded again from it only for the plans that are printed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Index of the shape in the search's list.
    pub shape: usize,
    /// Training tokens.
    pub tokens: u64,
    /// The layout.
    pub layout: Layout,
    /// The memory model, with the training step under the detailed model.
    pub model: MemoryModel,
    /// Predicted loss.
    pub loss: f64,
    /// Days.
    pub days: f64,
    /// Per-GPU memory, GB: exactly the plan's `memory_gb.total`, so a plan read back from a
    /// shard's file ranks as it did.
    pub memory: f64,
    /// The runnable-first key among plans the plate grades equal: a plate plan's days per
    /// token under the detailed model when it fits there, +∞ when not
    /// ([`crate::plan::runnable::runnable_key`]); 0 for plans the detailed model graded.
    pub prefer: f64,
    /// Training and inference FLOPs over the model's life, `N·(6·D + 2·D_inf)`
    /// ([`lifetime_flops`]); 0 when the brief has no inference tokens.
    pub lifetime: f64,
}

/// A candidate's lifetime FLOPs: `N_active·(6·tokens + 2·D_inf)` for `shape` with the brief's
/// inference tokens `D_inf` (Sardana et al. 2024, [`crate::laws::lifetime`]); 0 without them,
/// the shape's parameters then left uncounted.
pub fn lifetime_flops(brief: &Brief, shape: &crate::model::Shape, tokens: u64) -> f64 {
    if brief.inference_tokens.is_none() {
        return 0.0;
    }
    brief
        .lifetime(shape.active_params() as f64, tokens as f64)
        .map_or(0.0, |l| l.total_flops())
}

/// What to rank plans by, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rank {
    /// Lowest predicted loss (then fewest days).
    #[default]
    Loss,
    /// Fewest days (then lowest loss).
    Days,
    /// Least per-GPU memory (then lowest loss, fewest days).
    Memory,
    /// Least cost (then lowest loss). Every layout holds the brief's GPUs, so cost —
    /// `GPUs × days × 24 × price` — orders plans as days do; the name says what the user asked
    /// for, and it needs a price ([`Rank::check_against`]).
    Cost,
    /// Least training plus inference FLOPs over the model's life (then fewest tokens, fewest
    /// days, lowest loss): Sardana et al. 2024's objective, which needs the brief's inference
    /// tokens.
    Lifetime,
}

impl Rank {
    /// The name a user types.
    pub fn name(self) -> &'static str {
        match self {
            Rank::Loss => "loss",
            Rank::Days => "days",
            Rank::Memory => "memory",
            Rank::Cost => "cost",
            Rank::Lifetime => "lifetime",
        }
    }

    /// Refuses a ranking the brief cannot answer: by cost without a price, by lifetime without
    /// inference tokens (`field` names where the ranking came from).
    pub fn check_against(self, field: &str, brief: &Brief) -> Result<()> {
        match (self, brief.spend.price_per_gpu_hour) {
            (Rank::Cost, None) => Err(Error::invalid(
                field,
                "cost",
                "a brief with a price (--price-per-gpu-hour, spend.price_per_gpu_hour)",
            )),
            (Rank::Lifetime, _) if brief.inference_tokens.is_none() => Err(Error::invalid(
                field,
                "lifetime",
                "a brief with the tokens the model will serve (--inference-tokens, inference_tokens)",
            )),
            _ => Ok(()),
        }
    }

    /// The ranking a user names, or why the name is none (the field it came in is `field`).
    pub fn from_name(field: &str, name: &str) -> Result<Rank> {
        [
            Rank::Loss,
            Rank::Days,
            Rank::Memory,
            Rank::Cost,
            Rank::Lifetime,
        ]
        .into_iter()
        .find(|r| r.name() == name)
        .ok_or_else(|| Error::invalid(field, name, "loss, days, memory, cost or lifetime"))
    }

    /// The total order of this ranking: its objective, then the others, then [`tie_break`].
    pub fn compare(self, a: &Candidate, b: &Candidate) -> Ordering {
        let by_loss = a.loss.total_cmp(&b.loss);
        let by_days = a.days.total_cmp(&b.days);
        let by_memory = a.memory.total_cmp(&b.memory);
        match self {
            Rank::Loss => by_loss.then(by_days),
            Rank::Days | Rank::Cost => by_days.then(by_loss),
            Rank::Memory => by_memory.then(by_loss).then(by_days),
            // Then the fewest tokens, so that lifetime FLOPs equal in floating point (or
            // all 0, without inference tokens) still order a line as its walk does.
            Rank::Lifetime => a
                .lifetime
                .total_cmp(&b.lifetime)
                .then(a.tokens.cmp(&b.tokens))
                .then(by_days)
                .then(by_loss),
        }
        .then_with(|| tie_break(a, b))
    }
}

/// What one row of a top list stands for: the choices a user picks between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Distinct {
    /// Every plan: each token count of each configuration a row of its own.
    #[default]
    Plan,
    /// One row per (shape, layout, training step), at its best token count; the depths of
    /// an interleaved schedule count as one step, shown at its best depth.
    Layout,
    /// One row per shape, at its best plan.
    Shape,
}

impl Distinct {
    /// The name a user types.
    pub fn name(self) -> &'static str {
        match self {
            Distinct::Plan => "plan",
            Distinct::Layout => "layout",
            Distinct::Shape => "shape",
        }
    }

    /// The choice a user names, or why the name is none (the field it came in is `field`).
    pub fn from_name(field: &str, name: &str) -> Result<Distinct> {
        [Distinct::Plan, Distinct::Layout, Distinct::Shape]
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| Error::invalid(field, name, "plan, layout or shape"))
    }

    /// What makes a candidate one choice: its shape, and for `Layout` its layout and step
    /// (any interleaving depth or V schedule the same: a schedule beyond 1F1B is one choice,
    /// its fastest kept); for `Plan` also its tokens.
    pub fn key(self, c: &Candidate) -> ChoiceKey {
        self.key_of(c.shape, &c.layout, c.model.step(), c.tokens)
    }

    /// [`Distinct::key`] of a candidate of shape `shape` (its place), `layout` and `step`, on
    /// `tokens` tokens.
    pub fn key_of(
        self,
        shape: usize,
        layout: &Layout,
        step: Option<&Step>,
        tokens: u64,
    ) -> ChoiceKey {
        let l = layout;
        let step = step.map(|s| Step {
            schedule: match s.schedule {
                Schedule::OneFOneB => Schedule::OneFOneB,
                Schedule::Interleaved(_) | Schedule::ZeroBubbleV | Schedule::DualPipeV => {
                    Schedule::Interleaved(2)
                }
            },
            ..*s
        });
        match self {
            Distinct::Plan => (
                shape,
                Some((l.tp, l.pp, l.zero.get(), l.ep, l.etp)),
                step,
                tokens,
            ),
            Distinct::Layout => (
                shape,
                Some((l.tp, l.pp, l.zero.get(), l.ep, l.etp)),
                step,
                0,
            ),
            Distinct::Shape => (shape, None, None, 0),
        }
    }

    /// Whether `a` and `b` are the same choice ([`Distinct::key`]).
    pub fn same(self, a: &Candidate, b: &Candidate) -> bool {
        self.key(a) == self.key(b)
    }
}

/// A choice's identity: shape, (TP, PP, ZeRO, EP, ETP), step, tokens, as [`Distinct::key`]
/// fills them (a mixture of experts on another expert grid is another choice).
pub type ChoiceKey = (usize, Option<(u64, u64, u8, u64, u64)>, Option<Step>, u64);

/// Between plans equal on loss and days: runnable first (of plate plans, the one the detailed
/// model runs fastest among those that fit it), then less memory per GPU, then smaller TP, PP,
/// ZeRO, then the smaller training step (micro-batch, sequence, recomputation, …), then the
/// shape's place in the list and the tokens, so no two distinct plans compare equal.
pub fn tie_break(a: &Candidate, b: &Candidate) -> Ordering {
    a.prefer
        .total_cmp(&b.prefer)
        .then(a.memory.total_cmp(&b.memory))
        .then_with(|| layout_order(&a.layout, &b.layout))
        .then_with(|| a.model.step().cmp(&b.model.step()))
        .then(a.shape.cmp(&b.shape))
        .then(a.tokens.cmp(&b.tokens))
}

/// The best `k` candidates under a ranking (all of them when `k` is `None`), kept in bounded
/// memory: at most `2k` are held before the list is cut back to `k`.
#[derive(Debug, Clone)]
pub struct TopK {
    rank: Rank,
    k: Option<usize>,
    items: Vec<Candidate>,
}

impl TopK {
    /// An empty list.
    pub fn new(rank: Rank, k: Option<usize>) -> Self {
        TopK {
            rank,
            k,
            items: Vec::new(),
        }
    }

    /// The ranking.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Offers one candidate.
    pub fn push(&mut self, c: Candidate) {
        self.items.push(c);
        if let Some(k) = self.k {
            if self.items.len() >= k.max(1).saturating_mul(2) {
                self.cut(k);
            }
        }
    }

    fn cut(&mut self, k: usize) {
        let rank = self.rank;
        self.items.sort_unstable_by(|a, b| rank.compare(a, b));
        self.items.truncate(k);
    }

    /// Both lists' candidates in one.
    pub fn merge(mut self, other: TopK) -> TopK {
        for c in other.items {
            self.push(c);
        }
        self
    }

    /// The best candidates, best first.
    pub fn into_sorted(mut self) -> Vec<Candidate> {
        let rank = self.rank;
        self.items.sort_unstable_by(|a, b| rank.compare(a, b));
        if let Some(k) = self.k {
            self.items.truncate(k);
        }
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::model::layout::layouts;
    use crate::model::preset;

    fn cand(shape: usize, tokens: u64, loss: f64, days: f64, memory: f64) -> Candidate {
        let layout = layouts(&Brief::default(), &preset("70b").unwrap())[0];
        Candidate {
            shape,
            tokens,
            layout,
            model: MemoryModel::Plate,
            loss,
            days,
            memory,
            prefer: 0.0,
            lifetime: 0.0,
        }
    }

    #[test]
    fn each_ranking_puts_its_objective_first() {
        let a = cand(0, 1, 1.90, 29.0, 50.0);
        let b = cand(0, 2, 1.95, 20.0, 10.0);
        assert_eq!(Rank::Loss.compare(&a, &b), Ordering::Less);
        assert_eq!(Rank::Days.compare(&a, &b), Ordering::Greater);
        assert_eq!(Rank::Memory.compare(&a, &b), Ordering::Greater);
    }

    #[test]
    fn top_k_keeps_the_best_k_in_order_whatever_the_arrival_order() {
        let all: Vec<Candidate> = (0..100u64)
            .map(|i| cand(0, i, 2.0 - (i % 37) as f64 * 0.01, i as f64, 1.0))
            .collect();
        let mut forward = TopK::new(Rank::Loss, Some(5));
        all.iter().for_each(|c| forward.push(*c));
        let mut backward = TopK::new(Rank::Loss, Some(5));
        all.iter().rev().for_each(|c| backward.push(*c));
        let mut expected = all.clone();
        expected.sort_by(|a, b| Rank::Loss.compare(a, b));
        expected.truncate(5);
        assert_eq!(forward.into_sorted(), expected);
        assert_eq!(backward.into_sorted(), expected);
    }
}
