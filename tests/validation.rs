//! Every input, its valid range and the error a user sees outside it: the validation table of
//! `docs/validation.md` is generated from the rows below, and each row is a test that runs the binary and
//! expects exit status 2, nothing on stdout and exactly this one line on stderr. With
//! `TRAINPLAN_WRITE_RESULTS` set the table in docs/validation.md is rewritten.

mod common;

use common::trainplan;

use std::path::Path;

/// One input: what it is, what is valid, a command that breaks it and the error it gets.
struct Row {
    input: &'static str,
    valid: &'static str,
    args: &'static [&'static str],
    error: &'static str,
}

const fn row(
    input: &'static str,
    valid: &'static str,
    args: &'static [&'static str],
    error: &'static str,
) -> Row {
    Row {
        input,
        valid,
        args,
        error,
    }
}

/// The files the rows read, made in the directory the commands run in.
fn files(dir: &Path) {
    let hf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf");
    for (name, bytes) in [
        ("empty.json", &b""[..]),
        ("latin1.json", &b"{\"gpus\": \"\xe9\"}"[..]),
        ("broken.json", &b"{\"gpus\": "[..]),
        ("broken.toml", &b"gpus = ["[..]),
        ("string.json", &b"{\"gpus\": \"many\"}"[..]),
        ("typo.json", &b"{\"gpux\": 1}"[..]),
        ("typo.toml", &b"[loss_law]\nalfa = 0.3\n"[..]),
        ("list.json", &b"[1, 2]"[..]),
        ("no-points.json", &b"{\"points\": []}"[..]),
        ("plan.json", &b"{\"tokens\": 1}"[..]),
        ("partial.json", &b"{}"[..]),
        ("law-list.json", &b"{\"loss_law\": [1.69, 406.4]}"[..]),
        (
            "law-emax.json",
            &b"{\"loss_law\": {\"experts\": {\"delta\": -0.2285, \"gamma\": 0.0098, \"omega\": 0.5529, \"zeta\": -0.0259, \"e_start\": 2.0732, \"e_max\": 2}}}"[..],
        ),
        ("topology-list.toml", &b"topology = [370, 3]\n"[..]),
        ("twice.json", &b"{\"gpus\": 1024, \"gpus\": 8}"[..]),
        ("null-gpu.json", &b"{\"gpu\": null}"[..]),
        ("date.toml", &b"max_days = 1979-05-27\n"[..]),
        ("points-list.json", &b"{\"points\": [[1024, 0.5]]}"[..]),
        (
            "layout-list.json",
            &b"{\"model\": \"70b\", \"tokens\": 1000000000000, \"layout\": [8, 8, 32, 1]}"[..],
        ),
        (
            "layout-ok.json",
            &b"{\"model\": \"70b\", \"tokens\": 1000000000000, \"layout\": {\"tp\": 8, \"pp\": 8, \"dp\": 32, \"zero\": 1}}"[..],
        ),
        (
            "args.sh",
            &b"ARGS=(\n  --num-layers 32\n)\n"[..],
        ),
        (
            "job.toml",
            &b"[model]\nname = \"llama3\"\nflavor = \"8B\"\n\n[training]\nlocal_batch_size = 1\nglobal_batch_size = 64\nseq_len = 8192\nsteps = 1000\n\n[parallelism]\ndata_parallel_shard_degree = 64\nfsdp_reshard_after_forward = \"always\"\n"[..],
        ),
        ("moe.toml", &b"[parallelism]\nexpert_parallel_degree = 8\n"[..]),
        (
            "ds_config.json",
            &b"{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true}, \"zero_optimization\": {\"stage\": 3}}\n"[..],
        ),
        // Round 3 files: launchers and their readers.
        (
            "plan-ep.json",
            &b"{\"model\": \"70b\", \"tokens\": 1000000000000, \"layout\": {\"tp\": 8, \"pp\": 8, \"dp\": 32, \"zero\": 1, \"ep\": 2}}\n"[..],
        ),
        (
            "plan-dense-moe.json",
            &b"{\"model\": \"70b\", \"tokens\": 1000000000000, \"layout\": {\"tp\": 8, \"pp\": 8, \"dp\": 32, \"zero\": 1}, \"step\": {\"micro_batch\": 1, \"seq_len\": 8192, \"recompute\": \"full\", \"sequence_parallel\": true, \"schedule\": \"1f1b\", \"precision\": \"bf16\", \"global_batch_tokens\": 16777216}, \"memory_model\": {\"stack\": \"megatron-te\", \"gradients\": \"fp32\", \"loss\": \"fp32\", \"kernels\": \"fused\", \"stages\": \"even\", \"reserve_gb\": 2.0, \"fragmentation\": 0.05, \"ep_overlap\": true}}\n"[..],
        ),
        (
            "plan-cp.json",
            &b"{\"model\": \"70b\", \"tokens\": 1000000000000, \"layout\": {\"tp\": 8, \"cp\": 2, \"pp\": 8, \"dp\": 16, \"zero\": 1}, \"step\": {\"micro_batch\": 1, \"seq_len\": 8192, \"recompute\": \"full\", \"sequence_parallel\": true, \"schedule\": \"1f1b\", \"precision\": \"bf16\", \"global_batch_tokens\": 16777216, \"tp_comm_overlap\": true}, \"memory_model\": {\"stack\": \"megatron-te\", \"gradients\": \"fp32\", \"loss\": \"fp32\", \"kernels\": \"fused\", \"stages\": \"even\", \"reserve_gb\": 2.0, \"fragmentation\": 0.05}}\n"[..],
        ),
        (
            "nodes.sh",
            &b"torchrun --nproc_per_node 8 --nnodes 2:4 pretrain_gpt.py --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 --vocab-size 1024\n"[..],
        ),
        (
            "nodes-unset.sh",
            &b"torchrun --nproc_per_node 8 --nnodes $NODES pretrain_gpt.py --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 --vocab-size 1024\n"[..],
        ),
        (
            "append.sh",
            &b"ARGS=(--num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 --vocab-size 1024)\nwhile true; do\n  ARGS+=(--tensor-model-parallel-size 2)\ndone\n"[..],
        ),
        (
            "if.sh",
            &b"if [ -f /etc/big ]; then\n  TP=8\nelse\n  TP=1\nfi\nARGS=(--tensor-model-parallel-size $TP --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 --vocab-size 1024)\n"[..],
        ),
        (
            "function.sh",
            &b"ARGS=(--num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 --vocab-size 1024)\nARGS+=(--moe-expert-capacity-factor 1.25)\n"[..],
        ),
        (
            "heredoc.sh",
            &b"cat > args.txt <<EOF\n--tensor-model-parallel-size 8\nEOF\n"[..],
        ),
        (
            "sp-false.sh",
            &b"ARGS=(--num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 --vocab-size 1024 --sequence-parallel false)\n"[..],
        ),
        (
            "par.sh",
            &b"PAR=\"--tensor-model-parallel-size 4 --sequence-parallel\"\ntorchrun pretrain_gpt.py --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 --vocab-size 1024 \"$PAR\"\n"[..],
        ),
        (
            "value.sh",
            &b"ARGS=(--tensor-model-parallel-size $(nproc) --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2 --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1 --global-batch-size 16 --train-iters 10 --vocab-size 1024)\n"[..],
        ),
        (
            "moe.sh",
            &b"ARGS=(\n  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32\n  --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 4096 --micro-batch-size 1\n  --global-batch-size 256 --train-iters 1000\n  --num-experts 8 --moe-router-topk 2 --moe-grouped-gemm --moe-token-dispatcher-type allgather\n)\n"[..],
        ),
        (
            "ds-yes.json",
            &b"{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true}, \"activation_checkpointing\": {\"cpu_checkpointing\": \"yes\"}}\n"[..],
        ),
        (
            "ds-twice.json",
            &b"{\"train_batch_size\": 64, \"train_batch_size\": 8, \"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true}}\n"[..],
        ),
        (
            "quantize.toml",
            &b"[model]\nflavor = \"8B\"\n[quantize]\nfoo = 1\n"[..],
        ),
        (
            "training-twice.toml",
            &b"[training]\nsteps = 1\n[training]\nseq_len = 8192\n"[..],
        ),
        // Round 3 files: the server.
        // Round 3 files: merge and calibrate.
        (
            "runs-mfu.json",
            &b"{\"runs\": [{\"id\": \"nemo-gpt3-175b-bf16-128\", \"gpu\": \"h100-sxm\", \"gpus\": 128, \"tp\": 4, \"pp\": 8, \"vp\": 12, \"zero\": 1, \"micro_batch\": 1, \"global_batch\": 256, \"seq_len\": 2048, \"recompute\": \"selective\", \"framework\": \"NeMo\", \"card_gb\": 80, \"shape\": {\"layers\": 96, \"hidden\": 12288, \"ffn_swiglu_equivalent\": 32768, \"heads\": 96, \"kv_heads\": 96, \"vocab\": 51200}, \"published\": {\"mfu_pct\": 120}}]}"[..],
        ),
        (
            "runs-tps.json",
            &b"{\"runs\": [{\"id\": \"nemo-gpt3-175b-bf16-128\", \"gpu\": \"h100-sxm\", \"gpus\": 128, \"tp\": 4, \"pp\": 8, \"vp\": 12, \"zero\": 1, \"micro_batch\": 1, \"global_batch\": 256, \"seq_len\": 2048, \"recompute\": \"selective\", \"framework\": \"NeMo\", \"card_gb\": 80, \"shape\": {\"layers\": 96, \"hidden\": 12288, \"ffn_swiglu_equivalent\": 32768, \"heads\": 96, \"kv_heads\": 96, \"vocab\": 51200}, \"published\": {\"tokens_per_s_per_gpu\": 3943.68}}]}"[..],
        ),
        (
            "runs-memory.json",
            &b"{\"runs\": [{\"id\": \"nemo-gpt3-175b-bf16-128\", \"gpu\": \"h100-sxm\", \"gpus\": 128, \"tp\": 4, \"pp\": 8, \"vp\": 12, \"zero\": 1, \"micro_batch\": 8, \"global_batch\": 256, \"seq_len\": 2048, \"recompute\": \"none\", \"framework\": \"NeMo\", \"card_gb\": 80, \"shape\": {\"layers\": 96, \"hidden\": 12288, \"ffn_swiglu_equivalent\": 32768, \"heads\": 96, \"kv_heads\": 96, \"vocab\": 51200}, \"published\": {\"tokens_per_s_per_gpu\": 492.96}}]}"[..],
        ),
        (
            "fit-none.json",
            &b"{\"sustained\": 0.8, \"fit\": {\"runs_file\": \"runs.json\", \"runs\": 0, \"mae_before\": 1.2, \"mae_after\": 1.1}}"[..],
        ),
        // Round 3 files: models, families and flags.
        (
            "window.sh",
            &b"ARGS=(\n  --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2\n  --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1\n  --global-batch-size 16 --train-iters 10 --window-size 18446744073709551615,0\n)\n"[..],
        ),
        ("gpus-date.toml", &b"gpus = 1979-05-27\n"[..]),
        // FP8 recipes, FP8 weights and the optimizer state.
        (
            "moments.sh",
            &b"ARGS=(\n  --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2\n  --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1\n  --global-batch-size 16 --train-iters 10 --use-precision-aware-optimizer\n  --exp-avg-dtype fp8 --exp-avg-sq-dtype fp8\n)\n"[..],
        ),
        (
            "param-gather.sh",
            &b"ARGS=(\n  --num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 2\n  --swiglu --disable-bias-linear --bf16 --normalization RMSNorm --position-embedding-type rope --seq-length 128 --micro-batch-size 1\n  --global-batch-size 16 --train-iters 10 --fp8-param-gather\n)\n"[..],
        ),
        (
            "plan-twice.json",
            &b"{\"model\": \"70b\", \"tokens\": 1000000000000, \"tokens\": 1, \"layout\": {\"tp\": 8, \"pp\": 8, \"dp\": 32, \"zero\": 1}}"[..],
        ),
    ] {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    for model in ["mixtral-8x7b-v0.1", "gemma-2b", "llama-3.1-8b"] {
        std::fs::create_dir_all(dir.join(model)).unwrap();
        std::fs::copy(
            hf.join(model).join("config.json"),
            dir.join(model).join("config.json"),
        )
        .unwrap();
    }
    // A whole partial result of a one-shard search, its ranking renamed.
    let partial = trainplan()
        .args(["search", "--models", "8b", "--shard", "1/1"])
        .output()
        .unwrap();
    let partial = String::from_utf8(partial.stdout).unwrap();
    let renamed = partial.replacen("\"rank\": \"loss\"", "\"rank\": \"speed\"", 1);
    assert_ne!(renamed, partial);
    std::fs::write(dir.join("rank.json"), renamed).unwrap();
    // The same partial with more passing than evaluated, and with its grid as an array.
    let mut value: serde_json::Value = serde_json::from_str(&partial).unwrap();
    let evaluated = value["evaluated"].as_u64().unwrap();
    value["passing"] = (evaluated + 1).into();
    std::fs::write(dir.join("counts.json"), value.to_string()).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&partial).unwrap();
    let grid: Vec<serde_json::Value> = value["grid"]
        .as_object()
        .unwrap()
        .values()
        .cloned()
        .collect();
    value["grid"] = grid.into();
    std::fs::write(dir.join("grid-list.json"), value.to_string()).unwrap();
    // Round 3 files: merge and calibrate, from a real partial whose shape passes.
    merge_files(dir);
    // A brief larger than the 1 MiB a brief may have, and a FIFO, which would block a read.
    std::fs::write(dir.join("big.json"), vec![b' '; (1 << 20) + 1]).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.join("fifo.json"))
        .status()
        .unwrap();
    assert!(made.success());
    let config = std::fs::read_to_string(hf.join("llama-3.1-8b/config.json")).unwrap();
    std::fs::create_dir_all(dir.join("odd")).unwrap();
    std::fs::write(
        dir.join("odd/config.json"),
        config.replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("dup")).unwrap();
    std::fs::write(
        dir.join("dup/config.json"),
        config.replace(
            "\"hidden_size\": 4096",
            "\"hidden_size\": 4096, \"hidden_size\": 8192",
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("two")).unwrap();
    std::fs::write(
        dir.join("two/config.json"),
        config.replace(
            "\"LlamaForCausalLM\"",
            "\"LlamaForCausalLM\", \"MistralForCausalLM\"",
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("neg")).unwrap();
    std::fs::write(
        dir.join("neg/config.json"),
        config.replace("\"num_hidden_layers\": 32", "\"num_hidden_layers\": -32"),
    )
    .unwrap();
    // Round 3: a huge RoPE θ, and a RoPE scaling whose type is not a name.
    for (name, from, to) in [
        ("theta", "\"rope_theta\": 500000.0", "\"rope_theta\": 1e300"),
        ("rope-type", "\"rope_type\": \"llama3\"", "\"rope_type\": 3"),
    ] {
        assert!(config.contains(from), "{from}");
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("config.json"), config.replace(from, to)).unwrap();
    }
}

