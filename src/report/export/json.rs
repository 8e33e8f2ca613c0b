//! The JSON contract: the plan object, the search document and the Pareto file.
//! Field names are part of the contract; new fields may be added, none renamed or removed
//! without bumping [`SCHEMA_VERSION`].

use std::io;

use serde::Serialize;

use super::exporter::Exporter;
use crate::brief::Brief;
use crate::cost::links::placement::RankPlacement;
use crate::error::{Error, Result};
use crate::laws::{ComputeOptimal, Lifetime};
use crate::plan::check::CheckReport;
use crate::plan::command::CheckCommand;
use crate::plan::sensitivity::SearchSensitivity;
use crate::plan::verdict::ShapeVerdict;
use crate::plan::Plan;
use crate::report::output::written;
use crate::search::{FrontRuns, Ranked, SearchReport, TokenGrid};

/// Version of the search and Pareto documents.
pub const SCHEMA_VERSION: u32 = 1;

/// JSON, pretty-printed, with a trailing newline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

/// `search --json`.
#[derive(Serialize)]
struct SearchDocument<'a> {
    /// Version of this document's layout.
    schema_version: u32,
    /// The brief searched, in the `--brief` file's field names.
    brief: &'a Brief,
    /// The token counts tried.
    token_grid: &'a TokenGrid,
    /// The order of `plans`: `loss`, `days` or `memory`.
    rank: &'static str,
    /// Whether `plans` come from every whole token count in the shapes' exact windows (true,
    /// `--exact`) or from the grid.
    exact: bool,
    /// What a row of `plans` stands for: `plan` (every plan), `layout` (each shape, layout
    /// and step once, at its best token count) or `shape` (each shape once).
    distinct: &'static str,
    /// Distinct choices that pass (the passing plans for `plan`).
    choices: u64,
    /// The compute budget `C = GPUs × peak × MFU × days × 86,400`, FLOPs.
    budget_flops: f64,
    /// The compute-optimal model for the budget.
    compute_optimal: &'a ComputeOptimal,
    /// With the brief's inference tokens: the model of least training plus inference FLOPs
    /// at the loss target (Sardana et al. 2024), as a dense model of the brief's law.
    #[serde(skip_serializing_if = "Option::is_none")]
    lifetime_optimal: Option<Lifetime>,
    /// One verdict per shape: its exact token window or the reason it never passes.
    shapes: &'a [ShapeVerdict],
    /// Candidates (shape, tokens, TP, PP, ZeRO) graded.
    evaluated: u64,
    /// Candidates that passed every check.
    passing: u64,
    /// The best passing plans (or all, with `--all`), ranked; each with its `placement` where
    /// the brief's scale-up domain is larger than its node ([`Brief::placement`]).
    plans: Walked<'a>,
    /// With `--sensitivity`: the first plan graded again and the search run again with each
    /// uncertain input at the ends of its range.
    #[serde(skip_serializing_if = "Option::is_none")]
    sensitivity: Option<&'a SearchSensitivity>,
}

/// Ranked plans serialized as an array while they are walked, never held; with the brief
/// they were graded on, which says where each plan's ranks sit when its scale-up domain is
/// larger than its node, and the search's flags, which make each plan's `check` command.
struct Walked<'a>(&'a dyn Ranked, &'a Brief, Option<&'a CheckCommand>);

/// A plan with where its ranks sit and the `check` command that grades it again.
#[derive(Serialize)]
struct Placed {
    #[serde(flatten)]
    plan: Plan,
    #[serde(skip_serializing_if = "Option::is_none")]
    placement: Option<RankPlacement>,
    /// The arguments of `trainplan check` that grade the plan again as the search did.
    #[serde(skip_serializing_if = "Option::is_none")]
    check: Option<Vec<String>>,
    /// Why `check` cannot grade it from flags, where it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    check_unavailable: Option<String>,
}

impl Serialize for Walked<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let Walked(plans, brief, commands) = *self;
        // Where nodes are their own domains and no command is asked for, the plans go out as
        // they are, without the flattened map.
        if brief.domain_gpus() == brief.gpus_per_node && commands.is_none() {
            return s.collect_seq(plans.walk());
        }
        s.collect_seq(plans.walk().map(|plan| {
            let (check, check_unavailable) = match commands.map(|c| c.args(&plan, brief)) {
                Some(Ok(args)) => (Some(args), None),
                Some(Err(why)) => (None, Some(why)),
                None => (None, None),
            };
            Placed {
                placement: brief.placement(&plan.layout),
                check,
                check_unavailable,
                plan,
            }
        }))
    }
}

/// The `--pareto` file.
#[derive(Serialize)]
struct FrontDocument<'a> {
    /// Version of this document's layout.
    schema_version: u32,
    /// The brief searched.
    brief: &'a Brief,
    /// The objectives, both minimised.
    objectives: [&'static str; 2],
    /// Passing plans on the grid that no other passing plan on the grid beats on both
    /// objectives, sorted by days; each with its `placement` where the brief's scale-up
    /// domain is larger than its node.
    front: Walked<'a>,
    /// With `--exact`: the front over every whole token count in the windows, as runs sorted
    /// by days, each its first and last plan with every count between them on the front, and
    /// whether the runs are complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    exact_front: Option<&'a FrontRuns>,
}

/// The error of a value JSON cannot hold.
fn unrepresentable(e: serde_json::Error) -> Error {
    Error::Invalid {
        field: "output".into(),
        value: "a number that JSON cannot hold".into(),
        expected: e.to_string(),
    }
}

fn to_json(value: &impl Serialize) -> Result<String> {
    let mut text = serde_json::to_string_pretty(value).map_err(unrepresentable)?;
    text.push('\n');
    Ok(text)
}

/// [`to_json`] written to `out` as it is made.
fn write_json(value: &impl Serialize, out: &mut dyn io::Write) -> Result<()> {
    match serde_json::to_writer_pretty(&mut *out, value) {
        Ok(()) => written(out.write_all(b"\n")),
        Err(e) if e.is_io() => written(Err(e.into())),
        Err(e) => Err(unrepresentable(e)),
    }
}

impl Exporter for Json {
    fn check(&self, report: &CheckReport) -> Result<String> {
        to_json(report)
    }

    fn write_search(
        &self,
        r: &SearchReport,
        plans: &dyn Ranked,
        out: &mut dyn io::Write,
    ) -> Result<()> {
        let document = SearchDocument {
            schema_version: SCHEMA_VERSION,
            brief: &r.brief,
            token_grid: &r.grid,
            rank: r.rank.name(),
            exact: r.exact,
            distinct: r.distinct.name(),
            choices: r.choices,
            budget_flops: r.budget_flops,
            compute_optimal: &r.compute_optimal,
            lifetime_optimal: r.brief.lifetime_optimal(),
            shapes: &r.shapes,
            evaluated: r.evaluated,
            passing: r.passing,
            plans: Walked(plans, &r.brief, r.commands.as_ref()),
            sensitivity: r.sensitivity.as_ref(),
        };
        write_json(&document, out)
    }

    fn front(&self, r: &SearchReport) -> Result<String> {
        to_json(&FrontDocument {
            schema_version: SCHEMA_VERSION,
            brief: &r.brief,
            objectives: ["loss", "days"],
            front: Walked(&r.front.as_slice(), &r.brief, r.commands.as_ref()),
            exact_front: r.front_runs.as_ref(),
        })
    }
    fn launch(&self, _: &super::launch::Launch) -> Result<String> {
        Err(super::exporter::not_a_launcher("json"))
    }
}
