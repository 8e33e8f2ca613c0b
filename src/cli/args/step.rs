//! The training step under `--memory detailed`: the one `check` grades, and the lists whose
//! every combination `search` tries.
#![allow(rustdoc::broken_intra_doc_links)]

use clap::{Args, ValueEnum};
use itertools::iproduct;

use super::parse::{parse_precision, parse_whole, OnOff};
use crate::brief::{self, Brief};
use crate::cost::step::precision::Precision;
use crate::cost::step::stack::Stack;
use crate::cost::step::{Recompute, Schedule, Step};
use crate::error::{Error, Result};
use crate::model::layout::ExpertSpace;
use crate::search::{ParallelSpace, DEFAULT_MICRO_BATCHES, DEFAULT_RECOMPUTE};

/// Recomputation modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecomputeArg {
    /// Keep every activation.
    None,
    /// Recompute the attention core.
    Selective,
    /// Keep each layer's input only.
    Full,
    /// torchtitan's op-level policy: keep attention's and every other matrix product's output.
    SelectiveOp,
    /// torchtitan's layer-level policy: every other layer fully recomputed.
    SelectiveLayer,
    /// MaxText's save_qkv_proj policy: keep the Q, K, V projections, recompute the rest.
    SaveQkv,
}

impl RecomputeArg {
    pub(super) fn mode(self) -> Recompute {
        match self {
            RecomputeArg::None => Recompute::None,
            RecomputeArg::Selective => Recompute::Selective,
            RecomputeArg::Full => Recompute::Full,
            RecomputeArg::SelectiveOp => Recompute::SelectiveOp,
            RecomputeArg::SelectiveLayer => Recompute::SelectiveLayer,
            RecomputeArg::SaveQkv => Recompute::SaveQkv,
        }
    }
}

/// The training step of one design (`check --memory detailed`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Training step (--memory detailed)")]
pub struct CheckStepArgs {
    /// Sequences per micro-batch [default: 1]. The sequence length is the brief's --seq-len.
    #[arg(long, value_name = "B", value_parser = parse_whole)]
    pub micro_batch: Option<u64>,
    /// Activation recomputation [default: full].
    #[arg(long, value_enum)]
    pub recompute: Option<RecomputeArg>,
    /// Sequence parallelism with TP [default: on when tp > 1].
    #[arg(long, value_enum)]
    pub sequence_parallel: Option<OnOff>,
    /// Pipeline schedule: 1f1b, interleaved:V, or a V schedule, zbv or dualpipev (torchtitan)
    /// [default: 1f1b].
    #[arg(long, value_name = "SCHEDULE")]
    pub schedule: Option<String>,
    /// TP communication overlapped with the GEMMs (Megatron-core's --tp-comm-overlap; needs
    /// sequence parallelism and a stack that has it) [default: on where the stack has it and
    /// sequence parallelism is on].
    #[arg(long, value_enum)]
    pub tp_comm_overlap: Option<OnOff>,
    /// Tokens per optimizer step across all replicas [default: the whole rounds of b·s·DP
    /// nearest --batch-target, within --batch-tolerance].
    #[arg(long, value_name = "TOKENS", value_parser = parse_whole)]
    pub global_batch_tokens: Option<u64>,
    /// Precision of the matrix products: bf16, fp8, mxfp8 (Blackwell, MI355X), nvfp4
    /// (Blackwell) or mxfp4 (Blackwell, MI355X) [default: bf16].
    #[arg(long, value_name = "PRECISION", value_parser = parse_precision)]
    pub precision: Option<Precision>,
}

