//! Hugging Face configs: every accepted checkpoint's parameter count equals its published
//! count exactly; what cannot be planned is refused by name.

use std::path::PathBuf;

use trainplan::input::hf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf")
        .join(name)
        .join("config.json")
}

/// Published parameter counts: the Hugging Face Hub's safetensors totals for the Llama
/// checkpoints (Llama 3.2's from the Instruct models, the same shapes), GGUF
/// `general.parameter_count` for Mistral 7B, Mistral NeMo and Qwen2.5 7B, the Hub's count for
/// Qwen2.5 0.5B (model card: "0.49B, 0.36B non-embedding"), TinyLlama's safetensors header
/// (`{"F32": 1100048384}`), and Qwen3-8B's safetensors index (`total_size` 16,381,470,720
/// bytes of BF16).
const PUBLISHED: [(&str, u64); 11] = [
    ("llama-3.1-8b", 8_030_261_248),
    ("llama-3.1-70b", 70_553_706_496),
    ("llama-3.1-405b", 405_853_388_800),
    ("llama-3.2-1b", 1_235_814_400),
    ("llama-3.2-3b", 3_212_749_824),
    ("mistral-7b-v0.1", 7_241_732_096),
    ("mistral-nemo-base-2407", 12_247_782_400),
    ("qwen2.5-0.5b", 494_032_768),
    ("qwen2.5-7b", 7_615_616_512),
    ("tinyllama-1.1b", 1_100_048_384),
    ("qwen3-8b", 8_190_735_360),
];

#[test]
fn every_accepted_checkpoint_counts_its_published_parameters() {
    for (name, published) in PUBLISHED {
        let shape = hf::read(&fixture(name)).unwrap();
        assert_eq!(shape.params(), published, "{name}");
        assert_eq!(shape.name, name);
    }
}

#[test]
fn the_llama_3_1_configs_are_the_presets() {
    for (config, preset) in [
        ("llama-3.1-8b", "8b"),
        ("llama-3.1-70b", "70b"),
        ("llama-3.1-405b", "405b"),
    ] {
        let shape = hf::read(&fixture(config)).unwrap();
        assert!(shape.same_dimensions(&trainplan::model::preset(preset).unwrap()));
    }
}

#[test]
fn what_each_architecture_adds_is_read() {
    // Qwen2: q, k and v biases, hard-coded: 896 + 2·128 = 1,152 a layer in Qwen2.5 0.5B.
    let qwen = hf::read(&fixture("qwen2.5-0.5b")).unwrap();
    assert!(qwen.biases.qkv && !qwen.biases.output && !qwen.biases.mlp);
    assert!(qwen.tied_embeddings);
    // Counting its head twice would give 630,167,424.
    assert_eq!(qwen.params() + qwen.embedding_params(), 630_167_424);
    // Mistral NeMo's head dimension is 128, not 5,120 / 32 = 160 (which gives 12,772,070,400).
    let nemo = hf::read(&fixture("mistral-nemo-base-2407")).unwrap();
    assert_eq!((nemo.head_dim(), nemo.attention_width()), (128, 4_096));
    // Per layer, worked by hand: 2·5120·4096 + 2·5120·1024 + 3·5120·14336 + 2·5120.
    assert_eq!(nemo.params_per_layer(), 272_640_000);
    // Qwen3 dense: an RMSNorm of the 128-wide head on each query and key, no biases:
    // 2·4096·4096 + 2·4096·1024 + 3·4096·12288 + 2·4096 + 2·128 = 192,946,432 a layer.
    let qwen3 = hf::read(&fixture("qwen3-8b")).unwrap();
    assert!(qwen3.attention.qk_norm && qwen3.experts.is_none());
    assert_eq!(qwen3.biases, trainplan::model::Biases::default());
    assert_eq!(qwen3.params_per_layer(), 192_946_432);
}

