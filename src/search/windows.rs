//! Token windows: the interval of the grid each fitting configuration passes on ([`Window`],
//! [`windows`]), the exact top list along them ([`exact_top`]), and a configuration's passing
//! grid counts as one line of the ranking's k-way merge ([`GridLine`]).

use rayon::prelude::*;

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::plan::limits::config_loss;
use crate::plan::pace::Pace;
use crate::plan::verdict::{fewest_tokens_on, time_bound};
use crate::search::options::TokenGrid;
use crate::search::ordered::{Line, Merge};
use crate::search::pareto::{Chain, Front};
use crate::search::rank::{lifetime_flops, Candidate, Rank, TopK};
use crate::search::space::Config;
use crate::search::weigh::Fitting;
use crate::units::gb;

/// A fitting configuration of a shape over its passing token window (or, in a merge of
/// shards, a run of a shard's exact front). The fastest of a shape's are the only plans of it
/// that can stand on the Pareto front, since every other configuration at the same tokens has
/// the same loss and no fewer days; where the brief counts the critical batch, the fastest of
/// each global batch's ([`Window::batch_key`]).
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
        config_loss(self.brief, self.shape, tokens, &self.model)
    }
    fn days(&self, tokens: u64) -> f64 {
        self.pace
            .run_days(self.brief, self.shape.active_params(), tokens)
    }
    /// Loss and days depend on a dense shape only through its parameter count, and on the
    /// configuration only through its pace; a mixture of experts's also on its expansion, so
    /// it shares its curve with none.
    /// Where the brief counts the critical batch, the loss is also the configuration's batch's,
    /// so none shares its curve either.
    fn curve(&self) -> Option<(u64, u64)> {
        if self.shape.experts.is_some() || !self.brief.critical_batch.is_off() {
            return None;
        }
        Some((self.shape.params(), self.pace.key().to_bits()))
    }
}

impl Window<'_> {
    /// What besides the shape the window's loss depends on: its global batch where the brief
    /// counts the critical batch (`None` for the plate's, whose batch is the shape's), else
    /// nothing.
    pub(crate) fn batch_key(&self) -> Option<u64> {
        if self.brief.critical_batch.is_off() {
            return None;
        }
        self.model.global_batch_tokens()
    }

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
            lifetime: lifetime_flops(self.brief, self.shape, tokens),
        }
    }
}

/// The window of every fitting configuration of each shape that passes somewhere, fastest
/// first within a shape (the first of a shape is the one [`Window`] means for the front; the
/// plate's bounds are solved once a shape, all its configurations sharing the pace).
pub(crate) fn windows<'a>(
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
    // empty every later one's is too. Where the brief counts the critical batch the loss
    // bound is each configuration's batch's ([`LossBounds`]), and every window is worked out.
    let mut bounds = LossBounds::new(brief, shape);
    let shared = brief.critical_batch.is_off();
    let mut out = Vec::new();
    let mut plate_bound = None;
    for config in fit.by_pace() {
        let window = bounds
            .of(config)
            .map(|lo| config_window(brief, shape, index, config, lo, &mut plate_bound))
            .filter(|w| w.tokens.0 <= w.tokens.1);
        match window {
            Some(w) => out.push(w),
            None if shared => break,
            None => {}
        }
    }
    out
}

/// The fewest tokens with which a shape's configurations reach the loss target
/// ([`fewest_tokens_on`]): one bound for all, or where the brief counts the critical batch,
/// one a global batch (the plate's configurations share the plate's), each worked out once.
pub(crate) struct LossBounds<'a> {
    brief: &'a Brief,
    shape: &'a Shape,
    /// The bounds worked out, by global batch (`None`: the shared one).
    known: Vec<(Option<u64>, Option<u64>)>,
}

impl<'a> LossBounds<'a> {
    pub(crate) fn new(brief: &'a Brief, shape: &'a Shape) -> LossBounds<'a> {
        LossBounds {
            brief,
            shape,
            known: Vec::new(),
        }
    }

    /// The fewest tokens with which `config` reaches the loss target, `None` if none do.
    pub(crate) fn of(&mut self, config: &Config) -> Option<u64> {
        let key = if self.brief.critical_batch.is_off() {
            None
        } else {
            config.global_batch()
        };
        if let Some(&(_, lo)) = self.known.iter().find(|(k, _)| *k == key) {
            return lo;
        }
        let lo = fewest_tokens_on(self.brief, self.shape, &config.model);
        self.known.push((key, lo));
        lo
    }
}

/// The window of `config` of `shape` (the shape's `index`-th), from `lo` tokens, the loss's
/// bound, to the most its pace trains within the days (`plate_bound`: the plate pace's, worked
/// out once for every plate configuration); empty where `lo` is past it.
pub(crate) fn config_window<'a>(
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
pub(crate) const CHUNK: u64 = 256;

/// What one worker has found so far.
pub(crate) struct Found {
    pub(crate) top: TopK,
    pub(crate) front: Front,
    pub(crate) passing: u64,
    /// The best passing candidate of each shape under the ranking.
    pub(crate) best: Vec<Option<Candidate>>,
}

impl Found {
    pub(crate) fn merge(mut self, other: Found) -> Found {
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
pub(crate) fn better(rank: Rank, a: Option<Candidate>, b: Option<Candidate>) -> Option<Candidate> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if rank.compare(&y, &x).is_lt() { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The grid's indices inside `[lo, hi]` tokens, as a half-open range.
pub(crate) fn grid_range(grid: &TokenGrid, [lo, hi]: [u64; 2]) -> std::ops::Range<u64> {
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
pub(crate) fn exact_top(
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

/// The windows' grid counts as lines whose positions are the grid's indices (windows with no
/// grid count left out).
pub(crate) fn grid_lines<'a>(
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
pub(crate) struct GridLine<'a> {
    window: Window<'a>,
    grid: TokenGrid,
    pub(crate) span: (u64, u64),
}

impl Line for GridLine<'_> {
    fn span(&self) -> (u64, u64) {
        self.span
    }
    fn at(&self, i: u64) -> Candidate {
        self.window.candidate(self.grid.at(i))
    }
}