/// Shard 1/1 of a search where 405B passes, each edited as a hand might: the files the merge
/// rows read.
fn merge_files(dir: &Path) {
    let out = trainplan()
        .args(["search", "--models", "405b", "--shard", "1/1"])
        .output()
        .unwrap();
    let partial: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let edit = |name: &str, change: &dyn Fn(&mut serde_json::Value)| {
        let mut value = partial.clone();
        change(&mut value);
        assert_ne!(value, partial, "{name}");
        std::fs::write(dir.join(name), value.to_string()).unwrap();
    };
    edit("shard-floor.json", &|v| {
        v["plans"][0]["plan"]["loss"] = 1.5.into()
    });
    edit("shard-tp3.json", &|v| {
        v["plans"][0]["plan"]["layout"]["tp"] = 3.into()
    });
    edit("shard-twice.json", &|v| {
        v["plans"][1] = v["plans"][0].clone()
    });
    edit("shard-cut.json", &|v| {
        let mut front = v["front"].as_array().unwrap().clone();
        front.remove(0);
        v["front"] = front.into();
    });
    // A key first, so the error's line and column do not move with the rest of the file.
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let colour = text.replacen('{', "{\"colour\": \"red\",", 1);
    std::fs::write(dir.join("shard-colour.json"), colour).unwrap();
    edit("shard-choices.json", &|v| v["choices"] = 3.into());
}

