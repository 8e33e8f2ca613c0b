//! The `check` command of each plan a search lists ([`crate::plan::command`]): the search's
//! flags that `check` shares, taken from the command line as given, and each listed shape's
//! model flags.

use std::collections::{BTreeMap, BTreeSet};

use clap::parser::ValueSource;
use clap::{ArgMatches, Args};

use super::args::{AttentionArgs, BriefArgs, DetailedArgs, SearchArgs, TimeArgs};
use crate::input::hf;
use crate::model::{self, Shape};
use crate::plan::command::CheckCommand;
use crate::search::SearchReport;

/// The check command of `report`'s plans: the flags of `matches` (the search's) that `check`
/// shares, what `--from` laid over them, and the model flags of the shapes the report lists
/// (of every shape that can pass, where `every` lists all plans).
pub(super) fn check_command(
    matches: &ArgMatches,
    args: &SearchArgs,
    shapes: &[Shape],
    report: &SearchReport,
    every: bool,
) -> CheckCommand {
    let mut brief = given_flags(matches, &BriefArgs::augment_args(clap::Command::new("")));
    let mut settings = given_flags(matches, &DetailedArgs::augment_args(clap::Command::new("")));
    settings.extend(given_flags(
        matches,
        &TimeArgs::augment_args(clap::Command::new("")),
    ));
    if args.from.is_some() {
        // What the file gave the search, which `check` takes as flags.
        let lay = |flags: &mut Vec<Vec<String>>, flag: &str, value: Option<String>| {
            if let (Some(value), false) = (value, flags.iter().any(|f| f[0] == flag)) {
                flags.push(vec![flag.to_string(), value]);
            }
        };
        lay(&mut brief, "--gpus", args.brief.gpus.map(|g| g.to_string()));
        lay(
            &mut brief,
            "--seq-len",
            args.brief.seq_len.map(|s| s.to_string()),
        );
        let stack = args.detailed.stack.map(|s| s.name().to_string());
        lay(&mut settings, "--stack", stack);
    }
    if args.best_loss {
        // The target the first search found, which `check` takes as the brief's (clap has
        // refused --loss-target beside --best-loss).
        brief.push(vec![
            "--loss-target".into(),
            report.brief.loss_target.to_string(),
        ]);
    }
    let mut wanted: BTreeSet<&str> = report.plans.iter().map(|p| p.model.as_str()).collect();
    for v in &report.shapes {
        if every && v.token_window.is_some() {
            wanted.insert(&v.model);
        }
        if let Some(p) = &v.best_plan {
            wanted.insert(&p.model);
        }
    }
    // The search read each config already; a config a second read refuses names no shape.
    let configs: Vec<(Shape, String)> = args
        .model_config
        .iter()
        .filter_map(|path| Some((hf::read(path).ok()?, path.display().to_string())))
        .collect();
    let mut models = BTreeMap::new();
    for s in shapes.iter().filter(|s| wanted.contains(s.name.as_str())) {
        let flags = match models.get(&s.name) {
            // A plan names its model, so two shapes of one name cannot be told apart.
            Some(_) => Err(format!(
                "two searched shapes are named {}: grade it with check --plan FILE.json --index N",
                s.name
            )),
            None => model_flags(s, &configs),
        };
        models.insert(s.name.clone(), flags);
    }
    CheckCommand {
        brief,
        settings,
        models,
        show: args.show_commands,
    }
}

/// The flags of `group` that `matches` had on the command line, each with its values as given
/// (a list's joined by commas).
fn given_flags(matches: &ArgMatches, group: &clap::Command) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for arg in group.get_arguments() {
        let id = arg.get_id().as_str();
        let (Some(long), Some(ValueSource::CommandLine)) =
            (arg.get_long(), matches.value_source(id))
        else {
            continue;
        };
        let mut flag = vec![format!("--{long}")];
        if arg.get_action().takes_values() {
            let values: Vec<String> = matches
                .get_raw(id)
                .into_iter()
                .flatten()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            flag.push(values.join(","));
        }
        out.push(flag);
    }
    out
}

