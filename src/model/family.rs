//! Families of Llama-like shapes generated from ranges, so a search can look beyond the three
//! published shapes (the brief's compute-optimal model, about 140 B parameters, is not one).
//!
//! A family is every combination of a layer count, a hidden size and an FFN ratio, each from an
//! inclusive range `start..end:step`. The head dimension is fixed (Llama 3: 128), so the heads are
//! `h / d` and `h` must be a multiple of `d`; the KV heads are fixed (Llama 3: 8) and must divide
//! the heads; the FFN width is `ratio × h` rounded to the nearest multiple of `ffn_multiple`, as
//! Llama's `multiple_of` rule rounds it (Llama 3: 14,336 = 3.5 × 4,096; 53,248 = 3.25 × 16,384).
//! Combinations that round to the same shape are kept once.
//!
//! A family may also range over mixtures of experts ([`ExpertRanges`]), in the terms of
//! Krajewski et al., "Scaling Laws for Fine-Grained Mixture of Experts" (2024): an expansion
//! `E` (the experts' capacity over one dense MLP's), `k` of those activated, and a granularity
//! `G` that cuts each into `G` narrower experts: `E·G` routed experts of width `f/G` on every
//! layer, `k·G` of them a token. `E = 1` is the dense shape itself (and `k` and `G` are then
//! left out), so one family can hold dense and MoE shapes alike.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::general;
use crate::hash::FastMap;
use crate::model::{
    Architecture, Attention, Biases, Experts, Shape, ShapeSpec, LLAMA3_HEAD_DIM, LLAMA3_KV_HEADS,
    LLAMA3_VOCAB,
};

/// An inclusive range `start..end:step` of numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// First value.
    pub start: f64,
    /// Last value (inclusive).
    pub end: f64,
    /// Step, > 0.
    pub step: f64,
}

impl Span {
    /// Parses `start..end:step`, `start..end` (step 1) or a single value, for the flag `flag`.
    pub fn parse(flag: &str, text: &str) -> Result<Self> {
        let bad = || Error::invalid(flag, text, "a range start..end:step, for example 40..160:4");
        let number = |t: &str| t.trim().parse::<f64>().ok().filter(|x| x.is_finite());
        let (range, step) = match text.split_once(':') {
            Some((r, s)) => (r, number(s).ok_or_else(bad)?),
            None => (text, 1.0),
        };
        let (start, end) = match range.split_once("..") {
            Some((a, b)) => (number(a).ok_or_else(bad)?, number(b).ok_or_else(bad)?),
            None => {
                let x = number(range).ok_or_else(bad)?;
                (x, x)
            }
        };
        if !(start > 0.0 && end >= start && step > 0.0) {
            return Err(bad());
        }
        Ok(Span { start, end, step })
    }

    /// The range as written, `start..end:step`.
    pub fn text(&self) -> String {
        format!(
            "{}..{}:{}",
            general(self.start),
            general(self.end),
            general(self.step)
        )
    }

    /// How many values the range holds (saturating), from start while not past end, with a
    /// tolerance of a millionth of a step.
    pub fn count(&self) -> u64 {
        let steps = ((self.end - self.start) / self.step + 1e-6).floor();
        if steps.is_finite() && steps < 1e18 {
            steps as u64 + 1
        } else {
            u64::MAX
        }
    }

    /// The values; call only once [`Self::count`] is known to be small.
    pub fn values(&self) -> Vec<f64> {
        (0..self.count())
            .map(|i| self.start + i as f64 * self.step)
            .collect()
    }
}

/// A family of shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Layer counts.
    pub layers: Span,
    /// Hidden sizes.
    pub hidden: Span,
    /// FFN width over hidden size.
    pub ffn_ratio: Span,
    /// Head dimension d.
    pub head_dim: u64,
    /// KV heads.
    pub kv_heads: u32,
    /// Vocabulary.
    pub vocab: u64,
    /// The FFN width is rounded to a multiple of this.
    pub ffn_multiple: u64,
    /// The mixtures of experts each shape is also tried as, if any.
    pub experts: Option<ExpertRanges>,
}