const ROWS: &[Row] = &[
    // The brief: flags and file fields alike (SPEC.md §1).
    row("`--gpus`, `gpus`", "whole, 1 to 10⁸", &["check", "--model", "70b", "--tokens", "1e12", "--gpus", "0"], "error: invalid brief.gpus = 0: a whole number from 1 to 100,000,000"),
    row("`--peak-tflops`, `peak_tflops`", "finite, > 0, at most 10⁶", &["check", "--model", "70b", "--tokens", "1e12", "--peak-tflops", "NaN"], "error: invalid brief.peak_tflops = NaN: a number > 0 and at most 1000000"),
    row("`--gpu-memory-gb`, `gpu_memory_gb`", "finite, > 0, at most 10⁶", &["check", "--model", "70b", "--tokens", "1e12", "--gpu-memory-gb", "-80"], "error: invalid brief.gpu_memory_gb = -80: a number > 0 and at most 1000000"),
    row("`--memory-cap-gb`, `memory_cap_gb`", "> 0, at most the card's memory", &["check", "--model", "70b", "--tokens", "1e12", "--memory-cap-gb", "90"], "error: invalid brief.memory_cap_gb = 90: at most the card's 80 GB (gpu_memory_gb)"),
    row("`--gpus` and every count", "at most 2⁶⁴ − 1 as written", &["check", "--model", "70b", "--tokens", "1e12", "--gpus", "18446744073709551616"], "error: invalid value '18446744073709551616' for '--gpus <N>': at most 18446744073709551615 (2^64 − 1)"),
    row("`--gpus-per-node`, `gpus_per_node`", "whole, 1 to 1,024", &["check", "--model", "70b", "--tokens", "1e12", "--gpus-per-node", "0"], "error: invalid brief.gpus_per_node = 0: a whole number from 1 to 1,024"),
    row("`--scale-up-gpus`, `scale_up_gpus`", "whole hosts, from the node's GPUs to 65,536", &["check", "--model", "70b", "--tokens", "1e12", "--gpus-per-node", "4", "--scale-up-gpus", "70"], "error: invalid brief.scale_up_gpus = 70: a multiple of the 4 GPUs per node (gpus_per_node), from 4 to 65,536"),
    row("`--scale-up-used`, `scale_up_used`", "whole hosts, at most the domain", &["check", "--model", "70b", "--tokens", "1e12", "--gpus-per-node", "4", "--scale-up-gpus", "72", "--scale-up-used", "80"], "error: invalid brief.scale_up_used = 80: a multiple of the 4 GPUs per node (gpus_per_node), from 4 to the 72 GPUs of a scale-up domain (scale_up_gpus)"),
    row("`--mfu`, `mfu`", "in (0, 1]", &["check", "--model", "70b", "--tokens", "1e12", "--mfu", "-0.4"], "error: invalid brief.mfu = -0.4: a fraction in (0, 1], for example 0.4 for 40 %"),
    row("`--max-days`, `max_days`", "finite, > 0, at most 36,500", &["check", "--model", "70b", "--tokens", "1e12", "--max-days", "inf"], "error: invalid brief.max_days = inf: a number > 0 and at most 36500"),
    row("`--loss-target`, `loss_target`", "> 0, at most 1,000", &["check", "--model", "70b", "--tokens", "1e12", "--loss-target", "0"], "error: invalid brief.loss_target = 0: a number > 0 and at most 1000"),
    row("`--seq-len`, `seq_len`", "whole, 1 to 10⁸", &["check", "--model", "70b", "--tokens", "1e12", "--seq-len", "0"], "error: invalid brief.seq_len = 0: a whole number from 1 to 100,000,000"),
    row("`--loss-e`, `loss_law.e`", "finite, ≥ 0", &["check", "--model", "70b", "--tokens", "1e12", "--loss-e", "-1"], "error: invalid brief.loss_law.e = -1: a finite number ≥ 0"),
    row("`--loss-a`/`-b`/`-alpha`/`-beta`, `loss_law.*`", "finite, > 0", &["check", "--model", "70b", "--tokens", "1e12", "--loss-alpha", "0"], "error: invalid brief.loss_law.alpha = 0: a finite number > 0"),
    row("the brief as a whole", "a compute-optimal model of 1 to 10¹⁸ parameters and tokens", &["check", "--model", "70b", "--tokens", "1e12", "--mfu", "1e-300"], "error: invalid brief = a budget of 5.250e-276 FLOPs: a budget whose compute-optimal model (3.713e-143 parameters on 2.356e-134 tokens) has between 1 and 1.0e18 of each; check peak_tflops, mfu, gpus, max_days, max_cost and the loss law"),
    row("`--loss-law`", "besiroglu, besiroglu-unrounded, hoffmann, muennighoff, ludziejewski, gadre", &["check", "--model", "70b", "--tokens", "1e12", "--loss-law", "chinchilla"], "error: invalid value 'chinchilla' for '--loss-law <PRESET>' [possible values: besiroglu, besiroglu-unrounded, hoffmann, muennighoff, ludziejewski, gadre]"),
    row("`--unique-tokens` / `unique_tokens`", "a law that values repeats", &["check", "--model", "70b", "--tokens", "1e12", "--unique-tokens", "5e11"], "error: invalid brief.unique_tokens = 500000000000: a law that says what repeated tokens are worth: --loss-law muennighoff, or loss_law.repetition = { r_d, r_n } in the brief"),
    row("`--unique-tokens` / `unique_tokens`", "whole, ≥ 1", &["check", "--model", "70b", "--tokens", "1e12", "--loss-law", "muennighoff", "--unique-tokens", "0"], "error: invalid brief.unique_tokens = 0: a whole number from 1 to 1e18"),
    row("`--gpu`, `gpu`", "a preset name", &["check", "--model", "70b", "--tokens", "1e12", "--gpu", "h300"], "error: invalid value 'h300' for '--gpu <GPU>': expected one of a100-40gb, a100-80gb, h100-sxm, h100-pcie, h200, h800, b200, b300, gb200, gb300, mi300x, mi325x, mi355x"),
    row("`--intra-node-gbps` and the other link figures, `topology.*`", "finite, > 0", &["check", "--model", "70b", "--tokens", "1e12", "--intra-node-gbps", "0"], "error: invalid brief.topology.intra_node_gbps = 0: a number > 0, at most 1000000000"),
    row("`--failures-per-gpu-hour`, `--restart-minutes`, …, `reliability.*`", "finite, ≥ 0", &["check", "--model", "70b", "--tokens", "1e12", "--failures-per-gpu-hour", "-1"], "error: invalid brief.reliability.failures_per_gpu_hour = -1: a number ≥ 0, at most 1000000000"),
    row("`--price-per-gpu-hour`, `spend.price_per_gpu_hour`", "finite, > 0, at most 10⁶", &["check", "--model", "70b", "--tokens", "1e12", "--price-per-gpu-hour", "0"], "error: invalid brief.spend.price_per_gpu_hour = 0: a price > 0 and at most 1e6 a GPU-hour"),
    row("`--gpu-power-w`, `spend.gpu_power_w`", "finite, > 0, at most 10⁵", &["check", "--model", "70b", "--tokens", "1e12", "--gpu-power-w", "-700"], "error: invalid brief.spend.gpu_power_w = -700: a power > 0 and at most 100,000 W a GPU"),
    row("`--pue`, `spend.pue`", "1 to 10, with a power", &["check", "--model", "70b", "--tokens", "1e12", "--gpu", "h100-sxm", "--pue", "0.9"], "error: invalid brief.spend.pue = 0.9: a power usage effectiveness from 1 to 10 (facility energy over IT energy)"),
    row("`--pue`, `--carbon-g-per-kwh`", "only with a power", &["check", "--model", "70b", "--tokens", "1e12", "--carbon-g-per-kwh", "400"], "error: invalid brief.spend.carbon_g_per_kwh = 400: it needs a power (spend.gpu_power_w, --gpu-power-w or a --gpu preset), and none is given"),
    row("`--max-cost`, `max_cost`", "only with a price", &["check", "--model", "70b", "--tokens", "1e12", "--max-cost", "1e6"], "error: invalid brief.max_cost = 1000000: it needs a price (spend.price_per_gpu_hour, --price-per-gpu-hour), and none is given"),
    row("`--rank cost`", "only with a price", &["search", "--rank", "cost"], "error: invalid --rank = cost: a brief with a price (--price-per-gpu-hour, spend.price_per_gpu_hour)"),
    // Brief files.
    row("`--brief FILE`", "a readable file", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "missing.json"], "error: cannot read 'missing.json': No such file or directory (os error 2)"),
    row("`--brief FILE`", "UTF-8", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "latin1.json"], "error: cannot read 'latin1.json': stream did not contain valid UTF-8"),
    row("`--brief FILE`", "a regular file", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "/dev/zero"], "error: cannot read '/dev/zero': not a regular file (a device, FIFO or socket); a brief is read from a file"),
    row("`--brief FILE`", "a regular file, never a FIFO (it would block)", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "fifo.json"], "error: cannot read 'fifo.json': not a regular file (a device, FIFO or socket); a brief is read from a file"),
    row("`--brief FILE`", "a file, not a directory", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "."], "error: cannot read '.': a directory; a brief is read from a file"),
    row("`--brief FILE`", "at most 1 MiB", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "big.json"], "error: cannot read 'big.json': 1,048,577 bytes or more, more than the 1 MiB a brief may have"),
    row("`--brief FILE`", "an object, not an array", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "list.json"], "error: cannot parse 'list.json': not a brief: invalid type: sequence, expected struct BriefPatch at line 1 column 1"),
    row("`loss_law`, `topology`, `reliability`, `family`", "objects (tables), never arrays", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "law-list.json"], "error: cannot parse 'law-list.json': not a brief: loss_law: invalid type: sequence, expected struct LossLawPatch at line 1 column 14"),
    row("`topology` in TOML", "a table, never an array", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "topology-list.toml"], "error: cannot parse 'topology-list.toml': not a brief: topology: invalid type: sequence, expected struct TopologyPatch at line 1 column 12"),
    row("a brief field", "given once", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "twice.json"], "error: cannot parse 'twice.json': not a brief: gpus: given twice: each key may be given once at line 1 column 21"),
    row("`gpu`, `family` and every field", "a value: `null` is refused (leave the field out)", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "null-gpu.json"], "error: cannot parse 'null-gpu.json': not a brief: gpu: null is not a value here: leave the field out to keep its default at line 1 column 13"),
    row("a number in TOML", "a number, not a datetime", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "date.toml"], "error: cannot parse 'date.toml': not a brief: max_days: invalid type: a TOML datetime (1979-05-27), expected f64 at line 1 column 12"),
    row("`--brief FILE.json`", "not empty", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "empty.json"], "error: cannot parse 'empty.json': not a brief: EOF while parsing a value at line 1 column 0"),
    row("`--brief FILE.json`", "well-formed JSON", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "broken.json"], "error: cannot parse 'broken.json': not a brief: gpus: EOF while parsing a value at line 1 column 9"),
    row("`--brief FILE.toml`", "well-formed TOML", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "broken.toml"], "error: cannot parse 'broken.toml': not a brief: invalid array: expected `]` at line 1 column 9"),
    row("a brief file's fields", "the right type", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "string.json"], "error: cannot parse 'string.json': not a brief: gpus: invalid type: string \"many\", expected a whole number ≥ 0 at line 1 column 15"),
    row("a brief file's fields", "known names", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "typo.toml"], "error: cannot parse 'typo.toml': not a brief: loss_law.alfa: unknown field `alfa`, expected one of `e`, `a`, `b`, `alpha`, `beta`, `repetition`, `experts` at line 2 column 1"),
    // The design.
    row("`--model`", "8b, 70b, 405b or a dimension name", &["check", "--model", "13b", "--tokens", "1e12"], "error: unknown model '13b': expected one of 8b, 70b, 405b, or a family shape such as L80-h8192-f28672"),
    row("the model", "one of `--model`, `--model-config`, `--layers`…", &["check", "--tokens", "1e12"], "error: invalid model = none: one of --model, --model-config, or --layers --hidden --ffn"),
    row("`--tokens`", "whole, ≥ 1", &["check", "--model", "70b", "--tokens", "0"], "error: invalid --tokens = 0: a whole number ≥ 1"),
    row("`--tokens`", "whole, not a fraction", &["check", "--model", "70b", "--tokens", "1.5"], "error: invalid value '1.5' for '--tokens <D>': expected a whole number, not a fraction"),
    row("`--tokens`", "below 2⁵³ in scientific notation", &["check", "--model", "70b", "--tokens", "1e30"], "error: invalid value '1e30' for '--tokens <D>': above 2^53 write the number out in full digits, not as 1.2e19"),
    row("`--tp`", "divides the GPUs per node", &["check", "--model", "70b", "--tokens", "1e12", "--tp", "16"], "error: invalid layout: tp = 16 must divide the 8 GPUs per node (TP stays inside a node)"),
    row("`--tp` in a scale-up domain larger than the node", "divides the GPUs of a domain used", &["check", "--model", "70b", "--tokens", "1e12", "--gpus", "512", "--gpus-per-node", "4", "--scale-up-gpus", "72", "--tp", "16"], "error: invalid layout: tp = 16 must divide the 72 GPUs of a scale-up domain used (TP stays inside one NVLink domain)"),
    row("`--tp`", "divides the heads and KV heads", &["check", "--layers", "4", "--hidden", "1536", "--ffn", "4096", "--heads", "12", "--kv-heads", "4", "--tokens", "1e12", "--tp", "8"], "error: invalid layout: tp = 8 does not divide the 12 attention heads and 4 KV heads of L4-h1536-f4096-kv4"),
    row("`--pp`", "1 to the layers", &["check", "--model", "70b", "--tokens", "1e12", "--pp", "81"], "error: invalid layout: pp = 81 must be between 1 and the 80 layers of llama3-70b"),
    row("`--zero`", "0, 1, 2 or 3", &["check", "--model", "70b", "--tokens", "1e12", "--zero", "4"], "error: invalid value '4' for '--zero <STAGE>': expected a ZeRO stage: 0, 1, 2 or 3"),
    row("`--global-batch-tokens`", "a multiple of micro-batch × sequence × DP", &["check", "--model", "70b", "--tokens", "1e12", "--tp", "8", "--memory", "detailed", "--global-batch-tokens", "1000"], "error: invalid --global-batch-tokens = 1000: a whole multiple of b × s × DP = 1 × 8192 × 256"),
    row("`--schedule`", "1f1b, interleaved:V with V ≥ 1 (1 is 1f1b), zbv or dualpipev", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--schedule", "interleaved:0"], "error: invalid --schedule = interleaved:0: 1f1b, interleaved:V with V ≥ 1 chunks (interleaved:1 is 1f1b), zbv or dualpipev"),
    row("training-step flags", "with `--memory detailed`", &["check", "--model", "70b", "--tokens", "1e12", "--recompute", "none"], "error: invalid --memory = plate: --memory detailed (or --detailed), which the training-step and memory-model flags need"),
    row("`--fragmentation`", "in [0, 1)", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--fragmentation", "1"], "error: invalid --fragmentation = 1: a fraction in [0, 1)"),
    row("`--tp-overlap`, `--pp-overlap`, `--dp-overlap`", "in [0, 1]", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--time", "detailed", "--tp-overlap", "2"], "error: invalid --tp-overlap = 2: a fraction in [0, 1]"),
    row("`--reserve-gb`", "0 to 1000, a huge value named as typed", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--reserve-gb", "1e300"], "error: invalid --reserve-gb = 1e300: 0 to 1000 GB"),
    row("`--sensitivity`", "with the text report or `--json`", &["check", "--model", "70b", "--tokens", "1e12", "--sensitivity", "--format", "csv"], "error: invalid --sensitivity = with --format csv: the text report or --json, which carry its table"),
    row("`search --sensitivity`", "not with `--all` or `--shard`", &["search", "--sensitivity", "--all"], "error: the argument '--sensitivity' cannot be used with '--all'"),
    row("`--efficiency FILE`", "points as objects", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--time", "detailed", "--efficiency", "points-list.json"], "error: cannot parse 'points-list.json': not an efficiency table: points[0]: invalid type: sequence, expected struct Point at line 1 column 13"),
    row("`--efficiency FILE`", "at least one point", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--time", "detailed", "--efficiency", "no-points.json"], "error: invalid efficiency.points = []: at least one point"),
    row("`--layers` (ad hoc)", "whole, ≥ 1", &["check", "--layers", "0", "--hidden", "1024", "--ffn", "4096", "--tokens", "1e12"], "error: invalid --layers = 0: a whole number ≥ 1"),
    row("`--hidden` (ad hoc)", "a multiple of 128, or `--heads`", &["check", "--layers", "4", "--hidden", "1000", "--ffn", "4096", "--tokens", "1e12"], "error: invalid --hidden = 1000: a multiple of 128, or give --heads"),
    row("`--precision`", "a format the GPU's tensor cores run (NVFP4: Blackwell)", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--precision", "nvfp4"], "error: invalid --precision = nvfp4: bf16, or a GPU with NVFP4 tensor cores (fp4_tflops > 0 and nvfp4 = true: Blackwell)"),
    row("`--precision`", "a recipe the stack runs on the GPU's software", &["check", "--model", "70b", "--tokens", "1e12", "--tp", "8", "--memory", "detailed", "--time", "detailed", "--gpu", "mi355x", "--precision", "mxfp8"], "error: invalid --precision = mxfp8: a precision the megatron-te stack has a ROCm recipe for on the mi355x"),
    // Hugging Face configs.
    row("`--model-config FILE`", "a readable file", &["check", "--model-config", "missing/config.json", "--tokens", "1e12"], "error: cannot read 'missing/config.json': No such file or directory (os error 2)"),
    row("`--model-config FILE`", "a JSON object", &["check", "--model-config", "list.json", "--tokens", "1e12"], "error: cannot parse 'list.json': not a Hugging Face config.json: expected a JSON object"),
    row("`num_hidden_layers` and the other counts", "whole, ≥ 1", &["check", "--model-config", "neg/config.json", "--tokens", "1e12"], "error: invalid neg/config.json: num_hidden_layers = -32: a whole number ≥ 1"),
    row("`num_key_value_heads`", "divides `num_attention_heads`", &["check", "--model-config", "odd/config.json", "--tokens", "1e12"], "error: invalid odd/config.json: num_key_value_heads = 5: a divisor of the 32 attention heads"),
    row("`--moe-recompute`, `--ep-dispatcher`, `--ep-overlap`, `--moe-imbalance`", "a mixture of experts", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--moe-recompute", "act"], "error: invalid --moe-recompute = act: a mixture of experts: llama3-70b is dense (the flag sets how its experts run)"),
    row("`--ep-overlap on`", "EP > 1, no full recomputation, interleaving under PP (Megatron-core's rules)", &["check", "--model-config", "mixtral-8x7b-v0.1/config.json", "--tokens", "1e12", "--gpus", "64", "--memory", "detailed", "--ep-overlap", "on"], "error: invalid --ep-overlap = on: off with EP 1: the overlap hides expert-parallel all-to-alls"),
    row("`--moe-recompute`, `--norm-recompute`", "with `--recompute none` or `selective`", &["check", "--model-config", "mixtral-8x7b-v0.1/config.json", "--tokens", "1e12", "--gpus", "64", "--memory", "detailed", "--ep", "8", "--moe-recompute", "act", "--recompute", "full"], "error: invalid --recompute = full: none or selective with --moe-recompute or --norm-recompute (Megatron-core's recompute modules go with selective granularity)"),
    row("`--latent-recompute`", "latent attention, with `--recompute none` or `selective`", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--latent-recompute", "on"], "error: invalid --latent-recompute = on: off for llama3-70b, which has no latent attention whose up-projections it would recompute (Megatron-core's mla_up_proj)"),
    row("`search --ep`", "divides every model's routed experts", &["search", "--model-config", "mixtral-8x7b-v0.1/config.json", "--memory", "detailed", "--ep", "3"], "error: invalid --ep = 3: a divisor of the 8 routed experts of mixtral-8x7b-v0.1"),
    row("`search --ep`, `--etp`", "a mixture of experts among the models", &["search", "--models", "8b", "--memory", "detailed", "--ep", "2"], "error: invalid --ep = 2: a mixture of experts among the models (dense models take EP 1 and their TP)"),
    row("`search --etp`", "divides every model's expert width", &["search", "--model-config", "mixtral-8x7b-v0.1/config.json", "--memory", "detailed", "--etp", "5"], "error: invalid --etp = 5: a divisor of the experts' width 14336 of mixtral-8x7b-v0.1"),
    row("`loss_law.experts.e_max`", "above e_start", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "law-emax.json"], "error: invalid brief.loss_law.experts.e_max = 2: a finite number above e_start = 2.0732"),
    row("`--ep`", "divides the routed experts", &["check", "--model-config", "mixtral-8x7b-v0.1/config.json", "--tokens", "1e12", "--ep", "3"], "error: invalid layout: ep = 3 must divide the 8 routed experts of mixtral-8x7b-v0.1"),
    row("`--ep`", "a mixture of experts only", &["check", "--model", "70b", "--tokens", "1e12", "--ep", "2"], "error: invalid layout: ep = 2 needs a mixture of experts: llama3-70b is dense (EP 1)"),
    row("`--etp` × `--ep`", "divides TP × CP × DP", &["check", "--model-config", "mixtral-8x7b-v0.1/config.json", "--tokens", "1e12", "--gpus", "8", "--ep", "8", "--etp", "2"], "error: invalid layout: etp × ep = 2 × 8 = 16 must divide TP × CP × DP = 8 (the ranks of a pipeline stage)"),
    row("`--moe-imbalance`", "1 to 16", &["check", "--model-config", "mixtral-8x7b-v0.1/config.json", "--tokens", "1e12", "--memory", "detailed", "--moe-imbalance", "0.5"], "error: invalid --moe-imbalance = 0.5: the busiest rank's routes over the mean, 1 to 16"),
    row("`--model-config FILE`", "each key once", &["check", "--model-config", "dup/config.json", "--tokens", "1e12"], "error: cannot parse 'dup/config.json': not a Hugging Face config.json: hidden_size: given twice: each key may be given once at line 10 column 36"),
    row("`architectures`", "one name", &["check", "--model-config", "two/config.json", "--tokens", "1e12"], "error: invalid two/config.json: architectures = [\"LlamaForCausalLM\",\"MistralForCausalLM\"]: one architecture name, such as [\"LlamaForCausalLM\"]"),
    row("`architectures`", "Llama, Mistral, Qwen2, Qwen3, an MoE family or Nemotron-H read", &["check", "--model-config", "gemma-2b/config.json", "--tokens", "1e12"], "error: cannot plan 'gemma-2b/config.json': architecture GemmaForCausalLM is not supported; trainplan reads LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM, Llama4ForConditionalGeneration, Llama4ForCausalLM, NemotronHForCausalLM"),
    // Search.
    row("`--top`", "whole, ≥ 1", &["search", "--top", "0"], "error: invalid --top = 0: a whole number ≥ 1"),
    row("`--tokens-step`", "at most 10⁸ grid points", &["search", "--tokens-step", "1"], "error: invalid --tokens-step = 1: a step giving at most 100000000 token counts (this gives 49990000000001)"),
    row("`--tokens-max`", "at least `--tokens-min`", &["search", "--tokens-min", "2e13", "--tokens-max", "1e13"], "error: invalid --tokens-max = 10000000000000: at least --tokens-min (20000000000000)"),
    row("`--threads`", "0 (every core) to 1,024", &["search", "--threads", "2000"], "error: invalid --threads = 2000: 0 (every core) to 1024"),
    row("`--shard I/N`", "1 ≤ I ≤ N", &["search", "--shard", "3/2"], "error: invalid --shard = 3/2: I/N with 1 ≤ I ≤ N, for example 3/8"),
    row("`--layers`, `--hidden`, `--ffn-ratio`", "ranges start..end:step, together", &["search", "--layers", "40..10:4", "--hidden", "8192", "--ffn-ratio", "3.5"], "error: invalid --layers = 40..10:4: a range start..end:step, for example 40..160:4"),
    row("`--experts`, `--top-k`, `--granularity`", "whole-number ranges up to 4,096", &["search", "--layers", "32", "--hidden", "4096", "--ffn-ratio", "3.5", "--experts", "1..4.5"], "error: invalid --experts = 1..4.5:1: whole numbers up to 4096 in the range and its step"),
    row("a shape family", "at most 10⁶ shapes", &["search", "--layers", "1..100000:1", "--hidden", "128..1000000:128", "--ffn-ratio", "1..64:1"], "error: invalid shape family = 49996800000 shapes: at most 1000000 (widen the steps)"),
    // Launcher files read back (check --from).
    row("`--from` Megatron-LM arguments", "a whole design, 16-bit precision stated (options the plan cannot say are each refused at once: docs/configs.md)", &["check", "--from", "args.sh"], "error: invalid --bf16 = missing: 16-bit mixed precision (--bf16, or --fp16), the precision every plan keeps its weights in"),
    row("`--from` torchtitan keys", "keys trainplan maps or knows to leave alone", &["check", "--from", "moe.toml"], "error: invalid parallelism.expert_parallel_degree = 8: a key trainplan maps to the design or knows to leave the plan alone (take it out, or state it with trainplan's flags if it changes the design)"),
    row("a flag with `--from`", "what the file says, where it says it", &["check", "--from", "job.toml", "--tp", "2"], "error: invalid --tp = 2: 1, what the --from file says (a flag the file sets must agree with it)"),
    row("`--from` a DeepSpeed JSON", "with the model alongside", &["check", "--from", "ds_config.json"], "error: invalid --from = deepspeed: the model alongside: DeepSpeed's JSON has none (give --model-config config.json, or --model)"),
    // Other commands' inputs.
    row("`merge FILE…`", "partial results of `search --shard`", &["merge", "partial.json"], "error: cannot parse 'partial.json': not a partial search result: missing field `kind` at line 1 column 2"),
    row("a partial result's `rank`", "loss, days, memory, cost or lifetime", &["merge", "rank.json"], "error: invalid rank = speed: loss, days, memory, cost or lifetime"),
    row("`export --plan FILE`", "a plan, search or Pareto JSON", &["export", "--format", "megatron", "--plan", "plan.json"], "error: cannot parse 'plan.json': not a plan: missing field `model`"),
    row("a partial result's counts", "passing ≤ evaluated; plans and front ≤ passing", &["merge", "counts.json"], "error: invalid merge = shard 1/1: 480000 evaluated, 480001 passing, 0 plans and 0 on the front: a partial file as search wrote it: passing at most evaluated, and the plans and the front at most the passing (and the plans at most top)"),
    row("a partial result's `grid`", "an object, never an array", &["merge", "grid-list.json"], "error: cannot parse 'grid-list.json': not a partial search result: grid: invalid type: sequence, expected struct TokenGrid at line 1 column 817"),
    row("`merge --max-file-mb`", "1 to 1,048,576 (default 1,024)", &["merge", "rank.json", "--max-file-mb", "0"], "error: invalid value '0' for '--max-file-mb <MIB>': 0 is not in 1..=1048576"),
    row("a plan's `layout`", "an object, never an array", &["export", "--format", "megatron", "--plan", "layout-list.json"], "error: cannot parse 'layout-list.json': not a plan: layout: invalid type: sequence, expected struct Layout"),
    row("a plan file's keys", "each key once", &["export", "--format", "megatron", "--plan", "plan-twice.json"], "error: cannot parse 'plan-twice.json': not a plan, search or Pareto JSON: tokens: given twice: each key may be given once at line 1 column 50"),
    row("`export --index`", "1 for a file of one plan", &["export", "--format", "megatron", "--plan", "layout-ok.json", "--index", "2"], "error: invalid --index = 2: 1: the file holds one plan, not a search's plans or a Pareto front"),
    row("`--pareto`, `--plot` as a FIFO", "one that a process reads (else it would block)", &["search", "--pareto", "fifo.json"], "error: cannot write 'fifo.json': a FIFO that no process is reading"),
    row("`--plot`, `--pareto`", "a writable path that is not an input", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "typo.json", "--plot", "typo.json"], "error: invalid --plot = typo.json: a path other than the input files it would overwrite"),
    row("`serve --port`", "0 to 65,535", &["serve", "--port", "70000"], "error: invalid value '70000' for '--port <PORT>': 70000 is not in 0..=65535"),
    row("`serve --host`", "an IP address", &["serve", "--host", "localhost:80"], "error: invalid value 'localhost:80' for '--host <HOST>': invalid IP address syntax"),
    // Round 3: launchers and their readers.
    row("a plan file's `layout` (`export --plan`)", "every degree as `check` takes it: CP, replicas, EP, ETP", &["export", "--format", "megatron", "--plan", "plan-ep.json"], "error: invalid layout: ep = 2 needs a mixture of experts: llama3-70b is dense (EP 1)"),
    row("a plan file's experts' settings (`memory_model.ep_overlap`, …)", "a mixture of experts", &["export", "--format", "megatron", "--plan", "plan-dense-moe.json"], "error: invalid plan.memory_model.ep_overlap = set: a mixture of experts: llama3-70b is dense (the field sets how its experts run)"),
    row("a plan file's CP, `--format deepspeed`", "1: DeepSpeed's config has no context parallelism", &["export", "--format", "deepspeed", "--plan", "plan-cp.json"], "error: invalid --format = deepspeed: a plan without context parallelism: cp = 2 splits each sequence with K/V exchanged between its slices, and DeepSpeed's config has no such scheme (its sequence_parallel_size is DeepSpeed-Ulysses, an all-to-all splitting attention by heads, a different one)"),
    row("a detailed plan's ZeRO stage, `--format torchtitan`", "2 or 3; 0 without TP, CP or PP", &["export", "--format", "torchtitan", "--model", "8b", "--tokens", "1e12", "--gpus", "64", "--zero", "1", "--memory", "detailed", "--stack", "torchtitan"], "error: invalid --format = torchtitan: a ZeRO stage torchtitan runs: FSDP2 shards the gradients with the optimizer state (ZeRO 2 or 3), and its replication (ZeRO 0) does not compose with TP, CP or PP; this plan has ZeRO 1, which would run as ZeRO 2 (check it with --zero 2)"),
    row("a plan's settings beyond its stack, `--format megatron`", "the stage split, the experts' settings, gradients, Transformer Engine's loss, FP8 recipe and weights, optimizer state, which its arguments write", &["export", "--format", "megatron", "--model", "70b", "--tokens", "1e12", "--tp", "8", "--pp", "8", "--zero", "1", "--memory", "detailed", "--loss-precision", "bf16"], "error: invalid --format = megatron: a plan whose settings the file can say: llama3-70b was graded with --loss-precision bf16, which no Megatron-LM setting written here gives (it would run the megatron-te stack's --loss-precision fp32); check the plan without it"),
    row("`--from` torchrun's `--nnodes`", "a whole number ≥ 1, not an elastic range", &["check", "--from", "nodes.sh"], "error: line 1: invalid --nnodes = 2:4: a whole number of nodes ≥ 1, which the GPUs are counted from (an elastic range, an unset variable or a command is not read: give --gpus, or --set the variable)"),
    row("`--from` torchrun's `--nnodes`", "a number, not a variable the file does not set", &["check", "--from", "nodes-unset.sh"], "error: line 1: invalid --nnodes = no value: a whole number of nodes ≥ 1, which the GPUs are counted from (an elastic range, an unset variable or a command is not read: give --gpus, or --set the variable)"),
    row("`--from` a script's `while` and `until` loops", "none holding options (the reader runs no loop whose turns it cannot count)", &["check", "--from", "append.sh"], "error: line 2: invalid --from script = a while loop holding options: options outside loops whose turns the reader cannot count (write them out of the loop)"),
    row("`--from` a script's `if`, `case`, `&&` and `||`", "decided by the script's values, or by `--branch` or `--set` where the branches give different options", &["check", "--from", "if.sh"], "error: line 1: invalid --from script = `[ -f /etc/big ]` (line 1): a condition the script's values decide, or a branch chosen: its branches give different options (--branch 1=then gives --tensor-model-parallel-size 8, --branch 1=else gives --tensor-model-parallel-size 1; or --set the variable it tests)"),
    row("`--from` Megatron-LM options", "each mapped, read and not used, or refused with what the plan would need (several at once: docs/configs.md)", &["check", "--from", "function.sh"], "error: line 2: invalid --moe-expert-capacity-factor = 1.25: an option the plan can say, not this one (token dropping at an expert capacity: trainplan routes every token (dropless))"),
    row("`--from` a here-document", "its text skipped, never read as options", &["check", "--from", "heredoc.sh"], "error: invalid --from = no Megatron-LM options: a Megatron-LM argument list (--num-layers …), a torchtitan job TOML or a DeepSpeed JSON"),
    row("`--from` a switch (`--sequence-parallel`, …)", "no value: on when given", &["check", "--from", "sp-false.sh"], "error: line 1: invalid --sequence-parallel = false: no value: --sequence-parallel is a switch, on when given and off when left out"),
    row("`--from` a quoted variable of several options", "one option a word, as bash passes them", &["check", "--from", "par.sh"], "error: line 1: invalid megatron arguments = --tensor-model-parallel-size 4 --sequence-parallel: options written out, one a word (bash hands a quoted \"--a b\" over as one word, which Megatron-LM's parser refuses)"),
    row("`--from` a value from a command's output", "one the script sets (the reader runs no command), or given with `--set`", &["check", "--from", "value.sh"], "error: line 1: invalid --tensor-model-parallel-size = $(nproc): a value the script sets: the reader runs no command ($(…), backquotes) and cannot work out this one (give the variable with --set NAME=VALUE, or write the value out)"),
    row("`--from` Megatron-LM's `--moe-token-dispatcher-type`", "alltoall, or flex with `--moe-enable-deepep`", &["check", "--from", "moe.sh", "--gpus", "64"], "error: invalid --moe-token-dispatcher-type = allgather: alltoall, or flex with --moe-enable-deepep: the dispatchers the time model costs"),
    row("`--from` DeepSpeed's flags (`cpu_checkpointing`, …)", "true or false", &["check", "--from", "ds-yes.json"], "error: invalid activation_checkpointing.cpu_checkpointing = \"yes\": true or false"),
    row("`--from` a DeepSpeed key", "given once", &["check", "--from", "ds-twice.json"], "error: cannot parse 'ds-twice.json': not a DeepSpeed config: train_batch_size: given twice: each key may be given once at line 1 column 43"),
    row("`--from` torchtitan's `[quantize]` keys", "keys trainplan maps or knows to leave alone", &["check", "--from", "quantize.toml"], "error: invalid quantize.foo = 1: a key trainplan maps to the design or knows to leave the plan alone (take it out, or state it with trainplan's flags if it changes the design)"),
    row("`--from` a torchtitan table", "given once", &["check", "--from", "training-twice.toml"], "error: cannot parse 'training-twice.toml': not a torchtitan job TOML: invalid table header: duplicate key `training` in document root at line 3"),
    // Round 3: the server.
    // Round 3: merge and calibrate.
    row("a partial result's `loss`", "at least the law's floor for its model, and the law's for its tokens", &["merge", "shard-floor.json"], "error: invalid shard-floor.json: plans[0].plan.loss = 1.5: at least 1.863988, the floor of the partial's loss law for llama3-405b: no number of tokens trains below it (1.953335 on 860,000,000,000 tokens)"),
    row("a partial result's `layout`", "degrees the brief's machine allows, as `Layout::with` derives them", &["merge", "shard-tp3.json"], "error: invalid shard-tp3.json: plans[0].plan.layout = TP 3 × PP 1 × DP 1,024, ZeRO 3: a layout the brief's machine (2,048 GPUs, 8 a node) allows for llama3-405b: tp = 3 must divide the 8 GPUs per node (TP stays inside a node)"),
    row("a partial result's `plans`, `front`", "each plan once", &["merge", "shard-twice.json"], "error: invalid shard-twice.json: plans[1] = llama3-405b on 860,000,000,000 tokens, TP 2 × PP 1 × DP 1,024, ZeRO 3: each plan once: it is plans[0] too"),
    row("a partial result's `front`", "sorted by days, reaching every passing plan the partial knows of", &["merge", "shard-cut.json"], "error: invalid shard-cut.json: front = 4 points: a front that reaches llama3-405b's passing plan on 820,000,000,000 tokens (28.526 days, loss 1.954906); search --shard writes the whole front"),
    row("a partial result's keys", "only those `search --shard` writes", &["merge", "shard-colour.json"], "error: cannot parse 'shard-colour.json': not a partial search result: colour: unknown field: trainplan writes no such key here at line 1 column 11"),
    row("a partial result's `plans` and `choices`", "the best `top` of the choices", &["merge", "shard-choices.json"], "error: invalid shard-choices.json: plans = 10: 3, the best 10 of the 3 passing choices the partial counts (choices)"),
    row("a run's `published.mfu_pct`", "above 0, at most 100", &["calibrate", "runs-mfu.json"], "error: invalid runs[nemo-gpt3-175b-bf16-128].published.mfu_pct = 120: a percentage above 0 and at most 100: no run computes faster than its card's peak"),
    row("a run's `published.tokens_per_s_per_gpu`", "above 0, within the card's peak", &["calibrate", "runs-tps.json"], "error: invalid runs[nemo-gpt3-175b-bf16-128].published.tokens_per_s_per_gpu = 3943.68: at most 931.3, the card's 989 TFLOP/s bf16 peak in trainplan's FLOP count for this model and step (423.5 % MFU as given): check the units, tokens per second per GPU"),
    row("a run of `calibrate RUNS.json`", "one that fits its card under the detailed memory model", &["calibrate", "runs-memory.json"], "error: invalid runs[nemo-gpt3-175b-bf16-128] = 222.8 GB predicted on its fullest GPU: at most what its card's 80 GB hold, 85.2 GB of 10^9 bytes: as described (TP 4 × PP 8 × DP 4, ZeRO 1, micro-batch 8, recomputation none), the detailed memory model says it could never fit, so it cannot calibrate the time model; check the run's layout, micro_batch, recompute and zero, give the card's memory in card_gb, or leave the run out"),
    row("`--calibration FILE`'s `fit`", "a run or more, errors finite and ≥ 0", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--time", "detailed", "--calibration", "fit-none.json"], "error: invalid fit-none.json: fit.runs = 0: at least 1: trainplan calibrate fits one run or more"),
    // Round 3: models, families and flags.
    row("`--window-size` in `--from` Megatron-LM arguments", "LEFT,0 with LEFT below 2⁶⁴ − 1", &["check", "--from", "window.sh"], "error: line 4: invalid --window-size = 18446744073709551615,0: a causal window as LEFT,0 (tokens before each one it sees), LEFT below 2^64 − 1"),
    row("`--unique-tokens` / `unique_tokens`", "at most 10¹⁸, compared as a whole number", &["check", "--model", "70b", "--tokens", "1e12", "--loss-law", "muennighoff", "--unique-tokens", "1000000000000000001"], "error: invalid brief.unique_tokens = 1000000000000000001: a whole number from 1 to 1e18"),
    row("a whole number in TOML (`gpus`, …)", "a number, not a datetime", &["check", "--model", "70b", "--tokens", "1e12", "--brief", "gpus-date.toml"], "error: cannot parse 'gpus-date.toml': not a brief: gpus: invalid type: a TOML datetime (1979-05-27), expected a whole number ≥ 0 at line 1 column 8"),
    row("`rope_theta` and every number a config gives", "in range, a huge value named as typed", &["check", "--model-config", "theta/config.json", "--tokens", "1e12"], "error: invalid theta/config.json: rope_theta = 1e300: a number > 0 and below 1e18"),
    row("`rope_scaling.rope_type`", "a name, or null for none", &["check", "--model-config", "rope-type/config.json", "--tokens", "1e12"], "error: invalid rope-type/config.json: rope_scaling.rope_type = 3: a name, such as \"llama3\", \"yarn\" or \"default\""),
    row("`--experts`, `--top-k`, `--granularity`", "ranges that name a mixture", &["search", "--layers", "32", "--hidden", "4096", "--ffn-ratio", "3.5", "--experts", "4", "--top-k", "8"], "error: invalid --experts, --top-k, --granularity = 4..4:1, 8..8:1, 1..1:1: ranges that name a mixture: top-k at most the experts, experts × granularity at most 4096, and an expert width (FFN / granularity) of at least 1"),
    // Round 4: FP8 recipes, FP8 weights and the optimizer state.
    row("`--fp8-recipe`", "delayed, tensorwise, blockwise or mxfp8", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--fp8-recipe", "rowwise"], "error: invalid value 'rowwise' for '--fp8-recipe <RECIPE>': invalid --fp8-recipe = rowwise: one of delayed, tensorwise, blockwise, mxfp8"),
    row("`--fp8-recipe`", "none with `--precision bf16`", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--fp8-recipe", "tensorwise"], "error: invalid --fp8-recipe = tensorwise: none with --precision bf16 (a recipe scales FP8: --precision fp8)"),
    row("`--fp8-recipe`", "mxfp8 or none with `--precision mxfp8`", &["check", "--model", "70b", "--tokens", "1e12", "--gpu", "b200", "--memory", "detailed", "--precision", "mxfp8", "--fp8-recipe", "blockwise"], "error: invalid --fp8-recipe = blockwise: mxfp8 (or none) with --precision mxfp8, whose scales are the recipe"),
    row("`--fp8-recipe`", "delayed, tensorwise or blockwise with `--precision fp8`", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--precision", "fp8", "--fp8-recipe", "mxfp8"], "error: invalid --fp8-recipe = mxfp8: delayed, tensorwise or blockwise with --precision fp8 (MXFP8 is --precision mxfp8)"),
    row("`--fp8-recipe`", "one the stack runs", &["check", "--model", "70b", "--tokens", "1e12", "--zero", "3", "--memory", "detailed", "--stack", "torchtitan", "--precision", "fp8", "--fp8-recipe", "blockwise"], "error: invalid --fp8-recipe = blockwise: delayed or tensorwise on the torchtitan stacks (torchao's float8 scales per tensor; blockwise scaling is Transformer Engine's: --stack megatron-te)"),
    row("`--fp8-params`", "off with `--precision bf16`", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--fp8-params", "on"], "error: invalid --fp8-params = on: off with --precision bf16 (FP8 weights need --precision fp8 or mxfp8)"),
    row("`--master-weights`", "fp32 or fp16 with `--fp8-params`", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--precision", "fp8", "--fp8-params", "on", "--master-weights", "remainders"], "error: invalid --master-weights = remainders: fp32 or fp16 with --fp8-params (the remainders are an FP32 master's low 16 bits beside a BF16 weight)"),
    row("`--optimizer-states`, `--master-weights`", "fp32 but on the megatron-te stack", &["check", "--model", "70b", "--tokens", "1e12", "--zero", "3", "--memory", "detailed", "--stack", "torchtitan", "--optimizer-states", "bf16"], "error: invalid --optimizer-states = bf16: fp32 on the torchtitan stack (lower-precision optimizer state is Megatron-core's precision-aware optimizer: --stack megatron-te)"),
    row("`--fp8-bf16-layers START,END`", "two counts", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--precision", "fp8", "--fp8-bf16-layers", "2"], "error: invalid value '2' for '--fp8-bf16-layers <START,END>': invalid --fp8-bf16-layers = 2: START,END: layers at the start and at the end kept in BF16, for example 1,1"),
    row("`--fp8-bf16-layers START,END`", "fewer than the model's layers, with FP8", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--precision", "fp8", "--fp8-bf16-layers", "40,40"], "error: invalid --fp8-bf16-layers = 40,40: fewer than the 80 layers of llama3-70b in all (--precision bf16 keeps every one)"),
    row("`--fp8-bf16-layers START,END`", "0,0 with `--precision bf16`", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--fp8-bf16-layers", "1,1"], "error: invalid --fp8-bf16-layers = 1,1: 0,0 with --precision bf16 (every layer is BF16)"),
    row("`--fp8-bf16-layers START,END`", "0,0 with FP4", &["check", "--model", "70b", "--tokens", "1e12", "--memory", "detailed", "--gpu", "b200", "--precision", "nvfp4", "--fp8-bf16-layers", "1,1"], "error: invalid --fp8-bf16-layers = 1,1: 0,0 with --precision nvfp4 (BF16 layers are an FP8 recipe's setting: --precision fp8 or mxfp8)"),
    row("`--from` Megatron-LM's `--exp-avg-dtype`", "fp32 or bf16", &["check", "--from", "moments.sh", "--gpus", "8"], "error: invalid --exp-avg-dtype = fp8: fp32 or bf16, the moments the model counts"),
    row("`--from` Megatron-LM's `--fp8-param-gather`", "with an FP8 recipe", &["check", "--from", "param-gather.sh", "--gpus", "8"], "error: invalid --fp8-param-gather = given: an FP8 recipe beside it (--fp8-format, --fp8-recipe): the weights it keeps in FP8"),
];

#[test]
fn every_row_of_the_validation_table_is_refused_as_it_says() {
    let dir = tempfile::tempdir().unwrap();
    files(dir.path());
    for row in ROWS {
        let out = trainplan()
            .current_dir(dir.path())
            .args(row.args)
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{:?}: {stderr}", row.args);
        assert!(out.stdout.is_empty(), "{:?}", row.args);
        assert_eq!(stderr, format!("{}\n", row.error), "{:?}", row.args);
    }
}

#[test]
fn the_docs_hold_the_validation_table() {
    let code = |s: &str| format!("`{}`", s.replace('|', "\\|"));
    let mut table = String::from(
        "| input | valid | for example | the error, exit status 2 |\n|---|---|---|---|\n",
    );
    for row in ROWS {
        table.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            row.input,
            row.valid,
            code(&format!("trainplan {}", row.args.join(" "))),
            code(row.error.trim_start_matches("error: "))
        ));
    }
    common::generated_sections(
        "docs/validation.md",
        "tests/validation.rs",
        &[("validation", table)],
    );
}
