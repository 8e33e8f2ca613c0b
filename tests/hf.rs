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
/// Qwen2.5 0.5B (model card: "0.49B, 0.36B non-embedding"), and TinyLlama's safetensors header
/// (`{"F32": 1100048384}`).
const PUBLISHED: [(&str, u64); 10] = [
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
}

#[test]
fn a_mixture_of_experts_is_refused_by_name() {
    let e = hf::read(&fixture("mixtral-8x7b-v0.1"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("mixture-of-experts"), "{e}");
    assert!(e.contains("num_local_experts = 8"), "{e}");
    assert!(e.contains("LlamaForCausalLM"), "{e}");
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