/// The ranges of a family's mixtures of experts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpertRanges {
    /// The expansion `E`, whole numbers (1: the dense shape).
    pub expansion: Span,
    /// Experts of the dense MLP's width a token goes to, `k ≤ E`, whole.
    pub top_k: Span,
    /// The granularity `G`, whole: each expert cut into `G` of width `f/G` (rounded).
    pub granularity: Span,
}

/// The most routed experts a family's mixture may have, `E·G`.
pub const MAX_EXPERTS: f64 = 4096.0;

/// A family as a brief file gives it: the three ranges as text, the rest as numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilySpec {
    /// Layer counts, `start..end:step`.
    pub layers: String,
    /// Hidden sizes, `start..end:step`.
    pub hidden: String,
    /// FFN ratios, `start..end:step`.
    pub ffn_ratio: String,
    /// Head dimension (default 128).
    #[serde(default = "default_head_dim")]
    pub head_dim: u64,
    /// KV heads (default 8).
    #[serde(default = "default_kv_heads")]
    pub kv_heads: u32,
    /// Vocabulary (default 128,256).
    #[serde(default = "default_vocab")]
    pub vocab: u64,
    /// FFN rounding multiple (default 256).
    #[serde(default = "default_ffn_multiple")]
    pub ffn_multiple: u64,
    /// Expansions `E` of a mixture of experts, `start..end:step` (none: dense shapes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<String>,
    /// Experts a token goes to, `k` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<String>,
    /// Granularities `G` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granularity: Option<String>,
}

fn default_head_dim() -> u64 {
    LLAMA3_HEAD_DIM
}
fn default_kv_heads() -> u32 {
    LLAMA3_KV_HEADS
}
fn default_vocab() -> u64 {
    LLAMA3_VOCAB
}
fn default_ffn_multiple() -> u64 {
    256
}

impl FamilySpec {
    /// The family, its ranges parsed.
    pub fn family(&self) -> Result<Family> {
        Ok(Family {
            layers: Span::parse("brief.family.layers", &self.layers)?,
            hidden: Span::parse("brief.family.hidden", &self.hidden)?,
            ffn_ratio: Span::parse("brief.family.ffn_ratio", &self.ffn_ratio)?,
            head_dim: self.head_dim,
            kv_heads: self.kv_heads,
            vocab: self.vocab,
            ffn_multiple: self.ffn_multiple,
            experts: ExpertRanges::parse(
                "brief.family.",
                self.experts.as_deref(),
                self.top_k.as_deref(),
                self.granularity.as_deref(),
            )?,
        })
    }
}

impl ExpertRanges {
    /// The ranges from their texts (`prefix` names the fields in errors: `--` for flags,
    /// `brief.family.` for a brief): `None` without expansions; `k` and `G` default to 1 and
    /// need expansions.
    pub fn parse(
        prefix: &str,
        expansion: Option<&str>,
        top_k: Option<&str>,
        granularity: Option<&str>,
    ) -> Result<Option<ExpertRanges>> {
        let dash = prefix == "--";
        let name = |f: &str| {
            if dash {
                format!("--{}", f.replace('_', "-"))
            } else {
                format!("{prefix}{f}")
            }
        };
        let Some(expansion) = expansion else {
            if let Some((f, v)) = [("top_k", top_k), ("granularity", granularity)]
                .into_iter()
                .find_map(|(f, v)| v.map(|v| (f, v)))
            {
                return Err(Error::invalid(
                    name(f),
                    v,
                    format!(
                        "a range with {} (the expansions it applies to)",
                        name("experts")
                    ),
                ));
            }
            return Ok(None);
        };
        let span = |f: &str, text: Option<&str>| Span::parse(&name(f), text.unwrap_or("1"));
        let ranges = ExpertRanges {
            expansion: span("experts", Some(expansion))?,
            top_k: span("top_k", top_k)?,
            granularity: span("granularity", granularity)?,
        };
        for (f, s) in [
            ("experts", ranges.expansion),
            ("top_k", ranges.top_k),
            ("granularity", ranges.granularity),
        ] {
            if [s.start, s.end, s.step].iter().any(|x| x.fract() != 0.0) || s.end > MAX_EXPERTS {
                return Err(Error::invalid(
                    name(f),
                    s.text(),
                    format!("whole numbers up to {MAX_EXPERTS} in the range and its step"),
                ));
            }
        }
        Ok(Some(ranges))
    }

