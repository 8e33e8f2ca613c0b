//! A search's family of Llama-like shapes (ranges of layers, hidden sizes, FFN ratios and
//! experts), or its one ad-hoc shape.
#![allow(rustdoc::broken_intra_doc_links)]

use clap::Args;

use super::design::AttentionArgs;
use super::parse::parse_whole;
use crate::error::{Error, Result};
use crate::model::family::{ExpertRanges, Family, Span};
use crate::model::{Shape, LLAMA3_HEAD_DIM, LLAMA3_KV_HEADS};

/// A family of Llama-like shapes to search beside the presets, or one ad-hoc shape.
#[derive(Debug, Args)]
#[command(
    next_help_heading = "Shape family (--layers, --hidden and --ffn-ratio as ranges together) or one ad-hoc shape (--layers, --hidden and --ffn as numbers)"
)]
pub struct FamilyArgs {
    /// Layer counts, start..end:step (for example 40..160:4), or one count with --ffn.
    #[arg(long, value_name = "RANGE")]
    pub layers: Option<String>,
    /// Hidden sizes, multiples of the head dimension (for example 6144..20480:512), or one
    /// size with --ffn.
    #[arg(long, value_name = "RANGE")]
    pub hidden: Option<String>,
    /// FFN width over hidden size (for example 3.0..4.0:0.25).
    #[arg(long, value_name = "RANGE", conflicts_with = "ffn")]
    pub ffn_ratio: Option<String>,
    /// The FFN width of one ad-hoc shape (with --layers and --hidden as single numbers).
    #[arg(long, value_name = "F", value_parser = parse_whole)]
    pub ffn: Option<u64>,
    /// Attention heads of the ad-hoc shape [default: hidden / head dimension].
    #[arg(long, value_name = "N", value_parser = parse_whole, requires = "ffn")]
    pub heads: Option<u64>,
    /// Head dimension [default: 128, Llama 3's].
    #[arg(long, value_name = "D", value_parser = parse_whole)]
    pub head_dim: Option<u64>,
    /// KV heads [default: 8, Llama 3's; an ad-hoc shape whose heads 8 does not divide gets one
    /// per head].
    #[arg(long, value_name = "N", value_parser = parse_whole)]
    pub kv_heads: Option<u64>,
    /// Vocabulary (Llama 3: 128,256).
    #[arg(long, value_name = "V", default_value = "128256", value_parser = parse_whole)]
    pub vocab: u64,
    /// The FFN width is rounded to a multiple of this.
    #[arg(long, value_name = "N", default_value = "256", value_parser = parse_whole)]
    pub ffn_multiple: u64,
    /// The ad-hoc shape's output head shares the input embedding.
    #[arg(long, requires = "ffn")]
    pub tied_embeddings: bool,
    /// Each family shape also as mixtures of experts of these expansions E, the experts'
    /// capacity over one dense MLP's (1 is the dense shape), for example 1..16 (Krajewski et
    /// al. 2024's terms) [default: dense only].
    #[arg(long, value_name = "RANGE", requires = "ffn_ratio")]
    pub experts: Option<String>,
    /// Dense-width experts a token goes to, k ≤ E [default: 1].
    #[arg(long, value_name = "RANGE", requires = "experts")]
    pub top_k: Option<String>,
    /// Granularities G: each expert cut into G of width f/G, E·G routed and k·G a token
    /// [default: 1].
    #[arg(long, value_name = "RANGE", requires = "experts")]
    pub granularity: Option<String>,
}

impl FamilyArgs {
    /// The ad-hoc shape, if --ffn gives one.
    pub fn adhoc(&self) -> Result<Option<Shape>> {
        let Some(ffn) = self.ffn else {
            return Ok(None);
        };
        let single = |flag: &str, text: &Option<String>| -> Result<u64> {
            let text = text.as_deref().ok_or_else(|| {
                Error::invalid(flag, "missing", "--layers and --hidden with --ffn")
            })?;
            parse_whole(text).map_err(|why| Error::invalid(flag, text, why))
        };
        let attention = AttentionArgs {
            heads: self.heads,
            kv_heads: self.kv_heads,
            head_dim: self.head_dim,
            vocab: Some(self.vocab),
            tied_embeddings: self.tied_embeddings,
            no_rope_scaling: false,
            rope_theta: None,
            norm_eps: None,
            sliding_window: None,
        };
        attention
            .shape(
                single("--layers", &self.layers)?,
                single("--hidden", &self.hidden)?,
                ffn,
            )
            .map(Some)
    }

    /// The family, if its ranges are given.
    pub fn family(&self) -> Result<Option<Family>> {
        if self.ffn.is_some() {
            return Ok(None);
        }
        let kv_heads = self.kv_heads.unwrap_or(u64::from(LLAMA3_KV_HEADS));
        match (&self.layers, &self.hidden, &self.ffn_ratio) {
            (None, None, None) => Ok(None),
            (Some(l), Some(h), Some(r)) => Ok(Some(Family {
                layers: Span::parse("--layers", l)?,
                hidden: Span::parse("--hidden", h)?,
                ffn_ratio: Span::parse("--ffn-ratio", r)?,
                head_dim: self.head_dim.unwrap_or(LLAMA3_HEAD_DIM),
                kv_heads: u32::try_from(kv_heads)
                    .map_err(|_| Error::invalid("--kv-heads", kv_heads, "at most 4294967295"))?,
                vocab: self.vocab,
                ffn_multiple: self.ffn_multiple,
                experts: ExpertRanges::parse(
                    "--",
                    self.experts.as_deref(),
                    self.top_k.as_deref(),
                    self.granularity.as_deref(),
                )?,
            })),
            _ => Err(Error::invalid(
                "shape family",
                "a partial range",
                "--layers, --hidden and --ffn-ratio together (or --ffn for one shape)",
            )),
        }
    }
}
