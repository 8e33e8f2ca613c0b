//! What people read: the exporters behind one trait ([`export`]: text, JSON, CSV, Markdown and
//! the launcher configurations), the SVG plots ([`plot`]), and atomic, pipe-aware writing
//! ([`output`]). Uses `search`, `plan`, `brief`, `cost`, `model` and the ground floor.

pub mod export;
pub mod output;
pub mod plot;
pub mod validation;
