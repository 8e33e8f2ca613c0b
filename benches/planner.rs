//! Criterion benchmarks: grading one plan, one shape's verdict, and the whole default search
//! (and a 10× finer token grid) at one thread and at every core.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use itertools::iproduct;
use trainplan::cost::run::TimeModel;
use trainplan::cost::step::detailed::Options;
use trainplan::cost::step::stack::Stack;
use trainplan::cost::step::Recompute;
use trainplan::cost::step::{Schedule, Step};
use trainplan::cost::step_time::options::TimeOptions;
use trainplan::input::hf;
use trainplan::model::family::Family;
use trainplan::model::layout::layouts;
use trainplan::model::layout::{Layout, ZeroStage};
use trainplan::model::{preset, presets};
use trainplan::plan::check::check;
use trainplan::plan::pace::Pace;
use trainplan::plan::verdict::{plate_lightest, verdict};
use trainplan::plan::{evaluate, Design};
use trainplan::report::export::Format;
use trainplan::report::plot;
use trainplan::search::progress::Silent;
use trainplan::search::{
    configurations, search, search_all, MemorySpace, SearchOptions, TokenGrid,
};
use trainplan::{serve, Brief};

fn one_plan(c: &mut Criterion) {
    let brief = Brief::default();
    let shape = preset("70b").unwrap();
    let layout = Layout::new(&brief, &shape, 8, 1, ZeroStage::new(3).unwrap()).unwrap();
    let mut g = c.benchmark_group("grade");
    g.bench_function("evaluate one plan (70B, TP 8, ZeRO 3)", |b| {
        b.iter(|| {
            evaluate(
                black_box(&brief),
                &Design::plate(black_box(&shape), black_box(4_960_000_000_000), layout),
            )
        })
    });
    g.bench_function("verdict of one shape (405B)", |b| {
        let shape = preset("405b").unwrap();
        b.iter(|| {
            let lightest = plate_lightest(black_box(&brief), black_box(&shape));
            verdict(&brief, &shape, lightest, Pace::Plate)
        })
    });
    g.finish();
}

fn default_search(c: &mut Criterion) {
    let brief = Brief::default();
    let shapes = presets();
    let mut g = c.benchmark_group("search");
    g.sample_size(20);
    for (name, grid) in [
        ("default brief", TokenGrid::default()),
        (
            "10x finer grid",
            TokenGrid::new(1_000_000_000, 50_000_000_000_000, 1_000_000_000).unwrap(),
        ),
    ] {
        let options = SearchOptions {
            grid,
            ..SearchOptions::default()
        };
        let candidates = search(&brief, &shapes, &options, &Silent).evaluated;
        g.throughput(Throughput::Elements(candidates));
        for threads in [1, 0] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let label = format!("{name}, {} thread(s)", pool.current_num_threads());
            g.bench_function(label, |b| {
                b.iter(|| pool.install(|| search(black_box(&brief), &shapes, &options, &Silent)))
            });
        }
    }
    g.finish();
}

