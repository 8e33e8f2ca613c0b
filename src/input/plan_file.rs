//! Plan files: one plan read back from `check --json`, a search's `plans` or a Pareto file's
//! `front`, for `export --plan`.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::brief::Brief;
use crate::cost::memory::MemoryModel;
use crate::cost::run::TimeModel;
use crate::cost::step::detailed::{Detailed, Options};
use crate::cost::step::Step;
use crate::cost::step_time::options::TimeOptions;
use crate::error::{Error, Result};
use crate::input::{from_value, hf, parse_json, read_text, PLAN};
use crate::model::layout::{Degrees, Layout};
use crate::model::{self, Architecture, Shape};
use crate::plan::{evaluate, Design, Plan};
use crate::report::export::Launch;

/// The fields of a plan object (`check --json`, a search's `plans` or `front`) a launcher
/// needs; the rest are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct PlanFields {
    /// The model's name.
    pub model: String,
    /// Parameters, when the file gives them: checked against the model's.
    #[serde(default)]
    pub params: Option<u64>,
    /// Training tokens.
    pub tokens: u64,
    /// The layout.
    pub layout: Layout,
    /// The step, for detailed plans.
    #[serde(default)]
    pub step: Option<Step>,
    /// The detailed memory model's settings, for detailed plans.
    #[serde(default)]
    pub memory_model: Option<Options>,
    /// The step's time, for plans graded under the detailed time model.
    #[serde(default)]
    pub step_seconds: Option<f64>,
    /// RoPE, ε and the attention window, when the plan's model has others than Llama 3's.
    #[serde(default)]
    pub architecture: Option<Architecture>,
}

/// A plan read from a file: its fields and the brief of the document it came from (if the
/// document carries one). What the file says of the plan's checks is not read: a plan from a
/// file is graded again.
#[derive(Debug, Clone)]
pub struct PlanFile {
    /// The plan's fields.
    pub fields: PlanFields,
    /// The brief of a search or Pareto document.
    pub brief: Option<Brief>,
}

impl PlanFile {
    /// The plan in the JSON file at `path`; see [`PlanFile::parse`].
    pub fn read(path: &Path, index: u64) -> Result<PlanFile> {
        PlanFile::parse(&read_text(path, PLAN)?, path, index)
    }