/// Published parameter counts of the mixtures of experts, every expert counted: Mixtral 8x7B,
/// Qwen1.5-MoE-A2.7B, Qwen3-30B-A3B and Qwen3-235B-A22B as the Hub's safetensors totals (all
/// BF16; `model.safetensors.index.json` gives twice each in bytes); DeepSeek-V3's main model
/// with its routers' score corrections (671,026,419,200: the Hub's 684,531,386,000 adds the
/// multi-token-prediction layer and the FP8 block scales, neither built by transformers); gpt-oss as its GGUF `general.parameter_count` and its model card's Table 1
/// (116.83B, 20.91B); Llama 4 Maverick's language model (400,711,848,960: the checkpoint's
/// 401,583,781,376 less its vision encoder and projector, 871,932,416); Kimi K2 as its
/// checkpoint's logical parameters (the FP8 block scales left out), which its GGUF conversions
/// report as `n_params`.
const PUBLISHED_MOE: [(&str, u64); 9] = [
    ("mixtral-8x7b-v0.1", 46_702_792_704),
    ("qwen1.5-moe-a2.7b", 14_315_784_192),
    ("qwen3-30b-a3b", 30_532_122_624),
    ("qwen3-235b-a22b", 235_093_634_560),
    ("deepseek-v3", 671_026_419_200),
    ("gpt-oss-20b", 20_914_757_184),
    ("gpt-oss-120b", 116_829_156_672),
    ("llama-4-maverick-17b-128e-instruct", 400_711_848_960),
    ("kimi-k2-instruct", 1_026_408_232_448),
];

#[test]
fn every_mixture_of_experts_counts_its_published_parameters() {
    for (name, published) in PUBLISHED_MOE {
        let shape = hf::read(&fixture(name)).unwrap();
        assert_eq!(shape.params(), published, "{name}");
        assert!(shape.experts.is_some(), "{name}");
        assert!(shape.active_params() < shape.params(), "{name}");
    }
    // Llama 4 Scout's checkpoint, 108,641,793,536, holds the same vision encoder as
    // Maverick's (871,932,416).
    let scout = hf::read(&fixture("llama-4-scout-17b-16e-instruct")).unwrap();
    assert_eq!(scout.params(), 108_641_793_536 - 871_932_416);
}

#[test]
fn deepseek_v3_s_multi_token_prediction_is_counted_apart_and_closes_its_checkpoint() {
    // One MTP depth: an MoE layer as the model's last, 11,507,286,272 (MLA 187,107,328, two
    // norms, 257 experts of 3·7,168·2,048 and the router's 256·7,168 + 256), its projection
    // 2·7,168² = 102,760,448 and three norms of 7,168.
    let v3 = hf::read(&fixture("deepseek-v3")).unwrap();
    assert_eq!(v3.mtp, 1);
    assert_eq!(v3.mtp_params(), 11_507_286_272 + 102_760_448 + 3 * 7_168);
    assert!(v3.mtp_is_moe());
    // The checkpoint stores the depth with its own embedding and head (2·V·h) and the FP8
    // weights' 128 × 128 block scales beside every quantized matrix (attention's five, the
    // MLPs'; not the embedding, head, routers or the depth's projection): 684,531,386,000,
    // the Hub's count ("671B + 14B").
    let blocks = |rows: u64, cols: u64| rows.div_ceil(128) * cols.div_ceil(128);
    let h = 7_168;
    let attention = blocks(1_536, h)
        + blocks(128 * 192, 1_536)
        + blocks(576, h)
        + blocks(128 * 256, 512)
        + blocks(h, 128 * 128);
    let mlp = |f: u64| 2 * blocks(f, h) + blocks(h, f);
    let scales = 3 * (attention + mlp(18_432)) + (58 + 1) * (attention + 257 * mlp(2_048));
    assert_eq!(scales, 41_540_496);
    let copies = 2 * v3.embedding_params();
    assert_eq!(
        v3.params() + v3.mtp_params() + copies + scales,
        684_531_386_000
    );
    // Kimi K2 trains none (its config's 0).
    assert_eq!(hf::read(&fixture("kimi-k2-instruct")).unwrap().mtp, 0);
}

