//! Passing plans one at a time in ranking order, in memory that does not grow with them.
//!
//! The plans of one shape and configuration lie on a *line*: an interval of positions (whole
//! token counts, or a token grid's indices) along which tokens rise, the loss never rises and
//! the days never fall (`L = E + A/N^α + B/D^β` falls with `D`; days are `6ND` or a fixed pace
//! times `D`). Memory, layout, step and shape are the same all along a line. So each ranking
//! orders a line's plans by walking it in one direction, except where `f64` rounds a run of
//! neighbouring counts to the same loss (or days): within such a *plateau* the next objective
//! decides, and it runs the other way. [`Walk`] visits a line in exact ranking order, finding
//! each plateau's far end by galloping, so it holds three frames, not the plateau.
//!
//! [`Merge`] merges the lines' walks with a heap: since [`Rank::compare`] is a total order and
//! every walk yields its line in that order, the merge yields every plan of every line in the
//! order a full sort would give, holding one plan per line.

use std::cmp::Ordering;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;

use crate::search::rank::{Candidate, Rank};

/// The plans of one shape and configuration at consecutive positions: the loss never rises
/// and the days never fall as the position (and with it the tokens) grows.
pub(crate) trait Line {
    /// The first and last position, inclusive (`first ≤ last`).
    fn span(&self) -> (u64, u64);
    /// The plan at `position`.
    fn at(&self, position: u64) -> Candidate;
}

/// An objective a walk sorts a line by, and which way along the line it grows.
#[derive(Debug, Clone, Copy)]
enum Key {
    /// Days, which never fall along a line: smallest first means walking up.
    Days,
    /// Loss, which never rises along a line: smallest first means walking down.
    Loss,
}

impl Key {
    fn of(self, c: &Candidate) -> f64 {
        match self {
            Key::Days => c.days,
            Key::Loss => c.loss,
        }
    }

    fn up(self) -> bool {
        matches!(self, Key::Days)
    }
}

/// The objectives that order one line under `rank`, before the last word, the tokens (fewest
/// first, from [`crate::search::rank::tie_break`]): memory is the same all along a line, and days
/// after loss sort the same way as the tokens, so they need no level of their own.
fn keys(rank: Rank) -> &'static [Key] {
    match rank {
        Rank::Loss | Rank::Memory => &[Key::Loss],
        Rank::Days | Rank::Cost => &[Key::Days, Key::Loss],
        // Lifetime FLOPs rise strictly with the tokens along a line: fewest first, as the
        // tokens' own order has them, whatever the days do.
        Rank::Lifetime => &[],
    }
}

/// The farthest position from `from` towards `to` (either way, inclusive) at which `same`
/// holds, given that it holds at `from` and, the keys being monotone, on a prefix of the way:
/// galloping, so a plateau of `n` positions costs `O(log n)` probes and a lone position one.
fn plateau_end(from: u64, to: u64, same: impl Fn(u64) -> bool) -> u64 {
    let up = to >= from;
    let len = u128::from(from.abs_diff(to));
    let at = |d: u128| {
        let d = d as u64; // d ≤ len, which fits.
        if up {
            from + d
        } else {
            from - d
        }
    };
    let (mut good, mut reach) = (0u128, 1u128);
    let mut bad = len + 1;
    while reach <= len {
        if same(at(reach)) {
            good = reach;
            reach *= 2;
        } else {
            bad = reach;
            break;
        }
    }
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if same(at(mid)) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    at(good)
}

/// A part of a line being walked: the plateaus of `keys[level]` in `[lo, hi]` one by one, or,
/// past the last key, the positions themselves upwards.
#[derive(Debug, Clone, Copy, Default)]
struct Frame {
    level: u8,
    lo: u64,
    hi: u64,
    /// The next position (or the near end of the next plateau) to visit.
    next: u64,
    done: bool,
}

impl Frame {
    fn new(level: usize, lo: u64, hi: u64, keys: &[Key]) -> Frame {
        let up = keys.get(level).is_none_or(|k| k.up());
        Frame {
            level: level as u8,
            lo,
            hi,
            next: if up { lo } else { hi },
            done: false,
        }
    }
}

/// One line's positions in exact ranking order (see the module's notes).
#[derive(Debug, Clone)]
pub(crate) struct Walk {
    frames: [Frame; 3],
    depth: usize,
}

