//! The columns of a table of plans, shared by the CSV and Markdown exporters: one row a plan,
//! the step's columns only when the plans have steps, the derived MFU only when they have one.

use crate::plan::Plan;

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
}

impl Columns {
    /// The columns of a table whose first plan is `first`: the step's when the plans have
    /// training steps, the MFU when they have one. Every plan of one search or front has the
    /// same (the memory and time models are the search's), so the first decides.
    pub fn of(first: Option<&Plan>) -> Columns {
        Columns {
            steps: first.is_some_and(|p| p.step.is_some()),
            mfu: first.is_some_and(|p| p.mfu.is_some()),
        }
    }

    /// The header.
    pub fn header(&self) -> Vec<&'static str> {
        let mut header = vec![
            "rank", "model", "params", "tokens", "tp", "pp", "dp", "zero",
        ];
        if self.steps {
            header.extend([
                "micro_batch",
                "recompute",
                "sequence_parallel",
                "schedule",
                "global_batch_tokens",
            ]);
        }
        header.extend(["memory_gb", "days"]);
        if self.mfu {
            header.push("mfu");
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
                    whole(s.micro_batch),
                    text(s.recompute.name()),
                    text(if s.sequence_parallel { "on" } else { "off" }),
                    text(s.schedule.to_string()),
                    whole(s.global_batch_tokens),
                ]),
                None => row.extend((0..5).map(|_| text(""))),
            }
        }
        row.extend([real(p.memory_gb.total, 2), real(p.days, 3)]);
        if self.mfu {
            row.push(p.mfu.map_or_else(|| text(""), |m| real(m, 3)));
        }
        row.extend([real(p.loss, 5), text(if p.pass { "PASS" } else { "FAIL" })]);
        row
    }
}
