//! The laws: what a model reaches, not what a step costs. A law grades a design by its
//! parameters and tokens alone — the loss it predicts, the tokens a target needs, the
//! compute-optimal split of a budget — so nothing in `cost` reads one, and every part that
//! grades loss reaches it through the brief (`Brief::loss`, `Brief::tokens_for_loss`).
//!
//! - [`loss`]: the loss laws, the Chinchilla form `L = E + A/N^α + B/D^β` with what repeated
//!   data (Muennighoff et al. 2023) and experts (Ludziejewski et al. 2025) are worth, the
//!   presets `--loss-law` names, and the compute-optimal model.
//! - [`batch`]: the batch-size laws (DeepSeek LLM's and StepFun's Step Law) that set a plan's
//!   global batch and learning rate when the brief names one (`--batch-law`).
//! - [`lifetime`]: the model of least training plus inference FLOPs at a loss (Sardana et al.
//!   2024), for a brief that says how many tokens the model will serve.
//!
//! Uses the ground floor and `model`; used by `brief` and the parts above it.

pub mod batch;
pub mod critical;
pub mod lifetime;
pub mod loss;

pub use batch::{BatchLaw, LawInputs};
pub use critical::CriticalBatch;
pub use lifetime::{lifetime_optimal, Lifetime};
pub use loss::{
    ComputeOptimal, Effective, ExpertScaling, LawSize, LossLaw, LossLawPreset, Repetition,
};