#[test]
fn the_parameters_a_token_goes_through_are_the_published_active_counts() {
    // Where a publication says which tables it counts, the same count. gpt-oss's card counts
    // the unembedding but not the embedding (Table 1: 5.13B and 3.61B); DeepSeek-V3's
    // 36,625,618,432 is an audit of its checkpoint's activated weights with the head and
    // without the embedding (the paper's "37B" rounds both ways); Mixtral's "12.9B active"
    // and Qwen's "2.0B non-embedding" of Qwen1.5-MoE-A2.7B count both tables and neither.
    let active = |name: &str| {
        let shape = hf::read(&fixture(name)).unwrap();
        (shape.active_params(), shape.embedding_params())
    };
    let (n, table) = active("gpt-oss-120b");
    assert_eq!(n - table, 5_132_849_472);
    let (n, table) = active("gpt-oss-20b");
    assert_eq!(n - table, 3_608_307_264);
    let (n, table) = active("deepseek-v3");
    assert_eq!(n - table, 36_625_618_432);
    // Kimi K2 ("32B activated"): an audit of the matrices a decoded token runs through,
    // 31,686,066,176 with the head, plus the vectors (61 layers' four norms, 16,384, the final
    // norm and 60 routers' 384 score corrections): 999,424 + 7,168 + 23,040.
    let (n, table) = active("kimi-k2-instruct");
    assert_eq!(n - table, 31_686_066_176 + 1_029_632);
    assert_eq!(active("mixtral-8x7b-v0.1").0, 12_879_925_248);
    let (n, table) = active("qwen1.5-moe-a2.7b");
    assert_eq!((n, n - 2 * table), (2_689_173_504, 2_066_843_648));
}

#[test]
fn each_family_s_layers_and_vectors_are_read_as_its_code_builds_them() {
    use trainplan::model::LayerSet;
    // DeepSeek-V3: three dense layers of 18,432, then 58 of 256 experts of 2,048 and one
    // shared; latent attention of ranks 1,536 and 512.
    let deepseek = hf::read(&fixture("deepseek-v3")).unwrap();
    let e = deepseek.experts.as_ref().unwrap();
    assert_eq!(e.layers, LayerSet::Every { first: 3, step: 1 });
    assert_eq!(
        (e.routed, e.per_token, e.ffn, e.shared_ffn),
        (256, 8, 2_048, 2_048)
    );
    assert_eq!(deepseek.ffn, 18_432);
    let latent = deepseek.attention.latent.unwrap();
    assert_eq!((latent.q_rank, latent.kv_rank), (Some(1_536), 512));
    // Llama 4 Maverick: a mixture on every second layer from the second, dense 16,384 on the
    // others; Scout a mixture on every layer.
    let maverick = hf::read(&fixture("llama-4-maverick-17b-128e-instruct")).unwrap();
    let e = maverick.experts.as_ref().unwrap();
    assert_eq!(e.layers, LayerSet::Every { first: 1, step: 2 });
    assert_eq!((e.ffn, e.shared_ffn, maverick.ffn), (8_192, 8_192, 16_384));
    let scout = hf::read(&fixture("llama-4-scout-17b-16e-instruct")).unwrap();
    assert_eq!(scout.experts.unwrap().layers, LayerSet::ALL);
    assert_eq!(scout.architecture.rope_scaling.unwrap().factor, 16.0);
    // gpt-oss: a 128-token window on the even layers, biases and sinks.
    let oss = hf::read(&fixture("gpt-oss-20b")).unwrap();
    assert_eq!(oss.architecture.sliding_window, Some(128));
    assert_eq!(
        oss.architecture.window_layers,
        Some(LayerSet::Every { first: 0, step: 2 })
    );
    assert!(oss.attention.sinks && oss.biases.qkv && oss.biases.output);
    let e = oss.experts.as_ref().unwrap();
    assert!(e.biases && e.router_bias);
    assert_eq!(oss.architecture.rope_theta, 150_000.0);
    // Qwen3-MoE: query-key norms; Qwen1.5-MoE: q, k and v biases, a gated shared expert.
    assert!(
        hf::read(&fixture("qwen3-30b-a3b"))
            .unwrap()
            .attention
            .qk_norm
    );
    let qwen = hf::read(&fixture("qwen1.5-moe-a2.7b")).unwrap();
    assert!(qwen.biases.qkv && qwen.experts.unwrap().shared_gate);
}

