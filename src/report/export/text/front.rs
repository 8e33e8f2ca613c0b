//! The Pareto front in text: the front report, the lines a search report gives it, and the
//! runs of the exact front.

use std::fmt::Write;

use super::plan_table::{plan_align, plan_header, plan_rows};
use super::table::table;
use crate::format::{fixed, plural, thousands};
use crate::plan::Plan;
use crate::search::{FrontRuns, SearchReport, MAX_FRONT_RUNS};

/// The front report: the plans on the Pareto front of (loss, days), sorted by days, and
/// every run of the exact front.
pub(super) fn report(r: &SearchReport) -> String {
    let mut out = format!(
        "pareto front on (loss, days): {}, sorted by days\n",
        plural(r.front.len() as u64, "plan")
    );
    let header = plan_header(&r.front);
    let rows = plan_rows(&r.front, false);
    out.push_str(&table(&header, &rows, &plan_align(&header), "  "));
    if let Some(runs) = &r.front_runs {
        out.push_str(&exact_runs(runs, usize::MAX));
    }
    out
}

/// The front's lines in a search report: its ends, or why it is empty, and the exact front's
/// first runs.
pub(super) fn summary(r: &SearchReport) -> String {
    let mut out = String::new();
    match (r.front.first(), r.front.last()) {
        (Some(a), Some(b)) => {
            let _ = writeln!(
                out,
                "\npareto front (loss, days): {}, from {} days at loss {} to {} days at loss {}",
                plural(r.front.len() as u64, "plan"),
                fixed(a.days, 2),
                fixed(a.loss, 4),
                fixed(b.days, 2),
                fixed(b.loss, 4)
            );
        }
        _ if r.any_pass() => out.push_str(
            "\npareto front (loss, days) on the grid: empty, no count of the grid passes\n",
        ),
        _ => out.push_str("\nno plan passes every check\n"),
    }
    if let Some(runs) = &r.front_runs {
        out.push_str(&exact_runs(runs, SUMMARY_RUNS));
    }
    out
}

/// Runs of the exact front a search's summary lists; the `--pareto` file has them all.
const SUMMARY_RUNS: usize = 10;

/// The exact front's runs: each run's first and last plan, every whole token count between
/// them a plan on the front.
fn exact_runs(front: &FrontRuns, rows: usize) -> String {
    let runs = &front.runs;
    let Some((first, last)) = runs.first().zip(runs.last()) else {
        return if front.complete {
            "\nexact pareto front: empty\n".to_string()
        } else {
            "\nexact pareto front: unknown (a shard stopped before any run of it)\n".to_string()
        };
    };
    let shown = if front.complete {
        plural(runs.len() as u64, "run")
    } else if runs.len() == MAX_FRONT_RUNS {
        format!(
            "the first {} runs only (it carries on: shapes this close trade the front token by token)",
            thousands(MAX_FRONT_RUNS as u64)
        )
    } else {
        format!(
            "the first {} only (it carries on past where a shard stopped at {} runs)",
            plural(runs.len() as u64, "run"),
            thousands(MAX_FRONT_RUNS as u64)
        )
    };
    let mut out = format!(
        "\nexact pareto front over every whole token count: {shown}, from {} days at loss {} to {} days at loss {}\n",
        fixed(first.first.days, 2),
        fixed(first.first.loss, 4),
        fixed(last.last.days, 2),
        fixed(last.last.loss, 4)
    );
    let ends: Vec<Plan> = runs
        .iter()
        .take(rows)
        .flat_map(|run| [run.first.clone(), run.last.clone()])
        .collect();
    let mut header = vec!["run", "end"];
    header.extend(plan_header(&ends));
    let rows: Vec<Vec<String>> = plan_rows(&ends, false)
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let end = if i % 2 == 0 { "first" } else { "last" };
            [(i / 2 + 1).to_string(), end.to_string()]
                .into_iter()
                .chain(row)
                .collect()
        })
        .collect();
    let align = format!("rl{}", plan_align(&header[2..]));
    out.push_str(&table(&header, &rows, &align, "  "));
    if rows.len() < 2 * runs.len() {
        let _ = writeln!(
            out,
            "  … {} more in the --pareto file",
            plural((runs.len() - rows.len() / 2) as u64, "run")
        );
    }
    out
}
