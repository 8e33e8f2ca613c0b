//! What is trained, and how it is split: model shapes (dimensions, parameter counts, the Llama
//! 3 presets), families of shapes to sweep, and the parallel layouts a shape admits on a
//! cluster.
//!
//! Uses only the ground floor (`error`, `format`, `units`); every other part may use it.

mod architecture;
mod experts;
pub mod family;
pub mod layout;
mod presets;
mod shape;

pub use architecture::*;
pub use experts::*;
pub use presets::*;
pub use shape::*;
