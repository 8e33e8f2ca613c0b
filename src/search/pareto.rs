//! The Pareto front of passing plans on (loss, days), both to be minimised.
//!
//! A plan is on the front when no other passing plan is at least as good on both objectives and
//! better on one. Plans equal on both keep one representative: the least memory per GPU, then
//! the smaller TP, PP, ZeRO ([`crate::search::rank::tie_break`]). The front is kept incrementally, so
//! memory grows with the front, not with the number of passing plans, and the result does not
//! depend on the order plans arrive in.

use std::cmp::Ordering;

use crate::search::rank::{tie_break, Candidate};

/// A Pareto front under construction. Invariant: sorted by days strictly rising, loss strictly
/// falling.
#[derive(Debug, Clone, Default)]
pub struct Front {
    points: Vec<Candidate>,
}

impl Front {
    /// An empty front.
    pub fn new() -> Self {
        Front::default()
    }

    /// Offers one candidate: kept if nothing on the front dominates it, and whatever it
    /// dominates is dropped.
    pub fn insert(&mut self, c: Candidate) {
        // Points with days ≤ c.days form a prefix; its last has the lowest loss among them.
        let at_or_before = self.points.partition_point(|q| q.days <= c.days);
        if let Some(q) = at_or_before.checked_sub(1).map(|i| self.points[i]) {
            match q.loss.total_cmp(&c.loss) {
                Ordering::Less => return,
                Ordering::Equal if q.days < c.days => return,
                Ordering::Equal => {
                    // The same point on both objectives: keep the better representative.
                    if tie_break(&c, &q) == Ordering::Less {
                        self.points[at_or_before - 1] = c;
                    }
                    return;
                }
                Ordering::Greater => {}
            }
        }
        // c is not dominated. Points with days ≥ c.days and loss ≥ c.loss are dominated by it;
        // they are a run starting at the first point with days ≥ c.days.
        let start = self.points.partition_point(|q| q.days < c.days);
        let end = start
            + self.points[start..]
                .iter()
                .take_while(|q| q.loss >= c.loss)
                .count();
        self.points.splice(start..end, [c]);
    }

    /// Both fronts as one.
    pub fn merge(mut self, other: Front) -> Front {
        for c in other.points {
            self.insert(c);
        }
        self
    }

    /// The front, sorted by days.
    pub fn into_points(self) -> Vec<Candidate> {
        self.points
    }
}

/// A stream of plans that differ only in their whole number of training tokens, from `first`
/// to `last`: a (shape, configuration) over its passing token window. Along it the loss never
/// rises and the days never fall as the tokens grow (the loss law is falling in D, days are
/// linear in D under both time models).
pub trait Chain {
    /// The first and last token counts, inclusive.
    fn tokens(&self) -> (u64, u64);
    /// Predicted loss at `tokens`.
    fn loss(&self, tokens: u64) -> f64;
    /// Days at `tokens`.
    fn days(&self, tokens: u64) -> f64;
    /// A key two chains share when their loss and days agree at every count (two shapes with
    /// the same parameter count at the same pace); `None` when the chain shares it with none.
    fn curve(&self) -> Option<(u64, u64)> {
        None
    }
}

/// A part of a chain's tokens.
struct Piece<'a, C> {
    chain: &'a C,
    index: usize,
    tokens: (u64, u64),
}

impl<C: Chain> Chain for Piece<'_, C> {
    fn tokens(&self) -> (u64, u64) {
        self.tokens
    }
    fn loss(&self, tokens: u64) -> f64 {
        self.chain.loss(tokens)
    }
    fn days(&self, tokens: u64) -> f64 {
        self.chain.days(tokens)
    }
}

