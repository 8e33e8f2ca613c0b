//! Communication buffers a GPU holds besides the model's state: context parallelism's chunks of
//! keys and values, and Transformer Engine's userbuffers under TP-communication overlap.

use crate::cost::step::stack::CpComm;
use crate::cost::step::stack::Stack;
use crate::cost::step::Step;
use crate::model::layout::Layout;
use crate::model::Shape;
/// Bytes one rank holds for the context-parallel exchange of one layer, at `tokens` tokens
/// of its own: a chunk of K and V is `4·g·T/t` bytes (BF16, the KV heads' width `g`; with
/// latent attention every head's own K and V, `2·(a·d_qk + a·d_v)·T/t`). The
/// ring keeps the chunk being sent and the one arriving, and in backward their gradients too:
/// four chunks. The all-gather holds every rank's chunk, and in backward their gradients:
/// `2·CP` chunks. Nothing without CP.
pub fn cp_buffers(shape: &Shape, layout: &Layout, tokens: f64, comm: Option<CpComm>) -> f64 {
    if layout.cp <= 1 {
        return 0.0;
    }
    let w = shape.attention_widths();
    let chunk = 2.0 * (w.key + w.value) * tokens / layout.tp as f64;
    match comm {
        Some(CpComm::Ring) => 4.0 * chunk,
        Some(CpComm::AllGather) => 2.0 * layout.cp as f64 * chunk,
        None => 0.0,
    }
}

/// Transformer Engine's userbuffers, bytes a GPU, for a step that overlaps TP communication
/// with the GEMMs on a stack that runs the overlap on them (`--tp-comm-overlap` with TP > 1 on
/// megatron-te; 0 otherwise, MaxText's XLA collective matmuls among them).
///
/// Megatron-LM's `_initialize_tp_communicators` (`megatron/training/initialize.py`) hands TE's
/// `initialize_ub` (`transformer_engine/pytorch/module/base.py`) the shape `[s·b/CP, h]`, and
/// TE builds one communication buffer of that shape for each GEMM it overlaps, once a process,
/// shared by every layer: twelve since TE 2.7 (ring exchange `qkv_fprop`, `fc1_fprop`, `proj_dgrad`,
/// `fc2_dgrad`; pipeline `proj_fprop`, `fc2_fprop`; bulk `qkv_dgrad`, `qkv_wgrad`,
/// `fc1_dgrad`, `fc1_wgrad`; external `proj_wgrad`, `fc2_wgrad`; before 2.7 the first ten, 20 and 14 bytes an element:
/// an upper bound there). A
/// buffer holds the activation type, BF16, except that under an FP8 recipe the eight
/// all-gather buffers hold one byte an element:
///
/// `(s·b/CP)·h·24` bytes in BF16, `(s·b/CP)·h·(8·1 + 4·2)` in FP8 or MXFP8, and the same in
/// NVFP4 or MXFP4 (a byte an element for the all-gather buffers: an upper bound, the FP4
/// buffers' own layout not being modelled).
///
/// Llama 3 70B at s = 8,192, b = 1, CP 1: 8,192 · 8,192 · 24 = 1.61 GB. The buffers are
/// allocated once at start-up, before the step's churn, so the fragmentation share is not
/// charged on them (a modelling choice); the ring exchange's extra receive chunks (only where
/// a configuration asks for a ring reduce-scatter) are not counted.
pub fn userbuffers(stack: Stack, step: &Step, hidden: u64, layout: &Layout) -> f64 {
    if !holds_userbuffers(stack, step, layout) {
        return 0.0;
    }
    let elements = (step.seq_len * step.micro_batch / layout.cp.max(1)) as f64 * hidden as f64;
    let bytes_an_element = if step.precision.is_narrow() {
        8.0 * 1.0 + 4.0 * 2.0
    } else {
        12.0 * 2.0
    };
    elements * bytes_an_element
}

/// Whether `step` holds TE's [`userbuffers`]: TP overlap with TP > 1 on a stack that runs it
/// on them.
pub fn holds_userbuffers(stack: Stack, step: &Step, layout: &Layout) -> bool {
    step.tp_comm_overlap && layout.tp > 1 && stack.settings().userbuffers
}
