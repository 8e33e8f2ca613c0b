//! What a search is asked beyond the brief: the token grid ([`TokenGrid`]) and the options
//! ([`SearchOptions`]: the memory and time models, the space, the ranking, the top list,
//! distinct choices, exact windows).

use crate::cost::run::TimeModel;
use crate::error::{Error, Result};
use crate::search::rank::{Distinct, Rank};
use crate::search::space::MemorySpace;

/// Token counts to try: `min, min + step, …` up to `max` inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenGrid {
    /// First token count.
    pub(crate) min: u64,
    /// Last token count (inclusive; the grid stops at the last step not past it).
    max: u64,
    /// Step between counts.
    pub(crate) step: u64,
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

    /// Whether a count of the grid lies in `[lo, hi]`: the first count at or above `lo`,
    /// `min + ⌈(lo − min)/step⌉·step`, is at most `hi` and on the grid.
    pub fn meets(&self, lo: u64, hi: u64) -> bool {
        let first = if lo <= self.min {
            0
        } else {
            (lo - self.min).div_ceil(self.step)
        };
        first < self.len() && self.at(first) <= hi
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

/// Refuses what a shard and its merge cannot check of `brief` (`field` names where it came
/// from): the critical batch's cost, which depends on each layout's own global batch, where
/// `merge` checks a partial's windows and plans against one loss per shape and token count
/// (`shard/check.rs`). A search in one go grades it.
pub fn shardable(brief: &crate::brief::Brief, field: &str) -> crate::error::Result<()> {
    if brief.critical_batch.is_off() {
        return Ok(());
    }
    Err(crate::error::Error::invalid(
        field,
        brief.critical_batch.name(),
        "off in a sharded search, whose merge checks each partial against one loss per shape and token count while the critical batch's cost depends on each layout's own batch; search it in one go",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_window_meets_the_grid_where_a_count_falls_in_it() {
        let g = super::TokenGrid::default();
        // 1.733 T – 1.736 T lies between 1.73 T and 1.74 T.
        assert!(!g.meets(1_733_000_000_000, 1_736_000_000_000));
        assert!(g.meets(1_733_000_000_000, 1_740_000_000_000));
        assert!(g.meets(1, 10_000_000_000));
        assert!(!g.meets(1, 9_999_999_999));
        assert!(g.meets(50_000_000_000_000, u64::MAX));
        assert!(!g.meets(50_000_000_000_001, u64::MAX));
    }

    use super::*;

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
}
