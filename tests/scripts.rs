//! Real public launch scripts (`tests/fixtures/scripts/`, their sources beside them), each
//! graded by `check --from` as it is, without an edit: graded where the plan can say the job,
//! refused with every reason at once where it cannot. The reader runs nothing.

mod common;

use std::path::PathBuf;

use common::trainplan;

fn fixture(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/scripts")
        .join(path)
        .display()
        .to_string()
}

/// `check --from` on the script with `extra`: exit status, stdout, stderr.
fn check(path: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = trainplan()
        .args(["check", "--from", &fixture(path)])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The plan JSON of a script that grades.
fn graded(path: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let mut args = vec!["--json"];
    args.extend(extra);
    let (code, out, err) = check(path, &args);
    assert!(matches!(code, Some(0 | 1)), "{path}: {err}");
    (serde_json::from_str(&out).unwrap(), err)
}

/// The report of a script that is refused: every problem, each on its line.
fn refused(path: &str, extra: &[&str]) -> String {
    let (code, _, err) = check(path, extra);
    assert_eq!(code, Some(2), "{path}: {err}");
    err
}

/// NVIDIA's Llama 3 8B FP8 scripts, the distributed optimizer's and Megatron-FSDP's.
#[test]
fn nvidia_s_llama3_8b_fp8_scripts_grade_as_they_are() {
    for (script, zero) in [
        ("megatron-lm/llama_train_llama3_8b_h100_fp8.sh", 1),
        (
            "megatron-lm/megatron_fsdp_train_llama3_8b_fsdp_h100_fp8.sh",
            3,
        ),
    ] {
        let (plan, err) = graded(script, &["--gpu", "h100-sxm"]);
        // Its `if [[ "$DTYPE" == "fp8" ]]` decided, its items "--fp8-format hybrid" split as
        // bash splits them, its data `if` decided by the positional defaults ("MOCK").
        assert_eq!(plan["layout"]["tp"], 1, "{script}");
        assert_eq!(plan["layout"]["dp"], 8, "{script}");
        assert_eq!(plan["layout"]["zero"], zero, "{script}");
        assert_eq!(plan["params"], 8_030_261_248u64);
        assert_eq!(plan["step"]["precision"], "fp8");
        assert_eq!(plan["memory_model"]["fp8_params"], true);
        // 1,953,125,000 samples of 8,192 tokens.
        assert_eq!(plan["tokens"], 16_000_000_000_000u64);
        assert!(err.contains("--sequence-parallel at TP 1 is off"), "{err}");
        assert!(err.contains("--tiktoken-pattern v2"), "{err}");
    }
    let (plan, err) = graded(
        "megatron-lm/llama_train_llama3_8b_h100_fp8.sh",
        &["--gpu", "h100-sxm"],
    );
    assert_eq!(plan["memory_model"]["gradients"], "bf16");
    assert!(err.contains("$PWD (line 44)"), "{err}");
}

#[test]
fn nvidia_s_mixtral_script_grades_on_the_gpus_its_layout_needs() {
    // As written it launches 8 GPUs (one node), which its PP 4 × EP 8 cannot fill: refused by
    // the layout rule; on 64 GPUs it is graded, its vocabulary its tokenizer's.
    let err = refused(
        "megatron-lm/mixtral_train_mixtral_8x7b_distributed.sh",
        &["--gpu", "h100-sxm"],
    );
    assert!(err.contains("etp × ep = 1 × 8 = 8 must divide"), "{err}");
    let (plan, err) = graded(
        "megatron-lm/mixtral_train_mixtral_8x7b_distributed.sh",
        &["--gpu", "h100-sxm", "--gpus", "64"],
    );
    assert_eq!(plan["params"], 46_702_792_704u64);
    assert_eq!(plan["layout"]["pp"], 4);
    assert_eq!(plan["layout"]["ep"], 8);
    assert!(
        err.contains("Llama 2's tokenizer's 32000")
            && err.contains("--gpus 64 stands for the launcher's count in the file (8 GPUs)"),
        "{err}"
    );
}

#[test]
fn scripts_whose_model_trainplan_does_not_plan_are_refused_with_every_reason() {
    for (path, reasons) in [
        // Megatron-LM itself refuses a step schedule beside --global-batch-size.
        (
            "megatron-lm/gpt3_train_gpt3_175b_distributed.sh",
            &[
                "line 40: invalid --step-batch-size-schedule",
                "Cannot specify both",
            ][..],
        ),
        (
            "megatron-lm/gptoss_02_train.sh",
            &["--quick-geglu", "--softmax-type = learnable"],
        ),
        (
            "public/bigscience_tr11_176b_ml_slurm.sh",
            &[
                "--position-embedding-type = alibi",
                "--rampup-batch-size",
                "--embed-layernorm = given",
            ],
        ),
        // Megatron-DeepSpeed's GPT-2 blocks with experts.
        (
            "public/mds_gpt_1.3b_rope_slw_deepspeed.sh",
            &["--rotary-percent"],
        ),
    ] {
        let err = refused(path, &["--gpu", "h100-sxm"]);
        // One line, or every problem at once under one heading.
        assert!(
            err.starts_with("error: ")
                && (err.trim().lines().count() == 1 || err.contains("every problem at once")),
            "{path}: {err}"
        );
        for reason in reasons {
            assert!(err.contains(reason), "{path}: {reason}: {err}");
        }
    }
}

#[test]
fn every_public_script_is_read_without_a_panic_and_never_one_option_at_a_time() {
    for dir in ["megatron-lm", "public", "torchtitan", "megatron-bridge"] {
        let dir = PathBuf::from(fixture(dir));
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if !matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("sh" | "slurm")
            ) {
                continue;
            }
            let name = format!(
                "{}/{}",
                dir.file_name().unwrap().to_str().unwrap(),
                path.file_name().unwrap().to_str().unwrap()
            );
            let (code, _, err) = check(&name, &["--gpu", "h100-sxm", "--gpus", "64"]);
            assert!(matches!(code, Some(0..=2)), "{name}: {err}");
            assert!(!err.contains("panicked"), "{name}: {err}");
        }
    }
}

