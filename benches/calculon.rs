//! trainplan's half of `benches/calculon.sh`: the detailed search of Llama 3 70B on the
//! brief's H100s (2,048 by default; `GPUS` and the global batch in sequences, `BATCH`, as the
//! first two arguments), at one thread, repeated for at least two seconds after a warm-up.
//! It prints the configurations (layout and step) the search decided and those it weighed in
//! full, and the rate of each per CPU-second (one thread: wall time is CPU time); the plan it
//! ranks best and its step time; and, for the side-by-side, the plan Calculon found best on
//! that problem (TP 4 × PP 2 × DP 256, one sequence a micro-batch, 40 virtual stages, attention
//! recomputed, sequence parallel) graded by trainplan's model, to show it is in trainplan's
//! space and no faster than what trainplan finds.
//!
//! `cargo bench --bench calculon -- 2048 2048 [narrow]`

use std::time::Instant;

use trainplan::cost::memory::MemoryModel;
use trainplan::cost::run::TimeModel;
use trainplan::cost::step::detailed::{Detailed, Options};
use trainplan::cost::step::precision::Precision;
use trainplan::cost::step::stack::Stack;
use trainplan::cost::step::Recompute;
use trainplan::cost::step::{Schedule, Step};
use trainplan::cost::step_time::options::TimeOptions;
use trainplan::model::layout::{Degrees, Layout, ZeroStage};
use trainplan::model::preset;
use trainplan::plan::{evaluate, Design};
use trainplan::search::progress::Silent;
use trainplan::search::{search, MemorySpace, SearchOptions};
use trainplan::Brief;

fn main() {
    // `cargo bench` passes `--bench`; the numbers are ours.
    let numbers: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let gpus = numbers.first().copied().unwrap_or(2048);
    let batch = numbers.get(1).copied().unwrap_or(2048);
    let base = Brief::default();
    let brief = Brief {
        gpus,
        batch_target_tokens: batch * base.seq_len,
        ..base
    };
    if let Err(e) = brief.validate() {
        eprintln!("{e}");
        std::process::exit(2);
    }
    let shape = preset("70b").expect("a preset");
    let stack = Stack::default();
    let mut memory = MemorySpace::detailed_defaults(&brief, Options::for_stack(stack));
    // `narrow`: the default space when issue 19 was filed (CP 1, 1F1B and interleaving depth
    // 2, micro-batches 1, 2 and 4), to compare with the figures measured then.
    if std::env::args().any(|a| a == "narrow") {
        if let MemorySpace::Detailed {
            steps,
            interleave,
            parallel,
            divisors,
            ..
        } = &mut memory
        {
            let deeper: Vec<Step> = steps
                .iter()
                .map(|s| Step {
                    schedule: Schedule::Interleaved(2),
                    ..*s
                })
                .collect();
            steps.extend(deeper);
            steps.sort();
            *interleave = false;
            *divisors = false;
            parallel.cps = vec![1];
        }
    }
    let options = SearchOptions {
        memory,
        time: TimeModel::Detailed(TimeOptions::for_stack(stack)),
        top: Some(1),
        ..SearchOptions::default()
    };
    let shapes = [shape.clone()];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a thread pool");
    let run = || search(&brief, &shapes, &options, &Silent);
    // The warm-up and the timed runs inside one `install`: the pool's thread runs them one
    // after another, rather than being woken and put to sleep again for each.
    let (report, runs, start, cpu) = pool.install(|| {
        let report = run();
        let (mut runs, start, cpu) = (0u32, Instant::now(), cpu_seconds());
        while runs < 3 || start.elapsed().as_secs_f64() < 2.0 {
            std::hint::black_box(run());
            runs += 1;
        }
        (report, runs, start, cpu)
    });
    // CPU time where the system tells it (so a busy machine does not slow the figure), else
    // wall time, which one thread makes the same on an idle machine.
    let seconds = match (cpu, cpu_seconds()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => start.elapsed().as_secs_f64(),
    } / f64::from(runs);
    let decided = report.configurations;
    let graded = report.graded.unwrap_or(decided);
    println!(
        "trainplan decided {decided} configurations, graded {graded}, in {seconds:.6} CPU-s: {:.0} decided/CPU-s, {:.0} graded/CPU-s",
        decided as f64 / seconds,
        graded as f64 / seconds
    );
    let best = report.shapes[0].best_plan.as_ref();
    match best {
        Some(p) => println!(
            "trainplan best: {}, {} ({:.3} s a step, MFU {:.1} %)",
            p.layout.describe(),
            p.step.map_or(String::new(), |s| format!("{s:?}")),
            p.step_seconds.unwrap_or(f64::NAN),
            p.mfu.unwrap_or(f64::NAN) * 100.0
        ),
        None => println!("trainplan best: none passes"),
    }
    // Calculon's best plan for 2,048 GPUs and 2,048 sequences, as trainplan grades it.
    if (gpus, batch) == (2048, 2048) {
        let layout = Layout::with(
            &brief,
            &shape,
            Degrees {
                ep: 1,
                etp: None,
                tp: 4,
                cp: 1,
                pp: 2,
                replicate: 1,
            },
            ZeroStage::new(1).expect("a stage"),
        )
        .expect("a layout");
        let step = Step {
            micro_batch: 1,
            seq_len: brief.seq_len,
            recompute: Recompute::Selective,
            sequence_parallel: true,
            schedule: Schedule::Interleaved(40),
            // Calculon's ring overlap of the TP collectives.
            tp_comm_overlap: true,
            precision: Precision::Bf16,
            global_batch_tokens: brief.batch_target_tokens,
        };
        let time = TimeModel::Detailed(TimeOptions::for_stack(stack));
        let design = Design {
            shape: &shape,
            tokens: 1_000_000_000_000,
            layout,
            memory: MemoryModel::Detailed(Detailed {
                step,
                options: Options::for_stack(stack),
            }),
            time: &time,
        };
        match evaluate(&brief, &design) {
            Ok(p) => println!(
                "calculon's best in trainplan: {}, b1 selective sp+o interleaved:40 ({:.3} s a step, MFU {:.1} %, {:.1} GB)",
                p.layout.describe(),
                p.step_seconds.unwrap_or(f64::NAN),
                p.mfu.unwrap_or(f64::NAN) * 100.0,
                p.memory_gb.total
            ),
            Err(e) => println!("calculon's best in trainplan: {e}"),
        }
    }
}

/// This process's user and system CPU time, seconds, from `/proc/self/stat` (Linux; fields 14
/// and 15, in clock ticks of 1/100 s), or `None` elsewhere.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / 100.0)
}