    /// The plan in JSON `text`: a plan object, or entry `index` (from 1) of a search
    /// document's `plans` or a Pareto file's `front`; `path` names it in errors.
    pub fn parse(text: &str, path: &Path, index: u64) -> Result<PlanFile> {
        let value: Value = parse_json(text, path, PLAN.what)?;
        let brief = match value.get("brief") {
            Some(b) => Some(from_value::<Brief>(b.clone(), path, "a brief")?),
            None => None,
        };
        let list = ["plans", "front"]
            .into_iter()
            .find_map(|key| value.get(key).and_then(Value::as_array).map(|a| (key, a)));
        let plan = match list {
            Some((key, plans)) => usize::try_from(index)
                .ok()
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| plans.get(i))
                .ok_or_else(|| {
                    Error::invalid(
                        "--index",
                        index,
                        format!("1 to {}, the plans in the file's {key}", plans.len()),
                    )
                })?
                .clone(),
            None if index != 1 => {
                return Err(Error::invalid(
                    "--index",
                    index,
                    "1: the file holds one plan, not a search's plans or a Pareto front",
                ))
            }
            None => value,
        };
        // A step written before TP overlap was one of its fields ran the stack's default.
        let said = plan
            .get("step")
            .and_then(Value::as_object)
            .is_some_and(|s| s.contains_key("tp_comm_overlap"));
        let mut fields: PlanFields = from_value(plan, path, "a plan")?;
        if let Some(options) = &fields.memory_model {
            options.validate()?;
        }
        if let (false, Some(step)) = (said, fields.step.as_mut()) {
            let stack = fields.memory_model.map(|o| o.stack).unwrap_or_default();
            step.tp_comm_overlap = Step::stack_overlap(stack, step.sequence_parallel);
        }
        Ok(PlanFile { fields, brief })
    }

    /// The plan's model: the config at `model_config` when given, else the preset or
    /// dimension name the plan gives; either must be the plan's (its name and, where the file
    /// gives it, its parameter count), with the plan's RoPE, ε and window where the file names
    /// them.
    pub fn shape(&self, model_config: Option<&Path>) -> Result<Shape> {
        let fields = &self.fields;
        let shape = match model_config {
            Some(config) => hf::read(config)?,
            None => model::preset(&fields.model).map_err(|_| {
                Error::invalid(
                    "--plan",
                    &fields.model,
                    "a preset or dimension name, or give the model's config with --model-config",
                )
            })?,
        };
        let named = shape.name == fields.model
            || model::preset(&fields.model).is_ok_and(|s| s.same_dimensions(&shape));
        if !named || fields.params.is_some_and(|n| n != shape.params()) {
            return Err(Error::invalid(
                "--model-config",
                format!("{} ({} parameters)", shape.name, shape.params()),
                format!(
                    "the plan's model, {} ({} parameters)",
                    fields.model,
                    fields.params.map_or("?".into(), |n| n.to_string())
                ),
            ));
        }
        // The plan's RoPE, ε and window: from the file when it names them, which a config
        // given with --model-config must then agree with.
        Ok(match (&fields.architecture, model_config) {
            (Some(a), Some(_)) if *a != shape.architecture => {
                return Err(Error::invalid(
                    "--model-config",
                    format!("{} ({})", shape.name, shape.architecture.describe()),
                    format!("the plan's model: {}", a.describe()),
                ))
            }
            (Some(a), _) => Shape {
                architecture: a.clone(),
                ..shape
            },
            (None, _) => shape,
        })
    }

    /// What grades the plan on `shape` against `brief`: the brief sized to the plan's GPUs
    /// (and to its step's sequence when it names a step), every degree of its layout (TP, CP,
    /// PP, DP, ZeRO, the replicas, EP and ETP, each checked by the layout's own rules as
    /// `check` checks them), and the models the plan names (its step and memory settings, and
    /// the detailed time model at its stack's options where the file gives a step time). What
    /// the file says of the plan's checks is not read.
    pub fn graded_with(&self, shape: &Shape, mut brief: Brief) -> Result<PlanModels> {
        let fields = &self.fields;
        let l = fields.layout;
        brief.gpus =
            l.tp.checked_mul(l.cp)
                .and_then(|g| g.checked_mul(l.pp))
                .and_then(|g| g.checked_mul(l.dp))
                .filter(|g| (1..=crate::brief::limits::GPUS).contains(g))
                .ok_or_else(|| {
                    let cp = if l.cp == 1 {
                        String::new()
                    } else {
                        format!(" × CP {}", l.cp)
                    };
                    Error::invalid(
                        "plan.layout",
                        format!("TP {}{cp} × PP {} × DP {}", l.tp, l.pp, l.dp),
                        format!("at least 1 and at most {} GPUs", crate::brief::limits::GPUS),
                    )
                })?;
        if let Some(step) = &fields.step {
            brief.seq_len = step.seq_len;
        }
        brief.validate()?;
        let degrees = Degrees {
            tp: l.tp,
            cp: l.cp,
            pp: l.pp,
            replicate: l.replicate,
            ep: l.ep,
            etp: Some(l.etp),
        };
        let layout = Layout::with(&brief, shape, degrees, l.zero)?;
        if let (None, Some(options)) = (&shape.experts, &fields.memory_model) {
            let d = Options::for_stack(options.stack);
            let expert = [
                ("ep_overlap", options.ep_overlap != d.ep_overlap),
                ("moe_recompute", options.moe_recompute != d.moe_recompute),
                ("norm_recompute", options.norm_recompute != d.norm_recompute),
                ("ep_dispatcher", options.ep_dispatcher != d.ep_dispatcher),
                ("moe_imbalance", options.moe_imbalance != d.moe_imbalance),
            ];
            if let Some((field, _)) = expert.iter().find(|(_, set)| *set) {
                return Err(Error::invalid(
                    format!("plan.memory_model.{field}"),
                    "set",
                    format!(
                        "a mixture of experts: {} is dense (the field sets how its experts run)",
                        shape.name
                    ),
                ));
            }
        }
        // The GPU's own settings are the brief's, not the file's ([`Options::on_gpu`]).
        let on_gpu = |o: Options| o.on_gpu(brief.mxfp8);
        let options = fields.memory_model.map(on_gpu);
        let memory = match (fields.step, options) {
            (Some(step), options) => MemoryModel::Detailed(Detailed {
                step,
                options: options.unwrap_or_else(|| on_gpu(Options::default())),
            }),
            (None, _) => MemoryModel::Plate,
        };
        let time = match fields.step_seconds {
            Some(_) => TimeModel::Detailed(TimeOptions::for_stack(
                fields.memory_model.unwrap_or_default().stack,
            )),
            None => TimeModel::Plate,
        };
        Ok(PlanModels {
            brief,
            layout,
            memory,
            time,
            options,
        })
    }

    /// The plan on `shape`, graded again against `brief` ([`PlanFile::graded_with`]) and
    /// ready for a launcher: its layout, its step and its settings.
    pub fn launch(&self, shape: Shape, brief: Brief) -> Result<(Launch, Plan)> {
        let m = self.graded_with(&shape, brief)?;
        let fields = &self.fields;
        let design = Design {
            shape: &shape,
            tokens: fields.tokens,
            layout: m.layout,
            memory: m.memory,
            time: &m.time,
        };
        let graded = evaluate(&m.brief, &design)?;
        let target = m.brief.batch_target_for(&shape);
        let law = crate::plan::batch::LawBatch::at(&m.brief, &shape, fields.tokens as f64);
        let mut launch = Launch::new(
            shape,
            fields.tokens,
            m.layout,
            fields.step,
            m.brief.seq_len,
            &target,
            m.options,
        )?;
        launch.set_law(law.as_ref(), &m.brief);
        Ok((launch, graded))
    }
}