#[test]
fn a_smoke_script_with_arrays_and_appends_grades_under_the_nearest_stack() {
    let (plan, err) = graded(
        "public/megatron_llama3_8b_fp8_2gpu_smoke_arrays.sh",
        &["--gpu", "h100-sxm"],
    );
    assert_eq!(plan["layout"]["tp"], 2);
    assert!(
        err.contains("are no stack's; graded as the nearest, megatron-te"),
        "{err}"
    );
}

/// Llama 3 8B as Megatron-LM's options state it (the vocabulary apart), for scripts
/// written here.
const LLAMA3_8B: &str = "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 \
--num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu \
--disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope \
--seq-length 8192 --micro-batch-size 1 --global-batch-size 128 --train-iters 1000 \
--untie-embeddings-and-output-weights --rotary-base 500000 --use-rope-scaling";

/// `check --from` on the script `text` (written to a file) with `extra`: exit status, stdout,
/// stderr.
fn check_text(text: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.sh");
    std::fs::write(&path, text).unwrap();
    let out = trainplan()
        .args(["check", "--from"])
        .arg(&path)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The plan JSON `check --from` grades from the script `text` on an H100.
fn read_back(text: &str) -> serde_json::Value {
    let (code, out, err) = check_text(text, &["--json", "-q", "--gpu", "h100-sxm"]);
    assert!(matches!(code, Some(0 | 1)), "{err}");
    serde_json::from_str(&out).unwrap()
}

/// A script whose `if` the script's values do not decide: refused with the branches named,
/// then graded by the branch `--branch` takes, or by the variable `--set` gives.
#[test]
fn an_undecided_branch_is_taken_by_branch_or_set() {
    let text = format!(
        "if [ -f /etc/big-cluster ]; then\n  TP=8\nelse\n  TP=${{TP:-2}}\nfi\nARGS=(--tensor-model-parallel-size $TP {LLAMA3_8B} --vocab-size 128256)\ntorchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \"${{ARGS[@]}}\" --overlap-grad-reduce\n"
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["--json"];
        args.extend(extra);
        check_text(&text, &args)
    };
    let (code, _, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--branch 1=then gives --tensor-model-parallel-size 8, --branch 1=else gives --tensor-model-parallel-size 2"),
        "{err}"
    );
    let tp = |extra: &[&str]| {
        let (code, out, err) = run(extra);
        assert!(matches!(code, Some(0 | 1)), "{extra:?}: {err}");
        let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
        plan["layout"]["tp"].as_u64().unwrap()
    };
    assert_eq!(tp(&["--branch", "1=then"]), 8);
    assert_eq!(tp(&["--branch", "1=else"]), 2);
    assert_eq!(tp(&["--branch", "1=else", "--set", "TP=4"]), 4);
    // --lenient grades the first reading, and says what it graded without.
    let (code, out, err) = run(&["--lenient"]);
    assert!(matches!(code, Some(0 | 1)), "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(plan["layout"]["tp"], 8);
    assert!(
        plan["from"]["refused"][0]
            .as_str()
            .unwrap()
            .starts_with("line 1: invalid --from script"),
        "{plan}"
    );
    assert!(
        err.contains("graded without what the design cannot say (--lenient)"),
        "{err}"
    );
    // A branch the if does not have is said.
    let (code, _, err) = run(&["--branch", "1=3"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--branch 1=3: then, else, or 1 to 1, the branches of the if on line 1"),
        "{err}"
    );
}

/// Launch forms: Slurm's counts (`#SBATCH`, `$SLURM_NNODES`), `srun`, a profiler before the
/// launcher, `python -m torch.distributed.run`: the GPUs are the launcher's counts, and
/// nothing of the launchers' own options is taken for the program's.
#[test]
fn launch_forms_give_the_gpus_and_keep_their_options_to_themselves() {
    let text = format!(
        "#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=8\n#SBATCH --time=04:00:00\nARGS=(--tensor-model-parallel-size 8 {LLAMA3_8B} --vocab-size 128256)\nsrun --container-image nvcr.io/nvidia/pytorch:25.01-py3 --output logs/%j.log \\\n  nsys profile -o trace --trace cuda,nvtx \\\n  python -m torch.distributed.run --nproc_per_node $SLURM_GPUS_PER_NODE --nnodes $SLURM_NNODES \\\n  --rdzv-backend c10d pretrain_gpt.py \"${{ARGS[@]}}\"\n"
    );
    let (code, out, err) = check_text(&text, &["--json", "--quiet", "--stack", "megatron-te"]);
    assert!(matches!(code, Some(0 | 1)), "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    // 4 nodes × 8 GPUs: TP 8 × DP 4.
    assert_eq!(plan["layout"]["dp"], 4, "{plan}");
    let unused = plan["from"]["unused"].to_string();
    assert!(
        !unused.contains("--trace") && !unused.contains("--container-image"),
        "{unused}"
    );
    // A launcher's option after the program is the program's, which its parser refuses: no
    // GPU count is taken from it.
    let after = format!(
        "torchrun --nproc_per_node 8 pretrain_gpt.py {LLAMA3_8B} --vocab-size 128256 --nnodes 4\n"
    );
    let (code, _, err) = check_text(&after, &["--stack", "megatron-te"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("invalid --nnodes = 4: before the program"),
        "{err}"
    );
}

/// A vocabulary the script leaves to a tokenizer file is given with `--vocab`; one the file
/// states must agree with it.
#[test]
fn a_vocabulary_left_to_a_tokenizer_file_comes_with_vocab() {
    let flags = ["--json", "--quiet", "--stack", "megatron-te"];
    let tokenizer = format!("torchrun --nproc_per_node 8 pretrain_gpt.py {LLAMA3_8B} --tokenizer-type HuggingFaceTokenizer --tokenizer-model /models/llama3\n");
    let (code, _, err) = check_text(&tokenizer, &flags);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("give it with --vocab"), "{err}");
    let (code, out, err) = check_text(&tokenizer, &[&flags[..], &["--vocab", "128256"]].concat());
    assert!(matches!(code, Some(0 | 1)), "{err}");
    let plan: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Llama 3 8B's dimensions with its vocabulary: the preset.
    assert_eq!(plan["params"], 8_030_261_248u64);
    let stated =
        format!("torchrun --nproc_per_node 8 pretrain_gpt.py {LLAMA3_8B} --vocab-size 128256\n");
    let (_, _, err) = check_text(&stated, &[&flags[..], &["--vocab", "32000"]].concat());
    assert!(
        err.contains("invalid --vocab = 32000: 128256, what the --from file says"),
        "{err}"
    );
}

/// Megatron-DeepSpeed's own spellings (`--deepspeed`, `--zero-stage`, `--num-key-value-heads`,
/// `--use-rotary-position-embeddings`, `--normalization rmsnorm`): its Llama 2 example graded
/// on its stack, with the vocabulary its SentencePiece file leaves to `--vocab`.
#[test]
fn megatron_deepspeed_s_llama2_script_grades_on_its_stack() {
    let path = "public/mds_llama2_torchrun_zero.sh";
    let err = refused(path, &["--gpu", "h100-sxm"]);
    assert!(err.contains("--vocab"), "{err}");
    let (plan, err) = graded(path, &["--gpu", "h100-sxm", "--vocab", "32000"]);
    assert_eq!(plan["layout"]["zero"], 0);
    assert_eq!(plan["layout"]["tp"], 2);
    assert_eq!(plan["layout"]["pp"], 2);
    assert_eq!(plan["memory_model"]["stack"], "megatron-deepspeed");
    // 24 layers of h 2,048, 4 KV heads, FFN 5,504, V 32,000, untied.
    assert_eq!(plan["params"], 1_194_428_416u64);
    assert!(err.contains("here-document's text is not read"), "{err}");
}

/// torchtitan 0.3's own launch files, as they are: `-m torchtitan.train --module ${MODULE}
/// --config ${CONFIG} "$@"`, the named config of its llama3 registry with the script's
/// arguments as overrides.
#[test]
fn torchtitan_s_launch_files_grade_their_named_configs() {
    // run_train.sh's defaults: llama3_debugmodel (6 layers of 256) on torchrun's 8 GPUs, the
    // shard degree's −1 filling them; 8 × 2,048 tokens a rank, 10 steps.
    let (plan, _) = graded("torchtitan/run_train.sh", &["--gpu", "h100-sxm"]);
    assert_eq!(plan["model"], "L6-h256-f768-a16-kv16-v2048");
    assert_eq!(plan["layout"]["dp"], 8);
    assert_eq!(plan["tokens"], 8 * 8 * 2048 * 10);
    assert_eq!(plan["from"]["format"], "torchtitan");
    // The Slurm file: torchrun's 4 nodes of 8; CONFIG and the script's arguments given.
    let (plan, err) = graded(
        "torchtitan/multinode_trainer.slurm",
        &[
            "--gpu",
            "h100-sxm",
            "--set",
            "CONFIG=llama3_70b",
            "--set",
            "1=--training.steps",
            "--set",
            "2=500",
            "--set",
            "3=activation-checkpoint:selective",
        ],
    );
    assert_eq!(plan["model"], "llama3-70b");
    // llama3_70b: TP 8, local batch 8 of 8,192 tokens; DP the 32 GPUs' rest.
    assert_eq!(plan["layout"]["tp"], 8);
    assert_eq!(plan["layout"]["dp"], 4);
    assert_eq!(plan["tokens"], 8 * 4 * 8192 * 500);
    assert_eq!(plan["step"]["recompute"], "selective-op");
    assert!(err.contains("named config llama3_70b"), "{err}");
    // llama3_405b trains float8 with rowwise scaling: refused by name, in one line.
    let err = refused(
        "torchtitan/run_train.sh",
        &["--gpu", "h100-sxm", "--set", "CONFIG=llama3_405b"],
    );
    assert!(
        err.contains("rowwise") && err.trim().lines().count() == 1,
        "{err}"
    );
}

/// GPT-style scripts (LayerNorm, GeLU, biases, a learned position table, FP16, tied
/// embeddings: Megatron-LM's defaults), planned with exact counts.
#[test]
fn gpt_style_scripts_grade_with_exact_counts() {
    // GPT-2 medium ("345M"): 24 layers of h = 1,024, each 12h² + 13h (Q, K, V and output
    // 4h², their biases 4h; the 4h-wide GeLU MLP 8h², its biases 5h; two LayerNorms 4h),
    // the tied embedding of the vocabulary Megatron-LM pads GPT-2's 50,257 to (a multiple of
    // 128 × TP 2: 50,432), 1,024 learned positions and the final LayerNorm (2h).
    let (plan, err) = graded(
        "public/megatron_gpt_345m_torchrun_tp2_pp2.sh",
        &["--gpu", "h100-sxm", "--vocab", "50432"],
    );
    let h: u64 = 1024;
    let n = 24 * (12 * h * h + 13 * h) + 50_432 * h + 1024 * h + 2 * h;
    assert_eq!(plan["params"], n);
    assert_eq!(plan["layout"]["tp"], 2);
    assert!(
        err.contains("--fp16: FP16 mixed precision planned as BF16"),
        "{err}"
    );
    // Its export writes the same blocks, which read back as the same plan.
    let (code, export, err) = check(
        "public/megatron_gpt_345m_torchrun_tp2_pp2.sh",
        &[
            "--gpu", "h100-sxm", "--vocab", "50432", "--format", "megatron", "-q",
        ],
    );
    assert!(matches!(code, Some(0 | 1)), "{err}");
    for option in [
        "--normalization LayerNorm",
        "--position-embedding-type learned_absolute",
        "--max-position-embeddings 1024",
    ] {
        assert!(export.contains(option), "{option}: {export}");
    }
    assert!(!export.contains("--swiglu") && !export.contains("--disable-bias-linear"));
    let mut back = read_back(&export);
    let mut first = plan.clone();
    back["from"] = serde_json::Value::Null;
    first["from"] = serde_json::Value::Null;
    assert_eq!(back, first);
    // GPT-3 175B, refused by Megatron-LM's own rule, graded with --lenient: 174.6 B.
    let (plan, _) = graded(
        "megatron-lm/gpt3_train_gpt3_175b_distributed.sh",
        &[
            "--gpu",
            "h100-sxm",
            "--lenient",
            "--gpus",
            "1024",
            "--vocab",
            "51200",
        ],
    );
    let h: u64 = 12288;
    let n = 96 * (12 * h * h + 13 * h) + 51_200 * h + 2048 * h + 2 * h;
    assert_eq!(n, 174_615_846_912);
    assert_eq!(plan["params"], n);
    assert_eq!(plan["layout"]["pp"], 16);
}

/// Megatron-Bridge's launch scripts run a recipe, a Python config with key=value overrides:
/// refused in one line that names the recipe and what to give instead.
#[test]
fn megatron_bridge_recipe_launches_are_refused_by_name() {
    for (path, recipe) in [
        (
            "megatron-bridge/gpt_oss_slurm_pretrain.sh",
            "${RECIPE_NAME}",
        ),
        (
            "megatron-bridge/nemotron_3_nano_slurm_pretrain.sh",
            "${MODEL_NAME}_pretrain_config",
        ),
    ] {
        let err = refused(path, &["--gpu", "h100-sxm"]);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("run_recipe.py --recipe {recipe}"))
                && err.contains("--model-config"),
            "{err}"
        );
    }
}

/// NVIDIA's Mamba example: its `case "${MODEL_SCALE}"` decided (800M), a hybrid whose MLP blocks
/// are Megatron-LM's default GeLU (not gated, as squared ReLU's are counted), its vocabulary in a
/// SentencePiece file (`--vocab`).
#[test]
fn nvidia_s_mamba_example_grades_with_gelu_mlp_blocks() {
    let (plan, _) = graded(
        "megatron-lm/mamba_train.sh",
        &["--gpu", "h100-sxm", "--vocab", "256000"],
    );
    let name = plan["model"].as_str().unwrap();
    assert!(
        name.starts_with("L48-h1024-f4096") && name.contains("-gelu"),
        "{name}"
    );
    // Against the same pattern with squared ReLU blocks, written out: the same count, since
    // both are an up and a down projection.
    let (code, export, err) = check(
        "megatron-lm/mamba_train.sh",
        &[
            "--gpu", "h100-sxm", "--vocab", "256000", "--format", "megatron", "-q",
        ],
    );
    assert!(matches!(code, Some(0 | 1)), "{err}");
    assert!(!export.contains("--squared-relu") && !export.contains("--swiglu"));
    let relu2 = read_back(&export.replace(
        "--normalization RMSNorm",
        "--normalization RMSNorm --squared-relu",
    ));
    assert_eq!(relu2["params"], plan["params"]);
    assert!(relu2["model"].as_str().unwrap().contains("-relu2"));
}
