//! The plan table: a plan's row, the header of the optional columns the plans have, its
//! alignment and the ranked plans written row by row; and a plan or its step in a line.

use std::fmt::Write;
use std::io;

use super::table::Columns;
use crate::cost::step::Step;
use crate::format::{count, fixed, money, percent, sci, thousands};
use crate::model::layout::Layout;
use crate::plan::Plan;
use crate::search::Ranked;

const PLAN_HEADER: [&str; 9] = [
    "model", "tokens", "TP", "PP", "DP", "ZeRO", "GB/GPU", "days", "loss",
];

pub(super) fn plan_rows(plans: &[Plan], numbered: bool) -> Vec<Vec<String>> {
    plans
        .iter()
        .enumerate()
        .map(|(i, p)| plan_row(numbered.then_some(i as u64 + 1), p))
        .collect()
}

/// A plan's row of the plan table, numbered `number` when it is given.
fn plan_row(number: Option<u64>, p: &Plan) -> Vec<String> {
    let mut row = Vec::new();
    if let Some(n) = number {
        row.push(n.to_string());
    }
    let l = &p.layout;
    row.extend([
        p.model.clone(),
        count(p.tokens as f64),
        l.tp.to_string(),
        l.pp.to_string(),
        dp_text(l),
        zero_text(l),
        fixed(p.memory_gb.total, 2),
        fixed(p.days, 3),
        fixed(p.loss, 5),
    ]);
    if let (Some(plate), Some(mfu)) = (p.days_plate, p.mfu) {
        row.push(fixed(plate, 3));
        row.push(percent(mfu));
    }
    if let Some(spend) = &p.spend {
        row.push(fixed(spend.gpu_hours, 0));
        row.extend(spend.cost.map(money));
        row.extend(spend.energy_mwh.map(|e| fixed(e, 1)));
        row.extend(spend.emissions_t.map(|t| fixed(t, 1)));
    }
    if let Some(l) = &p.lifetime {
        row.push(sci(l.train_flops));
        row.push(sci(l.inference_flops));
    }
    if let Some(s) = &p.step {
        row.insert(if number.is_some() { 4 } else { 3 }, l.cp.to_string());
        row.push(step_text(s));
    }
    row
}

/// The DP column: the degree, and for a mixture of experts with expert parallelism its EP (and
/// its ETP where it is not the TP).
fn dp_text(l: &Layout) -> String {
    match (l.ep, l.etp) {
        (1, etp) if etp == l.tp => thousands(l.dp),
        (ep, etp) if etp == l.tp => format!("{} EP {ep}", thousands(l.dp)),
        (ep, etp) => format!("{} EP {ep}/ETP {etp}", thousands(l.dp)),
    }
}

/// The ZeRO column: the stage, and with hybrid sharding `×R`, the replicas of each shard.
fn zero_text(l: &Layout) -> String {
    if l.replicate > 1 {
        format!("{}×{}", l.zero, l.replicate)
    } else {
        l.zero.to_string()
    }
}

/// The plan table's header, with a step column when the plans have training steps.
pub(super) fn plan_header(plans: &[Plan]) -> Vec<&'static str> {
    let mut shown = Shown::default();
    plans.iter().for_each(|p| shown.see(p));
    plan_header_with(shown)
}

/// Which of the plan table's optional columns the plans have.
#[derive(Debug, Clone, Copy, Default)]
struct Shown {
    /// The time model's columns: days at the assumed MFU, and the derived MFU.
    mfu: bool,
    /// Training steps: a CP column after TP and a step column.
    step: bool,
    /// GPU-hours (the brief has a price or a power).
    gpu_hours: bool,
    /// Cost (the brief has a price).
    cost: bool,
    /// Energy, MWh (the brief has a power).
    energy: bool,
    /// Emissions, t CO2e (the brief has a power and a carbon intensity).
    emissions: bool,
    /// Training and inference FLOPs (the brief has inference tokens).
    lifetime: bool,
}

impl Shown {
    /// Takes note of the columns `p` has.
    fn see(&mut self, p: &Plan) {
        self.mfu |= p.mfu.is_some();
        self.step |= p.step.is_some();
        let spend = p.spend.as_ref();
        self.gpu_hours |= spend.is_some();
        self.cost |= spend.is_some_and(|s| s.cost.is_some());
        self.energy |= spend.is_some_and(|s| s.energy_mwh.is_some());
        self.emissions |= spend.is_some_and(|s| s.emissions_t.is_some());
        self.lifetime |= p.lifetime.is_some();
    }
}

/// The plan table's header, with the optional columns the plans have.
fn plan_header_with(shown: Shown) -> Vec<&'static str> {
    let mut header = PLAN_HEADER.to_vec();
    if shown.step {
        header.insert(3, "CP");
    }
    if shown.mfu {
        header.extend(["plate days", "MFU"]);
    }
    for (has, name) in [
        (shown.gpu_hours, "GPU-h"),
        (shown.cost, "cost"),
        (shown.energy, "MWh"),
        (shown.emissions, "tCO2e"),
    ] {
        if has {
            header.push(name);
        }
    }
    if shown.lifetime {
        header.extend(["train FLOPs", "serve FLOPs"]);
    }
    if shown.step {
        header.push("step");
    }
    header
}

/// The ranked plans as a numbered table, written row by row: one walk measures the columns
/// and tells which there are, a second writes the rows.
pub(super) fn write_plan_table(plans: &dyn Ranked, out: &mut dyn io::Write) -> io::Result<()> {
    let (mut columns, mut shown) = (Columns::default(), Shown::default());
    for (i, p) in plans.walk().enumerate() {
        shown.see(&p);
        columns.measure(&plan_row(Some(i as u64 + 1), &p));
    }
    let mut header = vec!["#"];
    header.extend(plan_header_with(shown));
    let align = plan_align(&header);
    columns.measure(&header);
    let columns = columns.finish(header.len(), &align);
    out.write_all(columns.line(&header, "  ").as_bytes())?;
    for (i, p) in plans.walk().enumerate() {
        let row = plan_row(Some(i as u64 + 1), &p);
        out.write_all(columns.line(&row, "  ").as_bytes())?;
    }
    Ok(())
}

/// The plan table's alignment: names left, numbers right.
pub(super) fn plan_align(header: &[&str]) -> String {
    header
        .iter()
        .map(|h| {
            if matches!(*h, "model" | "step") {
                'l'
            } else {
                'r'
            }
        })
        .collect()
}

/// A step in the plan table's words: `b1 s8192 full sp 1f1b B 16.78 M` (`sp+o` where TP
/// communication overlaps the GEMMs).
pub(super) fn step_text(s: &Step) -> String {
    let sp = match (s.sequence_parallel, s.tp_comm_overlap) {
        (true, true) => " sp+o",
        (true, false) => " sp",
        (false, true) => " o",
        (false, false) => "",
    };
    let precision = if s.precision.is_narrow() {
        format!(" {}", s.precision)
    } else {
        String::new()
    };
    format!(
        "b{} s{} {}{sp} {}{precision} B {}",
        s.micro_batch,
        s.seq_len,
        s.recompute.name(),
        s.schedule,
        count(s.global_batch_tokens as f64)
    )
}

/// A plan in a line: its model, tokens, layout and (for a detailed plan) step.
pub(super) fn plan_line(p: &Plan) -> String {
    let l = &p.layout;
    let mut out = format!(
        "{} on {} tokens, {}",
        p.model,
        count(p.tokens as f64),
        l.describe()
    );
    if let Some(s) = &p.step {
        let _ = write!(out, ", {}", step_text(s));
    }
    out
}
