//! Splitting a search over machines: `search --shard I/N` searches one slice of the shapes and
//! writes a partial result; `merge` combines the partial results into the report one run
//! over all the shapes gives, byte for byte.
//!
//! Shape `i` (0-based, in the order the search lists them) belongs to shard `i mod N + 1`. A
//! shard keeps its own top K and Pareto front: the global top K are among the shards' top Ks,
//! and a plan dominated within its shard is dominated overall, so the merged ranking and front
//! are the single run's. Plans carry their shape's global index, which the tie-break uses.
//! The same holds for the exact front (`--exact`): the merge takes each shard's runs as chains,
//! finds their front with [`crate::search::pareto::exact_front`], and grades the ends again.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::Detailed;
use crate::error::{Error, Result};
use crate::laws::ComputeOptimal;
use crate::model::layout::Layout;
use crate::model::Shape;
use crate::plan::command::CheckCommand;
use crate::plan::pace::Pace;
use crate::plan::verdict::ShapeVerdict;
use crate::plan::{evaluate, Design, Plan};
use crate::search::grid::thin_front;
use crate::search::options::TokenGrid;
use crate::search::pareto::{exact_front, last_before, last_on_front, Chain, Front, Segment};
use crate::search::rank::{tie_break, Candidate, Distinct, Rank, TopK};
use crate::search::report::{FrontRun, FrontRuns, SearchReport, MAX_FRONT_RUNS};
use crate::search::windows::Window;

mod check;

/// What a partial file says it is.
pub const PARTIAL_KIND: &str = "trainplan-partial";

/// The partial format's version: 4 since it carries what makes each plan's `check` command
/// (`commands`) and each verdict may carry its `detailed_best` (3: plate plans carry the
/// detailed grade they rank by, `runnable`, and the plans may be distinct choices); a partial
/// file of another version is refused by name.
pub const PARTIAL_SCHEMA_VERSION: u32 = 4;

/// One slice of a search: shard `index` of `count`, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, 1 to `count`.
    pub index: u64,
    /// How many shards.
    pub count: u64,
}

impl Shard {
    /// Parses `I/N` with `1 ≤ I ≤ N`.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || Error::invalid("--shard", text, "I/N with 1 ≤ I ≤ N, for example 3/8");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count) = (i.trim().parse::<u64>(), n.trim().parse::<u64>());
        match (index, count) {
            (Ok(index), Ok(count)) if index >= 1 && index <= count => Ok(Shard { index, count }),
            _ => Err(bad()),
        }
    }

    /// Whether shape `i` (0-based) belongs to this shard.
    pub fn takes(&self, i: usize) -> bool {
        i as u64 % self.count == self.index - 1
    }
}

/// A verdict with its shape's place among all the shapes searched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexedVerdict {
    /// The shape's 0-based place in the full list.
    pub index: usize,
    /// Its verdict.
    pub verdict: ShapeVerdict,
}

/// A plan with its shape's place among all the shapes searched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexedPlan {
    /// The shape's 0-based place in the full list.
    pub shape_index: usize,
    /// The plan.
    pub plan: Plan,
}

/// A shard's result: everything `merge` needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    /// Always [`PARTIAL_KIND`].
    pub kind: String,
    /// Version of this layout.
    pub schema_version: u32,
    /// `[I, N]`.
    pub shard: [u64; 2],
    /// Shapes in the whole search.
    pub shapes_total: usize,
    /// A fingerprint of the shapes, memory and time models searched; shards of one search
    /// share it.
    pub fingerprint: String,
    /// The brief.
    pub brief: Brief,
    /// The token grid.
    pub grid: TokenGrid,
    /// The ranking, by name.
    pub rank: String,
    /// How many plans were kept (`null`: all).
    pub top: Option<usize>,
    /// Whether the plans come from the exact token windows.
    pub exact: bool,
    /// What a row of `plans` stands for, by name (`plan`, `layout`, `shape`).
    pub distinct: String,
    /// Whether the merged front is to be thinned to one plan per distinct choice (a shard
    /// keeps its whole front, since a point it would thin away may dominate another shard's).
    pub distinct_front: bool,
    /// Distinct choices of this shard that pass.
    pub choices: u64,
    /// This shard's verdicts.
    pub shapes: Vec<IndexedVerdict>,
    /// This shard's best plans.
    pub plans: Vec<IndexedPlan>,
    /// This shard's Pareto front.
    pub front: Vec<IndexedPlan>,
    /// With `exact`, this shard's exact front, with what a merge needs to re-grade it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_front: Option<PartialFront>,
    /// Candidates this shard graded.
    pub evaluated: u64,
    /// Candidates of this shard that passed.
    pub passing: u64,
    /// What makes each plan's `check` command: the search's flags and this shard's shapes'
    /// model flags (a merge joins the shards' shapes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<CheckCommand>,
    /// The file this partial was read from (set by its reader, never written), which errors
    /// about it name; empty for a partial made in memory.
    #[serde(skip)]
    pub source: String,
}

