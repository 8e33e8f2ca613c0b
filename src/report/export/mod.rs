//! Exporters: one small trait that turns results into text, one module per format.
//!
//! Reports (text, JSON), tables of plans (CSV, Markdown) and launcher configurations for one
//! plan (Megatron-LM, DeepSpeed, torchtitan) are all [`Exporter`]s; a format that has no
//! sense for a kind of result says so as an error.

mod columns;
mod csv;
mod deepspeed;
mod exporter;
mod formats;
mod json;
pub mod launch;
mod markdown;
pub mod megatron;
mod text;
mod torchtitan;

pub use csv::Csv;
pub use deepspeed::DeepSpeed;
pub use exporter::{Exporter, Launcher};
pub use formats::Format;
pub use json::{Json, SCHEMA_VERSION};
pub use launch::Launch;
pub use markdown::Markdown;
pub use megatron::Megatron;
pub use text::{brief_lines, Text};
pub use torchtitan::Torchtitan;