/// The chains cut so that no two pieces share a count on the same curve: where chains with one
/// curve overlap, each count goes to the chain that wins the tie-break there (it wins at every
/// count: `tie` between plans of one token count does not depend on the count), since the
/// others' plans at it equal the winner's and lose. Without this, two identical chains would
/// make the sweep advance one count at a time.
fn pieces<'a, C: Chain>(
    chains: &'a [C],
    tie: &impl Fn((usize, u64), (usize, u64)) -> Ordering,
) -> Vec<Piece<'a, C>> {
    let mut groups: std::collections::BTreeMap<(u64, u64), Vec<usize>> = Default::default();
    let mut out = Vec::new();
    for (j, chain) in chains.iter().enumerate() {
        match chain.curve() {
            Some(key) => groups.entry(key).or_default().push(j),
            None => out.push(Piece {
                chain,
                index: j,
                tokens: chain.tokens(),
            }),
        }
    }
    for (_, mut members) in groups {
        let at = chains[members[0]].tokens().0;
        members.sort_by(|&a, &b| tie((a, at), (b, at)).then(a.cmp(&b)));
        // Counts taken by earlier (winning) members, as sorted disjoint intervals.
        let mut taken: Vec<(u64, u64)> = Vec::new();
        for j in members {
            let (lo, hi) = chains[j].tokens();
            // The gaps `taken` leaves in lo..=hi.
            let mut from = Some(lo);
            for &(a, b) in &taken {
                let Some(start) = from else { break };
                if b < start {
                    continue;
                }
                if a > hi {
                    break;
                }
                if a > start {
                    out.push(Piece {
                        chain: &chains[j],
                        index: j,
                        tokens: (start, a - 1),
                    });
                }
                // b < hi ≤ u64::MAX, so b + 1 does not overflow.
                from = (b < hi).then(|| b + 1);
            }
            if let Some(start) = from {
                out.push(Piece {
                    chain: &chains[j],
                    index: j,
                    tokens: (start, hi),
                });
            }
            taken.push((lo, hi));
            taken.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::with_capacity(taken.len());
            for (a, b) in taken {
                match merged.last_mut() {
                    Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            taken = merged;
        }
    }
    out.sort_by_key(|p| (p.index, p.tokens.0));
    out
}

/// A run of an exact front along one chain: of the chain's plans with tokens in
/// `first..=last`, those on the front are the ones no other plan of the chain beats: a count
/// whose loss equals the count before's is beaten by it, and one whose days equal a later
/// count's by that count when it has the lower loss. (Consecutive counts differ in both unless the
/// rounding of `f64` makes them equal, so in practice every count in the run is on the front.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Index of the chain.
    pub chain: usize,
    /// First token count of the run.
    pub first: u64,
    /// Last token count of the run.
    pub last: u64,
}

/// The last plan of `run` on the front: the first count of the run with its last count's loss.
pub fn last_on_front<C: Chain>(chain: &C, run: &Segment) -> u64 {
    let floor = chain.loss(run.last);
    first_where(run.first, run.last, |t| chain.loss(t) <= floor).unwrap_or(run.last)
}

/// The first count in `lo..=hi` where `pred` holds, for a `pred` false then true.
fn first_where(mut lo: u64, hi: u64, pred: impl Fn(u64) -> bool) -> Option<u64> {
    if !pred(hi) {
        return None;
    }
    let mut hi = hi;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// The chain's first undominated plan with a loss below `m`, if any: the first count below
/// `m`, moved on to the count with the lowest loss among those with the same days (the first
/// of them if several share it).
fn first_below<C: Chain>(chain: &C, m: f64) -> Option<u64> {
    let (lo, hi) = chain.tokens();
    let t = first_where(lo, hi, |t| chain.loss(t) < m)?;
    let days = chain.days(t);
    let end = last_before(chain, t, |d| d <= days);
    let floor = chain.loss(end);
    first_where(t, end, |t| chain.loss(t) <= floor)
}

/// The last count of `chain` from `from` on whose days satisfy `within`, given that `from`'s
/// do (days never fall, so those counts are a run).
pub fn last_before<C: Chain>(chain: &C, from: u64, within: impl Fn(f64) -> bool) -> u64 {
    let (mut lo, mut hi) = (from, chain.tokens().1);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if within(chain.days(mid)) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// A heap entry: the days of a chain's first plan below some loss, a lower bound on its days
/// below any lower loss.
#[derive(Debug, Clone, Copy)]
struct Next {
    days: f64,
    chain: usize,
}

impl PartialEq for Next {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Next {}
impl PartialOrd for Next {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Next {
    /// Reversed, so the max-heap pops the fewest days (then the lowest chain index) first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .days
            .total_cmp(&self.days)
            .then(other.chain.cmp(&self.chain))
    }
}

/// Every chain's first plan below the current loss bound, kept lazily: an entry computed for
/// an older (higher) bound still bounds the days from below, so only the entries that reach the
/// top are brought up to date.
struct Heads<'a, C> {
    chains: &'a [C],
    heap: std::collections::BinaryHeap<Next>,
    /// Each chain's first count below `at[j]`.
    next: Vec<u64>,
    at: Vec<f64>,
}

impl<C: Chain> Heads<'_, C> {
    /// The chain's entry brought up to the bound `m`, or `None` once nothing in it is below.
    fn refresh(&mut self, j: usize, m: f64) -> Option<Next> {
        let t = first_below(&self.chains[j], m)?;
        self.next[j] = t;
        self.at[j] = m;
        Some(Next {
            days: self.chains[j].days(t),
            chain: j,
        })
    }

    /// Pops entries until the top is current for `m`, skipping `except`, which is returned to
    /// the heap unchanged. The top's days are then the fewest of any chain but `except` below
    /// `m`.
    fn settle(&mut self, m: f64, except: Option<usize>) -> Option<Next> {
        let mut aside = None;
        let top = loop {
            let Some(top) = self.heap.pop() else {
                break None;
            };
            if Some(top.chain) == except {
                aside = Some(top);
            } else if self.at[top.chain].to_bits() != m.to_bits() {
                if let Some(e) = self.refresh(top.chain, m) {
                    self.heap.push(e);
                }
            } else {
                self.heap.push(top);
                break Some(top);
            }
        };
        if let Some(e) = aside {
            self.heap.push(e);
        }
        top
    }
}

/// An exact front, or its beginning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExactFront {
    /// The runs, sorted by days.
    pub runs: Vec<Segment>,
    /// Whether these are all the runs, rather than the first `limit`, which end where the
    /// front carries on.
    pub complete: bool,
}

