//! The cluster's links and the time collectives take on them (SPEC.md §4).
//!
//! Ring collectives over `n` ranks moving `S` bytes on links of bus bandwidth `B` and per-step
//! latency `α` (Thakur, Rabenseifner and Gropp 2005; NCCL's "bus bandwidth" is defined so these
//! hold, `nccl-tests/doc/PERFORMANCE.md`):
//!
//! - all-reduce: `2(n − 1)·α + 2·(n − 1)/n · S / B`
//! - reduce-scatter or all-gather: `(n − 1)·α + (n − 1)/n · S / B`
//! - point-to-point send: `α + S / B`
//!
//! Defaults are an H100 SXM node (8 GPUs on NVLink 4 through NVSwitch) with one 400 Gb/s
//! InfiniBand NIC per GPU, as SPEC.md §4 quotes them: about 370 GB/s of all-reduce bus bandwidth
//! inside a node and 46–48 GB/s per NIC between nodes. Latencies are typical NCCL per-step
//! figures (a few µs on NVLink, about 10 µs across an InfiniBand fabric); they matter only for
//! small messages and very large rings.

use serde::{Deserialize, Serialize};

use crate::error::{check_numbers, Result};

/// The links of the cluster and the GPUs' memory bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// All-reduce bus bandwidth inside a node, GB/s (H100 NVLink: ~370).
    pub intra_node_gbps: f64,
    /// Per-step latency inside a node, µs.
    pub intra_node_latency_us: f64,
    /// Bus bandwidth between nodes per GPU, GB/s (one 400 Gb/s NIC per GPU: ~46).
    pub inter_node_gbps: f64,
    /// Per-step latency between nodes, µs.
    pub inter_node_latency_us: f64,
    /// Memory (HBM) bandwidth per GPU, GB/s (H100 SXM: 3,350); the optimizer step is bound by it.
    pub hbm_gbps: f64,
    /// One GPU's link to host memory, GB/s each way: PCIe Gen5 x16's 64 by default (the H100
    /// SXM's), NVLink-C2C's share on a Grace superchip ([`crate::brief::gpu`]); offloaded
    /// activations and an offloaded optimizer's copies cross it (`--offload-activations`,
    /// `--offload-optimizer`). Briefs written before it, and briefs
    /// at the default, say nothing of it.
    #[serde(default = "pcie_gen5", skip_serializing_if = "is_pcie_gen5")]
    pub host_link_gbps: f64,
    /// Host memory bandwidth per GPU, GB/s: the host's DRAM bandwidth over its GPUs, 76.8 by
    /// default (a DGX H100's two Xeons' DDR5, [`DGX_H100_HOST_MEMORY_GBPS`]); an offloaded
    /// optimizer's CPU step is bound by it (`--offload-optimizer`). Briefs written before it,
    /// and briefs at the default, say nothing of it.
    #[serde(default = "dgx_h100_host", skip_serializing_if = "is_dgx_h100_host")]
    pub host_memory_gbps: f64,
}

/// A DGX H100's (and DGX H200's) host memory bandwidth per GPU, GB/s: two Intel Xeon
/// Platinum 8480C (MLCommons' DGX H200 system description: `"host_processor_model_name":
/// "Intel(R) Xeon(R) Platinum 8480C"`, `"host_processors_per_node": 2`), each with 8 channels
/// of DDR5-4800 (Intel's 4th-generation Xeon Scalable specifications): 8 × 4,800 MT/s × 8
/// bytes = 307.2 GB/s a socket, 614.4 over 8 GPUs (*derived*, nominal).
pub const DGX_H100_HOST_MEMORY_GBPS: f64 = 76.8;

fn dgx_h100_host() -> f64 {
    DGX_H100_HOST_MEMORY_GBPS
}

fn is_dgx_h100_host(x: &f64) -> bool {
    *x == DGX_H100_HOST_MEMORY_GBPS
}

/// PCIe Gen5 x16, GB/s each way: 32 GT/s × 16 lanes ÷ 8 bits (128b/130b encoding, under 2 %,
/// left out), the figure PCI-SIG and NVIDIA quote ("128 GB/s bidirectional": Transformer
/// Engine's CPU-offloading guide).
pub const PCIE_GEN5_X16_GBPS: f64 = 64.0;

fn pcie_gen5() -> f64 {
    PCIE_GEN5_X16_GBPS
}

/// Whether a host link is [`PCIE_GEN5_X16_GBPS`]: the figure JSON leaves out as the default.
pub(crate) fn is_pcie_gen5(x: &f64) -> bool {
    *x == PCIE_GEN5_X16_GBPS
}

/// PCIe Gen4 x16, GB/s each way (16 GT/s × 16 lanes ÷ 8): the A100's host link (A100
/// datasheet: "PCIe Gen4: 64 GB/s", both ways together).
pub const PCIE_GEN4_X16_GBPS: f64 = 32.0;