/// What [`PlanFile::graded_with`] grades a plan under: the brief, the layout, the memory and
/// time models, and the detailed settings where the plan has them.
#[derive(Debug, Clone)]
pub struct PlanModels {
    /// The brief, sized to the plan.
    pub brief: Brief,
    /// The layout.
    pub layout: Layout,
    /// The memory model.
    pub memory: MemoryModel,
    /// The time model.
    pub time: TimeModel,
    /// The detailed model's settings on the brief's GPU, where the plan names them.
    pub options: Option<Options>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A detailed plan as `check --json` wrote it before the step had its TP overlap.
    fn plan(stack: &str, sequence_parallel: bool) -> String {
        format!(
            r#"{{"model": "llama3-70b", "tokens": 1000000000000,
                "layout": {{"tp": 8, "cp": 1, "pp": 1, "dp": 256, "zero": 1, "replicate": 1}},
                "step": {{"micro_batch": 1, "seq_len": 8192, "recompute": "full",
                          "sequence_parallel": {sequence_parallel}, "schedule": "1f1b",
                          "precision": "bf16", "global_batch_tokens": 16777216}},
                "memory_model": {{"stack": "{stack}", "gradients": "fp32", "loss": "fp32",
                                  "kernels": "fused", "stages": "even", "reserve_gb": 2.0,
                                  "fragmentation": 0.05}}}}"#
        )
    }

    fn overlap(text: &str) -> bool {
        let file = PlanFile::parse(text, Path::new("plan.json"), 1).unwrap();
        file.fields.step.unwrap().tp_comm_overlap
    }

    #[test]
    fn a_plan_written_before_tp_overlap_was_a_step_field_runs_its_stack_s_default() {
        assert!(overlap(&plan("megatron-te", true)));
        assert!(!overlap(&plan("megatron-te", false)));
        assert!(!overlap(&plan("llama3", true)));
        // Said in the file: as said.
        let off = plan("megatron-te", true).replace(
            r#""schedule": "1f1b","#,
            r#""schedule": "1f1b", "tp_comm_overlap": false,"#,
        );
        assert!(!overlap(&off));
    }
}
