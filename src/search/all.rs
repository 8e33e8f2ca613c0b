//! Every passing plan (`search --all`), made one at a time in ranking order ([`AllPlans`],
//! [`search_all`]), so memory does not grow with them.

use crate::brief::Brief;
use crate::cost::run::TimeModel;
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::plan::runnable::{detailed_grade, DetailedGrade};
use crate::plan::Plan;
use crate::search::grid::block_for;
use crate::search::grid::grade_with;
use crate::search::grid::search_in_blocks;
use crate::search::grid::MicroBatches;
use crate::search::options::SearchOptions;
use crate::search::ordered::Merge;
use crate::search::progress::Progress;
use crate::search::rank::Rank;
use crate::search::report::Ranked;
pub(crate) use crate::search::report::SearchReport;
use crate::search::windows::grid_lines;
use crate::search::windows::GridLine;
use crate::search::windows::Window;

/// Every passing plan on a search's grid in ranking order, made one at a time as it is walked
/// (`search --all`), so memory holds one line for each fitting configuration of each shape
/// that passes, however many plans pass: a k-way merge (`src/search/ordered.rs`) of each configuration's
/// passing grid counts, which form an interval (the loss falls and the days rise with the
/// tokens). The plans are exactly those, and in the order, that [`crate::search::search`] with `top: None`
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
        // plans of one layout (every token count of it) grade it once. The whole layout is the
        // key: its expert degrees, CP and replicas change the grade too.
        type Key = (usize, Layout);
        type Grade = std::result::Result<DetailedGrade, String>;
        let kept = std::cell::RefCell::new(std::collections::HashMap::<Key, Grade>::new());
        let micro_batches = MicroBatches::default();
        let merge = Merge::new(&self.lines, self.rank);
        Box::new(merge.map(move |c| {
            let l = c.layout;
            let shape = &self.shapes[c.shape];
            let detailed = || {
                kept.borrow_mut()
                    .entry((c.shape, l))
                    .or_insert_with(|| {
                        detailed_grade(self.brief, shape, &l).map_err(|e| e.to_string())
                    })
                    .clone()
            };
            grade_with(self.brief, shape, self.time, &c, &micro_batches, &detailed)
        }))
    }
}

/// [`crate::search::search`] on the grid for every passing plan, without holding them: the report (its
/// `plans` empty, everything else as [`crate::search::search`] gives it) and the plans, made one at a time in
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::search::options::TokenGrid;

    use crate::plan::limits::loss;
    use crate::search::grid::search;
    use crate::search::progress::Silent;

    pub(crate) fn plateau_brief() -> Brief {
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
}
