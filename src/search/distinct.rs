//! Distinct choices (`--distinct layout` or `shape`): each choice's best plan, found as its
//! configurations' windows' first plans ([`distinct_firsts`]).

use crate::brief::Brief;
use crate::cost::run::plate as time;
use crate::model::Shape;
use crate::search::options::TokenGrid;
use crate::search::ordered::{self};
use crate::search::rank::{Candidate, ChoiceKey, Distinct, Rank};
use crate::search::space::Config;
use crate::search::weigh::Fitting;
use crate::search::windows::better;
use crate::search::windows::config_window;
use crate::search::windows::grid_lines;
use crate::search::windows::LossBounds;
use crate::search::windows::Window;

/// Each distinct choice's best plan under `rank` among `windows` (the fitting configurations'
/// exact windows): each window's first, on the grid's counts or with `exact` over every whole
/// count ([`Merge::firsts`], exact under `f64` plateaus), then the best of those that are one
/// choice ([`Distinct::same`]).
/// Each choice of a shape: its first configuration's best plan (`None`: its line is empty, and
/// so is every later one's), the best so far, and whether it is settled. Kept from shape to
/// shape by a worker, so its tables are allocated once, not once a shape.
#[derive(Default)]
pub(crate) struct Choices {
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
    pub(crate) fn assign(&mut self, configs: &[Config], index: usize, distinct: Distinct) {
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
pub(crate) fn distinct_firsts_of_shape(
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
    // One loss bound for all, or where the brief counts the critical batch one a batch; then
    // a slower configuration may still reach a lower loss (a smaller batch wastes fewer
    // tokens), so no choice is settled early: every configuration's window is walked.
    let mut bounds = LossBounds::new(brief, shape);
    let shared = brief.critical_batch.is_off();
    if shared && fit.configs.first().is_some_and(|c| bounds.of(c).is_none()) {
        return Vec::new();
    }
    let cluster_flops = brief.cluster_flops_per_second();
    let n = shape.active_params() as f64;
    choices.assign(&fit.configs, index, distinct);
    let mut plate_bound = None;
    for &i in &fit.order {
        let choice = &mut choices.found[choices.of[i as usize] as usize];
        let config = &fit.configs[i as usize];
        match choice {
            Some((_, _, true)) => continue,
            Some((Some(first), _, settled)) if shared => {
                let plate_days = time::days(cluster_flops, n, first.tokens as f64);
                if config.pace.days(plate_days, first.tokens) > first.days {
                    *settled = true;
                    continue;
                }
            }
            _ => {}
        }
        let best = bounds.of(config).and_then(|lo| {
            let window = config_window(brief, shape, index, config, lo, &mut plate_bound);
            (window.tokens.0 <= window.tokens.1)
                .then(|| grid_lines(std::iter::once(window), grid).pop())
                .flatten()
                .and_then(|line| ordered::first(&line, rank))
        });
        match choice {
            Some((_, kept, _)) => *kept = better(rank, *kept, best),
            None => *choice = Some((best, best, shared && best.is_none())),
        }
    }
    // In no order: a top list's order is total.
    choices
        .found
        .iter()
        .filter_map(|c| c.and_then(|(_, best, _)| best))
        .collect()
}

pub(crate) fn distinct_firsts(
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