    /// Combinations the ranges hold, before any is left out.
    fn count(&self) -> u64 {
        self.expansion
            .count()
            .saturating_mul(self.top_k.count())
            .saturating_mul(self.granularity.count())
    }

    /// The mixtures of a dense MLP of width `ffn` the ranges make, in order of `E`, `k`, `G`:
    /// `None` for the dense shape (`E = 1`, once), else `E·G` experts of width `round(f/G)`,
    /// `k·G` a token, on every layer; `k > E`, a width below 1 or more than [`MAX_EXPERTS`]
    /// experts left out.
    fn mixtures(&self, ffn: u64) -> Vec<Option<Experts>> {
        let mut out = Vec::new();
        for e in self.expansion.values() {
            if e == 1.0 {
                out.push(None);
                continue;
            }
            for k in self.top_k.values() {
                for g in self.granularity.values() {
                    let width = (ffn as f64 / g).round();
                    if k > e || width < 1.0 || e * g > MAX_EXPERTS {
                        continue;
                    }
                    out.push(Some(Experts::plain(
                        (e * g) as u32,
                        (k * g) as u32,
                        width as u64,
                    )));
                }
            }
        }
        out
    }
}

/// The most shapes a family may have, so a typo cannot start a sweep of years.
pub const MAX_SHAPES: usize = 1_000_000;
/// How many candidate shapes [`Family::shapes_with`] makes between two calls of its step.
pub const STEP_SHAPES: u64 = 4_096;
/// The most layers a family's shapes may have.
pub const MAX_LAYERS: f64 = 10_000.0;
/// The largest hidden size a family's shapes may have.
pub const MAX_HIDDEN: f64 = 1_048_576.0;
/// The largest FFN ratio a family may have.
pub const MAX_FFN_RATIO: f64 = 64.0;

impl Family {
    /// A family of Llama 3's head dimension (128), KV heads (8), vocabulary (128,256) and FFN
    /// multiple (256), over the ranges given as text.
    pub fn llama(layers: &str, hidden: &str, ffn_ratio: &str) -> Result<Family> {
        Ok(Family {
            layers: Span::parse("--layers", layers)?,
            hidden: Span::parse("--hidden", hidden)?,
            ffn_ratio: Span::parse("--ffn-ratio", ffn_ratio)?,
            head_dim: default_head_dim(),
            kv_heads: default_kv_heads(),
            vocab: default_vocab(),
            ffn_multiple: default_ffn_multiple(),
            experts: None,
        })
    }

    /// Every shape of the family, in order of layers, then hidden size, then FFN width.
    pub fn shapes(&self) -> Result<Vec<Shape>> {
        self.shapes_with(&mut |_, _| Ok(()))
    }

