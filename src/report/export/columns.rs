//! Tables of plans, the exporter the CSV and Markdown formats share: one row a plan, the
//! step's columns only when the plans have steps, the derived MFU only when they have one, the
//! spend's (GPU-hours, cost, energy, emissions) only as far as the brief prices them;
//! each format is a [`Style`] of laying out the header and the rows.

use std::io;

use super::exporter::Exporter;
use super::launch::Launch;
use crate::error::Result;
use crate::plan::check::CheckReport;
use crate::plan::Plan;
use crate::report::output::written;
use crate::search::{Ranked, SearchReport};

/// How a table format lays out its header and its rows.
pub trait Style {
    /// The format's name, as `--format` takes it.
    const NAME: &'static str;
    /// The header, given the first row (none when there are no plans).
    fn head(header: &[&str], first: Option<&[Cell]>) -> String;
    /// One row.
    fn row(cells: &[Cell]) -> String;
}

/// A table of plans in the style `S`: one row for a check's plan, a search's ranked plans or
/// a front.
#[derive(Debug, Clone, Copy, Default)]
pub struct Table<S>(pub S);

impl<S: Style> Table<S> {
    /// The plans as a table, written row by row as they are walked.
    fn write(plans: &dyn Ranked, out: &mut dyn io::Write) -> io::Result<()> {
        let mut walk = plans.walk().peekable();
        let columns = Columns::of(walk.peek());
        let mut rows = walk.enumerate().map(|(i, p)| columns.row(i as u64 + 1, &p));
        let first = rows.next();
        out.write_all(S::head(&columns.header(), first.as_deref()).as_bytes())?;
        for row in first.into_iter().chain(rows) {
            out.write_all(S::row(&row).as_bytes())?;
        }
        Ok(())
    }

    /// The plans as a table, whole.
    fn text(plans: &[Plan]) -> String {
        let mut out = Vec::new();
        Self::write(&plans, &mut out).expect("a Vec takes every write");
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl<S: Style> Exporter for Table<S> {
    fn check(&self, report: &CheckReport) -> Result<String> {
        Ok(Self::text(std::slice::from_ref(&report.plan)))
    }
    fn write_search(
        &self,
        _: &SearchReport,
        plans: &dyn Ranked,
        out: &mut dyn io::Write,
    ) -> Result<()> {
        written(Self::write(plans, out))
    }
    fn front(&self, report: &SearchReport) -> Result<String> {
        Ok(Self::text(&report.front))
    }
    fn launch(&self, _: &Launch) -> Result<String> {
        Err(super::exporter::not_a_launcher(S::NAME))
    }
}

/// A cell: its exact value for programs (CSV) and a rounded one for people (Markdown).
pub struct Cell {
    /// Every digit: integers whole, floats in Rust's shortest round-trip form.
    pub exact: String,
    /// Rounded for reading.
    pub shown: String,
    /// Numbers are right-aligned in Markdown.
    pub numeric: bool,
}

fn text(s: impl Into<String>) -> Cell {
    let s = s.into();
    Cell {
        exact: s.clone(),
        shown: s,
        numeric: false,
    }
}

fn whole(n: u64) -> Cell {
    Cell {
        exact: n.to_string(),
        shown: crate::format::thousands(n),
        numeric: true,
    }
}

/// An amount (GPU-hours, money, MWh): exact for programs, with thousands separators for people.
fn amount(x: f64, decimals: usize) -> Cell {
    Cell {
        exact: format!("{x}"),
        shown: crate::format::fixed(x, decimals),
        numeric: true,
    }
}

fn real(x: f64, decimals: usize) -> Cell {
    Cell {
        exact: format!("{x}"),
        shown: format!("{x:.decimals$}"),
        numeric: true,
    }
}

/// Which columns a table of plans has.
pub struct Columns {
    /// The training step's columns.
    steps: bool,
    /// The derived MFU.
    mfu: bool,
    /// GPU-hours, and which of cost, energy and emissions.
    spend: Option<[bool; 3]>,
}

impl Columns {
    /// The columns of a table whose first plan is `first`: the step's when the plans have
    /// training steps, the MFU when they have one. Every plan of one search or front has the
    /// same (the memory and time models are the search's), so the first decides.
    pub fn of(first: Option<&Plan>) -> Columns {
        Columns {
            steps: first.is_some_and(|p| p.step.is_some()),
            mfu: first.is_some_and(|p| p.mfu.is_some()),
            spend: first.and_then(|p| p.spend).map(|s| {
                [
                    s.cost.is_some(),
                    s.energy_mwh.is_some(),
                    s.emissions_t.is_some(),
                ]
            }),
        }
    }

    /// The header.
    pub fn header(&self) -> Vec<&'static str> {
        let mut header = vec![
            "rank", "model", "params", "tokens", "tp", "pp", "dp", "zero",
        ];
        if self.steps {
            header.extend([
                "cp",
                "replicate",
                "micro_batch",
                "recompute",
                "sequence_parallel",
                "schedule",
                "tp_comm_overlap",
                "precision",
                "global_batch_tokens",
            ]);
        }
        header.extend(["memory_gb", "days"]);
        if self.mfu {
            header.push("mfu");
        }
        if let Some(has) = self.spend {
            header.push("gpu_hours");
            for (name, has) in ["cost", "energy_mwh", "emissions_t"].into_iter().zip(has) {
                if has {
                    header.push(name);
                }
            }
        }
        header.extend(["loss", "pass"]);
        header
    }

    /// The row of plan `p`, ranked `rank`.
    pub fn row(&self, rank: u64, p: &Plan) -> Vec<Cell> {
        let l = &p.layout;
        let mut row = vec![
            whole(rank),
            text(p.model.as_str()),
            whole(p.params),
            whole(p.tokens),
            whole(l.tp),
            whole(l.pp),
            whole(l.dp),
            whole(u64::from(l.zero.get())),
        ];
        if self.steps {
            match &p.step {
                Some(s) => row.extend([
                    whole(l.cp),
                    whole(l.replicate),
                    whole(s.micro_batch),
                    text(s.recompute.name()),
                    text(if s.sequence_parallel { "on" } else { "off" }),
                    text(s.schedule.to_string()),
                    text(if s.tp_comm_overlap { "on" } else { "off" }),
                    text(s.precision.name()),
                    whole(s.global_batch_tokens),
                ]),
                None => row.extend((0..9).map(|_| text(""))),
            }
        }
        row.extend([real(p.memory_gb.total, 2), real(p.days, 3)]);
        if self.mfu {
            row.push(p.mfu.map_or_else(|| text(""), |m| real(m, 3)));
        }
        if let Some(has) = self.spend {
            let s = p.spend;
            row.push(s.map_or_else(|| text(""), |s| amount(s.gpu_hours, 0)));
            let values = [
                s.and_then(|s| s.cost).map(|c| amount(c, 2)),
                s.and_then(|s| s.energy_mwh).map(|e| amount(e, 1)),
                s.and_then(|s| s.emissions_t).map(|t| amount(t, 1)),
            ];
            for (value, has) in values.into_iter().zip(has) {
                if has {
                    row.push(value.unwrap_or_else(|| text("")));
                }
            }
        }
        row.extend([real(p.loss, 5), text(if p.pass { "PASS" } else { "FAIL" })]);
        row
    }
}
