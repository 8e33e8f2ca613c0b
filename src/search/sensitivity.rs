//! A search's sensitivity: its first plan graded again with each uncertain input at the ends
//! of its range ([`crate::plan::sensitivity`]), and the whole search run again at each end,
//! the same brief and options otherwise, to say where another plan would rank first.
//!
//! Only the inputs of the search's time model move: the plate's MFU, or the detailed model's
//! calibration, overlaps and failure figures (an overlap the first plan's layout lacks still
//! moves the search, whose other plans may have it). Each search asks for its first plan
//! only (`top` 1: the same total order, so the same first plan); an end at the base value is
//! the search as given and is not run.

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::step::detailed::Detailed;
use crate::error::Result;
use crate::model::Shape;
use crate::plan::sensitivity::{
    same_design, same_layout, sensitivity as plan_sensitivity, End, Input, RankChange,
    SearchSensitivity,
};
use crate::plan::{Design, Plan};
use crate::search::progress::Silent;
use crate::search::{search, MemorySpace, SearchOptions, SearchReport};

/// The sensitivity of `report`, the search of `shapes` under `brief` and `options`: its first
/// plan graded again at each end of each range and the search run again there. An error if
/// the first plan cannot be graded again or a moved brief is not valid.
pub fn sensitivity(
    brief: &Brief,
    shapes: &[Shape],
    options: &SearchOptions,
    report: &SearchReport,
) -> Result<SearchSensitivity> {
    let first = report.plans.first();
    let plan = first
        .map(|p| plan_sensitivity(brief, &design(p, shapes, options)?))
        .transpose()?;
    let stack = match &options.memory {
        MemorySpace::Plate => None,
        MemorySpace::Detailed { options, .. } => Some(options.stack),
    };
    let mut inputs = Input::applying(&options.time, stack);
    inputs.extend(Input::of_laws(brief));
    let mut changes = Vec::new();
    let mut searches = 0;
    for &input in &inputs {
        let base = input.base(brief, &options.time, stack);
        let (low, high) = input.range(base);
        for (end, value) in [(End::Low, low), (End::High, high)] {
            if value == base {
                continue;
            }
            let (moved, time) = input.moved(brief, &options.time, stack, value);
            moved.validate()?;
            let mut again = SearchOptions {
                top: Some(1),
                time,
                ..options.clone()
            };
            // The space aims each shape's batch with its own copy of the brief: moved too.
            if let MemorySpace::Detailed {
                batch: Some(aim @ crate::search::BatchAim::Law(_)),
                ..
            } = &mut again.memory
            {
                *aim = crate::search::BatchAim::of(&moved);
            }
            searches += 1;
            let found = search(&moved, shapes, &again, &Silent);
            let now = found.plans.into_iter().next();
            let same = match (first, &now) {
                (Some(a), Some(b)) => same_design(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same {
                let same_layout = matches!((first, &now), (Some(a), Some(b)) if same_layout(a, b));
                changes.push(RankChange {
                    input,
                    end,
                    value,
                    first: now,
                    same_layout,
                });
            }
        }
    }
    Ok(SearchSensitivity {
        plan,
        inputs,
        searches,
        changes,
    })
}

/// The design of a search's plan: its shape (by name among `shapes`), tokens, layout, memory
/// model and step, under the search's time model.
fn design<'a>(plan: &Plan, shapes: &'a [Shape], options: &'a SearchOptions) -> Result<Design<'a>> {
    let shape = shapes
        .iter()
        .find(|s| s.name == plan.model && s.params() == plan.params)
        .ok_or_else(|| {
            crate::error::Error::invalid("--sensitivity", &plan.model, "a shape of the search")
        })?;
    let memory = match (plan.step, plan.memory_model) {
        (Some(step), Some(options)) => MemoryModel::Detailed(Detailed { step, options }),
        _ => MemoryModel::Plate,
    };
    Ok(Design {
        shape,
        tokens: plan.tokens,
        layout: plan.layout,
        memory,
        time: &options.time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::presets;

    #[test]
    fn the_default_search_s_first_plan_moves_with_the_plate_s_mfu() {
        // The default brief's first plan is 70B on the most tokens 30 days allow at 40 % MFU
        // (4.96 T); at 30 % MFU those tokens take 40 days, and at 50 % more fit: either way
        // the same layout on another token count ranks first.
        let (brief, shapes, options) = (Brief::default(), presets(), SearchOptions::default());
        let report = search(&brief, &shapes, &options, &Silent);
        let s = sensitivity(&brief, &shapes, &options, &report).unwrap();
        assert_eq!(s.inputs, [Input::Mfu]);
        assert_eq!(s.searches, 2);
        let plan = s.plan.unwrap();
        assert_eq!(plan.rows.len(), 1);
        assert_eq!(plan.base.days, Some(report.plans[0].days));
        assert_eq!(s.changes.len(), 2);
        let low = s.changes[0].first.as_ref().unwrap();
        let high = s.changes[1].first.as_ref().unwrap();
        assert!(low.tokens < report.plans[0].tokens && high.tokens > report.plans[0].tokens);
        assert_eq!((s.changes[0].end, s.changes[1].end), (End::Low, End::High));
        // The same layout each time: only the window moved.
        assert!(s.changes.iter().all(|c| c.same_layout));
    }
}