impl Walk {
    /// A walk of `line`'s whole span.
    pub(crate) fn new(line: &impl Line, rank: Rank) -> Walk {
        let (lo, hi) = line.span();
        let mut frames = [Frame::default(); 3];
        frames[0] = Frame::new(0, lo, hi, keys(rank));
        Walk { frames, depth: 1 }
    }

    /// The next position of `line` in ranking order.
    pub(crate) fn next(&mut self, line: &impl Line, rank: Rank) -> Option<u64> {
        let keys = keys(rank);
        loop {
            let f = self.frames[..self.depth].last_mut()?;
            if f.done {
                self.depth -= 1;
                continue;
            }
            let level = usize::from(f.level);
            let Some(&key) = keys.get(level) else {
                // The last word: fewest tokens first.
                let p = f.next;
                if p == f.hi {
                    f.done = true;
                } else {
                    f.next += 1;
                }
                return Some(p);
            };
            let near = f.next;
            let value = key.of(&line.at(near));
            let same = |p: u64| key.of(&line.at(p)).total_cmp(&value) == Ordering::Equal;
            let (lo, hi) = if key.up() {
                let far = plateau_end(near, f.hi, same);
                f.done = far == f.hi;
                f.next = far.wrapping_add(1);
                (near, far)
            } else {
                let far = plateau_end(near, f.lo, same);
                f.done = far == f.lo;
                f.next = far.wrapping_sub(1);
                (far, near)
            };
            self.frames[self.depth] = Frame::new(level + 1, lo, hi, keys);
            self.depth += 1;
        }
    }
}

/// A line's current plan, ordered for a max-heap so the best plan comes out first.
struct Head {
    rank: Rank,
    candidate: Candidate,
    line: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank.compare(&other.candidate, &self.candidate)
    }
}

/// Every plan of every line, best first under a ranking: a k-way merge of the lines' walks.
pub(crate) struct Merge<'a, L> {
    lines: &'a [L],
    rank: Rank,
    walks: Vec<Walk>,
    heap: BinaryHeap<Head>,
}

/// Each line's best plan, in the lines' order: what [`Merge::firsts`] holds, without the heap,
/// the lines walked in parallel.
pub(crate) fn firsts<L: Line + Sync>(lines: &[L], rank: Rank) -> Vec<Candidate> {
    use rayon::prelude::*;
    lines
        .par_iter()
        .filter_map(|line| first(line, rank))
        .collect()
}

/// The best plan of `line` under `rank`.
pub(crate) fn first<L: Line>(line: &L, rank: Rank) -> Option<Candidate> {
    let p = Walk::new(line, rank).next(line, rank)?;
    Some(line.at(p))
}

impl<'a, L: Line> Merge<'a, L> {
    /// The merge of `lines` under `rank`.
    pub(crate) fn new(lines: &'a [L], rank: Rank) -> Self {
        let mut walks: Vec<Walk> = lines.iter().map(|l| Walk::new(l, rank)).collect();
        let heap = walks
            .iter_mut()
            .zip(lines)
            .enumerate()
            .filter_map(|(i, (walk, line))| {
                let p = walk.next(line, rank)?;
                Some(Head {
                    rank,
                    candidate: line.at(p),
                    line: i,
                })
            })
            .collect();
        Merge {
            lines,
            rank,
            walks,
            heap,
        }
    }

    /// Each line's best plan, in no order (before any is taken).
    pub(crate) fn firsts(&self) -> impl Iterator<Item = &Candidate> {
        self.heap.iter().map(|h| &h.candidate)
    }
}

