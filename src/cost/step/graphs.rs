//! CUDA graphs and the host-side floor of a mixture of experts' step.
//!
//! A step is launched by the host: Python, PyTorch's dispatcher and the CUDA driver spend a
//! few microseconds on each operation before its kernel can start. While the GPU's kernels
//! last longer, the host runs ahead and its time is hidden. A dropless mixture of experts
//! stops it at every MoE layer: the routed experts' sizes (tokens per expert) are copied to
//! the host before the dispatch and the grouped GEMMs can be launched, a device-to-host
//! synchronisation, after which the host must launch the layer's routed part again from an
//! empty queue. Megatron-LM's DeepSeek-V3 guide on GB200 ("Optimizing DeepSeek-V3 Training
//! Performance on NVIDIA GB200 NVL72", its discussions, §2) names this the largest loss of its
//! baseline ("the CPU kernel launch speed cannot keep up with the kernel execution speed on
//! GPU"), worse as the GPU gets faster and as FP8 and fine-grained experts add kernels, and
//! removes most of it with CUDA graphs (494 → 830 TFLOP/s with fusions, graphs and CPU-side
//! fixes; after partial graphs "only the routed experts part still has some CPU overhead").
//!
//! The model: each MoE layer's micro-batch, forward and backward together, ends in its
//! routed experts (the dispatch, permutation, grouped GEMMs and combine), which the host
//! launches from an empty queue after the synchronisation and which take the longer of their
//! GPU time and the host's: [`exposed`] adds `max(0, n_local · t_expert − G_routed)`, where
//! `n_local` is the experts on the rank and `t_expert` the host's time for one expert's
//! launches ([`crate::cost::chip::calibration`]'s `host_expert`). Transformer Engine's grouped
//! linear launches each expert's GEMMs and quantizations apart (a multi-stream loop of cuBLAS
//! calls, the guide's §1 item 3), so the host's time grows with the experts a rank holds.
//! Partial CUDA graphs (`--cuda-graph-scope attn moe_router moe_preprocess`, with
//! `--cuda-graph-impl transformer_engine`) cannot capture the routed experts, whose shapes are
//! dynamic, and leave the floor as it is; full-iteration graphs (`full_iteration`, which
//! Megatron-Bridge's recipes run on dropless MoEs with HybridEP from its 26.06 release,
//! Megatron-core 0.18) remove it.
//!
//! What is left out: the launches before the synchronisation (attention, router, shared
//! experts), which partial graphs do capture. A second parameter for them, fitted beside
//! `host_expert`, fitted differently with each model held out and made the held-out errors
//! worse (Mixtral 8x7B's from 6.3 to 12.2 MFU points), so the model keeps the one. Dense
//! layers do not synchronise: the host runs ahead of their GEMMs. The floor is the megatron-te
//! stack's, the only one whose MoE path the fitted rows measure (Megatron-Bridge's tables).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// What a step captures in CUDA graphs (Megatron-core's `--cuda-graph-scope`, with
/// `--cuda-graph-impl transformer_engine` for the partial scopes and `local` for a full
/// iteration). Default: nothing, Megatron-core's default. The partial scopes are read, written
/// and carried as a launcher has them; the time model's floor depends only on whether a whole
/// iteration is captured ([`exposed`]), partial scopes leaving the routed experts uncaptured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CudaGraphs(u8);

/// The partial scopes trainplan plans, by Megatron-core's names, and a full iteration.
const SCOPES: [&str; 6] = [
    "attn",
    "mlp",
    "moe_router",
    "moe_preprocess",
    "mamba",
    "full_iteration",
];

impl CudaGraphs {
    /// Nothing captured.
    pub const NONE: CudaGraphs = CudaGraphs(0);
    /// A whole iteration captured (`--cuda-graph-impl local --cuda-graph-scope full_iteration`).
    pub const FULL: CudaGraphs = CudaGraphs(1 << 5);

    /// Whether nothing is captured.
    pub fn is_none(&self) -> bool {
        self.0 == 0
    }

    /// Whether a whole iteration is captured.
    pub fn is_full(&self) -> bool {
        self.0 & CudaGraphs::FULL.0 != 0
    }

    /// The scopes' names, Megatron-core's, in its order (empty for none).
    pub fn scopes(self) -> Vec<&'static str> {
        if self.is_full() {
            return vec!["full_iteration"];
        }
        SCOPES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, &s)| s)
            .collect()
    }
}

impl fmt::Display for CudaGraphs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_none() {
            return f.write_str("none");
        }
        f.write_str(&self.scopes().join(","))
    }
}

impl FromStr for CudaGraphs {
    type Err = Error;

    /// [`CudaGraphs::parse_as`] for `--cuda-graphs`.
    fn from_str(text: &str) -> Result<CudaGraphs> {
        CudaGraphs::parse_as("--cuda-graphs", text)
    }
}