/// A shard's exact front: its runs and the time model that graded them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartialFront {
    /// The time model searched, to grade the merged runs' new ends.
    pub time: TimeModel,
    /// Whether the runs are all of this shard's front, or its first [`MAX_FRONT_RUNS`].
    pub complete: bool,
    /// The runs, sorted by days.
    pub runs: Vec<PartialRun>,
}

/// One run of a shard's exact front.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartialRun {
    /// The shape's 0-based place in the full list.
    pub shape_index: usize,
    /// The shape itself.
    pub shape: Shape,
    /// The run's first plan.
    pub first: Plan,
    /// The tokens of its last plan on the front.
    pub last_tokens: u64,
    /// Days per token under the detailed time model, `None` under the plate's.
    pub days_per_token: Option<f64>,
}

/// A 64-bit FNV-1a hash of `text`, as 16 hex digits: enough to tell two searches apart.
pub fn fingerprint(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

impl Partial {
    /// The partial result of shard `shard` from the report of a search over its shapes
    /// `shapes` under `time`, whose global places are `indices`.
    #[allow(clippy::too_many_arguments)]
    pub fn from_report(
        report: SearchReport,
        shard: Shard,
        shapes: &[Shape],
        indices: &[usize],
        shapes_total: usize,
        fingerprint: String,
        top: Option<usize>,
        time: &TimeModel,
        distinct_front: bool,
    ) -> Self {
        let global = |local: usize| indices[local];
        let local_of = |plan: &Plan| {
            report
                .shapes
                .iter()
                .position(|v| v.model == plan.model && v.params == plan.params)
                .expect("every plan's shape has a verdict")
        };
        let index_of = |plan: &Plan| global(local_of(plan));
        let exact_front = report.front_runs.as_ref().map(|front| PartialFront {
            time: time.clone(),
            complete: front.complete,
            runs: front
                .runs
                .iter()
                .map(|run| PartialRun {
                    shape_index: index_of(&run.first),
                    shape: shapes[local_of(&run.first)].clone(),
                    first: run.first.clone(),
                    last_tokens: run.last.tokens,
                    days_per_token: run.days_per_token,
                })
                .collect(),
        });
        let plans = report
            .plans
            .iter()
            .map(|p| IndexedPlan {
                shape_index: index_of(p),
                plan: p.clone(),
            })
            .collect();
        let front = report
            .front
            .iter()
            .map(|p| IndexedPlan {
                shape_index: index_of(p),
                plan: p.clone(),
            })
            .collect();
        Partial {
            kind: PARTIAL_KIND.to_string(),
            schema_version: PARTIAL_SCHEMA_VERSION,
            shard: [shard.index, shard.count],
            shapes_total,
            fingerprint,
            rank: report.rank.name().to_string(),
            top,
            exact: report.exact,
            distinct: report.distinct.name().to_string(),
            distinct_front,
            choices: report.choices,
            shapes: report
                .shapes
                .into_iter()
                .enumerate()
                .map(|(i, verdict)| IndexedVerdict {
                    index: global(i),
                    verdict,
                })
                .collect(),
            plans,
            front,
            exact_front,
            brief: report.brief,
            grid: report.grid,
            evaluated: report.evaluated,
            passing: report.passing,
            commands: report.commands,
            source: String::new(),
        }
    }
}

/// A run of a shard's exact front as the window it was a part of, for the merged front.
fn run_window<'a>(brief: &'a Brief, run: &'a PartialRun) -> Window<'a> {
    Window {
        brief,
        shape: &run.shape,
        index: run.shape_index,
        layout: run.first.layout,
        model: memory_model(&run.first, brief),
        memory: run.first.memory_gb.total,
        prefer: prefer_of(&run.first),
        pace: Pace::from_days_per_token(run.days_per_token),
        tokens: (run.first.tokens, run.last_tokens),
    }
}

/// The exact front of the whole search from its shards' exact fronts: the front of the shards'
/// runs taken as chains (a plan dominated within its shard is dominated overall), whose ends
/// are graded again. Where a shard kept only its first runs, the merged front is known only up
/// to that shard's last day, and is cut there.
fn merge_exact(brief: &Brief, fronts: &[PartialFront]) -> Result<FrontRuns> {
    let Some(time) = fronts.first().map(|f| &f.time) else {
        return Ok(FrontRuns {
            runs: Vec::new(),
            complete: true,
        });
    };
    let chains: Vec<Window> = fronts
        .iter()
        .flat_map(|f| f.runs.iter().map(|run| run_window(brief, run)))
        .collect();
    // Each shard's front is known up to the end of its last run (nothing of it, if a shard
    // that stopped kept no run).
    let cut = fronts
        .iter()
        .filter(|f| !f.complete)
        .map(|f| {
            f.runs.last().map_or(f64::NEG_INFINITY, |run| {
                run_window(brief, run).days(run.last_tokens)
            })
        })
        .min_by(f64::total_cmp);
    let tie = |(a, ta): (usize, u64), (b, tb): (usize, u64)| {
        tie_break(&chains[a].candidate(ta), &chains[b].candidate(tb))
    };
    let front = exact_front(&chains, tie, MAX_FRONT_RUNS);
    let complete = front.complete && cut.is_none();
    let mut runs: Vec<Segment> = Vec::with_capacity(front.runs.len());
    for mut seg in front.runs {
        let chain = &chains[seg.chain];
        if let Some(cut) = cut {
            if chain.days(seg.first) > cut {
                break;
            }
            if chain.days(seg.last) > cut {
                seg.last = last_before(chain, seg.first, |d| d <= cut);
                runs.push(seg);
                break;
            }
        }
        runs.push(seg);
    }
    let grade = |chain: &Window, tokens: u64| -> Result<Plan> {
        let design = Design {
            shape: chain.shape,
            tokens,
            layout: chain.layout,
            memory: chain.model,
            time,
        };
        evaluate(brief, &design)
    };
    let runs = runs
        .iter()
        .map(|seg| {
            let chain = &chains[seg.chain];
            Ok(FrontRun {
                first: grade(chain, seg.first)?,
                last: grade(chain, last_on_front(chain, seg))?,
                days_per_token: chain.pace.days_per_token(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(FrontRuns { runs, complete })
}

/// The candidate a plan was, for ranking it again.
fn candidate(p: &IndexedPlan, brief: &Brief) -> Candidate {
    let plan = &p.plan;
    Candidate {
        shape: p.shape_index,
        tokens: plan.tokens,
        layout: plan.layout,
        model: memory_model(plan, brief),
        loss: plan.loss,
        days: plan.days,
        memory: plan.memory_gb.total,
        prefer: prefer_of(plan),
        lifetime: plan.lifetime.map_or(0.0, |l| l.total_flops()),
    }
}

/// The runnable-first key a plan was ranked by (its `runnable` grade; 0 for a detailed plan).
fn prefer_of(plan: &Plan) -> f64 {
    plan.runnable.as_ref().map_or(0.0, |r| r.key())
}

/// The memory model (with its step) a plan was graded under, on the brief's GPU (whose own
/// settings a plan file does not carry: [`crate::cost::step::detailed::Options::on_gpu`]).
pub(crate) fn memory_model(plan: &Plan, brief: &Brief) -> MemoryModel {
    match (plan.step, plan.memory_model) {
        (Some(step), Some(options)) => MemoryModel::Detailed(Detailed {
            step,
            options: options.on_gpu(brief.mxfp8),
        }),
        _ => MemoryModel::Plate,
    }
}

/// The key that finds a candidate's plan again: its shape, tokens, whole layout (CP, replicas,
/// EP and ETP too: plans that differ in them alone are different plans) and step.
type Key = (usize, u64, Layout, Option<crate::cost::step::Step>);

fn key(c: &Candidate) -> Key {
    (c.shape, c.tokens, c.layout, c.model.step().copied())
}

/// Combines the partial results of every shard of one search into its report: each checked
/// against the physics first ([`Partial::check`]), then against the others (one search, each
/// shard once, every shape once).
pub fn merge(partials: Vec<Partial>) -> Result<SearchReport> {
    let first = partials
        .first()
        .ok_or_else(|| Error::invalid("merge", "no files", "the partial files of every shard"))?;
    let count = first.shard[1];
    for p in &partials {
        let same = p.kind == PARTIAL_KIND
            && p.schema_version == first.schema_version
            && p.shard[1] == count
            && p.shapes_total == first.shapes_total
            && p.fingerprint == first.fingerprint
            && p.brief == first.brief
            && p.grid == first.grid
            && p.rank == first.rank
            && p.top == first.top
            && p.exact == first.exact
            && p.distinct == first.distinct
            && p.distinct_front == first.distinct_front
            && p.exact_front.is_some() == p.exact
            && p.exact_front.as_ref().map(|f| &f.time)
                == first.exact_front.as_ref().map(|f| &f.time);
        if !same {
            return Err(Error::invalid(
                "merge",
                format!("shard {}/{}", p.shard[0], p.shard[1]),
                "partial files of one search: the same brief, shapes, models, grid and ranking",
            ));
        }
    }
    for p in &partials {
        // A shard's counts hold together: what passed was graded, and the plans and the front
        // it kept passed (at most `top` of them). An exact search's plans are at counts off
        // the grid, which `passing` does not count.
        let kept = if p.exact {
            p.front.len()
        } else {
            p.plans.len().max(p.front.len())
        } as u64;
        let consistent = p.passing <= p.evaluated
            && kept <= p.passing
            && p.top.is_none_or(|top| p.plans.len() <= top);
        if !consistent {
            return Err(Error::invalid(
                "merge",
                format!(
                    "shard {}/{}: {} evaluated, {} passing, {} plans and {} on the front",
                    p.shard[0],
                    p.shard[1],
                    p.evaluated,
                    p.passing,
                    p.plans.len(),
                    p.front.len()
                ),
                "a partial file as search wrote it: passing at most evaluated, and the plans and the front at most the passing (and the plans at most top)",
            ));
        }
    }
    let mut seen: Vec<u64> = partials.iter().map(|p| p.shard[0]).collect();
    seen.sort_unstable();
    // 1, 2, …, count, compared without making the list: a hand-edited count may be 2^64 − 1.
    let each_once = seen.len() as u64 == count && seen.iter().zip(1..).all(|(&s, k)| s == k);
    if !each_once {
        return Err(Error::invalid(
            "merge",
            format!("shards {seen:?}"),
            format!("each of the {count} shards once"),
        ));
    }
    first.brief.validate()?;
    first.grid.checked()?;
    if first.top == Some(0) {
        return Err(Error::invalid(
            "top",
            0,
            "a whole number ≥ 1, or null for every plan",
        ));
    }
    let rank = Rank::from_name("rank", &first.rank)?;
    rank.check_against("rank", &first.brief)?;
    crate::search::shardable(&first.brief, "brief.critical_batch")?;
    let distinct = Distinct::from_name("distinct", &first.distinct)?;
    // What each file says, against the physics.
    for p in &partials {
        p.check()?;
    }
    let distinct_front = first.distinct_front;
    let (brief, grid, top, total) = (
        first.brief.clone(),
        first.grid,
        first.top,
        first.shapes_total,
    );
    let exact = first.exact;
    let mut shapes: Vec<IndexedVerdict> = Vec::with_capacity(total);
    let mut plans: HashMap<Key, Plan> = HashMap::new();
    let mut best = TopK::new(rank, top);
    let mut front = Front::new();
    let mut exact_fronts = Vec::new();
    let (mut evaluated, mut passing, mut choices) = (0u64, 0u64, 0u64);
    // The search's flags are every shard's; the shapes' model flags, each shard's own.
    let commands = partials
        .first()
        .and_then(|p| p.commands.clone())
        .map(|mut c| {
            for p in &partials {
                let models = p.commands.as_ref().map(|c| c.models.clone());
                c.models.extend(models.unwrap_or_default());
            }
            c
        });
    for p in partials {
        choices = choices.saturating_add(p.choices);
        exact_fronts.extend(p.exact_front);
        evaluated = evaluated.saturating_add(p.evaluated);
        passing = passing.saturating_add(p.passing);
        shapes.extend(p.shapes);
        for ip in p.plans {
            let c = candidate(&ip, &brief);
            best.push(c);
            plans.insert(key(&c), ip.plan);
        }
        for ip in p.front {
            let c = candidate(&ip, &brief);
            front.insert(c);
            plans.insert(key(&c), ip.plan);
        }
    }
    shapes.sort_by_key(|v| v.index);
    // Every shape once, each where its shard put it.
    let complete = shapes.len() == total && shapes.iter().enumerate().all(|(i, v)| v.index == i);
    let in_range = plans.keys().all(|k| k.0 < total)
        && exact_fronts.iter().flat_map(|f| &f.runs).all(|r| {
            r.shape_index < total
                && r.first.tokens <= r.last_tokens
                && r.first.params == r.shape.params()
                && r.days_per_token.is_none_or(|k| k.is_finite() && k > 0.0)
        });
    if !complete || !in_range {
        return Err(Error::invalid(
            "merge",
            format!("{} shapes", shapes.len()),
            format!("the {total} shapes of the search, each once"),
        ));
    }
    let plan_of = |c: &Candidate| plans[&key(c)].clone();
    let budget_flops = brief.budget_flops();
    Ok(SearchReport {
        compute_optimal: ComputeOptimal::for_budget(
            &brief.loss_law,
            budget_flops,
            brief.unique_tokens.map(|u| u as f64),
        ),
        budget_flops,
        grid,
        rank,
        exact,
        shapes: shapes.into_iter().map(|v| v.verdict).collect(),
        distinct,
        choices,
        plans: best.into_sorted().iter().map(plan_of).collect(),
        front: thin_front(front.into_points(), rank, distinct, distinct_front)
            .iter()
            .map(plan_of)
            .collect(),
        front_runs: if exact {
            Some(merge_exact(&brief, &exact_fronts)?)
        } else {
            None
        },
        evaluated,
        // Every shape's configurations times the grid's counts.
        configurations: evaluated / grid.len().max(1),
        graded: None,
        passing,
        brief,
        sensitivity: None,
        commands,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_split_the_shapes() {
        let s = Shard::parse("2/3").unwrap();
        let taken: Vec<usize> = (0..7).filter(|&i| s.takes(i)).collect();
        assert_eq!(taken, [1, 4]);
        for bad in ["0/3", "4/3", "3", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    /// Shard 1/1 of the default search over 405B, as `search --shard 1/1` makes it.
    fn partial_405b() -> Partial {
        let brief = Brief::default();
        let shapes = vec![crate::model::preset("405b").unwrap()];
        let options = crate::search::options::SearchOptions::default();
        let report = crate::search::grid::search(
            &brief,
            &shapes,
            &options,
            &crate::search::progress::Silent,
        );
        let shard = Shard { index: 1, count: 1 };
        let time = options.time.clone();
        Partial::from_report(
            report,
            shard,
            &shapes,
            &[0],
            1,
            "f".into(),
            options.top,
            &time,
            false,
        )
    }

    #[test]
    fn a_partial_as_search_makes_it_passes_its_checks() {
        partial_405b().check().unwrap();
    }

    #[test]
    fn a_shard_count_near_two_to_the_64_is_refused_without_overflow() {
        let mut p = partial_405b();
        p.shard = [1, u64::MAX];
        p.shapes_total = 3;
        let twice = p.shapes[0].clone();
        p.shapes.push(twice);
        let e = p.check().unwrap_err().to_string();
        assert!(
            e.starts_with("invalid shard 1/18446744073709551615: shapes[1].index = 0: no verdict: shard 1/18446744073709551615 holds places 0 of the search's 3 shapes"),
            "{e}"
        );
    }

    #[test]
    fn fingerprints_tell_texts_apart() {
        assert_ne!(fingerprint("a"), fingerprint("b"));
        assert_eq!(fingerprint("a").len(), 16);
    }
}