impl<L: Line> Iterator for Merge<'_, L> {
    type Item = Candidate;

    /// The best head out, its line's next plan in its place: one sift of the heap, not a pop
    /// and a push.
    fn next(&mut self) -> Option<Candidate> {
        let mut head = self.heap.peek_mut()?;
        let best = head.candidate;
        let line = &self.lines[head.line];
        match self.walks[head.line].next(line, self.rank) {
            Some(p) => head.candidate = line.at(p),
            None => {
                PeekMut::pop(head);
            }
        }
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::memory::MemoryModel;
    use crate::model::layout::{Layout, ZeroStage};

    /// A line of made-up loss and days, to put plateaus where a test wants them.
    struct Made {
        first: u64,
        loss: Vec<f64>,
        days: Vec<f64>,
        memory: f64,
        shape: usize,
    }

    impl Line for Made {
        fn span(&self) -> (u64, u64) {
            (self.first, self.first + self.loss.len() as u64 - 1)
        }
        fn at(&self, p: u64) -> Candidate {
            let i = (p - self.first) as usize;
            Candidate {
                shape: self.shape,
                tokens: p,
                layout: Layout {
                    tp: 1,
                    cp: 1,
                    pp: 1,
                    dp: 1,
                    zero: ZeroStage::new(0).unwrap(),
                    replicate: 1,
                    ep: 1,
                    etp: 1,
                },
                model: MemoryModel::Plate,
                loss: self.loss[i],
                days: self.days[i],
                memory: self.memory,
                prefer: 0.0,
                lifetime: 0.0,
            }
        }
    }

    fn sorted(lines: &[Made], rank: Rank) -> Vec<Candidate> {
        let mut all: Vec<Candidate> = lines
            .iter()
            .flat_map(|l| {
                let (a, b) = l.span();
                (a..=b).map(|p| l.at(p))
            })
            .collect();
        all.sort_by(|a, b| rank.compare(a, b));
        all
    }

    #[test]
    fn a_plateau_is_walked_the_way_the_next_objective_runs() {
        // Loss plateaus (2.0 ×3, 1.5 ×2) and a days plateau (5 ×3) that crosses them.
        let line = Made {
            first: 10,
            loss: vec![3.0, 2.0, 2.0, 2.0, 1.5, 1.5, 1.0],
            days: vec![1.0, 2.0, 5.0, 5.0, 5.0, 6.0, 7.0],
            memory: 1.0,
            shape: 0,
        };
        for rank in [Rank::Loss, Rank::Days, Rank::Memory] {
            let walked: Vec<Candidate> = Merge::new(std::slice::from_ref(&line), rank).collect();
            assert_eq!(
                walked,
                sorted(std::slice::from_ref(&line), rank),
                "{rank:?}"
            );
        }
        let tokens = |rank| {
            Merge::new(std::slice::from_ref(&line), rank)
                .map(|c| c.tokens)
                .collect::<Vec<_>>()
        };
        // Lowest loss first; the 1.5 and 2.0 plateaus each fewest days (tokens) first.
        assert_eq!(tokens(Rank::Loss), [16, 14, 15, 11, 12, 13, 10]);
        // Fewest days first; the 5-day plateau lowest loss first, its 2.0 pair fewest tokens first.
        assert_eq!(tokens(Rank::Days), [10, 11, 14, 12, 13, 15, 16]);
    }

    #[test]
    fn lines_merge_into_the_order_a_full_sort_gives() {
        // Three lines, one with the same loss as another (equal parameter counts), one a long
        // plateau, one a single plan; two share their memory.
        let lines = [
            Made {
                first: 0,
                loss: vec![2.5, 2.0, 2.0, 1.8, 1.8, 1.8, 1.8, 1.8, 1.1],
                days: vec![1.0, 1.5, 2.0, 2.5, 3.0, 3.0, 3.0, 3.5, 4.0],
                memory: 40.0,
                shape: 0,
            },
            Made {
                first: 3,
                loss: vec![2.0, 1.8, 1.8, 1.2],
                days: vec![0.5, 3.0, 3.0, 3.0],
                memory: 40.0,
                shape: 1,
            },
            Made {
                first: 7,
                loss: vec![1.8],
                days: vec![3.0],
                memory: 20.0,
                shape: 2,
            },
        ];
        for rank in [Rank::Loss, Rank::Days, Rank::Memory] {
            let merged: Vec<Candidate> = Merge::new(&lines, rank).collect();
            assert_eq!(merged, sorted(&lines, rank), "{rank:?}");
        }
    }

    #[test]
    fn a_plateau_s_end_is_found_at_the_ends_of_u64() {
        assert_eq!(plateau_end(5, 5, |_| true), 5);
        assert_eq!(plateau_end(0, u64::MAX, |_| true), u64::MAX);
        assert_eq!(plateau_end(u64::MAX, 0, |_| true), 0);
        assert_eq!(
            plateau_end(u64::MAX, 0, |p| p > u64::MAX - 1000),
            u64::MAX - 999
        );
        assert_eq!(plateau_end(100, 1_000_000, |p| p <= 12_345), 12_345);
        assert_eq!(plateau_end(100, 0, |p| p >= 37), 37);
    }
}
