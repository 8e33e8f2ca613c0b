//! The formats there are, and the exporter of each.

use super::columns::Table;
use super::csv::Csv;
use super::deepspeed::DeepSpeed;
use super::exporter::{Exporter, Launcher};
use super::json::Json;
use super::markdown::Markdown;
use super::megatron::Megatron;
use super::text::Text;
use super::torchtitan::{Torchtitan, Torchtitan03};

/// The formats there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// For people, on a terminal.
    Text,
    /// For programs: the JSON contract.
    Json,
    /// A table of plans for spreadsheets.
    Csv,
    /// A table of plans for documents.
    Markdown,
    /// Megatron-LM `pretrain_gpt.py` arguments.
    Megatron,
    /// A DeepSpeed `ds_config.json`.
    DeepSpeed,
    /// A torchtitan job TOML (0.2.2).
    Torchtitan,
    /// A torchtitan 0.3 command line: a named config and its overrides.
    Torchtitan03,
}

impl Format {
    /// The exporter for this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            Format::Text => Box::new(Text),
            Format::Json => Box::new(Json),
            Format::Csv => Box::new(Table(Csv)),
            Format::Markdown => Box::new(Table(Markdown)),
            Format::Megatron => Box::new(Megatron),
            Format::DeepSpeed => Box::new(DeepSpeed),
            Format::Torchtitan => Box::new(Torchtitan),
            Format::Torchtitan03 => Box::new(Torchtitan03),
        }
    }

    /// The launcher format named `name`, as its [`Launcher::NAME`].
    pub fn launcher_named(name: &str) -> Option<Format> {
        [
            (Format::Megatron, Megatron::NAME),
            (Format::DeepSpeed, DeepSpeed::NAME),
            (Format::Torchtitan, Torchtitan::NAME),
            (Format::Torchtitan03, Torchtitan03::NAME),
        ]
        .into_iter()
        .find_map(|(format, n)| (n == name).then_some(format))
    }

    /// Whether this format writes a launcher configuration for one plan.
    pub fn is_launcher(self) -> bool {
        matches!(
            self,
            Format::Megatron | Format::DeepSpeed | Format::Torchtitan | Format::Torchtitan03
        )
    }
}
