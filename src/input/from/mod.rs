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
mod megatron_options;
pub mod shell;
pub mod torchtitan;
pub mod torchtitan_cli;

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

/// What the user gives beside the file: the GPUs (`--gpus`), which a torchtitan job's
/// `data_parallel_shard_degree = -1` resolves against and which stand for launcher counts a
/// script leaves unknown; the script's undecided values and branches (`--set`, `--branch`);
/// and whether to grade without what the design cannot say (`--lenient`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub gpus: Option<u64>,
    pub given: shell::Given,
    pub lenient: bool,
}

/// Reads the launcher configuration at `path`.
pub fn read(path: &Path) -> Result<FromFile> {
    read_with(path, &Options::default())
}

/// Reads the launcher configuration at `path`, with what the user gives beside it.
pub fn read_with(path: &Path, options: &Options) -> Result<FromFile> {
    let text = read_text(path, LAUNCHER)?;
    parse_with(&text, path, options)
}

/// The design `text` (the file at `path`) states.
pub fn parse(text: &str, path: &Path) -> Result<FromFile> {
    parse_with(text, path, &Options::default())
}

/// [`parse`], with what the user gives beside the file ([`read_with`]). What the file states
/// that the design cannot say is refused, every problem at once with what was mapped and
/// what was read and not used, unless [`Options::lenient`].
pub fn parse_with(text: &str, path: &Path, options: &Options) -> Result<FromFile> {
    let text = text.trim_start_matches('\u{feff}');
    if let Some(recipe) = bridge_recipe(text) {
        return Err(crate::error::Error::invalid(
            "--from",
            format!("a Megatron-Bridge recipe launch (run_recipe.py --recipe {recipe})"),
            "a Megatron-LM argument list, a torchtitan job or a DeepSpeed JSON: a Megatron-Bridge recipe is a Python config (its model, layout and precision set in code, key=value overrides on top), which trainplan does not read; state the run with --model-config and check's layout, batch and precision flags",
        ));
    }
    let file = match detect(text, path) {
        Source::Megatron if torchtitan_cli::is_job(text) => {
            torchtitan_cli::parse_with(text, &options.given, options.gpus)?
        }
        Source::Megatron => megatron::parse_with(text, &options.given, options.gpus)?,
        Source::Torchtitan => torchtitan::parse_with(text, path, options.gpus)?,
        Source::DeepSpeed => deepspeed::parse(text, path)?,
    };
    match file.refused.len() {
        0 => Ok(file),
        _ if options.lenient => Ok(file),
        // One problem is one line, as every other error is.
        1 => Err(crate::error::Error::Problems(file.refused)),
        _ => Err(design::refusal(file.refused.clone(), &file, true)),
    }
}

/// The recipe a Megatron-Bridge launch names (`scripts/training/run_recipe.py --recipe NAME`,
/// as Megatron-Bridge's `examples/models/*/slurm_pretrain.sh` run it), as written, if the text
/// runs one outside a comment.
fn bridge_recipe(text: &str) -> Option<String> {
    let code = |l: &&str| !l.trim_start().starts_with('#');
    text.lines()
        .filter(code)
        .find(|l| l.contains("run_recipe.py"))?;
    let name = text
        .lines()
        .filter(code)
        .find_map(|l| l.split_once("--recipe")?.1.split_whitespace().next())
        .unwrap_or("…");
    Some(name.trim_matches(['"', '\'']).to_string())
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