#[test]
fn a_layer_rule_in_the_config_moves_the_experts() {
    let base = std::fs::read_to_string(fixture("qwen3-30b-a3b")).unwrap();
    let path = PathBuf::from("q/config.json");
    let all = hf::parse(&base, &path).unwrap();
    // Every second layer sparse: 24 of the 48 layers lose their experts for dense MLPs of
    // 6,144.
    let every_second = base.replace("\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2");
    let half = hf::parse(&every_second, &path).unwrap();
    let moe = all.moe_layer_params();
    let dense = all.params_per_layer();
    assert_eq!(half.params(), all.params() - 24 * (moe - dense));
    // Layers 0 and 47 dense by list.
    let listed = base.replace("\"mlp_only_layers\": []", "\"mlp_only_layers\": [0, 47]");
    let listed = hf::parse(&listed, &path).unwrap();
    assert_eq!(listed.params(), all.params() - 2 * (moe - dense));
    // No layer left with experts, or more experts a token than there are: refused by name.
    let none = base.replace("\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 49");
    let e = hf::parse(&none, &path).unwrap_err().to_string();
    assert!(e.contains("decoder_sparse_step and mlp_only_layers"), "{e}");
    let greedy = base.replace("\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 129");
    let e = hf::parse(&greedy, &path).unwrap_err().to_string();
    assert!(e.contains("num_experts_per_tok = 129"), "{e}");
    let missing = base.replace("\"moe_intermediate_size\": 768,", "");
    let e = hf::parse(&missing, &path).unwrap_err().to_string();
    assert!(e.contains("moe_intermediate_size = missing"), "{e}");
}

