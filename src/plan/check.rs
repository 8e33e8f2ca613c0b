//! `check`: one design graded, and for a failing design what would fix it.

use crate::plan::batch::LawBatch;
use serde::Serialize;

use crate::brief::Brief;
use crate::cost::links::placement::RankPlacement;
use crate::cost::memory::MemoryModel;
use crate::error::Result;
use crate::format::{count, fixed, money};
use crate::model::layout::{layouts, Layout};
use crate::model::Shape;
use crate::plan::limits::{law_size, loss, memory_fits, plan_batch_tokens};
use crate::plan::pace::Pace;
use crate::plan::sensitivity::Sensitivity;
use crate::plan::verdict::fewest_tokens_with;
use crate::plan::verdict::token_bounds;
use crate::plan::{evaluate, Design, Plan};
use crate::units::gb;

/// A graded design with the changes that would make its failing checks pass.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The brief the plan was graded against (not part of the plan object).
    #[serde(skip)]
    pub brief: Brief,
    /// The shape graded (not part of the plan object, which names it).
    #[serde(skip)]
    pub shape: Shape,
    /// The plan object of the JSON contract.
    #[serde(flatten)]
    pub plan: Plan,
    /// One suggestion per line, each naming the check it fixes; empty when the plan passes.
    pub fixes: Vec<String>,
    /// Where the ranks sit and which groups ride NVLink, when the brief's scale-up domain is
    /// larger than its node ([`Brief::placement`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<RankPlacement>,
    /// With `--sensitivity`: the plan graded again with each uncertain input at the ends of
    /// its range ([`crate::plan::sensitivity`]); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<Sensitivity>,
    /// The brief's batch law for the shape ([`LawBatch`]): the batch it asks for, against
    /// which the plan's own stands; absent under a fixed target.
    #[serde(rename = "batch_law", skip_serializing_if = "Option::is_none")]
    pub batch: Option<LawBatch>,
    /// What the command chose for the plan that its flags left open (a split of the layers
    /// over the stages the schedule needs), one sentence each; empty when nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Grades `design` and works out the fixes for whatever fails; an error if the design's step
/// does not go with its layout.
pub fn check(brief: &Brief, design: &Design) -> Result<CheckReport> {
    let plan = evaluate(brief, design)?;
    let mut fixes = Vec::new();
    if !plan.checks.memory {
        fixes.extend(memory_fixes(brief, design));
    }
    if !plan.checks.days || !plan.checks.loss || plan.checks.cost == Some(false) {
        let run = design.time.run_time(
            &brief.machine(),
            design.shape,
            &design.layout,
            &design.memory,
            1,
        )?;
        let pace = Pace::from_days_per_token(run.map(|r| r.days_per_token));
        fixes.extend(token_fixes(brief, design.shape, &plan, pace));
    }
    Ok(CheckReport {
        brief: brief.clone(),
        shape: design.shape.clone(),
        placement: brief.placement(&design.layout),
        batch: LawBatch::at(brief, design.shape, design.tokens as f64),
        notes: Vec::new(),
        plan,
        fixes,
        sensitivity: None,
    })
}

fn describe(l: &Layout) -> String {
    format!("TP {} × PP {} (DP {}), ZeRO {}", l.tp, l.pp, l.dp, l.zero)
}

/// The smallest ZeRO stage that fits at this TP × PP; the smallest TP × PP that fits at this
/// ZeRO stage; or, failing both, the smallest TP × PP that fits at any stage. The memory model
/// and its training step stay as they are; layouts the step does not go with are skipped.
fn memory_fixes(brief: &Brief, design: &Design) -> Vec<String> {
    let (shape, current) = (design.shape, &design.layout);
    let weighed: Vec<(Layout, f64)> = layouts(brief, shape)
        .into_iter()
        .filter_map(|l| {
            let bytes = design.memory.memory(brief.seq_len, shape, &l).ok()?.total();
            Some((l, bytes))
        })
        .collect();
    let fits = |l: &&(Layout, f64)| memory_fits(brief, l.1);
    let mut fixes = Vec::new();
    let same_split = weighed
        .iter()
        .filter(fits)
        .find(|(l, _)| l.tp == current.tp && l.pp == current.pp && l.zero > current.zero);
    if let Some((l, bytes)) = same_split {
        fixes.push(format!(
            "memory: raise ZeRO to stage {} at TP {} × PP {}: {} GB per GPU",
            l.zero,
            l.tp,
            l.pp,
            fixed(gb(*bytes), 1)
        ));
    }
    let same_zero = smallest_split(
        weighed
            .iter()
            .filter(fits)
            .filter(|(l, _)| l.zero == current.zero),
    );
    let any_zero = smallest_split(weighed.iter().filter(fits));
    match (same_zero, any_zero) {
        (Some((l, bytes)), _) => fixes.push(format!(
            "memory: keep ZeRO {} and split the model over TP × PP = {}: {}, {} GB per GPU",
            l.zero,
            l.tp * l.pp,
            describe(l),
            fixed(gb(*bytes), 1)
        )),
        (None, Some((l, bytes))) if same_split.is_none() => fixes.push(format!(
            "memory: the smallest split that fits is {}: {} GB per GPU",
            describe(l),
            fixed(gb(*bytes), 1)
        )),
        (None, None) => {
            let lightest = weighed
                .iter()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(l, bytes)| format!("{} needs {} GB", describe(l), fixed(gb(*bytes), 1)))
                .unwrap_or_else(|| "no layout exists".into());
            fixes.push(format!(
                "memory: no layout fits {} in {} GB per GPU (the lightest, {}): use a smaller model, more GPUs or a higher cap",
                shape.name,
                fixed(brief.memory_cap_gb, 1),
                lightest
            ))
        }
        _ => {}
    }
    fixes
}

