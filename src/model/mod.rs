//! What is trained, and how it is split: model shapes (dimensions, parameter counts, the Llama
//! 3 presets), families of shapes to sweep, and the parallel layouts a shape admits on a
//! cluster.
//!
//! Uses only the ground floor (`error`, `format`, `units`); every other part may use it.

mod architecture;
mod experts;
pub mod family;
pub mod hybrid;
pub mod layout;
mod presets;
mod shape;

pub use architecture::*;
pub use experts::*;
pub use hybrid::Hybrid;
pub use presets::*;
pub use shape::*;

/// Shapes the unit tests of other parts share.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Architecture, Attention, Biases, Latent, Shape, ShapeSpec};

    /// DeepSeek-V3's attention (h 7,168, 128 heads, r_q 1,536, r_kv 512, d_nope 128, d_rope
    /// 64, d_v 128; its `config.json`) on `layers` dense layers of its dense FFN width 18,432,
    /// vocabulary 129,280.
    pub(crate) fn latent(layers: u32) -> Shape {
        ShapeSpec {
            name: "latent".into(),
            layers,
            hidden: 7_168,
            ffn: 18_432,
            heads: 128,
            kv_heads: 128,
            vocab: 129_280,
            head_dim: Some(192),
            tied_embeddings: false,
            biases: Biases::default(),
            architecture: Architecture::default(),
            experts: None,
            attention: Attention {
                latent: Some(Latent {
                    q_rank: Some(1_536),
                    kv_rank: 512,
                    nope_dim: 128,
                    rope_dim: 64,
                    v_dim: 128,
                }),
                qk_norm: false,
                sinks: false,
            },
            mtp: 0,
            hybrid: None,
            style: Default::default(),
        }
        .build()
        .unwrap()
    }
}