fn detailed_search(c: &mut Criterion) {
    let brief = Brief::default();
    let shapes = presets();
    let steps: Vec<Step> = iproduct!(
        [1, 2, 4],
        [Recompute::None, Recompute::Selective, Recompute::Full],
        [true, false],
        [Schedule::OneFOneB, Schedule::Interleaved(2)]
    )
    .map(
        |(micro_batch, recompute, sequence_parallel, schedule)| Step {
            micro_batch,
            seq_len: 8192,
            recompute,
            sequence_parallel,
            schedule,
            // Megatron-core's default with sequence parallelism.
            tp_comm_overlap: sequence_parallel,
            precision: trainplan::cost::step::precision::Precision::Bf16,
            global_batch_tokens: 16 * 1024 * 1024,
        },
    )
    .collect();
    let memory = SearchOptions {
        memory: MemorySpace::Detailed {
            steps: steps.clone(),
            options: Options::default(),
            interleave: false,
            v_schedules: false,
            batch: None,
            parallel: Default::default(),
            divisors: false,
        },
        ..SearchOptions::default()
    };
    let time = SearchOptions {
        time: TimeModel::Detailed(TimeOptions::default()),
        ..memory.clone()
    };
    // One detailed configuration (memory and step time) of the presets' layouts under each
    // stack's compute model: per operation (megatron-te) against the eager curve.
    let mut g = c.benchmark_group("configuration");
    for stack in [Stack::MegatronTe, Stack::Eager] {
        let space = MemorySpace::Detailed {
            steps: steps.clone(),
            options: Options::for_stack(stack),
            interleave: false,
            v_schedules: false,
            batch: None,
            parallel: Default::default(),
            divisors: false,
        };
        let time = TimeModel::Detailed(TimeOptions::for_stack(stack));
        let pairs: u64 = shapes
            .iter()
            .map(|s| layouts(&brief, s).len() as u64 * steps.len() as u64)
            .sum();
        g.throughput(Throughput::Elements(pairs));
        g.bench_function(format!("detailed memory and time, {stack}"), |b| {
            b.iter(|| {
                for s in &shapes {
                    black_box(configurations(black_box(&brief), s, &space, &time));
                }
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("search");
    g.sample_size(20);
    for (name, options) in [
        ("detailed memory", &memory),
        ("detailed memory and time", &time),
    ] {
        g.throughput(Throughput::Elements(
            search(&brief, &shapes, options, &Silent).evaluated,
        ));
        for threads in [1, 0] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let label = format!("{name}, 36 steps, {} thread(s)", pool.current_num_threads());
            g.bench_function(label, |b| {
                b.iter(|| pool.install(|| search(black_box(&brief), &shapes, options, &Silent)))
            });
        }
    }
    g.finish();
}

/// The presets' default detailed space (every interleaving depth, the batch nearest the
/// target) with CP 1, 2, 4, 8, 16 and both precisions: issue 17's space.
fn cp_and_precision_search(c: &mut Criterion) {
    use trainplan::cost::step::precision::Precision;
    use trainplan::search::ParallelSpace;
    let brief = Brief::default();
    let shapes = presets();
    let stack = Stack::MegatronTe;
    let options = SearchOptions {
        memory: MemorySpace::detailed_defaults(&brief, Options::for_stack(stack)).with_parallel(
            &[Precision::Bf16, Precision::Fp8],
            ParallelSpace {
                cps: vec![1, 2, 4, 8, 16],
                replicates: vec![],
                experts: Default::default(),
            },
        ),
        time: TimeModel::Detailed(TimeOptions::for_stack(stack)),
        distinct: trainplan::search::rank::Distinct::Layout,
        ..SearchOptions::default()
    };
    let mut g = c.benchmark_group("search");
    g.sample_size(10);
    let configurations = search(&brief, &shapes, &options, &Silent).evaluated / 5000;
    g.throughput(Throughput::Elements(configurations));
    for threads in [1, 0] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let label = format!(
            "presets, default detailed space, CP 1-16, bf16 and fp8, {} thread(s)",
            pool.current_num_threads()
        );
        g.bench_function(label, |b| {
            b.iter(|| pool.install(|| search(black_box(&brief), &shapes, &options, &Silent)))
        });
    }
    g.finish();
}

fn family_search(c: &mut Criterion) {
    let brief = Brief::default();
    let family = Family::llama("40..160:4", "6144..20480:512", "3.0..4.0:0.25").unwrap();
    let mut shapes = presets();
    shapes.extend(family.shapes().unwrap());
    let options = SearchOptions::default();
    let mut g = c.benchmark_group("search");
    g.sample_size(10);
    g.throughput(Throughput::Elements(
        search(&brief, &shapes, &options, &Silent).evaluated,
    ));
    for threads in [1, 0] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let label = format!(
            "family of 2,327 shapes, {} thread(s)",
            pool.current_num_threads()
        );
        g.bench_function(label, |b| {
            b.iter(|| pool.install(|| search(black_box(&brief), &shapes, &options, &Silent)))
        });
    }
    g.finish();
}

/// `--exact`: the ranking and the Pareto front over every whole token count in the windows,
/// for the presets (a front of one run) and the family (capped at 10,000 runs).
fn exact_search(c: &mut Criterion) {
    let brief = Brief::default();
    let family = Family::llama("40..160:4", "6144..20480:512", "3.0..4.0:0.25").unwrap();
    let mut with_family = presets();
    with_family.extend(family.shapes().unwrap());
    let options = SearchOptions {
        exact: true,
        top: Some(3),
        ..SearchOptions::default()
    };
    let mut g = c.benchmark_group("exact");
    g.sample_size(10);
    for (name, shapes) in [
        ("default brief", presets()),
        ("family of 2,327 shapes", with_family),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| search(black_box(&brief), &shapes, &options, &Silent))
        });
    }
    g.finish();
}

/// `search --all` as CSV: every passing plan collected, sorted and written, against the same
/// plans made one at a time by the merge of each configuration's grid interval and streamed.
fn all_plans(c: &mut Criterion) {
    let brief = Brief::default();
    let shapes = presets();
    let options = SearchOptions {
        top: None,
        ..SearchOptions::default()
    };
    let passing = search(&brief, &shapes, &options, &Silent).passing;
    let mut g = c.benchmark_group("all");
    g.sample_size(10);
    g.throughput(Throughput::Elements(passing));
    let csv = Format::Csv.exporter();
    g.bench_function("every passing plan, collected then written (CSV)", |b| {
        b.iter(|| {
            let r = search(black_box(&brief), &shapes, &options, &Silent);
            csv.write_search(&r, &r.plans.as_slice(), &mut std::io::sink())
                .unwrap()
        })
    });
    g.bench_function("every passing plan, streamed (CSV)", |b| {
        b.iter(|| {
            let (r, all) = search_all(black_box(&brief), &shapes, &options, &Silent);
            csv.write_search(&r, &all, &mut std::io::sink()).unwrap()
        })
    });
    g.finish();
}

