//! **The search part**: every design of a brief — shapes × token grid × layouts — graded, ranked
//! and reduced to a Pareto front; shards and their merge; progress through a callback. Uses
//! `plan`, `brief`, `cost`, `laws`, `model` and the ground floor; never reads a file or draws.
//!
//! The plate model's checks separate — memory depends on (shape, layout), days and loss on
//! (shape, tokens) — so the hot loop works through the grid one token count at a time, computes
//! loss and days once for it, and pairs it with each layout of the shape whose memory (computed
//! once per layout) fits. Every candidate is graded by the same check functions as
//! [`crate::plan::evaluate`]; only the printed plans are graded again in full. The property
//! tests in `tests/properties.rs` compare the result with grading every candidate one by one.
//!
//! This is the only parallel code; the caller chooses the rayon pool it runs on. Each worker
//! keeps its own top-K list and Pareto front; they are merged at the end. Both are canonical
//! under a total order, so the result is the same, byte for byte, at any thread count.
//!
//! The rooms, in the order a search passes through them:
//!
//! - `options.rs` and `space.rs`: what is asked ([`SearchOptions`], [`TokenGrid`]) and the space
//!   of configurations ([`MemorySpace`], [`ParallelSpace`], [`Config`]).
//! - `weigh/`: the detailed space weighed memory first, over-cap bounds, shared work, tallies.
//! - `windows.rs`: each fitting configuration's token window, and the exact top list.
//! - `grid.rs`: the grid walk and its hot loop ([`search`]).
//! - `distinct.rs`, `rank.rs`, `pareto.rs`: distinct choices, the orders and the top-K, the front.
//! - `report.rs`: what a search answers ([`SearchReport`]).
//! - `all.rs` and `ordered.rs`: every passing plan (`--all`) in ranking order, made one at a
//!   time from each configuration's interval of passing grid counts ([`search_all`],
//!   [`AllPlans`]), so memory does not grow with them.
//! - `shard/` (`--shard I/N` partials and `merge`; what `merge` checks in a partial),
//!   `sensitivity.rs` (`search
//!   --sensitivity`), `progress.rs` (the [`progress::Progress`] callback).

mod all;
mod distinct;
mod grid;
mod options;
mod ordered;
pub mod pareto;
pub mod progress;
pub mod rank;
mod report;
pub mod sensitivity;
pub mod shard;
mod space;
mod weigh;
mod windows;

pub use all::{search_all, AllPlans};
pub use grid::{search, search_listing};
pub use options::{shardable, SearchOptions, TokenGrid};
pub use report::{FrontRun, FrontRuns, Ranked, SearchReport, MAX_FRONT_RUNS};
pub use space::{
    configurations, configurations_counted, searchable_precision, BatchAim, Config, MemorySpace,
    ParallelSpace, DEFAULT_MICRO_BATCHES, DEFAULT_RECOMPUTE,
};