    /// [`Family::shapes`], telling `step` every [`STEP_SHAPES`] candidates how many of the
    /// family's candidate shapes (its ranges' product, before duplicates and mixtures that
    /// break a rule are dropped) are done and how many there are; an error from `step` stops
    /// the list there (a host's Ctrl-C). The list is made in time linear in its candidates: a
    /// (layers, hidden) pair's duplicates (FFN ratios that round to one width, mixtures that
    /// name the same experts) are found by a hash of what makes them differ, before the shape
    /// is built.
    pub fn shapes_with(&self, step: &mut dyn FnMut(u64, u64) -> Result<()>) -> Result<Vec<Shape>> {
        // Counted before any list is made, so a typo cannot exhaust memory.
        let spans = [
            ("--layers", &self.layers),
            ("--hidden", &self.hidden),
            ("--ffn-ratio", &self.ffn_ratio),
        ];
        for (flag, span) in spans {
            if span.count() > MAX_SHAPES as u64 {
                return Err(Error::invalid(
                    flag,
                    span.text(),
                    format!("a range of at most {MAX_SHAPES} values (widen the step)"),
                ));
            }
        }
        let count = spans
            .iter()
            .fold(1u64, |n, (_, s)| n.saturating_mul(s.count()))
            .saturating_mul(self.experts.map_or(1, |x| x.count()));
        if count > MAX_SHAPES as u64 {
            return Err(Error::invalid(
                "shape family",
                format!("{count} shapes"),
                format!("at most {MAX_SHAPES} (widen the steps)"),
            ));
        }
        if self.layers.end > MAX_LAYERS
            || self.hidden.end > MAX_HIDDEN
            || self.ffn_ratio.end > MAX_FFN_RATIO
        {
            return Err(Error::invalid(
                "shape family",
                format!(
                    "up to {} layers, hidden {}, FFN ratio {}",
                    general(self.layers.end),
                    general(self.hidden.end),
                    general(self.ffn_ratio.end)
                ),
                format!(
                    "at most {MAX_LAYERS} layers, a hidden size of {MAX_HIDDEN} and an FFN ratio of {MAX_FFN_RATIO}"
                ),
            ));
        }
        let whole = |flag: &str, span: &Span| {
            let ok = [span.start, span.end, span.step]
                .iter()
                .all(|x| x.fract() == 0.0);
            if ok {
                Ok(span.values())
            } else {
                Err(Error::invalid(
                    flag,
                    span.text(),
                    "whole numbers in the range and its step",
                ))
            }
        };
        let layers = whole("--layers", &self.layers)?;
        let hidden = whole("--hidden", &self.hidden)?;
        let ratios = self.ffn_ratio.values();
        if self.head_dim == 0 || self.ffn_multiple == 0 || self.kv_heads == 0 || self.vocab == 0 {
            return Err(Error::invalid(
                "shape family",
                "0",
                "a head dimension, FFN multiple, KV heads and vocabulary ≥ 1",
            ));
        }
        // Within MAX_LAYERS and MAX_HIDDEN (checked above), layers and heads fit in 32 bits.
        let mut shapes: Vec<Shape> = Vec::new();
        step(0, count)?;
        let (mut done, mut next_step) = (0u64, STEP_SHAPES);
        // What distinguishes the shapes of one (layers, hidden) pair: the FFN width and the
        // experts.
        let mut seen: FastMap<(u64, Option<Experts>), ()> = FastMap::default();
        let mut valid_pairs = 0u64;
        for &l in &layers {
            for &h in &hidden {
                let h = h as u64;
                if h % self.head_dim != 0 {
                    continue;
                }
                let heads = h / self.head_dim;
                if heads % u64::from(self.kv_heads) != 0 {
                    continue;
                }
                valid_pairs += 1;
                seen.clear();
                for &r in &ratios {
                    let multiples = (r * h as f64 / self.ffn_multiple as f64).round().max(1.0);
                    let ffn = multiples as u64 * self.ffn_multiple;
                    let mixtures = match &self.experts {
                        None => vec![None],
                        Some(x) => x.mixtures(ffn),
                    };
                    // The candidates a rule of the mixtures dropped count as done.
                    let named = self.experts.map_or(1, |x| x.count());
                    done += named.saturating_sub(mixtures.len() as u64);
                    for experts in mixtures {
                        if done >= next_step {
                            step(done, count)?;
                            next_step = (done / STEP_SHAPES + 1) * STEP_SHAPES;
                        }
                        done += 1;
                        // Ratios that round to one width, or mixtures that name the same
                        // experts, make the same shape again, for this (layers, hidden) only.
                        if seen.insert((ffn, experts.clone()), ()).is_some() {
                            continue;
                        }
                        let shape = ShapeSpec {
                            name: String::new(),
                            layers: l as u32,
                            hidden: h,
                            ffn,
                            heads: heads as u32,
                            kv_heads: self.kv_heads,
                            vocab: self.vocab,
                            head_dim: None,
                            tied_embeddings: false,
                            biases: Biases::default(),
                            architecture: Architecture::default(),
                            experts,
                            attention: Attention::default(),
                            mtp: 0,
                            hybrid: None,
                            style: Default::default(),
                        }
                        .build_named()?;
                        shapes.push(shape);
                    }
                }
            }
        }
        if let (true, Some(x)) = (shapes.is_empty() && valid_pairs > 0, &self.experts) {
            // Hidden sizes that hold whole heads, but no mixture the ranges name.
            return Err(Error::invalid(
                "--experts, --top-k, --granularity",
                format!(
                    "{}, {}, {}",
                    x.expansion.text(),
                    x.top_k.text(),
                    x.granularity.text()
                ),
                format!(
                    "ranges that name a mixture: top-k at most the experts, experts × granularity \
                     at most {MAX_EXPERTS}, and an expert width (FFN / granularity) of at least 1"
                ),
            ));
        }
        if shapes.is_empty() {
            return Err(Error::invalid(
                "--hidden",
                self.hidden.start,
                format!(
                    "multiples of the head dimension {} whose heads the {} KV heads divide",
                    self.head_dim, self.kv_heads
                ),
            ));
        }
        step(count, count)?;
        Ok(shapes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(layers: &str, hidden: &str, ratio: &str) -> Family {
        Family::llama(layers, hidden, ratio).unwrap()
    }

    #[test]
    fn ranges_parse_with_and_without_a_step() {
        assert_eq!(Span::parse("x", "40..160:4").unwrap().values().len(), 31);
        assert_eq!(
            Span::parse("x", "3.0..4.0:0.25").unwrap().values(),
            [3.0, 3.25, 3.5, 3.75, 4.0]
        );
        assert_eq!(Span::parse("x", "80").unwrap().values(), [80.0]);
        for bad in ["", "a..b", "10..5:1", "1..5:0", "1..5:-1", "0..4", "1..NaN"] {
            assert!(Span::parse("--layers", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_family_through_llama_3_70b_contains_it_with_its_exact_parameter_count() {
        let shapes = family("80", "8192", "3.5").shapes().unwrap();
        assert_eq!(shapes.len(), 1);
        assert_eq!(shapes[0].name, "L80-h8192-f28672");
        assert_eq!(shapes[0].params(), 70_553_706_496);
        let s405 = family("126", "16384", "3.25").shapes().unwrap();
        assert_eq!(s405[0].params(), 405_853_388_800);
    }

    #[test]
    fn hidden_sizes_that_are_not_multiples_of_the_head_dimension_are_skipped() {
        // 6144..6400:64 gives 6144, 6208, 6272, 6336, 6400; multiples of 128: 6144, 6272, 6400;
        // heads 48, 49, 50: only 48 is divided by the 8 KV heads.
        let shapes = family("40", "6144..6400:64", "3.5").shapes().unwrap();
        let hidden: Vec<u64> = shapes.iter().map(|s| s.hidden).collect();
        assert_eq!(hidden, [6144]);
    }

    #[test]
    fn the_issue_s_example_family_has_thousands_of_shapes_and_no_repeats() {
        let shapes = family("40..160:4", "6144..20480:512", "3.0..4.0:0.25")
            .shapes()
            .unwrap();
        assert!(shapes.len() > 1000, "{}", shapes.len());
        let mut names: Vec<&str> = shapes.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), shapes.len());
    }

    #[test]
    fn too_large_a_family_is_refused_before_any_list_is_made() {
        assert!(family("1..2000", "128..1000000:128", "1..4:0.001")
            .shapes()
            .is_err());
        let e = family("1..1e12", "8192", "3.5")
            .shapes()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid --layers"), "{e}");
        let e = family("80", "8192", "1..2:1e-300")
            .shapes()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid --ffn-ratio"), "{e}");
        let e = family("80", "8192", "1e300")
            .shapes()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid shape family"), "{e}");
        let e = family("80..90:0.5", "8192", "3.5")
            .shapes()
            .unwrap_err()
            .to_string();
        assert!(e.contains("80..90:0.5"), "{e}");
    }

    fn moe_family(ratio: &str, experts: &str, top_k: &str, granularity: &str) -> Family {
        Family {
            experts: ExpertRanges::parse("--", Some(experts), Some(top_k), Some(granularity))
                .unwrap(),
            ..family("32", "4096", ratio)
        }
    }

    #[test]
    fn a_family_lists_each_distinct_shape_once_however_its_ranges_repeat_it() {
        // Ratios 3.5, 3.51 and 3.52 of 4,096 round to one FFN width, 14,336 (56 multiples of
        // 256); expansions 1 and 2, top-k 1 and 2, granularity 1 and 2 name the dense shape
        // and four mixtures: E 2 k 1 and E 2 k 2 of width 14,336, E 4 k 2 and E 4 k 4 of 7,168.
        let shapes = moe_family("3.5..3.52:0.01", "1..2", "1..2", "1..2")
            .shapes()
            .unwrap();
        let experts: Vec<Option<(u32, u32, u64)>> = shapes
            .iter()
            .map(|s| s.experts.as_ref().map(|e| (e.routed, e.per_token, e.ffn)))
            .collect();
        assert_eq!(
            experts,
            [
                None,
                Some((2, 1, 14336)),
                Some((4, 2, 7168)),
                Some((2, 2, 14336)),
                Some((4, 4, 7168)),
            ]
        );
        assert!(shapes.iter().all(|s| s.ffn == 14336));
    }

    #[test]
    fn a_quarter_million_mixtures_are_listed_in_linear_time_and_an_interrupt_stops_the_list() {
        // 64 expansions × 64 top-k × 64 granularities: 262,144 candidates, each compared with
        // a hash of what makes it differ rather than with every shape before it.
        let big = moe_family("3.5", "1..64", "1..64", "1..64");
        let mut calls = Vec::new();
        let shapes = big
            .shapes_with(&mut |done, total| {
                calls.push((done, total));
                Ok(())
            })
            .unwrap();
        assert!(shapes.len() > 10_000, "{}", shapes.len());
        assert_eq!(calls.first(), Some(&(0, 262_144)));
        assert_eq!(calls.last(), Some(&(262_144, 262_144)));
        // Every STEP_SHAPES candidates or so, in order.
        assert!(
            calls.len() as u64 >= 262_144 / STEP_SHAPES / 2,
            "{}",
            calls.len()
        );
        assert!(calls.windows(2).all(|w| w[0].0 < w[1].0));
        let stopped = big
            .shapes_with(&mut |done, _| {
                if done >= STEP_SHAPES {
                    Err(Error::invalid("shape family", "stopped", "to run on"))
                } else {
                    Ok(())
                }
            })
            .unwrap_err();
        assert!(stopped.to_string().contains("stopped"), "{stopped}");
    }

    #[test]
    fn a_family_whose_ranges_name_no_mixture_says_so_and_not_that_the_hidden_size_is_wrong() {
        let e = moe_family("3.5", "4", "8", "1")
            .shapes()
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid --experts, --top-k, --granularity = 4..4:1, 8..8:1, 1..1:1"),
            "{e}"
        );
        let e = family("32", "4000", "3.5")
            .shapes()
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("invalid --hidden"), "{e}");
    }
}