/// Reading a Hugging Face config, the plots, and the exporters of issue 5's ecosystem.
fn ecosystem(c: &mut Criterion) {
    let mut g = c.benchmark_group("ecosystem");
    let config = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/hf/llama-3.1-70b/config.json"
    ))
    .unwrap();
    let path = std::path::Path::new("config.json");
    g.bench_function("read a config.json (Llama 3.1 70B)", |b| {
        b.iter(|| hf::parse(black_box(&config), path).unwrap())
    });
    let brief = Brief::default();
    let shape = preset("70b").unwrap();
    let layout = Layout::new(&brief, &shape, 8, 8, ZeroStage::new(1).unwrap()).unwrap();
    let report = check(&brief, &Design::plate(&shape, 4_960_000_000_000, layout)).unwrap();
    g.bench_function("memory plot (SVG)", |b| {
        b.iter(|| plot::memory(black_box(&report)).unwrap())
    });
    let searched = search(&brief, &presets(), &SearchOptions::default(), &Silent);
    g.bench_function("loss-days plot of the default search (SVG)", |b| {
        b.iter(|| plot::loss_days(black_box(&searched)).unwrap())
    });
    for format in [Format::Megatron, Format::DeepSpeed, Format::Torchtitan] {
        g.bench_function(format!("{format:?} export of one plan"), |b| {
            b.iter(|| format.exporter().check(black_box(&report)).unwrap())
        });
    }
    g.bench_function("serve: POST /api/check (the starting plan)", |b| {
        let body = br#"{"model": "70b", "tokens": 15000000000000}"#;
        b.iter(|| serve::api_check(black_box(body)).unwrap())
    });
    g.bench_function("serve: POST /api/search (top 10 and the front)", |b| {
        let body = br#"{"top": 10}"#;
        b.iter(|| serve::api_search(black_box(body)).unwrap())
    });
    g.bench_function("CSV of the default search's front", |b| {
        b.iter(|| Format::Csv.exporter().front(black_box(&searched)).unwrap())
    });
    g.finish();
}

/// Issue 19's problem: Llama 3 70B on 2,048 H100s (the default brief's cluster with a global
/// batch of 2,048 sequences), the default detailed space, one thread. Throughput is the
/// configurations decided (graded in full or decided by a bound); `benches/calculon.rs` prints
/// the graded count beside it and times the same search in CPU seconds.
fn calculon_problem(c: &mut Criterion) {
    let base = Brief::default();
    let brief = Brief {
        gpus: 2048,
        batch_target_tokens: 2048 * base.seq_len,
        ..base
    };
    let stack = Stack::default();
    let options = SearchOptions {
        memory: MemorySpace::detailed_defaults(&brief, Options::for_stack(stack)),
        time: TimeModel::Detailed(TimeOptions::for_stack(stack)),
        top: Some(1),
        ..SearchOptions::default()
    };
    let shapes = [preset("70b").unwrap()];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let report = pool.install(|| search(&brief, &shapes, &options, &Silent));
    let mut g = c.benchmark_group("configuration");
    g.throughput(Throughput::Elements(report.configurations));
    g.bench_function(
        "70B on 2,048 H100s, default detailed space, decided, 1 thread",
        |b| b.iter(|| pool.install(|| search(black_box(&brief), &shapes, &options, &Silent))),
    );
    g.finish();
}

/// Mixtral 8x7B beside the presets on 256 H100s under the joint MoE law, in the default
/// detailed space with every EP and ETP the default rule gives Mixtral: issue 20's search.
fn moe_search(c: &mut Criterion) {
    let mixtral = hf::read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/hf/mixtral-8x7b-v0.1/config.json"
    )))
    .unwrap();
    let mut shapes = presets();
    shapes.push(mixtral);
    let brief = Brief {
        gpus: 256,
        loss_target: 2.0,
        loss_law: trainplan::laws::LossLawPreset::Ludziejewski.law(),
        ..Brief::default()
    };
    let stack = Stack::MegatronTe;
    let options = SearchOptions {
        memory: MemorySpace::detailed_defaults(&brief, Options::for_stack(stack)),
        time: TimeModel::Detailed(TimeOptions::for_stack(stack)),
        ..SearchOptions::default()
    };
    let mut g = c.benchmark_group("search");
    g.sample_size(10);
    let configurations = search(&brief, &shapes, &options, &Silent).evaluated / 5000;
    g.throughput(Throughput::Elements(configurations));
    g.bench_function(
        "Mixtral 8x7B and the presets, 256 GPUs, default detailed space with EP and ETP",
        |b| b.iter(|| search(black_box(&brief), &shapes, &options, &Silent)),
    );
    g.finish();
}

criterion_group!(
    benches,
    moe_search,
    one_plan,
    default_search,
    calculon_problem,
    detailed_search,
    cp_and_precision_search,
    family_search,
    exact_search,
    all_plans,
    ecosystem
);
criterion_main!(benches);