/// The flags that name `shape` to `check`: the config file it was read from (the same shape,
/// not just its name), its name where that is a preset's or a family shape's, else the
/// dimensions of an ad-hoc dense shape; why there are none for a shape no flags make (a
/// config's biases, latent attention or blocks, given without its file).
fn model_flags(shape: &Shape, configs: &[(Shape, String)]) -> Result<Vec<String>, String> {
    if let Some((_, path)) = configs.iter().find(|(read, _)| read == shape) {
        return Ok(vec!["--model-config".into(), path.clone()]);
    }
    if model::preset(&shape.name).is_ok_and(|s| s == *shape) {
        return Ok(vec!["--model".into(), shape.name.clone()]);
    }
    let arch = &shape.architecture;
    let adhoc = AttentionArgs {
        heads: Some(u64::from(shape.heads)),
        kv_heads: Some(u64::from(shape.kv_heads)),
        head_dim: Some(shape.head_dim),
        vocab: Some(shape.vocab),
        tied_embeddings: shape.tied_embeddings,
        no_rope_scaling: arch.rope_scaling.is_none(),
        rope_theta: Some(arch.rope_theta),
        norm_eps: Some(arch.norm_eps),
        sliding_window: arch.sliding_window,
    };
    let rebuilt = adhoc.shape(u64::from(shape.layers), shape.hidden, shape.ffn);
    if rebuilt.is_ok_and(|s| {
        Shape {
            name: shape.name.clone(),
            ..s
        } == *shape
    }) {
        let mut flags: Vec<String> = [
            ("--layers", u64::from(shape.layers)),
            ("--hidden", shape.hidden),
            ("--ffn", shape.ffn),
            ("--heads", u64::from(shape.heads)),
            ("--kv-heads", u64::from(shape.kv_heads)),
            ("--head-dim", shape.head_dim),
            ("--vocab", shape.vocab),
        ]
        .into_iter()
        .flat_map(|(flag, n)| [flag.to_string(), n.to_string()])
        .collect();
        if shape.tied_embeddings {
            flags.push("--tied-embeddings".into());
        }
        if arch.rope_scaling.is_none() {
            flags.push("--no-rope-scaling".into());
        }
        flags.extend(["--rope-theta".into(), arch.rope_theta.to_string()]);
        flags.extend(["--norm-eps".into(), arch.norm_eps.to_string()]);
        if let Some(w) = arch.sliding_window {
            flags.extend(["--sliding-window".into(), w.to_string()]);
        }
        return Ok(flags);
    }
    Err(format!(
        "check takes no flags for all of {}'s dimensions (its biases, attention, experts or blocks): grade it with check --plan FILE.json --index N",
        shape.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_check_has_no_flags_for_is_said_so_and_its_config_file_named_where_it_came_from_one()
    {
        // Qwen2.5's biases: no preset, family name or ad-hoc flag gives them.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/hf/qwen2.5-0.5b/config.json"
        );
        let shape = hf::read(std::path::Path::new(path)).unwrap();
        let why = model_flags(&shape, &[]).unwrap_err();
        assert!(why.contains("check --plan FILE.json --index N"), "{why}");
        let configs = [(shape.clone(), "q.json".to_string())];
        assert_eq!(
            model_flags(&shape, &configs).unwrap(),
            ["--model-config", "q.json"]
        );
        // Llama 3's 70B by its name; an ad-hoc dense shape by its dimensions.
        let llama = model::preset("70b").unwrap();
        assert_eq!(model_flags(&llama, &[]).unwrap(), ["--model", "llama3-70b"]);
        let adhoc = AttentionArgs {
            heads: None,
            kv_heads: None,
            head_dim: None,
            vocab: None,
            tied_embeddings: true,
            no_rope_scaling: false,
            rope_theta: Some(10_000.0),
            norm_eps: None,
            sliding_window: Some(4096),
        };
        let shape = adhoc.shape(16, 2048, 8192).unwrap();
        let flags = model_flags(&shape, &[]).unwrap().join(" ");
        assert_eq!(
            flags,
            "--layers 16 --hidden 2048 --ffn 8192 --heads 16 --kv-heads 8 --head-dim 128 \
             --vocab 128256 --tied-embeddings --rope-theta 10000 --norm-eps 0.00001 \
             --sliding-window 4096"
        );
    }
}
