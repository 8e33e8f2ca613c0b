//! What the brief's batch law ([`crate::laws::batch`]) asks of a shape, and how a plan's batch
//! stands against it: the law's optimal batch and learning rate for a run (a plan's own
//! tokens, or in a search the run that reaches the loss target, [`Brief::batch_law_run`]), the
//! most data-parallel replicas that batch keeps busy, and whether a plan's batch is what binds
//! it.

use serde::{Deserialize, Serialize};

use crate::brief::Brief;
use crate::laws::batch::SizedFor;
use crate::laws::BatchLaw;
use crate::model::Shape;

/// The brief's batch law for one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LawBatch {
    /// The law (`deepseek`, `step`).
    pub law: BatchLaw,
    /// The tokens it is evaluated at.
    pub tokens: f64,
    /// Which run those are: the plan's (`plan`), the fewest that reach the loss target
    /// (`loss_target`), or for a shape that never does, the most the budget trains (`budget`).
    pub sized_for: SizedFor,
    /// The law's compute budget `C = M·D`, FLOPs in DeepSeek LLM's convention (its
    /// non-embedding FLOPs a token `M` times the tokens).
    pub compute_flops: f64,
    /// The law's optimal global batch, tokens.
    pub optimal_batch_tokens: f64,
    /// The target a layout's whole rounds of micro-batches aim at, within the brief's
    /// tolerance ([`Brief::batch_target_for`]).
    pub target_tokens: u64,
    /// The law's optimal peak learning rate (AdamW).
    pub learning_rate: f64,
    /// The most data-parallel replicas with a sequence each that a batch within the tolerance
    /// of the target keeps busy: `⌊T·(1 + tolerance)/s⌋`; a cluster wider than this times a
    /// layout's model-parallel GPUs (TP × CP × PP) is batch-bound at that layout.
    pub most_replicas: u64,
    /// Where the run is beyond the runs the law was fitted on, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extrapolation: Option<String>,
}

impl LawBatch {
    /// The brief's batch law for `shape` in a search, sized for the run of
    /// [`Brief::batch_law_run`]; `None` under a fixed target.
    pub fn of(brief: &Brief, shape: &Shape) -> Option<LawBatch> {
        let (tokens, sized_for) = brief.batch_law_run(shape);
        LawBatch::sized(brief, shape, tokens, sized_for)
    }

    /// The brief's batch law for a plan of `shape` on `tokens`; `None` under a fixed target.
    pub fn at(brief: &Brief, shape: &Shape, tokens: f64) -> Option<LawBatch> {
        LawBatch::sized(brief, shape, tokens, SizedFor::Plan)
    }

    fn sized(brief: &Brief, shape: &Shape, tokens: f64, sized_for: SizedFor) -> Option<LawBatch> {
        let law = brief.batch_law;
        let inputs = brief.law_inputs(shape, tokens);
        let optimal_batch_tokens = law.optimal_batch(&inputs)?;
        let target = brief.law_target(optimal_batch_tokens);
        Some(LawBatch {
            law,
            tokens,
            sized_for,
            compute_flops: inputs.compute(),
            optimal_batch_tokens,
            target_tokens: target.tokens,
            learning_rate: law.optimal_learning_rate(&inputs)?,
            most_replicas: most_replicas(brief, &target),
            extrapolation: law.extrapolation(&inputs),
        })
    }

    /// The law for a plan of the same model on `tokens`, from this one: the batch and
    /// learning rate scaled by the law's exponents in tokens ([`BatchLaw::token_exponents`],
    /// exact for one model), its target, replicas and extrapolation worked out again.
    pub fn at_tokens(&self, brief: &Brief, tokens: f64) -> LawBatch {
        let (b, l) = self.law.token_exponents().unwrap_or((0.0, 0.0));
        let k = tokens / self.tokens;
        let optimal_batch_tokens = self.optimal_batch_tokens * k.powf(b);
        let target = brief.law_target(optimal_batch_tokens);
        LawBatch {
            law: self.law,
            tokens,
            sized_for: SizedFor::Plan,
            compute_flops: self.compute_flops * k,
            optimal_batch_tokens,
            target_tokens: target.tokens,
            learning_rate: self.learning_rate * k.powf(l),
            most_replicas: most_replicas(brief, &target),
            extrapolation: self.law.extrapolation_of(match self.law {
                BatchLaw::DeepSeek => self.compute_flops * k,
                _ => tokens,
            }),
        }
    }

    /// Whether a global batch of `tokens` is within the brief's tolerance of the law's
    /// target.
    pub fn accepts(&self, brief: &Brief, tokens: u64) -> bool {
        (tokens as f64 / self.target_tokens as f64 - 1.0).abs() <= brief.batch_tolerance
    }

    /// The run in words: `the 817.7 B tokens that reach loss 1.955`, `this plan's 3.4 T
    /// tokens`, `the 21.79 T tokens its budget trains (it never reaches loss 1.955)`.
    pub fn run_words(&self, loss_target: f64) -> String {
        let d = crate::format::count(self.tokens);
        match self.sized_for {
            SizedFor::Plan => format!("this plan's {d} tokens"),
            SizedFor::LossTarget => format!("the {d} tokens that reach loss {loss_target}"),
            SizedFor::Budget => {
                format!("the {d} tokens its budget trains (it never reaches loss {loss_target})")
            }
        }
    }
}

/// The most replicas of one sequence a batch within the tolerance of `target` keeps busy:
/// `⌊T·(1 + tolerance)/s⌋`, at least one.
fn most_replicas(brief: &Brief, target: &crate::cost::step::BatchTarget) -> u64 {
    let most = target.tokens as f64 * (1.0 + target.tolerance) / brief.seq_len as f64;
    (most.floor() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::preset;

    #[test]
    fn the_law_is_sized_for_the_run_that_reaches_the_target() {
        let brief = Brief {
            batch_law: BatchLaw::DeepSeek,
            ..Brief::default()
        };
        let shape = preset("llama3-405b").unwrap();
        let b = LawBatch::of(&brief, &shape).unwrap();
        // The default law's 405B reaches 1.955 on 817.7 B tokens.
        assert!((b.tokens / 817.7e9 - 1.0).abs() < 1e-3, "{}", b.tokens);
        // By hand: N_ne = 126 × (2·16384² + 2·16384·1024 + 3·16384·53248) = 4.0165e11,
        // M = 6·N_ne + 12·126·16384·8192 = 2.6128e12, C = M·D = 2.1365e24,
        // B = 0.2920·C^0.3271 = 2.652e7 tokens.
        assert!(
            (b.compute_flops / 2.1365e24 - 1.0).abs() < 1e-3,
            "{}",
            b.compute_flops
        );
        assert!((b.optimal_batch_tokens / 2.652e7 - 1.0).abs() < 2e-3);
        assert_eq!(b.target_tokens, b.optimal_batch_tokens.round() as u64);
        // ⌊T·1.25/8192⌋ replicas of a sequence each.
        assert_eq!(
            b.most_replicas,
            (b.target_tokens as f64 * 1.25 / 8192.0) as u64
        );
        assert!(b.extrapolation.unwrap().contains("above 2e19"));
        let fixed = Brief::default();
        assert_eq!(LawBatch::of(&fixed, &shape), None);
    }
}