/// The training steps a search tries (`search --memory detailed`): every combination.
#[derive(Debug, Args)]
#[command(next_help_heading = "Training steps (--memory detailed)")]
pub struct SearchStepArgs {
    /// Micro-batch sizes [default: 1, 2, 4 and, layout by layout, every size that divides
    /// its local batch at the --batch-target].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub micro_batches: Vec<u64>,
    /// Sequence lengths [default: the brief's --seq-len].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub seq_lens: Vec<u64>,
    /// Recomputation modes [default: none,selective,full].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    pub recompute: Vec<RecomputeArg>,
    /// Sequence parallelism settings [default: on,off; on needs tp > 1].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    pub sequence_parallel: Vec<OnOff>,
    /// Pipeline schedules: 1f1b, interleaved:V, interleaved:all for every depth from 2 to
    /// the most every stage of a layout allows (a chunk a layer, and one more for the
    /// embedding or the head on the first and last stage) where the micro-batches are a
    /// multiple of PP, zbv or dualpipev (two chunks a GPU in a V, at least 2·PP − 1 and 2·PP
    /// micro-batches) [default: 1f1b,interleaved:all where the stack interleaves, and zbv and
    /// dualpipev where it runs them (torchtitan)].
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub schedules: Vec<String>,
    /// TP-communication overlap settings (on needs sequence parallelism and a stack that has
    /// it; with off listed too, on goes only with sequence parallelism) [default: on,off where
    /// the stack has it, else off].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    pub tp_comm_overlap: Vec<OnOff>,
    /// Global batches, tokens, fixed for every layout (one a layout's micro-batches do not
    /// divide is left out, and counted in its verdict) [default: for each layout, the whole
    /// rounds of b·s·DP nearest --batch-target, within --batch-tolerance].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub global_batch_tokens: Vec<u64>,
    /// Precisions of the matrix products, each where the stack and the GPU have it
    /// [default: bf16].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_precision)]
    pub precisions: Vec<Precision>,
    /// Context-parallel degrees [default: 1 and each power of two leaving every rank at least
    /// 4,096 tokens of the sequence].
    #[arg(long = "cp", value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub cps: Vec<u64>,
    /// Hybrid-sharding replica counts (each divides DP; above 1 with ZeRO 1 to 3) [default: 1].
    #[arg(long = "replicate", value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub replicates: Vec<u64>,
    /// Expert-parallel degrees for the mixtures of experts (each divides the routed experts;
    /// dense models take 1) [default: every divisor of the routed experts].
    #[arg(long = "ep", value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub eps: Vec<u64>,
    /// Expert tensor-parallel degrees for the mixtures of experts (each divides a node and the
    /// experts' width; dense models take their TP) [default: 1 and the layout's TP].
    #[arg(long = "etp", value_name = "LIST", value_delimiter = ',', value_parser = parse_whole)]
    pub etps: Vec<u64>,
}

/// Whether a `--schedules` entry asks for every interleaving depth.
fn is_interleaved_all(text: &str) -> bool {
    text.trim().eq_ignore_ascii_case("interleaved:all")
}

impl SearchStepArgs {
    /// Whether every interleaving depth a layout allows is searched: by default (for a stack
    /// that interleaves), or when `--schedules` lists `interleaved:all`.
    pub(super) fn interleave_all(&self) -> bool {
        self.schedules.is_empty() || self.schedules.iter().any(|s| is_interleaved_all(s))
    }

    pub(super) fn given(&self) -> bool {
        !(self.micro_batches.is_empty()
            && self.seq_lens.is_empty()
            && self.recompute.is_empty()
            && self.sequence_parallel.is_empty()
            && self.schedules.is_empty()
            && self.tp_comm_overlap.is_empty()
            && self.global_batch_tokens.is_empty()
            && self.precisions.is_empty()
            && self.cps.is_empty()
            && self.replicates.is_empty()
            && self.eps.is_empty()
            && self.etps.is_empty())
    }