impl Default for Topology {
    fn default() -> Self {
        Topology {
            intra_node_gbps: 370.0,
            intra_node_latency_us: 3.0,
            inter_node_gbps: 46.0,
            inter_node_latency_us: 10.0,
            hbm_gbps: 3_350.0,
            host_link_gbps: PCIE_GEN5_X16_GBPS,
            host_memory_gbps: DGX_H100_HOST_MEMORY_GBPS,
        }
    }
}

/// A link class: bandwidth in bytes per second and latency in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Bus bandwidth, bytes/s.
    pub bytes_per_second: f64,
    /// Per-step latency, s.
    pub latency: f64,
}

impl Topology {
    /// The NVLink class.
    pub fn intra(&self) -> Link {
        Link {
            bytes_per_second: self.intra_node_gbps * 1e9,
            latency: self.intra_node_latency_us * 1e-6,
        }
    }

    /// The network class.
    pub fn inter(&self) -> Link {
        Link {
            bytes_per_second: self.inter_node_gbps * 1e9,
            latency: self.inter_node_latency_us * 1e-6,
        }
    }

    /// Checks every figure: finite, bandwidths > 0, latencies ≥ 0.
    pub fn validate(&self) -> Result<()> {
        let fields = [
            ("intra_node_gbps", self.intra_node_gbps, false),
            ("intra_node_latency_us", self.intra_node_latency_us, true),
            ("inter_node_gbps", self.inter_node_gbps, false),
            ("inter_node_latency_us", self.inter_node_latency_us, true),
            ("hbm_gbps", self.hbm_gbps, false),
            ("host_link_gbps", self.host_link_gbps, false),
            ("host_memory_gbps", self.host_memory_gbps, false),
        ];
        check_numbers("brief.topology.", &fields, 1e9)?;
        // Below 1 MB/s a link is a typo, and its times would overflow what can be printed.
        for (name, v) in [
            ("intra_node_gbps", self.intra_node_gbps),
            ("inter_node_gbps", self.inter_node_gbps),
            ("hbm_gbps", self.hbm_gbps),
            ("host_link_gbps", self.host_link_gbps),
            ("host_memory_gbps", self.host_memory_gbps),
        ] {
            if v < 1e-3 {
                return Err(crate::error::Error::invalid(
                    format!("brief.topology.{name}"),
                    crate::format::exact(v),
                    "at least 0.001 GB/s",
                ));
            }
        }
        Ok(())
    }
}

/// Seconds for a ring all-reduce of `bytes` over `n` ranks: `2(n−1)α + 2(n−1)/n · S/B`.
pub fn all_reduce(link: Link, n: u64, bytes: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let steps = (n - 1) as f64;
    2.0 * steps * link.latency + 2.0 * steps / n as f64 * bytes / link.bytes_per_second
}

/// Seconds for a ring reduce-scatter or all-gather of `bytes` (the whole buffer) over `n`
/// ranks: `(n−1)α + (n−1)/n · S/B`.
pub fn reduce_scatter(link: Link, n: u64, bytes: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let steps = (n - 1) as f64;
    steps * link.latency + steps / n as f64 * bytes / link.bytes_per_second
}

/// Seconds to send `bytes` to a neighbour: `α + S/B`.
pub fn send(link: Link, bytes: f64) -> f64 {
    link.latency + bytes / link.bytes_per_second
}

#[cfg(test)]
mod tests {
    use super::*;

    const NVLINK: Link = Link {
        bytes_per_second: 370e9,
        latency: 0.0,
    };

    #[test]
    fn a_tp_all_reduce_of_one_70b_activation_worked_by_hand() {
        // S = 2·s·h = 2 × 8192 × 8192 = 134,217,728 B over 8 ranks at 370 GB/s:
        // 2 × 7/8 × 134,217,728 / 370e9 = 234,881,024 / 370e9 = 634.8136 µs.
        let t = all_reduce(NVLINK, 8, 134_217_728.0);
        assert!((t - 634.8136e-6).abs() < 1e-10, "{t}");
    }

    #[test]
    fn reduce_scatter_plus_all_gather_cost_one_all_reduce() {
        let link = Link {
            bytes_per_second: 46e9,
            latency: 10e-6,
        };
        let s = 1e9;
        let pair = 2.0 * reduce_scatter(link, 64, s);
        assert!((pair - all_reduce(link, 64, s)).abs() < 1e-12);
    }

    #[test]
    fn latency_counts_once_per_ring_step() {
        let link = Link {
            bytes_per_second: f64::INFINITY,
            latency: 10e-6,
        };
        assert!((all_reduce(link, 5, 1.0) - 8.0 * 10e-6).abs() < 1e-15);
        assert!((send(link, 1.0) - 10e-6).abs() < 1e-15);
        assert_eq!(all_reduce(link, 1, 1e9), 0.0);
    }

    #[test]
    fn a_negative_bandwidth_is_refused_by_name() {
        let t = Topology {
            inter_node_gbps: -1.0,
            ..Topology::default()
        };
        let e = t.validate().unwrap_err().to_string();
        assert!(e.contains("brief.topology.inter_node_gbps = -1"), "{e}");
    }
}
