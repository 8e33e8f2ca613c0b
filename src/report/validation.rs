//! The detailed model against measured runs, as people read it: `trainplan calibrate`'s
//! before-and-after table and the validation table of `results/time-validation.md`.

use std::fmt::Write as _;

use crate::cost::chip::calibration::Calibration;
pub use crate::plan::calibrate::mae;
use crate::plan::calibrate::Prediction;

/// `calibrate`'s report: each run before and after the fit, and the means.
pub fn calibration_text(
    before: &[Prediction],
    after: &[Prediction],
    old: Calibration,
    new: Calibration,
) -> String {
    let mut out = format!(
        "{:<42} {:<18} {:>8} {:>8} {:>8} {:>8}\n",
        "run", "stack", "measured", "before", "after", "memory"
    );
    for (b, a) in before.iter().zip(after) {
        let _ = writeln!(
            out,
            "{:<42} {:<18} {:>7.1}% {:>+8.1} {:>+8.1} {:>5.1}/{:<5.1}",
            b.id,
            b.stack.name(),
            100.0 * b.measured_mfu,
            b.error_points,
            a.error_points,
            a.memory_gb,
            a.usable_gb()
        );
    }
    let all_b: Vec<&Prediction> = before.iter().collect();
    let all_a: Vec<&Prediction> = after.iter().collect();
    let own = |c: Calibration| {
        c.stacks
            .iter()
            .map(|(s, v)| format!(", {s} {v:.4}"))
            .collect::<String>()
    };
    let _ = writeln!(
        out,
        "sustained {:.4}{} → {:.4}{}; MAE {:.2} → {:.2} MFU points over {} runs",
        old.sustained,
        own(old),
        new.sustained,
        own(new),
        mae(&all_b),
        mae(&all_a),
        after.len()
    );
    out
}

/// One row of the validation table.
pub struct Row<'a> {
    /// The prediction with the run's family left out of the fit.
    pub held_out: &'a Prediction,
    /// The sustained fraction that fit used.
    pub fit: Calibration,
    /// The measured peak memory, GB, if published.
    pub peak_memory_gb: Option<f64>,
}

/// The validation table in Markdown: per run, measured and predicted MFU in one FLOP count,
/// the error with the family left out, memory against the card, and the stack; then per
/// family and overall.
pub fn validation_markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| run | stack | measured MFU | predicted | error (family held out) | fit's sustained | memory GB | card GB (usable) | measured peak GB |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let p = r.held_out;
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} % | {:.1} % | {:+.1} | {:.3} | {:.1} | {} ({:.1}) | {} |",
            p.id,
            p.stack.name(),
            100.0 * p.measured_mfu,
            100.0 * p.mfu,
            p.error_points,
            r.fit.sustained_for(p.stack),
            p.memory_gb,
            p.card_gb,
            p.usable_gb(),
            r.peak_memory_gb.map_or("—".to_string(), |g| format!(
                "{g:.1} ({:+.0} %)",
                100.0 * (p.memory_gb / g - 1.0)
            ))
        );
    }
    let mut families: Vec<&str> = Vec::new();
    for r in rows {
        if !families.contains(&r.held_out.family.as_str()) {
            families.push(&r.held_out.family);
        }
    }
    out.push_str("\n| family | runs | mean error | mean absolute error |\n|---|---|---|---|\n");
    for f in &families {
        let of: Vec<&Prediction> = rows
            .iter()
            .map(|r| r.held_out)
            .filter(|p| p.family == *f)
            .collect();
        let mean = of.iter().map(|p| p.error_points).sum::<f64>() / of.len() as f64;
        let _ = writeln!(out, "| {f} | {} | {mean:+.1} | {:.1} |", of.len(), mae(&of));
    }
    let all: Vec<&Prediction> = rows.iter().map(|r| r.held_out).collect();
    let _ = writeln!(
        out,
        "\n**Leave-one-family-out MAE: {:.2} MFU points over {} runs in {} families.**",
        mae(&all),
        all.len(),
        families.len()
    );
    out
}
