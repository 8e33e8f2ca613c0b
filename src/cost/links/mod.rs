//! What a step sends over links: the topology and the ring collectives' times
//! ([`topology`], a leaf that [`crate::cost::Machine`] names), the exchanges each parallelism
//! makes in a step ([`exchanges`]: context parallelism's keys and values, the MoE layer's
//! all-to-alls and gathers, the experts' dispatch, hybrid sharding's replicas); in this file, the link a group of ranks uses and how much of a transfer
//! hides behind compute. Uses `step` and `chip` of [`crate::cost`].

pub mod exchanges;
pub mod topology;

use crate::cost::links::topology::Link;
use crate::cost::Machine;
/// The link a group of `size` ranks, `stride` apart, uses: NVLink when it fits in one node;
/// otherwise the network, where NCCL spreads the ring over the NICs of the group's members in
/// each node (one 400 Gb/s NIC per GPU), so the bus bandwidth is the per-NIC figure times the
/// members per node, at most NVLink's.
pub fn link_for(machine: &Machine, stride: u64, size: u64) -> Link {
    let node = machine.cluster.gpus_per_node;
    if stride.saturating_mul(size) <= node {
        return machine.topology.intra();
    }
    let per_node = (node / stride.max(1)).clamp(1, size);
    let mut link = machine.topology.inter();
    link.bytes_per_second =
        (link.bytes_per_second * per_node as f64).min(machine.topology.intra().bytes_per_second);
    link
}

/// Seconds hidden of `comm` behind `window` seconds of compute, at most `overlap` of it.
pub fn hidden(comm: f64, overlap: f64, window: f64) -> f64 {
    (overlap * comm).min(window.max(0.0))
}