/// The layout with the fewest GPUs per model replica (TP × PP), then the least memory, then
/// the smaller TP.
fn smallest_split<'a>(
    candidates: impl Iterator<Item = &'a (Layout, f64)>,
) -> Option<&'a (Layout, f64)> {
    candidates.min_by(|a, b| {
        (a.0.tp * a.0.pp)
            .cmp(&(b.0.tp * b.0.pp))
            .then(a.1.total_cmp(&b.1))
            .then(a.0.tp.cmp(&b.0.tp))
    })
}

/// The token counts that meet the day limit and the loss target for this shape.
fn token_fixes(brief: &Brief, shape: &Shape, plan: &Plan, pace: Pace) -> Vec<String> {
    let mut v = token_bounds(brief, shape, pace);
    let n = law_size(shape);
    // Past the critical batch the loss counts the tokens the plan's batch makes count: its
    // step's, or a plate plan's at each token count (the law's batch moves with them).
    let counts_batch = plan.critical_batch.is_some();
    let batch_of = |t: u64| match (&plan.critical_batch, plan.step) {
        (Some(c), Some(_)) => c.batch_tokens,
        _ => plan_batch_tokens(brief, shape, t, &MemoryModel::Plate),
    };
    let loss_of = |t: u64| {
        if counts_batch {
            brief.loss_at_batch(n, t as f64, batch_of(t))
        } else {
            loss(brief, shape, t)
        }
    };
    if counts_batch {
        v.min_tokens_for_loss = fewest_tokens_with(brief, shape, &batch_of);
    }
    let days_of = |t: u64| pace.run_days(brief, shape.active_params(), t);
    let mut fixes = Vec::new();
    let over_cost = plan.checks.cost == Some(false);
    if !plan.checks.days || over_cost {
        let most = v.max_tokens_in_time;
        // The window's upper end keeps to the day limit, or to the cost limit's days when
        // that binds first.
        let (within, allow) = match brief.binding_cost_limit() {
            Some((limit, days)) => {
                let days = fixed(days, 1);
                (
                    format!("the {} cost limit ({days} days)", money(limit)),
                    format!("the {} cost limit ({days} days) allows", money(limit)),
                )
            }
            None => {
                let days = fixed(brief.max_days, 1);
                (format!("{days} days"), format!("{days} days allow"))
            }
        };
        let what = match (!plan.checks.days, over_cost) {
            (true, true) => "days and cost",
            (true, false) => "days",
            _ => "cost",
        };
        fixes.push(if most == 0 {
            format!(
                "{what}: not even one token of {} fits in {within} on this cluster",
                shape.name
            )
        } else {
            format!(
                "{what}: train at most {} tokens ({}), the most {allow}; loss then {}",
                count(most as f64),
                most,
                fixed(loss_of(most), 4)
            )
        });
    }
    if !plan.checks.loss {
        let needed = brief.tokens_for_loss(n, brief.loss_target);
        // On repeated data the floor is the unique tokens' as much as the model's: past the
        // data's optimum, more parameters decay as repeats do.
        let remedy = match (brief.loss_law.repetition, brief.unique_tokens) {
            (Some(_), Some(_)) => "more unique tokens or a larger model are needed",
            _ => "a larger model is needed",
        };
        fixes.push(match (needed, v.min_tokens_for_loss) {
            (None, _) => format!(
                "loss: no number of tokens reaches {}: the floor of {} is {}; {remedy}",
                brief.loss_target,
                shape.name,
                fixed(v.loss_floor, 6)
            ),
            (Some(d), None) => format!(
                "loss: reaching {} takes about {} tokens, more than can be counted; {remedy}",
                brief.loss_target,
                count(d)
            ),
            (_, Some(fewest)) => format!(
                "loss: train at least {} tokens ({}) to reach {}; that takes {} days",
                count(fewest as f64),
                fewest,
                brief.loss_target,
                fixed(days_of(fewest), 1)
            ),
        });
    }
    let floor_below_target = v.loss_floor < brief.loss_target;
    let too_few_days = v
        .min_tokens_for_loss
        .is_none_or(|fewest| fewest > v.max_tokens_in_time);
    if let (true, Some((limit, days))) = (
        floor_below_target && too_few_days,
        brief.binding_cost_limit(),
    ) {
        // Cost is GPUs × days: a larger cluster at the same pace costs the same.
        fixes.push(format!(
            "cost and loss: {} cannot meet both within the {} cost limit ({} days); a higher limit, a lower price, a faster layout or another model is needed",
            shape.name,
            money(limit),
            fixed(days, 1)
        ));
    } else if floor_below_target && too_few_days {
        fixes.push(match pace {
            Pace::Plate => format!(
                "days and loss: {} cannot meet both within {} days; a larger cluster, a longer run or another model is needed",
                shape.name,
                fixed(brief.max_days, 1)
            ),
            // Under the detailed time model the pace is this layout's: another may be faster.
            Pace::PerToken(_) => format!(
                "days and loss: {} cannot meet both within {} days at this layout and step's pace; `trainplan search --memory detailed --time detailed` looks for a faster one",
                shape.name,
                fixed(brief.max_days, 1)
            ),
        });
    }
    fixes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::layout::ZeroStage;
    use crate::model::preset;

    fn report(model: &str, tokens: u64, tp: u64, pp: u64, zero: u8) -> CheckReport {
        let b = Brief::default();
        let shape = preset(model).unwrap();
        let layout = Layout::new(&b, &shape, tp, pp, ZeroStage::new(zero).unwrap()).unwrap();
        check(&b, &Design::plate(&shape, tokens, layout)).unwrap()
    }

    #[test]
    fn the_starting_plan_is_told_zero_3_or_tp_8_pp_2_and_the_month_s_tokens() {
        let r = report("70b", 15_000_000_000_000, 1, 1, 0);
        // ZeRO 3 at TP 1 × PP 1: 16N/2048 + 2·s·h·80 = 0.551 + 10.737 = 11.3 GB.
        assert_eq!(
            r.fixes[0],
            "memory: raise ZeRO to stage 3 at TP 1 × PP 1: 11.3 GB per GPU"
        );
        // ZeRO 0 at TP·PP = 16: 16N/16 + 2·s·h·⌈80/16⌉ = 70.554 + 0.671 = 71.2 GB ≤ 72
        // (TP 8 × PP 2 weighs the same; the smaller TP wins the tie).
        assert_eq!(
            r.fixes[1],
            "memory: keep ZeRO 0 and split the model over TP × PP = 16: TP 1 × PP 16 (DP 128), ZeRO 0, 71.2 GB per GPU"
        );
        assert!(
            r.fixes[2].starts_with("days: train at most 4.961 T tokens (496"),
            "{}",
            r.fixes[2]
        );
        assert_eq!(r.fixes.len(), 3);
    }

    #[test]
    fn a_passing_plan_needs_no_fix() {
        let r = report("70b", 4_000_000_000_000, 8, 1, 1);
        assert!(r.plan.pass && r.fixes.is_empty());
    }

    #[test]
    fn a_model_whose_floor_is_too_high_is_told_so() {
        let r = report("8b", 1_000_000_000_000, 1, 1, 3);
        assert!(r
            .fixes
            .iter()
            .any(|f| f.starts_with("loss: no number of tokens reaches 1.955")));
    }

    #[test]
    fn too_few_tokens_for_the_loss_are_told_the_fewest() {
        let r = report("70b", 1_000_000_000_000, 8, 1, 1);
        // (B / (1.955 − 1.90087))^(1/0.366) = 3,380,993,485,051.3 (worked in Python), rounded up.
        assert_eq!(
            r.fixes[0],
            "loss: train at least 3.381 T tokens (3380993485052) to reach 1.955; that takes 20.4 days"
        );
    }
}