    /// The CP degrees and replica counts listed, each checked to be a whole number ≥ 1.
    pub(super) fn parallel(&self) -> Result<ParallelSpace> {
        for (flag, list) in [
            ("--cp", &self.cps),
            ("--replicate", &self.replicates),
            ("--ep", &self.eps),
            ("--etp", &self.etps),
        ] {
            if let Some(&bad) = list.iter().find(|&&x| x == 0 || x > brief::limits::GPUS) {
                return Err(Error::invalid(
                    flag,
                    bad,
                    format!("whole numbers from 1 to {}", brief::limits::GPUS),
                ));
            }
        }
        let sorted = |list: &Vec<u64>| {
            let mut list = list.clone();
            list.sort_unstable();
            list.dedup();
            list
        };
        Ok(ParallelSpace {
            cps: sorted(&self.cps),
            replicates: sorted(&self.replicates),
            experts: ExpertSpace {
                eps: sorted(&self.eps),
                etps: sorted(&self.etps),
            },
        })
    }

    /// Every combination of the lists, defaults filled in, sorted and without repeats (TP
    /// overlap on without sequence parallelism left out where off is listed too); `stack`
    /// decides whether TP communication can overlap.
    pub(super) fn steps(&self, brief: &Brief, stack: Stack) -> Result<Vec<Step>> {
        fn or<T: Clone>(given: &[T], default: &[T]) -> Vec<T> {
            if given.is_empty() {
                default.to_vec()
            } else {
                given.to_vec()
            }
        }
        let schedules = if self.schedules.is_empty() {
            vec![Schedule::OneFOneB]
        } else {
            let listed: Vec<&String> = self
                .schedules
                .iter()
                .filter(|s| !is_interleaved_all(s))
                .collect();
            if listed.is_empty() {
                vec![Schedule::OneFOneB]
            } else {
                listed
                    .into_iter()
                    .map(|s| Schedule::parse(s))
                    .collect::<Result<_>>()?
            }
        };
        for (flag, list, max) in [
            (
                "--micro-batches",
                &self.micro_batches,
                brief::limits::SEQ_LEN,
            ),
            ("--seq-lens", &self.seq_lens, brief::limits::SEQ_LEN),
            ("--global-batch-tokens", &self.global_batch_tokens, u64::MAX),
        ] {
            if let Some(&bad) = list.iter().find(|&&x| x == 0 || x > max) {
                return Err(Error::invalid(
                    flag,
                    bad,
                    format!("whole numbers from 1 to {max}"),
                ));
            }
        }
        let recompute: Vec<Recompute> = self.recompute.iter().map(|r| r.mode()).collect();
        let overlaps = if self.tp_comm_overlap.is_empty() {
            if stack.overlaps_tp() {
                vec![false, true]
            } else {
                vec![false]
            }
        } else {
            if self.tp_comm_overlap.contains(&OnOff::On) {
                stack.tp_overlap_allowed()?;
            }
            self.tp_comm_overlap
                .iter()
                .map(|&o| o == OnOff::On)
                .collect()
        };
        let plain = overlaps.contains(&false);
        let mut steps: Vec<Step> = iproduct!(
            or(&self.micro_batches, &DEFAULT_MICRO_BATCHES),
            or(&self.seq_lens, &[brief.seq_len]),
            or(&recompute, &DEFAULT_RECOMPUTE),
            or(&self.sequence_parallel, &[OnOff::On, OnOff::Off]),
            schedules,
            overlaps,
            or(&self.precisions, &[Precision::Bf16]),
            or(&self.global_batch_tokens, &[brief.batch_target_tokens])
        )
        .map(
            |(micro_batch, seq_len, rc, sp, schedule, overlap, precision, global_batch_tokens)| {
                Step {
                    micro_batch,
                    seq_len,
                    recompute: rc,
                    sequence_parallel: sp == OnOff::On,
                    schedule,
                    tp_comm_overlap: overlap,
                    precision,
                    global_batch_tokens,
                }
            },
        )
        .filter(|s| !(plain && s.tp_comm_overlap && !s.sequence_parallel))
        .collect();
        steps.sort();
        steps.dedup();
        Ok(steps)
    }
}
