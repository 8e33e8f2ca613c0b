//! The detailed time model's calibrated parameters: few, named, bounded, and fitted to
//! measured runs by `trainplan calibrate` (the published set's fit ships as the default).
//!
//! | parameter | meaning | bounds |
//! |---|---|---|
//! | `sustained` | fraction of the kernel benchmarks' FLOP rates (GEMM ceilings, attention tables) that a training step's GEMMs and attention keep: power-limited clocks over a long step, SMs shared with communication kernels, launch gaps between kernels, and the software of the run's day against the benchmarks' | 0.5 to 1.0 |
//! | `stacks.<name>` | `sustained` for one stack, fitted to the runs of that stack; a stack none of the runs used takes the pooled value | 0.5 to 1.0 |
//! | `host_expert` | the host's time for one local expert's launches in an MoE layer's micro-batch, forward and backward (Transformer Engine launches each expert's GEMMs and quantizations apart), which a dropless MoE's device-to-host synchronisation exposes where it outlasts the routed part's GPU time ([`crate::cost::step::graphs`]); megatron-te's | 0 to 2 ms |
//!
//! Everything else in the model is a published figure or a formula. The shipped values were
//! fitted to `data/published/runs.json` (the 22 runs at their cards' published peaks) by
//! minimising the mean absolute error in MFU points: the pooled value over every run, and one
//! for each stack over its own runs. `results/time-validation.md` reports every run's error with
//! its family left out of the fit: a family whose stack has other families in the published set
//! is then predicted at its stack's value fitted to those (torchtitan's four, Megatron-DeepSpeed's
//! MT-NLG and BLOOM), any other at the pooled value of the other families.

use serde::{Deserialize, Serialize};

use crate::cost::step::stack::Stack;
use crate::error::{Error, Result};

/// A stack's own `sustained`, by stack, in [`Stack::ALL`]'s order.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PerStack([Option<f64>; 8]);

impl PerStack {
    fn index(stack: Stack) -> usize {
        Stack::ALL
            .iter()
            .position(|&s| s == stack)
            .expect("every stack is in Stack::ALL")
    }

    /// The stack's own value, if it has one.
    pub fn get(&self, stack: Stack) -> Option<f64> {
        self.0[PerStack::index(stack)]
    }

    /// Gives `stack` its own value.
    pub fn set(&mut self, stack: Stack, value: f64) {
        self.0[PerStack::index(stack)] = Some(value);
    }

    /// The stacks with their own values, in [`Stack::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (Stack, f64)> + '_ {
        Stack::ALL
            .iter()
            .zip(self.0)
            .filter_map(|(&s, v)| v.map(|v| (s, v)))
    }

    fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

impl Serialize for PerStack {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        for (stack, v) in self.iter() {
            map.serialize_entry(stack.name(), &v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for PerStack {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, f64>::deserialize(d)?;
        let mut out = PerStack::default();
        for (name, v) in map {
            let stack: Stack = name.parse().map_err(serde::de::Error::custom)?;
            out.set(stack, v);
        }
        Ok(out)
    }
}

/// The calibrated parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Fraction of benchmarked kernel throughput kept in a step, pooled over stacks.
    pub sustained: f64,
    /// Stacks' own values.
    #[serde(default, skip_serializing_if = "PerStack::is_empty")]
    pub stacks: PerStack,
    /// The host's time for one local expert's launches in an MoE layer's micro-batch, forward
    /// and backward, seconds ([`crate::cost::step::graphs`]); files written before it read
    /// the published fit.
    #[serde(default = "published_host")]
    pub host_expert: f64,
}

/// `host_expert`'s bounds, seconds.
pub const HOST_EXPERT: (f64, f64) = (0.0, 2e-3);

/// `host_expert` fitted to the Megatron-Bridge MoE rows (`tests/time_validation.rs`,
/// minimising their mean absolute error in MFU points on a grid of 25 µs; each model's error in
/// `results/time-validation.md` is with that model held out of the fit).
pub const PUBLISHED_HOST_EXPERT: f64 = 0.65e-3;

fn published_host() -> f64 {
    PUBLISHED_HOST_EXPERT
}

/// `sustained`'s bounds.
pub const SUSTAINED: (f64, f64) = (0.5, 1.0);

/// The pooled fit to the published runs (`trainplan calibrate data/published/runs.json`).
pub const PUBLISHED_SUSTAINED: f64 = 0.8162;
/// Each stack's own fit to its published BF16 runs (the same command): NeMo's GPT-3 175B and
/// Llama 3.1 8B and 70B at CP 2 for `megatron-te`, Llama 3 405B's Table 4 for `llama3`, torchtitan's four A100 families,
/// MaxText's Llama 2 70B, MT-NLG 530B and BLOOM 176B for `megatron-deepspeed`.
pub const PUBLISHED_STACKS: [(Stack, f64); 5] = [
    (Stack::MegatronTe, 0.8093),
    (Stack::Llama3, 0.7684),
    (Stack::Torchtitan, 0.8302),
    (Stack::Maxtext, 0.8808),
    (Stack::MegatronDeepspeed, 0.6652),
];

impl Default for Calibration {
    fn default() -> Self {
        let mut stacks = PerStack::default();
        for (stack, v) in PUBLISHED_STACKS {
            stacks.set(stack, v);
        }
        Calibration {
            sustained: PUBLISHED_SUSTAINED,
            stacks,
            host_expert: PUBLISHED_HOST_EXPERT,
        }
    }
}

impl Calibration {
    /// A pooled value alone.
    pub fn pooled(sustained: f64) -> Self {
        Calibration {
            sustained,
            stacks: PerStack::default(),
            host_expert: PUBLISHED_HOST_EXPERT,
        }
    }

    /// `sustained` for `stack`: its own value, else the pooled one.
    pub fn sustained_for(&self, stack: Stack) -> f64 {
        self.stacks.get(stack).unwrap_or(self.sustained)
    }

    /// Checks each parameter is within its bounds; the error names it.
    pub fn validate(&self) -> Result<()> {
        let (lo, hi) = SUSTAINED;
        let check = |name: String, v: f64| {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(Error::invalid(
                    name,
                    crate::format::exact(v),
                    format!("a fraction from {lo} to {hi}"),
                ))
            }
        };
        check("calibration.sustained".into(), self.sustained)?;
        for (stack, v) in self.stacks.iter() {
            check(format!("calibration.stacks.{stack}"), v)?;
        }
        let (lo, hi) = HOST_EXPERT;
        if !(self.host_expert.is_finite() && (lo..=hi).contains(&self.host_expert)) {
            return Err(Error::invalid(
                "calibration.host_expert",
                crate::format::exact(self.host_expert),
                format!("seconds from {lo} to {hi}"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_within_its_bounds_and_bad_values_are_named() {
        Calibration::default().validate().unwrap();
        let e = Calibration::pooled(1.2).validate().unwrap_err().to_string();
        assert!(e.contains("calibration.sustained = 1.2"), "{e}");
        let mut c = Calibration::default();
        c.stacks.set(Stack::Eager, 0.2);
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("calibration.stacks.eager = 0.2"), "{e}");
        // A stack the published runs did not use takes the pooled value.
        let d = Calibration::default();
        assert_eq!(d.sustained_for(Stack::MegatronDeepspeed), 0.6652);
        assert_eq!(
            d.sustained_for(Stack::TorchtitanCompile),
            PUBLISHED_SUSTAINED
        );
        // Per-stack values read back from their names.
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains("\"megatron-deepspeed\":0.6652"), "{json}");
        assert_eq!(serde_json::from_str::<Calibration>(&json).unwrap(), d);
    }
}
