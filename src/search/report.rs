//! What a search answers: the [`SearchReport`] (the brief, each shape's verdict, the ranked
//! plans, the front, the tallies) and the [`Ranked`] plans an exporter walks, collected or
//! streamed.

use crate::brief::Brief;
use crate::laws::ComputeOptimal;
use crate::plan::command::CheckCommand;
use crate::plan::sensitivity::SearchSensitivity;
use crate::plan::verdict::ShapeVerdict;
use crate::plan::Plan;
use crate::search::options::TokenGrid;
use crate::search::rank::{Distinct, Rank};

/// Everything a search found.
#[derive(Debug, Clone)]
pub struct SearchReport {
    /// The brief searched.
    pub brief: Brief,
    /// The token grid searched.
    pub grid: TokenGrid,
    /// The ranking of `plans`.
    pub rank: Rank,
    /// Whether `plans` (and each shape's best) come from the exact token windows rather than
    /// the grid.
    pub exact: bool,
    /// `C = GPUs × peak × MFU × days × 86,400`, FLOPs.
    pub budget_flops: f64,
    /// The compute-optimal model for the budget.
    pub compute_optimal: ComputeOptimal,
    /// One verdict per shape searched, in the order given.
    pub shapes: Vec<ShapeVerdict>,
    /// What a row of `plans` stands for.
    pub distinct: Distinct,
    /// Distinct choices that pass (rows `plans` could hold; for [`Distinct::Plan`] the
    /// passing plans).
    pub choices: u64,
    /// The best passing plans (or all of them), ranked.
    pub plans: Vec<Plan>,
    /// The Pareto front on (loss, days) of the plans on the grid, sorted by days.
    pub front: Vec<Plan>,
    /// With `exact`, the Pareto front over every whole token count in the windows, as runs
    /// sorted by days (`None` without `exact`).
    pub front_runs: Option<FrontRuns>,
    /// Candidates graded.
    pub evaluated: u64,
    /// Valid configurations (layout and step) of every shape, each decided: weighed in full,
    /// or ruled out by a bound proven to give what weighing it would.
    pub configurations: u64,
    /// Of `configurations`, those weighed in full (`None` in a merge of shards, whose files
    /// do not record it).
    pub graded: Option<u64>,
    /// Candidates that passed every check.
    pub passing: u64,
    /// With `--sensitivity`: the first plan graded again and the search run again with each
    /// uncertain input at the ends of its range ([`crate::search::sensitivity::sensitivity`]); `None`
    /// otherwise.
    pub sensitivity: Option<SearchSensitivity>,
    /// What makes each listed plan's `check` command: the search's flags `check` shares and
    /// each shape's model flags, where the caller knows them (the command line sets it; a
    /// search run by the library alone has none).
    pub commands: Option<CheckCommand>,
}

impl SearchReport {
    /// Whether some plan passes: on the grid, or, with `exact`, at a whole token count in a
    /// shape's window (which the grid may miss: a window between two grid counts, or past the
    /// grid's end).
    pub fn any_pass(&self) -> bool {
        let runs = self.front_runs.as_ref();
        self.passing > 0 || !self.plans.is_empty() || runs.is_some_and(|f| !f.runs.is_empty())
    }

    /// Why a listing of every plan (no top) shows nothing though a verdict passes, with the
    /// way to see the window's plans: [`SearchReport::off_grid`] where no plan passes.
    pub fn unlisted(&self) -> Option<String> {
        if self.any_pass() {
            return None;
        }
        let why = self.off_grid()?;
        Some(format!(
            "{why}: the grid lists no plan of it; --exact with --top N ranks the window's"
        ))
    }

    /// The first shape whose passing token window holds no count of the grid, said as a
    /// reason; `None` where every window holds one (the default brief's do).
    pub fn off_grid(&self) -> Option<String> {
        use crate::format::count;
        let grid = &self.grid;
        self.shapes.iter().find_map(|s| {
            let [lo, hi] = s.token_window?;
            (!grid.meets(lo, hi)).then(|| {
                format!(
                    "no count of the token grid ({} to {} by {}) falls in {}'s passing window ({} – {} tokens)",
                    count(grid.min as f64),
                    count(grid.at(grid.len() - 1) as f64),
                    count(grid.step as f64),
                    s.model,
                    count(lo as f64),
                    count(hi as f64),
                )
            })
        })
    }
}

/// The ranked plans of a search, walked best first as often as a report needs (the text
/// report walks them twice: once to size its columns, once to print them).
pub trait Ranked {
    /// How many plans there are.
    fn count(&self) -> u64;
    /// The plans, best first.
    fn walk(&self) -> Box<dyn Iterator<Item = Plan> + '_>;
}

/// Plans held in a list, as a report holds its top K.
impl Ranked for &[Plan] {
    fn count(&self) -> u64 {
        self.len() as u64
    }
    fn walk(&self) -> Box<dyn Iterator<Item = Plan> + '_> {
        Box::new(self.iter().cloned())
    }
}

/// A run of the exact Pareto front: plans of one shape and configuration at consecutive token
/// counts, every one on the front (but for counts whose loss or days `f64` rounds to a
/// neighbour's, see [`crate::search::pareto::Segment`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FrontRun {
    /// The run's first plan, the one with the fewest tokens and days.
    pub first: Plan,
    /// The run's last plan on the front, the one with the lowest loss.
    pub last: Plan,
    /// Days per token along the run under the detailed time model (`null`: the plate's 6ND
    /// at the assumed MFU), so the plans between the ends can be told without grading them.
    pub days_per_token: Option<f64>,
}

/// The exact front's runs, sorted by days: all of them, or the first [`MAX_FRONT_RUNS`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct FrontRuns {
    /// The runs.
    pub runs: Vec<FrontRun>,
    /// Whether these are all the runs; if not, the front carries on past the last.
    pub complete: bool,
}

/// The most runs of an exact front a search finds. Neighbouring shapes of a dense family trade
/// the front count by count where their curves meet (the default family's front has hundreds
/// of millions of runs), and nobody reads past a few thousand.
pub const MAX_FRONT_RUNS: usize = 10_000;
