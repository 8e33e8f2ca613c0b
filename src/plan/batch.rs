//! What the brief's batch law ([`crate::laws::batch`]) asks of a shape, and how a plan's batch
//! stands against it: the law's optimal batch and learning rate at the tokens the law is
//! sized for ([`Brief::batch_law_tokens`]), the most data-parallel replicas that batch keeps
//! busy, and whether a plan's batch is what binds it.

use serde::{Deserialize, Serialize};

use crate::brief::Brief;
use crate::laws::BatchLaw;
use crate::model::Shape;

/// The brief's batch law for one shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LawBatch {
    /// The law (`deepseek`, `step`).
    pub law: BatchLaw,
    /// The tokens it is evaluated at: the fewest that reach the brief's loss target, or for a
    /// shape that never does, the most the budget trains ([`Brief::batch_law_tokens`]).
    pub tokens: f64,
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
    /// The brief's batch law for `shape`; `None` under a fixed target.
    pub fn of(brief: &Brief, shape: &Shape) -> Option<LawBatch> {
        let law = brief.batch_law;
        let tokens = brief.batch_law_tokens(shape);
        let inputs = brief.law_inputs(shape, tokens);
        let optimal_batch_tokens = law.optimal_batch(&inputs)?;
        let target = brief.batch_target_for(shape);
        let most = target.tokens as f64 * (1.0 + target.tolerance) / brief.seq_len as f64;
        Some(LawBatch {
            law,
            tokens,
            compute_flops: inputs.compute(),
            optimal_batch_tokens,
            target_tokens: target.tokens,
            learning_rate: law.optimal_learning_rate(&inputs)?,
            most_replicas: (most.floor() as u64).max(1),
            extrapolation: law.extrapolation(&inputs),
        })
    }
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