/// The exact Pareto front on (loss, days) of every plan along `chains`, as runs along the
/// chains sorted by days: the first `limit` runs of it. Chains that differ little (neighbouring
/// shapes of a dense family) can trade the front back and forth count by count where their
/// curves meet, so a front can have more runs than anyone could read; the sweep stops there. `tie` orders two plans of different chains equal on both (chain,
/// tokens of each); the lesser is kept, as [`Front`] keeps it.
///
/// A sweep in days: the next point of the front after one with loss `m` is the plan with the
/// fewest days among those with a loss below `m` (then the lowest loss, then `tie`). Once it
/// is found on chain `c` with loss `ℓ`, let `H` be the fewest days of any other chain's plan
/// below `ℓ`; every plan of `c` with fewer than `H` days is then undominated by other chains,
/// so the sweep jumps to the last of them by bisection. Each chain's first plan below the bound
/// only moves later as the bound falls, so the heads are kept in a lazily updated heap. The
/// result is exact whenever each chain's loss never rises and its days never fall (checked
/// against inserting every plan into a [`Front`] in the property tests).
pub fn exact_front<C: Chain>(
    chains: &[C],
    tie: impl Fn((usize, u64), (usize, u64)) -> Ordering,
    limit: usize,
) -> ExactFront {
    let pieces = pieces(chains, &tie);
    sweep(
        &pieces,
        |p| pieces[p].index,
        |(a, ta), (b, tb)| tie((pieces[a].index, ta), (pieces[b].index, tb)),
        limit,
    )
}

