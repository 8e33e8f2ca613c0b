//! trainplan: plan a large language-model training run before anyone spends a GPU-hour.
//!
//! Given a brief (a cluster, a deadline, a loss target and a scaling law), trainplan grades a
//! design — a model shape, a number of training tokens and a parallel layout — on three checks
//! (per-GPU memory, days, predicted loss; a fourth, cost, when the brief sets a limit), and
//! searches every design to rank the passing ones
//! and find their Pareto front on loss and days.
//!
//! The model is the plate model of SPEC.md: memory by ZeRO stage with full recomputation
//! ([`cost::memory`]), days by 6ND at an assumed MFU ([`cost::run::plate`]), and the
//! Chinchilla loss law ([`laws`]). Each formula lives in one small function with its source in
//! the doc comment.
//!
//! The parts, from the ground up (each uses only the parts before it; ARCHITECTURE.md):
//! `error`, `format`, `hash`, `units` → [`model`] → [`laws`] → [`cost`] → [`brief`] →
//! [`plan`] → [`search`] → [`report`] → [`input`] → [`serve`] → [`cli`] (clap's flags and the
//! commands, which the binary and the Python package both run).
//!
//! ```
//! use trainplan::{evaluate, model, Brief, Design, Layout, ZeroStage};
//!
//! // The seed's starting plan: Llama 3 70B on 15 T tokens with no parallelism.
//! let brief = Brief::default();
//! let shape = model::preset("70b")?;
//! let layout = Layout::new(&brief, &shape, 1, 1, ZeroStage::new(0)?)?;
//! let plan = evaluate(&brief, &Design::plate(&shape, 15_000_000_000_000, layout))?;
//! assert!((plan.memory_gb.total - 1139.6).abs() < 0.1); // GB per GPU, against a 72 GB cap
//! assert!((plan.days - 90.7).abs() < 0.1); // days, against a 30-day limit
//! assert!(!plan.pass && plan.reasons.len() == 2);
//! # Ok::<(), trainplan::Error>(())
//! ```

// The ground floor, used by every part.
pub mod error;
pub mod format;
pub mod hash;
pub mod numeric;
pub mod units;

// The parts, in the order they may use each other.
pub mod brief;
pub mod cost;
pub mod input;
pub mod laws;
pub mod model;
pub mod plan;
pub mod report;
pub mod search;
pub mod serve;

// The command line, on top of every part.
pub mod cli;

pub use brief::Brief;
pub use error::{Error, Result};
pub use model::layout::{Layout, ZeroStage};
pub use model::Shape;
pub use plan::{evaluate, Design, Plan};
