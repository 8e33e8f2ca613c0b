//! Reading inputs as a hostile user would write them, beyond the one-line refusals of the
//! validation table (`tests/validation.rs`): a plan file's own verdict is never trusted, what is
//! accepted on purpose (a byte-order mark, `null` in a Hugging Face config) reads as it should,
//! and the workshop's API refuses what the command line refuses, with 400.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::trainplan;
use serde_json::Value;

fn run(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = trainplan().current_dir(dir).args(args).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_plan_file_edited_to_fail_is_graded_again_and_fails_as_its_flags_do() {
    let dir = tempfile::tempdir().unwrap();
    let design = ["--model", "70b", "--tp", "8", "--pp", "4", "--zero", "1"];
    let (code, plan, _) = run(
        dir.path(),
        &[&["check", "--tokens", "4e12", "--json"][..], &design].concat(),
    );
    assert_eq!(code, 0, "the plan passes as written");
    // 15 T tokens take 90.7 days; the file still says it passes.
    let mut edited: Value = serde_json::from_str(&plan).unwrap();
    edited["tokens"] = 15_000_000_000_000u64.into();
    assert_eq!(edited["pass"], true);
    std::fs::write(dir.path().join("edited.json"), edited.to_string()).unwrap();
    let (code, config, warning) = run(
        dir.path(),
        &["export", "--format", "megatron", "--plan", "edited.json"],
    );
    assert_eq!(code, 1, "{warning}");
    assert!(
        warning.starts_with(
            "warning: this plan fails its checks (days: 90.7 days exceed the 30.0-day limit"
        ),
        "{warning}"
    );
    // The same design as flags: the same exit status, warning and configuration.
    let (code, flags_config, flags_warning) = run(
        dir.path(),
        &[
            &["export", "--format", "megatron", "--tokens", "15e12"][..],
            &design,
        ]
        .concat(),
    );
    assert_eq!(code, 1);
    assert_eq!(flags_warning, warning);
    assert_eq!(flags_config, config);
}

#[test]
fn a_detailed_plan_file_is_graded_again_under_its_own_step_and_memory_model() {
    let dir = tempfile::tempdir().unwrap();
    let brief = ["--loss-target", "2"];
    let design = "--model 70b --tp 8 --pp 4 --zero 1 --memory detailed --time detailed \
                  --recompute selective";
    let design: Vec<&str> = design.split_whitespace().collect();
    let check = [
        &["check", "--json", "--tokens", "1e12"][..],
        &brief,
        &design,
    ]
    .concat();
    let (code, plan, _) = run(dir.path(), &check);
    assert_eq!(code, 0, "1 T tokens pass in the detailed model");
    std::fs::write(dir.path().join("plan.json"), &plan).unwrap();
    let export = ["-q", "export", "--format", "megatron", "--plan"];
    let (code, _, _) = run(dir.path(), &[&export[..], &["plan.json"], &brief].concat());
    assert_eq!(code, 0);
    // Too many tokens for the month at the detailed pace, whatever the file says.
    let mut edited: Value = serde_json::from_str(&plan).unwrap();
    edited["tokens"] = 9_000_000_000_000u64.into();
    std::fs::write(dir.path().join("long.json"), edited.to_string()).unwrap();
    let export = ["export", "--format", "megatron"];
    let (code, _, warning) = run(
        dir.path(),
        &[&export[..], &["--plan", "long.json"], &brief].concat(),
    );
    let flags = [&export[..], &["--tokens", "9e12"], &brief, &design].concat();
    let (flags_code, _, flags_warning) = run(dir.path(), &flags);
    assert_eq!(code, 1, "{warning}");
    assert!(warning.contains("days:"), "{warning}");
    assert_eq!((code, warning), (flags_code, flags_warning));
}

#[test]
fn a_byte_order_mark_is_skipped_in_json_and_toml_alike() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.json"), "\u{feff}{\"gpus\": 1024}").unwrap();
    std::fs::write(dir.path().join("b.toml"), "\u{feff}gpus = 1024\n").unwrap();
    for file in ["b.json", "b.toml"] {
        let (code, out, err) = run(dir.path(), &["brief", "--brief", file]);
        assert_eq!(code, 0, "{err}");
        assert!(out.starts_with("brief     1,024 GPUs"), "{out}");
    }
}

#[test]
fn a_negative_zero_is_the_brief_s_zero() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("z.json"), "{\"loss_law\": {\"e\": -0.0}}").unwrap();
    let (code, out, _) = run(dir.path(), &["brief", "--brief", "z.json"]);
    assert_eq!(code, 0);
    assert!(out.contains("with L = 0 + 482/N^0.348"), "{out}");
    let (_, toml, _) = run(dir.path(), &["brief", "--brief", "z.json", "--print"]);
    assert!(toml.contains("e = 0.0\n"), "{toml}");
}

#[test]
fn null_in_a_hugging_face_config_means_unset_as_transformers_writes_it() {
    // Mistral NeMo's config has "sliding_window": null; it reads as any dense Mistral.
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf/mistral-nemo-base-2407/config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("null"));
    let out = trainplan()
        .args(["check", "--tokens", "1e12", "--json", "--model-config"])
        .arg(&config)
        .output()
        .unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["params"], 12_247_782_400u64);
}

/// A `trainplan serve` on a free port, stopped when dropped.
struct Server(std::process::Child, String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve() -> Server {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_trainplan"))
        .args(["serve", "--port", "0", "-q"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0] as char);
    }
    let address = line
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    Server(child, address)
}

/// POSTs `body` to `path` and returns the status and the body of the answer.
fn post(address: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

#[test]
fn the_api_refuses_what_the_command_line_refuses_with_400_and_one_line() {
    let server = serve();
    let address = &server.1;
    for (body, says) in [
        (
            r#"["70b",4960000000000,8,8,1]"#,
            "invalid type: sequence, expected struct",
        ),
        (
            r#"{"model":"70b","tokens":1e12,"tokens":1}"#,
            "tokens: given twice",
        ),
        (
            r#"{"model":"70b","tokens":1e12,"brief":{"gpu":null}}"#,
            "brief.gpu: null is not a value here",
        ),
        (
            r#"{"model":"70b","tokens":1e12,"brief":{"loss_law":[1.69,406.4]}}"#,
            "brief.loss_law: invalid type: sequence",
        ),
    ] {
        let (status, answer) = post(address, "/api/check", body);
        assert_eq!(status, 400, "{body}: {answer}");
        let error: Value = serde_json::from_str(&answer).unwrap();
        let message = error["error"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
        assert_eq!(message.lines().count(), 1);
    }
    let (status, _) = post(
        address,
        "/api/check",
        r#"{"model":"70b","tokens":1e12,"tp":8,"pp":8}"#,
    );
    assert_eq!(status, 200);
}