impl CudaGraphs {
    /// `none`, `full_iteration`, or scopes separated by commas or spaces:
    /// `attn,moe_router,moe_preprocess` (Megatron-core's old `full`, each layer whole, is not
    /// one of them); an error names `option`, the flag or the launcher's option it came from.
    pub fn parse_as(option: &str, text: &str) -> Result<CudaGraphs> {
        let expected = "none, full_iteration, or scopes among attn, mlp, moe_router, \
                        moe_preprocess and mamba separated by commas";
        let words: Vec<&str> = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        if words.is_empty() {
            return Err(Error::invalid(option, text, expected));
        }
        let mut bits = 0u8;
        for w in &words {
            let w = w.to_ascii_lowercase().replace('-', "_");
            match w.as_str() {
                "none" if words.len() == 1 => return Ok(CudaGraphs::NONE),
                "full_iteration" if words.len() == 1 => return Ok(CudaGraphs::FULL),
                "moe" => {
                    return Err(Error::invalid(
                        option,
                        text,
                        "no `moe` scope: Megatron-core captures the routed experts only for \
                         token-dropping experts, and trainplan plans dropless ones (full_iteration \
                         captures them without the host synchronisation)",
                    ))
                }
                s => match SCOPES[..5].iter().position(|&x| x == s) {
                    Some(i) => bits |= 1 << i,
                    None => return Err(Error::invalid(option, text, expected)),
                },
            }
        }
        Ok(CudaGraphs(bits))
    }
}

impl Serialize for CudaGraphs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// `false` reads as none (a runs file's flag), `true` as nothing it can say which scopes.
impl<'de> Deserialize<'de> for CudaGraphs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Flag(bool),
            Scopes(String),
        }
        match Given::deserialize(d)? {
            Given::Flag(false) => Ok(CudaGraphs::NONE),
            Given::Flag(true) => Err(serde::de::Error::custom(
                "cuda_graphs = true: name the scopes (\"full_iteration\", or \"attn,moe_router,moe_preprocess\")",
            )),
            Given::Scopes(text) => text.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// The host-bound time one MoE layer's micro-batch, forward and backward, adds past its
/// GPU time, seconds: `max(0, n_local · t_expert − G_routed)` for `local_experts` experts on
/// the rank whose launches take `expert` seconds each, after the synchronisation, against
/// `routed`, the GPU's time for the routed part (its compute and exposed all-to-alls); none
/// under full-iteration graphs.
pub fn exposed(expert: f64, graphs: CudaGraphs, local_experts: f64, routed: f64) -> f64 {
    if graphs.is_full() {
        return 0.0;
    }
    (expert * local_experts - routed).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_read_and_write_as_megatron_names_them() {
        let g: CudaGraphs = "moe_preprocess attn,moe_router".parse().unwrap();
        assert!(!g.is_full() && !g.is_none());
        assert_eq!(g.to_string(), "attn,moe_router,moe_preprocess");
        assert_eq!(g.scopes(), ["attn", "moe_router", "moe_preprocess"]);
        assert_eq!("none".parse::<CudaGraphs>().unwrap(), CudaGraphs::NONE);
        let full: CudaGraphs = "full_iteration".parse().unwrap();
        assert!(full.is_full());
        assert_eq!(full.to_string(), "full_iteration");
        assert!("full".parse::<CudaGraphs>().is_err());
        let e = "moe".parse::<CudaGraphs>().unwrap_err().to_string();
        assert!(e.contains("token-dropping"), "{e}");
        assert!("attn,none".parse::<CudaGraphs>().is_err());
        assert!("".parse::<CudaGraphs>().is_err());
        // A runs file's flag: false is none, true says too little.
        let none: CudaGraphs = serde_json::from_str("false").unwrap();
        assert_eq!(none, CudaGraphs::NONE);
        assert!(serde_json::from_str::<CudaGraphs>("true").is_err());
        let back: CudaGraphs = serde_json::from_str("\"attn,moe_router\"").unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), "\"attn,moe_router\"");
    }

    #[test]
    fn the_floor_binds_only_where_the_host_is_slower_than_the_gpu() {
        // 16 experts at 0.25 ms each: 4 ms of launches against 3 ms of GPU, 1 ms exposed;
        // partial graphs leave it, a slower GPU hides it, a full iteration's graphs remove it.
        let partial: CudaGraphs = "attn,moe_router,moe_preprocess".parse().unwrap();
        for graphs in [CudaGraphs::NONE, partial] {
            let e = exposed(0.25e-3, graphs, 16.0, 3e-3);
            assert!((e - 1e-3).abs() < 1e-12, "{e}");
        }
        assert_eq!(exposed(0.25e-3, CudaGraphs::NONE, 16.0, 5e-3), 0.0);
        assert_eq!(exposed(0.25e-3, CudaGraphs::FULL, 16.0, 0.0), 0.0);
    }
}