#[test]
fn a_mixture_of_experts_and_latent_attention_are_read_and_planned() {
    // `read` gives what the layouts and the step model plan: mixtures of experts with
    // grouped-query or latent attention, and windows on some layers (gpt-oss's).
    let mixtral = hf::read(&fixture("mixtral-8x7b-v0.1")).unwrap();
    assert_eq!(mixtral.params(), 46_702_792_704);
    assert_eq!(mixtral.active_params(), 12_879_925_248);
    let v3 = hf::read(&fixture("deepseek-v3")).unwrap();
    assert_eq!(v3.params(), 671_026_419_200);
    assert!(v3.attention.latent.is_some());
    let oss = hf::read(&fixture("gpt-oss-20b")).unwrap();
    assert_eq!(oss.architecture.sliding_window, Some(128));
    assert_eq!(oss.windowed(4_096), Some((12, 128)));
    // An expert field on a dense architecture is refused by name.
    let dense = std::fs::read_to_string(fixture("llama-3.1-8b"))
        .unwrap()
        .replacen('{', "{\"num_local_experts\": 8,", 1);
    let e = hf::parse(&dense, &PathBuf::from("c.json"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("num_local_experts = 8") && e.contains("dense"),
        "{e}"
    );
}

#[test]
fn another_architecture_is_refused_by_name() {
    let e = hf::read(&fixture("gemma-2b")).unwrap_err().to_string();
    assert!(
        e.contains("architecture GemmaForCausalLM is not supported"),
        "{e}"
    );
}

#[test]
fn bad_fields_name_the_file_the_field_and_the_value() {
    let path = PathBuf::from("x/config.json");
    let base = std::fs::read_to_string(fixture("llama-3.1-8b")).unwrap();
    let cases = [
        (
            "\"num_hidden_layers\": 32",
            "\"num_hidden_layers\": -3",
            "num_hidden_layers = -3",
        ),
        (
            "\"hidden_size\": 4096",
            "\"hidden_size\": 4096.5",
            "hidden_size = 4096.5",
        ),
        (
            "\"num_key_value_heads\": 8",
            "\"num_key_value_heads\": 5",
            "num_key_value_heads = 5: a divisor of the 32 attention heads",
        ),
        (
            "\"vocab_size\": 128256",
            "\"vocab_size\": 0",
            "vocab_size = 0",
        ),
        (
            "\"tie_word_embeddings\": false",
            "\"tie_word_embeddings\": \"no\"",
            "tie_word_embeddings = \"no\"",
        ),
        (
            "\"intermediate_size\": 14336,",
            "",
            "intermediate_size = missing",
        ),
    ];
    for (from, to, want) in cases {
        assert!(base.contains(from), "{from}");
        let text = base.replace(from, to);
        let e = hf::parse(&text, &path).unwrap_err().to_string();
        assert!(e.contains(want) && e.contains("x/config.json"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
    for text in ["", "[1, 2]", "{", "null"] {
        let e = hf::parse(text, &path).unwrap_err().to_string();
        assert!(e.contains("not a Hugging Face config.json"), "{e}");
    }
}

#[test]
fn a_config_without_kv_heads_has_multi_head_attention() {
    let base = std::fs::read_to_string(fixture("tinyllama-1.1b")).unwrap();
    let text = base.replace("\"num_key_value_heads\": 4,", "");
    let shape = hf::parse(&text, &PathBuf::from("t.json")).unwrap();
    assert_eq!(shape.kv_heads, 32);
    assert_eq!(shape.name, "t");
}

#[test]
fn a_name_from_the_config_cannot_carry_commands_or_markup() {
    let base = std::fs::read_to_string(fixture("llama-3.1-8b")).unwrap();
    let text = base.replacen(
        '{',
        "{\"_name_or_path\": \"org/x\\ntouch PWNED #|\\\"\",",
        1,
    );
    let shape = hf::parse(&text, &PathBuf::from("c.json")).unwrap();
    assert_eq!(shape.name, "x-touch-PWNED----");
}

#[test]
fn an_empty_architectures_list_or_zero_experts_falls_back_to_the_model_type() {
    let base = std::fs::read_to_string(fixture("llama-3.1-8b")).unwrap();
    let text = base
        .replace("[\n    \"LlamaForCausalLM\"\n  ]", "[]")
        .replacen(
            '{',
            "{\"num_experts\": 0.0, \"num_local_experts\": false,",
            1,
        );
    assert!(text.contains("\"architectures\": []"), "{text}");
    let shape = hf::parse(&text, &PathBuf::from("c.json")).unwrap();
    assert_eq!(shape.params(), 8_030_261_248);
}

#[test]
fn what_a_launcher_needs_beyond_the_counts_is_read_as_the_config_gives_it() {
    use trainplan::model::{preset, Architecture};
    // Llama 3.1's configs are the presets, RoPE scaling and all.
    for (config, name) in [("llama-3.1-8b", "8b"), ("llama-3.1-70b", "70b")] {
        let shape = hf::read(&fixture(config)).unwrap();
        assert_eq!(shape.architecture, preset(name).unwrap().architecture);
        assert_eq!(shape.architecture, Architecture::llama31());
    }
    // Llama 3.2 scales by 32; Mistral 7B windows 4,096 tokens at θ = 10,000; Qwen2.5 has
    // θ = 10^6 and ε = 1e-6, and no window (use_sliding_window is false).
    let small = hf::read(&fixture("llama-3.2-1b")).unwrap().architecture;
    assert_eq!(small.rope_scaling.unwrap().factor, 32.0);
    let mistral = hf::read(&fixture("mistral-7b-v0.1")).unwrap().architecture;
    assert_eq!(
        (mistral.rope_theta, mistral.sliding_window),
        (10_000.0, Some(4096))
    );
    let qwen = hf::read(&fixture("qwen2.5-7b")).unwrap().architecture;
    assert_eq!(
        (qwen.rope_theta, qwen.norm_eps, qwen.sliding_window),
        (1e6, 1e-6, None)
    );
    // A window on some layers only is refused by name.
    let text = std::fs::read_to_string(fixture("qwen2.5-7b"))
        .unwrap()
        .replace(
            "\"use_sliding_window\": false",
            "\"use_sliding_window\": true",
        );
    let e = hf::parse(&text, std::path::Path::new("qwen.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("use_sliding_window"), "{e}");
}

#[test]
fn a_field_left_out_takes_its_config_class_s_default() {
    let path = PathBuf::from("c/config.json");
    let without = |name: &str, keys: &[&str]| {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in keys {
            value.as_object_mut().unwrap().remove(*key).unwrap();
        }
        hf::parse(&value.to_string(), &path)
    };
    // DeepSeek-V3's own values are its config class's defaults (3 dense layers, one shared
    // expert, a query rank of 1,536); gpt-oss's attention biases and 64-wide heads likewise.
    for (name, keys) in [
        (
            "deepseek-v3",
            &["first_k_dense_replace", "n_shared_experts", "q_lora_rank"][..],
        ),
        ("gpt-oss-20b", &["attention_bias", "head_dim"][..]),
    ] {
        let full = hf::read(&fixture(name)).unwrap();
        assert_eq!(
            without(name, keys).unwrap().params(),
            full.params(),
            "{name}"
        );
    }
    // A null query rank is a full query projection (DeepSeek-V2-Lite): per layer h·a·192
    // = 7168·128·192 in place of 7168·1536 + 1536·128·192 and the 1,536-wide norm.
    let text = std::fs::read_to_string(fixture("deepseek-v3"))
        .unwrap()
        .replace("\"q_lora_rank\": 1536", "\"q_lora_rank\": null");
    let full_query = hf::parse(&text, &path).unwrap();
    let v3 = hf::read(&fixture("deepseek-v3")).unwrap();
    let per_layer: i64 = 7168 * 128 * 192 - (7168 * 1536 + 1536 * 128 * 192 + 1536);
    assert_eq!(
        full_query.params() as i64 - v3.params() as i64,
        61 * per_layer
    );
    // gpt-oss with a null window attends in full on every layer.
    let text = std::fs::read_to_string(fixture("gpt-oss-20b"))
        .unwrap()
        .replace("\"sliding_window\": 128", "\"sliding_window\": null");
    let full = hf::parse(&text, &path).unwrap().architecture;
    assert_eq!((full.sliding_window, full.window_layers), (None, None));
}

#[test]
fn a_dense_width_no_layer_uses_counts_nothing_and_never_overflows() {
    // Every layer of Llama 4 Scout is a mixture, so its dense width is never built: a width
    // of 2^40 over 100,000 layers neither overflows nor changes a count.
    let base = std::fs::read_to_string(fixture("llama-4-scout-17b-16e-instruct"))
        .unwrap()
        .replace("\"num_hidden_layers\": 48", "\"num_hidden_layers\": 100000");
    let wide = base.replace(
        "\"intermediate_size_mlp\": 16384",
        "\"intermediate_size_mlp\": 1099511627776",
    );
    let path = PathBuf::from("c.json");
    let (narrow, wide) = (
        hf::parse(&base, &path).unwrap(),
        hf::parse(&wide, &path).unwrap(),
    );
    assert_eq!(wide.ffn, 1_099_511_627_776);
    assert_eq!(
        (wide.params(), wide.active_params(), wide.matrix_params()),
        (
            narrow.params(),
            narrow.active_params(),
            narrow.matrix_params()
        )
    );
    // A dense layer of that width would overflow the count: one layer dense is refused.
    let one_dense = std::fs::read_to_string(fixture("llama-4-scout-17b-16e-instruct"))
        .unwrap()
        .replace(
            "\"intermediate_size_mlp\": 16384",
            "\"intermediate_size_mlp\": 1099511627776",
        )
        .replace("\"num_hidden_layers\": 48", "\"num_hidden_layers\": 100000")
        .replace(
            "\"interleave_moe_layer_step\": 1",
            "\"interleave_moe_layer_step\": 2",
        );
    let e = hf::parse(&one_dense, &path).unwrap_err().to_string();
    assert!(e.contains("more than 2^64"), "{e}");
}
