//! What moves a verdict, in text: a plan's sensitivity table and where its verdict flips, and
//! which plan a search ranks first at each end of each input's range.

use std::fmt::Write;

use super::plan_table::plan_line;
use super::table::{table, verdict_word};
use crate::format::{count, fixed, percent, thousands};
use crate::plan::sensitivity::{Input, Point, SearchSensitivity, Sensitivity};
use crate::plan::Plan;

/// The sensitivity table: the design as given, a row per input at the low and the high end
/// of its range, the ends where the verdict flips, and the inputs that cannot move it.
pub(super) fn sensitivity_section(s: &Sensitivity) -> String {
    let days = |p: &Point| p.days.map_or("never ends".into(), |d| fixed(d, 2));
    let mfu = |p: &Point| p.mfu.map_or("—".into(), percent);
    let verdict = |p: &Point| {
        if p.pass {
            "PASS".to_string()
        } else {
            format!("FAIL ({})", p.failing.join(", "))
        }
    };
    let mut out = String::from(
        "sensitivity: each input at the low and the high end of its range, the others as given\n",
    );
    let _ = writeln!(
        out,
        "  as given: {} days, {} MFU, {}",
        s.base.days.map_or("never ends".into(), |d| fixed(d, 3)),
        mfu(&s.base),
        verdict(&s.base)
    );
    let rows: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|r| {
            let i = r.input;
            vec![
                i.name().into(),
                format!("{} – {}", i.show(r.low), i.show(r.high)),
                i.show(r.base),
                format!("{} – {}", days(&r.at_low), days(&r.at_high)),
                format!("{} – {}", mfu(&r.at_low), mfu(&r.at_high)),
                format!("{} / {}", verdict(&r.at_low), verdict(&r.at_high)),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&table(
            &["input", "low – high", "base", "days", "MFU", "verdict"],
            &rows,
            "lrrrrl",
            "  ",
        ));
    }
    for flip in &s.flips {
        let _ = writeln!(out, "  {flip}");
    }
    if s.flips.is_empty() {
        let _ = writeln!(
            out,
            "  no input moves the plan from {} to {} within its range",
            verdict_word(s.base.pass),
            verdict_word(!s.base.pass)
        );
    }
    for u in &s.unmoved {
        let _ = writeln!(out, "  {} does not move this plan: {}", u.input, u.why);
    }
    // The critical batch moves the loss, not the days: its loss at each end.
    if let Some(r) = s.rows.iter().find(|r| r.input == Input::CriticalBatch) {
        let loss = |p: &Point| p.loss.map_or("?".into(), |l| fixed(l, 4));
        let _ = writeln!(
            out,
            "  {}: the law's critical batch × {} – {}: loss {} – {} (as given {})",
            r.input,
            r.input.show(r.low),
            r.input.show(r.high),
            loss(&r.at_low),
            loss(&r.at_high),
            loss(&s.base)
        );
    }
    if let Some(stack) = s
        .stack
        .filter(|_| s.rows.iter().any(|r| r.input == Input::Sustained))
    {
        let _ = writeln!(
            out,
            "  sustained: the calibration's value for the {stack} stack (--calibration FILE sets it)"
        );
    }
    out
}

/// A search's sensitivity: its first plan's table, and where another plan would rank first.
pub(super) fn search_sensitivity_section(s: &SearchSensitivity, first: Option<&Plan>) -> String {
    let mut out = String::new();
    match (&s.plan, first) {
        (Some(table), Some(p)) => {
            let _ = writeln!(out, "\nplan 1 again: {}", plan_line(p));
            out.push_str(&sensitivity_section(table));
        }
        _ => out.push_str("\nsensitivity: no plan passes, so none is graded again\n"),
    }
    let _ = writeln!(
        out,
        "the first plan at each end of each range ({} {} run again: {})",
        thousands(s.searches),
        if s.searches == 1 {
            "search"
        } else {
            "searches"
        },
        s.inputs
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    for c in &s.changes {
        let setting = format!("{} {}", c.input, c.input.show(c.value));
        let _ = match &c.first {
            Some(p) if c.same_layout => writeln!(
                out,
                "  with {setting}: the same shape and layout on {} tokens ranks first ({} days, loss {})",
                count(p.tokens as f64),
                fixed(p.days, 2),
                fixed(p.loss, 5)
            ),
            Some(p) => writeln!(
                out,
                "  with {setting}: {} ranks first ({} days, loss {})",
                plan_line(p),
                fixed(p.days, 2),
                fixed(p.loss, 5)
            ),
            None => writeln!(out, "  with {setting}: no plan passes"),
        };
    }
    if s.changes.is_empty() {
        out.push_str("  the first plan stays first at every end of every range\n");
    }
    out
}