/// [`exact_front`] over pieces no two of which share a count on one curve; `owner` gives the
/// chain a piece is part of, which the runs name.
fn sweep<C: Chain>(
    chains: &[C],
    owner: impl Fn(usize) -> usize,
    tie: impl Fn((usize, u64), (usize, u64)) -> Ordering,
    limit: usize,
) -> ExactFront {
    let mut heads = Heads {
        chains,
        heap: std::collections::BinaryHeap::new(),
        next: vec![0; chains.len()],
        at: vec![f64::INFINITY; chains.len()],
    };
    for j in 0..chains.len() {
        if let Some(e) = heads.refresh(j, f64::INFINITY) {
            heads.heap.push(e);
        }
    }
    let mut out: Vec<Segment> = Vec::new();
    let mut m = f64::INFINITY;
    while let Some(top) = heads.settle(m, None) {
        // Every chain whose plan below m has the fewest days: pop them all, current, and keep
        // the lowest loss, then the tie-break.
        let mut equal = Vec::new();
        while let Some(e) = heads.heap.peek().copied() {
            if e.days.total_cmp(&top.days).is_gt() {
                break;
            }
            heads.heap.pop();
            if heads.at[e.chain].to_bits() != m.to_bits() {
                if let Some(e) = heads.refresh(e.chain, m) {
                    heads.heap.push(e);
                }
            } else {
                equal.push(e);
            }
        }
        let point = |e: &Next| {
            let t = heads.next[e.chain];
            (e.chain, t, chains[e.chain].loss(t))
        };
        let (c, t, l) = equal
            .iter()
            .map(point)
            .min_by(|a, b| {
                a.2.total_cmp(&b.2)
                    .then_with(|| tie((a.0, a.1), (b.0, b.1)))
            })
            .expect("the top entry is among them");
        heads.heap.extend(equal);
        m = l;
        let last = match heads.settle(m, Some(c)) {
            Some(other) => last_before(&chains[c], t, |d| d < other.days),
            None => chains[c].tokens().1,
        };
        m = chains[c].loss(last);
        let full = out.len() == limit;
        let c = owner(c);
        match out.last_mut() {
            Some(s) if s.chain == c => s.last = last,
            _ if full => {
                return ExactFront {
                    runs: out,
                    complete: false,
                }
            }
            _ => out.push(Segment {
                chain: c,
                first: t,
                last,
            }),
        }
    }
    ExactFront {
        runs: out,
        complete: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::model::layout::layouts;
    use crate::model::preset;

    fn point(tokens: u64, loss: f64, days: f64, memory: f64) -> Candidate {
        let layout = layouts(&Brief::default(), &preset("70b").unwrap())[0];
        Candidate {
            shape: 0,
            tokens,
            layout,
            model: crate::cost::memory::MemoryModel::Plate,
            loss,
            days,
            memory,
            prefer: 0.0,
            lifetime: 0.0,
        }
    }

    fn front_of(points: &[Candidate]) -> Vec<(f64, f64)> {
        let mut f = Front::new();
        points.iter().for_each(|p| f.insert(*p));
        f.into_points().iter().map(|p| (p.days, p.loss)).collect()
    }

    #[test]
    fn dominated_points_are_dropped_and_the_rest_sorted_by_days() {
        let pts = [
            point(1, 2.0, 10.0, 1.0),
            point(2, 1.9, 20.0, 1.0),
            point(3, 1.95, 25.0, 1.0), // dominated by (20, 1.9)
            point(4, 1.8, 30.0, 1.0),
            point(5, 2.0, 12.0, 1.0), // dominated by (10, 2.0): same loss, more days
        ];
        assert_eq!(front_of(&pts), [(10.0, 2.0), (20.0, 1.9), (30.0, 1.8)]);
    }

    #[test]
    fn a_new_point_can_remove_several() {
        let pts = [
            point(1, 2.0, 10.0, 1.0),
            point(2, 1.9, 20.0, 1.0),
            point(3, 1.5, 5.0, 1.0),
        ];
        assert_eq!(front_of(&pts), [(5.0, 1.5)]);
    }

    #[test]
    fn equal_points_keep_the_one_with_less_memory() {
        let mut f = Front::new();
        f.insert(point(1, 1.9, 20.0, 5.0));
        f.insert(point(2, 1.9, 20.0, 3.0));
        f.insert(point(3, 1.9, 20.0, 4.0));
        let pts = f.into_points();
        assert_eq!(pts.len(), 1);
        assert_eq!(pts[0].tokens, 2);
    }

    #[test]
    fn the_front_does_not_depend_on_arrival_order() {
        let pts: Vec<Candidate> = (0..60u64)
            .map(|i| {
                point(
                    i,
                    2.0 - ((i * 7) % 11) as f64 * 0.01,
                    ((i * 13) % 17) as f64,
                    (i % 3) as f64,
                )
            })
            .collect();
        let forward = front_of(&pts);
        let mut rev = pts.clone();
        rev.reverse();
        assert_eq!(front_of(&rev), forward);
        let (a, b) = pts.split_at(25);
        let mut fa = Front::new();
        a.iter().for_each(|p| fa.insert(*p));
        let mut fb = Front::new();
        b.iter().for_each(|p| fb.insert(*p));
        let merged: Vec<_> = fb
            .merge(fa)
            .into_points()
            .iter()
            .map(|p| (p.days, p.loss))
            .collect();
        assert_eq!(merged, forward);
    }

    /// A chain for the tests: loss `e + b / t^0.3` and days `k · t`, each rounded to a grid
    /// step (0 for none) so runs of equal losses and equal days occur.
    #[derive(Clone, Copy)]
    struct Toy {
        first: u64,
        last: u64,
        e: f64,
        b: f64,
        k: f64,
        round: f64,
        curve: Option<(u64, u64)>,
    }

    impl Chain for Toy {
        fn curve(&self) -> Option<(u64, u64)> {
            self.curve
        }
        fn tokens(&self) -> (u64, u64) {
            (self.first, self.last)
        }
        fn loss(&self, t: u64) -> f64 {
            let l = self.e + self.b / (t as f64).powf(0.3);
            if self.round > 0.0 {
                (l / self.round).ceil() * self.round
            } else {
                l
            }
        }
        fn days(&self, t: u64) -> f64 {
            let d = self.k * t as f64;
            if self.round > 0.0 {
                (d / self.round).floor() * self.round
            } else {
                d
            }
        }
    }

    /// Every plan on the exact front, from its runs.
    fn expand(chains: &[Toy], segments: &[Segment]) -> Vec<(usize, u64)> {
        let mut out = Vec::new();
        for s in segments {
            let c = &chains[s.chain];
            let (lo, hi) = c.tokens();
            for t in s.first..=s.last {
                let beaten_before = t > lo && c.loss(t - 1) == c.loss(t);
                let same_days = (t..=hi).take_while(|&u| c.days(u) == c.days(t)).last();
                let beaten_after = same_days.is_some_and(|u| c.loss(u) < c.loss(t));
                if !beaten_before && !beaten_after {
                    out.push((s.chain, t));
                }
            }
        }
        out
    }

    /// The front by brute force: every plan inserted into a [`Front`].
    fn brute(chains: &[Toy]) -> Vec<(usize, u64)> {
        let mut f = Front::new();
        for (j, c) in chains.iter().enumerate() {
            for t in c.first..=c.last {
                let mut p = point(t, c.loss(t), c.days(t), 1.0);
                p.shape = j;
                f.insert(p);
            }
        }
        f.into_points()
            .iter()
            .map(|p| (p.shape, p.tokens))
            .collect()
    }

    fn by_chain_then_tokens(a: (usize, u64), b: (usize, u64)) -> Ordering {
        a.cmp(&b)
    }

    #[test]
    fn one_chain_is_its_own_front() {
        let c = Toy {
            first: 10,
            last: 500,
            e: 1.0,
            b: 2.0,
            k: 0.1,
            round: 0.0,
            curve: None,
        };
        let front = exact_front(&[c], by_chain_then_tokens, usize::MAX).runs;
        assert_eq!(
            front,
            [Segment {
                chain: 0,
                first: 10,
                last: 500
            }]
        );
    }

    #[test]
    fn a_faster_chain_with_a_higher_floor_leads_then_hands_over() {
        // Chain 0 is fast but floors at 1.5; chain 1 is slow but reaches lower. They cross once.
        let chains = [
            Toy {
                first: 1,
                last: 2000,
                e: 1.5,
                b: 1.0,
                k: 0.01,
                round: 0.0,
                curve: None,
            },
            Toy {
                first: 1,
                last: 2000,
                e: 1.0,
                b: 2.0,
                k: 0.05,
                round: 0.0,
                curve: None,
            },
        ];
        let front = exact_front(&chains, by_chain_then_tokens, usize::MAX).runs;
        assert_eq!(expand(&chains, &front), brute(&chains));
        assert_eq!(front.first().unwrap().chain, 0);
        assert_eq!(front.last().unwrap().chain, 1);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        #[test]
        fn the_exact_front_is_the_front_of_every_plan(
            specs in proptest::collection::vec(
                (1u64..300, 0u64..300, 0.5f64..2.0, 0.5f64..4.0, 0.001f64..0.1), 1..6),
            round in proptest::sample::select(vec![0.0, 1e-3, 1e-2, 0.05]),
            copies in proptest::collection::vec((0usize..6, 1u64..300, 0u64..300), 0..4),
        ) {
            let mut chains: Vec<Toy> = specs
                .iter()
                .enumerate()
                .map(|(i, &(first, len, e, b, k))| Toy {
                    first,
                    last: first + len,
                    e,
                    b,
                    k,
                    round,
                    curve: Some((i as u64, 0)),
                })
                .collect();
            // Chains on the same curve as another over other tokens: shapes of one size.
            for &(of, first, len) in &copies {
                let c = &chains[of % specs.len()];
                let copy = Toy { first, last: first + len, curve: c.curve, ..*c };
                chains.push(copy);
            }
            let front = exact_front(&chains, by_chain_then_tokens, usize::MAX).runs;
            proptest::prop_assert_eq!(expand(&chains, &front), brute(&chains));
            // Cut short, the sweep gives the front's first runs and says it stopped.
            let cut = exact_front(&chains, by_chain_then_tokens, 2);
            proptest::prop_assert_eq!(&cut.runs[..], &front[..front.len().min(2)]);
            proptest::prop_assert_eq!(cut.complete, front.len() <= 2);
        }
    }
}
