//! The workshop in a real browser: `trainplan serve`, Debian's headless Chromium driven through
//! WebDriver (chromedriver) with fantoccini. A learner moves the controls to the starting plan
//! (70B, 15 × 10^12 tokens, no parallelism) and sees memory and days fail with the numbers
//! `trainplan check` prints; fixes the layout and the tokens and sees every check pass; saves
//! the design and finds it after a reload. Screenshots go to `target/screenshots/` (and, with
//! `TRAINPLAN_WRITE_RESULTS` set, to `results/serve-*.png` for the README and docs/workshop.md).
//!
//! `.ci/run` installs chromium and chromium-driver and sets `TRAINPLAN_BROWSER_TESTS=required`,
//! and then, without them, the browser test fails; elsewhere, without them, it is reported as
//! ignored, and counted so in the summary (`test result: ok. 1 passed; 0 failed; 1 ignored`),
//! never as passed. Stable libtest cannot ignore a test at run time, so this file is its own
//! harness (`harness = false` in Cargo.toml) built on libtest-mimic: `main` registers each test
//! as a trial and runs the async one in a tokio runtime of its own. It takes libtest's arguments
//! (a name filter, `--ignored`, `--list`, ...) and prints libtest's summary.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A child process killed when the test ends, however it ends.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `trainplan serve --port 0`, and the address it prints.
fn serve() -> (Process, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_trainplan"))
        .args(["serve", "--port", "0", "-q"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("http://127.0.0.1:"), "{line}");
    (Process(child), line.trim().to_string())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// chromedriver on a free port, once it accepts connections. The port is free when chosen but
/// may be taken (by a server another test starts) before chromedriver binds it: chromedriver
/// then exits, and is started again on another port.
fn chromedriver() -> (Process, u16) {
    let start = Instant::now();
    loop {
        let port = free_port();
        let mut child = Process(
            Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        loop {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            if child.0.try_wait().unwrap().is_some() {
                break; // It could not bind the port: another one.
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // Listening, and still running a moment later: the port is chromedriver's.
                std::thread::sleep(Duration::from_millis(100));
                if child.0.try_wait().unwrap().is_none() {
                    return (child, port);
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Headless Chromium with the flags this machine's closed network needs, and a fresh profile.
async fn browser(port: u16, profile: &Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                "--window-size=1400,1050",
                format!("--user-data-dir={}", profile.display()),
            ]
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("chromedriver starts a session")
}

/// The text of element `id`.
async fn text(c: &Client, id: &str) -> String {
    c.find(Locator::Id(id)).await.unwrap().text().await.unwrap()
}

/// Waits until element `id` reads `want`. The page may replace the element while it regrades
/// (the verdict, the charts), so a read that finds it gone is tried again.
async fn wait_for(c: &Client, id: &str, want: &str) {
    let start = Instant::now();
    loop {
        let now = match c.find(Locator::Id(id)).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if now == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "#{id} reads {now:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn select(c: &Client, id: &str, value: &str) {
    c.find(Locator::Id(id))
        .await
        .unwrap()
        .select_by_value(value)
        .await
        .unwrap();
}

async fn type_into(c: &Client, id: &str, value: &str) {
    let field = c.find(Locator::Id(id)).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(value).await.unwrap();
}

async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
    if std::env::var_os("TRAINPLAN_WRITE_RESULTS").is_some() {
        std::fs::write(root.join(format!("results/serve-{name}.png")), &png).unwrap();
    }
}

/// What `trainplan check --json` says of a design.
fn cli_check(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_trainplan"))
        .arg("check")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `x` as the page writes GB: two decimals with thousands separators.
fn gb(x: f64) -> String {
    let s = format!("{x:.2}");
    let (whole, frac) = s.split_once('.').unwrap();
    let mut grouped = String::new();
    for (i, ch) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    format!("{grouped}.{frac} GB")
}

/// Why the browser test cannot run here, if it cannot: chromium or chromedriver is missing.
fn missing() -> Option<String> {
    let present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    (!present).then(|| format!("{CHROMIUM} or {CHROMEDRIVER} is missing"))
}

/// Whether the browser test must run, as in CI: `TRAINPLAN_BROWSER_TESTS=required`.
fn required() -> bool {
    std::env::var("TRAINPLAN_BROWSER_TESTS").as_deref() == Ok("required")
}

fn main() {
    let args = Arguments::from_args();
    let browser_test = "a_learner_fixes_the_starting_plan_and_saves_it";
    let browser_trial = match missing() {
        None => Trial::test(browser_test, || {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .map_err(|e| Failed::from(format!("no tokio runtime: {e}")))?
                .block_on(a_learner_fixes_the_starting_plan_and_saves_it());
            Ok(())
        }),
        Some(why) if required() => Trial::test(browser_test, move || {
            Err(format!("the browser tests are required but {why}").into())
        }),
        Some(why) => {
            // Ignored, so the summary counts it as ignored, not passed; run anyway (`--ignored`,
            // `--include-ignored`), it fails with the reason.
            if !args.list {
                eprintln!(
                    "{browser_test} is ignored: {why} (apt-get install chromium chromium-driver)"
                );
            }
            Trial::test(browser_test, move || Err(why.into())).with_ignored_flag(true)
        }
    };
    let trials = vec![
        browser_trial,
        Trial::test("the_api_answers_as_the_command_line_does", || {
            the_api_answers_as_the_command_line_does();
            Ok(())
        }),
    ];
    libtest_mimic::run(&args, trials).exit();
}

/// Run by `main` in a multi-threaded tokio runtime, where chromium and chromedriver are installed.
async fn a_learner_fixes_the_starting_plan_and_saves_it() {
    let (_server, url) = serve();
    let (_driver, port) = chromedriver();
    let profile = tempfile::tempdir().unwrap();
    let c = browser(port, profile.path()).await;
    c.goto(&url).await.unwrap();
    wait_for(&c, "check-loss", "PASS").await;

    // The starting plan: 70B on 15 T tokens with no parallelism.
    select(&c, "model", "70b").await;
    type_into(&c, "tokens", "15e12").await;
    select(&c, "tp", "1").await;
    type_into(&c, "pp", "1").await;
    select(&c, "zero", "0").await;
    let start = cli_check(&["--model", "70b", "--tokens", "15e12"]);
    wait_for(
        &c,
        "memory-value",
        &gb(start["memory_gb"]["total"].as_f64().unwrap()),
    )
    .await;
    assert_eq!(text(&c, "memory-value").await, "1,139.60 GB");
    assert_eq!(text(&c, "check-memory").await, "FAIL");
    assert_eq!(text(&c, "check-days").await, "FAIL");
    assert_eq!(text(&c, "check-loss").await, "PASS");
    assert_eq!(
        text(&c, "days-value").await,
        format!("{:.3}", start["days"].as_f64().unwrap())
    );
    assert_eq!(
        text(&c, "loss-value").await,
        format!("{:.4}", start["loss"].as_f64().unwrap())
    );
    assert!(text(&c, "fixes").await.contains("raise ZeRO to stage 3"));
    let save = c.find(Locator::Id("save")).await.unwrap();
    assert!(
        !save.is_enabled().await.unwrap(),
        "a failing design cannot be saved"
    );
    screenshot(&c, "start").await;

    // Fix the layout and the tokens.
    select(&c, "tp", "8").await;
    type_into(&c, "pp", "8").await;
    select(&c, "zero", "1").await;
    type_into(&c, "tokens", "4.96e12").await;
    let fixed = cli_check(&[
        "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "8", "--zero", "1",
    ]);
    wait_for(&c, "check-days", "PASS").await;
    wait_for(&c, "check-memory", "PASS").await;
    assert_eq!(text(&c, "check-loss").await, "PASS");
    assert_eq!(text(&c, "verdict").await, "PASS");
    assert_eq!(
        text(&c, "memory-value").await,
        gb(fixed["memory_gb"]["total"].as_f64().unwrap())
    );
    assert_eq!(
        text(&c, "days-value").await,
        format!("{:.3}", fixed["days"].as_f64().unwrap())
    );

    // A price and a cost limit: the spend line and a fourth check, as `check` gives them
    // (3,685,819 at 2.50 a GPU-hour is over 3,000,000); without them, three checks again.
    type_into(&c, "price", "2.5").await;
    type_into(&c, "maxcost", "3e6").await;
    // Each keystroke regrades; the last one's limit is the one to read the page at.
    wait_for(&c, "cost-limit", "≤ 3,000,000").await;
    wait_for(&c, "check-cost", "FAIL").await;
    let priced = cli_check(&[
        "--model",
        "70b",
        "--tokens",
        "4.96e12",
        "--tp",
        "8",
        "--pp",
        "8",
        "--zero",
        "1",
        "--price-per-gpu-hour",
        "2.5",
        "--max-cost",
        "3e6",
    ]);
    let cost = priced["spend"]["cost"].as_f64().unwrap();
    assert_eq!(text(&c, "cost-value").await, "3,685,819");
    assert!((cost - 3_685_818.84).abs() < 0.01);
    assert_eq!(text(&c, "verdict").await, "FAIL");
    assert!(text(&c, "spend").await.contains("cost 3,685,819"));
    // The cost limit's days on the chart: 3,000,000 / (2,048 × 24 × 2.5) = 24.4.
    let line = c.find(Locator::Id("cost-line")).await.unwrap();
    assert!(line.attr("x1").await.unwrap().is_some());
    type_into(&c, "maxcost", "").await;
    type_into(&c, "price", "").await;
    wait_for(&c, "spend", "").await;
    wait_for(&c, "verdict", "PASS").await;

    // Under the graded design, its sensitivity: the plate's MFU at 0.75× and 1.25×, the days
    // `check --sensitivity` gives, failing at the low end.
    let mut with = vec![
        "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "8", "--zero", "1",
    ];
    with.push("--sensitivity");
    let row = &cli_check(&with)["sensitivity"]["rows"][0];
    let days = |end: &str| format!("{:.2}", row[end]["days"].as_f64().unwrap());
    let start_wait = Instant::now();
    let cells = loop {
        let rows = c
            .find_all(Locator::Css("#sensitivity tbody tr"))
            .await
            .unwrap();
        if let [row] = rows.as_slice() {
            break row.text().await.unwrap();
        }
        assert!(
            start_wait.elapsed() < Duration::from_secs(10),
            "no sensitivity table"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(cells.starts_with("--mfu 0.3 – 0.5 0.4"), "{cells}");
    assert!(
        cells.contains(&format!("{} – {}", days("at_low"), days("at_high"))),
        "{cells}"
    );
    assert!(cells.contains("FAIL (days) / PASS"), "{cells}");
    assert!(text(&c, "flips")
        .await
        .contains("the plan fails with --mfu 0.3"));

    // The engine's best plans and front; clicking one loads it.
    c.find(Locator::Id("best"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let start_wait = Instant::now();
    while c
        .find_all(Locator::Css("#plans tbody tr"))
        .await
        .unwrap()
        .len()
        < 10
    {
        assert!(start_wait.elapsed() < Duration::from_secs(10), "no plans");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fronts = c
        .find_all(Locator::Css("#time-svg circle.front"))
        .await
        .unwrap();
    assert_eq!(fronts.len(), 158, "the default brief's front");
    screenshot(&c, "best").await;
    // Clicking the first row loads its plan, the one the detailed model runs fastest of those
    // the plate grades equal: TP 1 × PP 1, ZeRO 3 on 4.96 T tokens.
    c.find(Locator::Css("#plans tbody tr"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&c, "memory-value", "11.29 GB").await;
    let pp = c.find(Locator::Id("pp")).await.unwrap();
    assert_eq!(pp.prop("value").await.unwrap().as_deref(), Some("1"));
    // A brief that moves makes the search's plans and front stale: they go.
    type_into(&c, "gpus", "1536").await;
    let start_wait = Instant::now();
    while !c
        .find_all(Locator::Css("#plans tbody tr"))
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            start_wait.elapsed() < Duration::from_secs(10),
            "stale plans stay"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    type_into(&c, "gpus", "2048").await;

    // Back to the fixed design; save it; it survives a reload.
    select(&c, "zero", "1").await;
    select(&c, "tp", "8").await;
    type_into(&c, "pp", "8").await;
    wait_for(
        &c,
        "memory-value",
        &gb(fixed["memory_gb"]["total"].as_f64().unwrap()),
    )
    .await;
    wait_for(&c, "verdict", "PASS").await;
    save.click().await.unwrap();
    let saved = c.find_all(Locator::Css("#saved li")).await.unwrap();
    assert_eq!(saved.len(), 1);
    c.refresh().await.unwrap();
    let start_wait = Instant::now();
    loop {
        let items = c.find_all(Locator::Css("#saved li")).await.unwrap();
        if items.len() == 1 {
            let item = items[0].text().await.unwrap();
            assert!(
                item.contains("llama3-70b, 4.96 T tokens, TP 8 × PP 8, ZeRO 1"),
                "{item}"
            );
            break;
        }
        assert!(
            start_wait.elapsed() < Duration::from_secs(10),
            "the saved design is gone"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // After the reload the page starts from the seed's plan again; loading the saved design
    // brings it back, passing.
    wait_for(&c, "check-memory", "FAIL").await;
    c.find(Locator::Css("#saved li button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(&c, "check-memory", "PASS").await;
    wait_for(&c, "verdict", "PASS").await;
    let tokens = c.find(Locator::Id("tokens")).await.unwrap();
    assert_eq!(
        tokens.prop("value").await.unwrap().as_deref(),
        Some("4960000000000")
    );
    screenshot(&c, "saved").await;

    // Bad input is shown on the page, not swallowed.
    type_into(&c, "tokens", "lots").await;
    wait_for(
        &c,
        "error",
        "error: invalid tokens = lots: a whole number such as 15e12",
    )
    .await;
    c.close().await.unwrap();
}

/// A JSON request to the server over a plain socket: the status and the body.
fn request(url: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    request_with(url, method, path, "application/json", host, body)
}

/// A request with this content type and `Host` (a bare name gets the server's port).
fn request_with(
    url: &str,
    method: &str,
    path: &str,
    content_type: &str,
    host: &str,
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let address = url.trim_start_matches("http://").trim_end_matches('/');
    let host = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:{}", address.rsplit(':').next().unwrap())
    };
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    (status, body.to_string())
}

/// Needs no browser: it runs everywhere.
fn the_api_answers_as_the_command_line_does() {
    let (_server, url) = serve();
    // A plan object byte for byte as `trainplan check --json` prints it.
    let args = [
        "--model", "70b", "--tokens", "4.96e12", "--tp", "8", "--pp", "8", "--zero", "1",
    ];
    let cli = Command::new(env!("CARGO_BIN_EXE_trainplan"))
        .arg("check")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let (status, body) = request(
        &url,
        "POST",
        "/api/check",
        r#"{"model": "70b", "tokens": 4960000000000, "tp": 8, "pp": 8, "zero": 1}"#,
    );
    assert_eq!(status, 200);
    assert_eq!(body, String::from_utf8(cli.stdout).unwrap());
    // With its sensitivity, as `check --json --sensitivity` prints it; a flag that is not a
    // boolean, or one an export does not take, is refused.
    let cli = Command::new(env!("CARGO_BIN_EXE_trainplan"))
        .arg("check")
        .args(args)
        .args(["--json", "--sensitivity"])
        .output()
        .unwrap();
    let design = r#""model": "70b", "tokens": 4960000000000, "tp": 8, "pp": 8, "zero": 1"#;
    let (status, body) = request(
        &url,
        "POST",
        "/api/check",
        &format!(r#"{{{design}, "sensitivity": true}}"#),
    );
    assert_eq!(status, 200);
    assert_eq!(body, String::from_utf8(cli.stdout).unwrap());
    let (status, body) = request(
        &url,
        "POST",
        "/api/check",
        &format!(r#"{{{design}, "sensitivity": "yes"}}"#),
    );
    assert_eq!(status, 400);
    assert!(body.contains("sensitivity = \\\"yes\\\""), "{body}");
    let (status, body) = request(
        &url,
        "POST",
        "/api/export",
        &format!(r#"{{{design}, "format": "megatron", "sensitivity": true}}"#),
    );
    assert_eq!(status, 400);
    assert!(body.contains("unknown field `sensitivity`"), "{body}");
    // Errors: one line, the field and the value, status 400.
    let (status, body) = request(
        &url,
        "POST",
        "/api/check",
        r#"{"model": "70b", "tokens": 1e12, "tp": 3}"#,
    );
    assert_eq!(status, 400);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("tp = 3"),
        "{body}"
    );
    let (status, body) = request(&url, "POST", "/api/check", &"x".repeat(100_000));
    assert_eq!(status, 413, "a body above 64 KiB is refused");
    assert!(body.starts_with("{\"error\":"), "{body}");
    let (status, _) = request(&url, "GET", "/etc/passwd", "");
    assert_eq!(status, 404);
    let (status, body) = request(&url, "GET", "/api/check", "");
    assert_eq!(status, 405);
    assert!(body.starts_with("{\"error\":"), "{body}");
    let (status, body) = request_with(&url, "POST", "/api/check", "text/plain", "127.0.0.1", "{}");
    assert_eq!(status, 415, "{body}");
    let (status, body) = request_with(
        &url,
        "POST",
        "/api/check",
        "application/json",
        "evil.example:80",
        "{}",
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = request(&url, "GET", "/", "");
    assert_eq!(status, 200);
    assert!(body.contains("trainplan workshop") && !body.contains("http://cdn"));
}
