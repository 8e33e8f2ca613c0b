//! A launcher's configuration read back as a design (`check --from FILE`, `search --from
//! FILE`): a Megatron-LM argument list ([`megatron`]), a torchtitan job TOML ([`torchtitan`]) or
//! a DeepSpeed `ds_config.json` ([`deepspeed`]).
//!
//! Each reader gives a [`FromFile`]: the parts of a design the file states (the model's
//! dimensions or a preset, tokens, the layout's degrees, the step, the precision, the stack,
//! the sequence length, the GPUs) and the options it read and left alone because they do not
//! change the plan (paths, logging, the optimizer's schedule: [`FromFile::unused`]). An option
//! that changes the design but has no place in it, a value out of range, or an option no table
//! here knows is an error naming it: nothing is guessed.
//!
//! The format is told by the content: a `.toml` file, or text that parses as TOML with a
//! `[parallelism]` or `[training]` table, is torchtitan's; JSON with DeepSpeed's batch or ZeRO
//! keys is DeepSpeed's; anything else is read as a Megatron-LM argument list (a shell array,
//! a script or a file of `--option value` tokens).

pub mod deepspeed;
pub mod design;
pub mod megatron;
pub mod shell;
pub mod torchtitan;

use std::path::Path;

use crate::error::Result;
pub use design::{Dims, FileExperts, FileModel, FromFile, Source};

use super::{read_text, Limit, MIB};

/// A launcher configuration (`--from`): 1 MiB (an exported one is 2 kB).
pub const LAUNCHER: Limit = Limit {
    what: "a launcher configuration",
    bytes: MIB,
};

/// Which launcher's file `text` (at `path`) is.
pub fn detect(text: &str, path: &Path) -> Source {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if ext.as_deref() == Some("toml") {
        return Source::Torchtitan;
    }
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if ext.as_deref() == Some("json") || trimmed.starts_with('{') {
        return Source::DeepSpeed;
    }
    if let Ok(table) = text.parse::<toml::Table>() {
        if ["parallelism", "training", "model", "job"]
            .iter()
            .any(|k| table.get(*k).is_some_and(toml::Value::is_table))
        {
            return Source::Torchtitan;
        }
    }
    Source::Megatron
}

/// Reads the launcher configuration at `path`.
pub fn read(path: &Path) -> Result<FromFile> {
    read_with(path, None)
}

/// Reads the launcher configuration at `path`, with the world size when the user gives one
/// (`--gpus`), which a torchtitan job's `data_parallel_shard_degree = -1` resolves against.
pub fn read_with(path: &Path, world: Option<u64>) -> Result<FromFile> {
    let text = read_text(path, LAUNCHER)?;
    parse_with(&text, path, world)
}

/// The design `text` (the file at `path`) states.
pub fn parse(text: &str, path: &Path) -> Result<FromFile> {
    parse_with(text, path, None)
}

/// [`parse`], with the world size when the user gives one ([`read_with`]).
pub fn parse_with(text: &str, path: &Path, world: Option<u64>) -> Result<FromFile> {
    let text = text.trim_start_matches('\u{feff}');
    match detect(text, path) {
        Source::Megatron => megatron::parse(text),
        Source::Torchtitan => torchtitan::parse_with(text, path, world),
        Source::DeepSpeed => deepspeed::parse(text, path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_told_by_extension_and_content() {
        let p = Path::new;
        assert_eq!(detect("", p("job.toml")), Source::Torchtitan);
        assert_eq!(
            detect("[training]\nsteps = 1\n", p("job")),
            Source::Torchtitan
        );
        assert_eq!(detect("{\"a\": 1}", p("x")), Source::DeepSpeed);
        assert_eq!(detect("", p("ds.json")), Source::DeepSpeed);
        assert_eq!(
            detect("ARGS=(\n --num-layers 2\n)\n", p("x.sh")),
            Source::Megatron
        );
        assert_eq!(detect("--num-layers 2", p("args")), Source::Megatron);
    }
}
