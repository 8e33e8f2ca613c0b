//! GPU presets: the accelerators people plan on, with the figures the brief and the time model
//! use. `--gpu h200` (or `gpu = "h200"` in a brief file) lays one over the brief; any field can
//! still be set after it.
//!
//! Figures per GPU: dense BF16 peak (no sparsity), memory as marketed (GB = 10^9 bytes), HBM
//! bandwidth, the all-reduce bus bandwidth NCCL reaches inside an 8-GPU node with its ring
//! algorithm (the time model's collectives are ring collectives, and reduce-scatter and
//! all-gather stay near the ring figure even where NVLink SHARP lifts all-reduce), and the
//! bus bandwidth of one NIC between nodes: 46 GB/s for 400 Gb/s (the default brief's, SPEC.md
//! §4), 23 GB/s for 200 Gb/s in proportion. The memory cap is 90 % of the card, the default
//! brief's 72 of 80 GB.

use serde::Serialize;

use crate::error::{Error, Result};

/// One accelerator's figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Gpu {
    /// The name `--gpu` takes.
    pub name: &'static str,
    /// What it is, for people.
    pub title: &'static str,
    /// Dense BF16 peak, TFLOP/s.
    pub peak_tflops: f64,
    /// Dense FP8 peak, TFLOP/s; 0 without FP8 tensor cores.
    pub fp8_tflops: f64,
    /// Whether it runs MXFP8 (block-scaled FP8).
    pub mxfp8: bool,
    /// Memory, GB.
    pub memory_gb: f64,
    /// HBM bandwidth, GB/s.
    pub hbm_gbps: f64,
    /// Ring all-reduce bus bandwidth inside a node, GB/s.
    pub intra_node_gbps: f64,
    /// Bus bandwidth of one GPU's NIC between nodes, GB/s.
    pub inter_node_gbps: f64,
    /// GPUs per node (a host: the failure domain, and what a launcher's `--nproc-per-node`
    /// counts).
    pub gpus_per_node: u64,
    /// GPUs of one scale-up (NVLink) domain: the node's 8 on an HGX/DGX board, 72 on an NVL72
    /// rack of 18 hosts of 4 ([`crate::brief::Brief::scale_up_gpus`]).
    pub scale_up_gpus: u64,
    /// Board power (TDP), W: what energy is counted at under load.
    pub tdp_w: f64,
}

/// Share of the card a plan may use: SPEC.md §1's 72 GB of 80.
pub const CAP_FRACTION: f64 = 0.9;

/// The presets.
///
/// Sources:
/// - A100 (40 and 80 GB): NVIDIA A100 Tensor Core GPU datasheet (312 TFLOP/s BF16 dense;
///   1,555 GB/s HBM2 and 2,039 GB/s HBM2e); DGX A100: 8 GPUs, one 200 Gb/s HDR NIC each; ring
///   all-reduce ~230 GB/s (S. Jeaugey, NVIDIA/nccl-tests#149; 231.6 GB/s measured in Azure's
///   ND A100 v4 results).
/// - H100 SXM: NVIDIA H100 datasheet (989 TFLOP/s BF16 dense, 80 GB HBM3, 3,350 GB/s); DGX H100:
///   one 400 Gb/s NDR NIC per GPU; ring all-reduce ~370 GB/s (NVIDIA/nccl-tests#212). These are
///   the default brief's figures.
/// - H100 PCIe: the same datasheet (756 TFLOP/s dense, 80 GB HBM2e, 2,000 GB/s). No NVSwitch:
///   eight cards share PCIe Gen5 (NVLink bridges join pairs only); 40 GB/s is an estimate from
///   PCIe all-reduce reports (NVIDIA/nccl#1639), not a measurement; NIC assumed 400 Gb/s.
/// - H200: NVIDIA H200 product page (141 GB HBM3e, 4,800 GB/s, H100's compute); ring
///   all-reduce 367.6 GB/s with NVLink SHARP off (stas00/ml-engineering, 8×H200).
/// - B200 (HGX/DGX): NVIDIA DGX B200 user guide (1,440 GB for 8 GPUs: 180 GB each; 64 TB/s HBM:
///   8,000 GB/s each; ConnectX-7 at 400 Gb/s per GPU), Blackwell datasheet (2,250 TFLOP/s BF16
///   dense); ring all-reduce 682 GB/s (stas00/ml-engineering, 8×B200, NCCL 2.27).
/// - FP8 (dense, no sparsity), from the same datasheets: H100 SXM and H200 1,979 TFLOP/s, H100
///   PCIe 1,513, B200 4,500 (FP8 and MXFP8 alike on Blackwell's fifth-generation tensor cores;
///   only Blackwell scales FP8 by blocks in hardware, so only it has MXFP8), MI300X 2,614.9;
///   the A100 has no FP8 tensor cores (0).
/// - MI300X: AMD Instinct MI300X specifications (1,307.4 TFLOP/s BF16 dense, 192 GB HBM3,
///   5,300 GB/s); 8 per platform, 400 Gb/s NICs 1:1 (ROCm docs); RCCL all-reduce 313 GB/s
///   over 8 GPUs (stas00/ml-engineering) — far less for smaller groups, which one figure cannot
///   say.
/// - Board power (TDP, the most the board draws, the figure energy is counted at): A100 SXM
///   400 W (A100 datasheet); H100 SXM up to 700 W and H100 PCIe 350 W (H100 datasheet); H200
///   SXM up to 700 W (H200 product page); B200 1,000 W (HGX B200 specifications); MI300X 750 W
///   (AMD Instinct MI300X specifications).
/// - Scale-up domain: every preset here is an 8-GPU board whose NVLink (Infinity Fabric on
///   the MI300X) reaches its own 8 GPUs and no further: the domain is the node.
pub const PRESETS: [Gpu; 7] = [
    Gpu {
        name: "a100-40gb",
        title: "NVIDIA A100 SXM 40 GB",
        peak_tflops: 312.0,
        fp8_tflops: 0.0,
        mxfp8: false,
        memory_gb: 40.0,
        hbm_gbps: 1_555.0,
        intra_node_gbps: 230.0,
        inter_node_gbps: 23.0,
        gpus_per_node: 8,
        scale_up_gpus: 8,
        tdp_w: 400.0,
    },
    Gpu {
        name: "a100-80gb",
        title: "NVIDIA A100 SXM 80 GB",
        peak_tflops: 312.0,
        fp8_tflops: 0.0,
        mxfp8: false,
        memory_gb: 80.0,
        hbm_gbps: 2_039.0,
        intra_node_gbps: 230.0,
        inter_node_gbps: 23.0,
        gpus_per_node: 8,
        scale_up_gpus: 8,
        tdp_w: 400.0,
    },
    Gpu {
        name: "h100-sxm",
        title: "NVIDIA H100 SXM 80 GB",
        peak_tflops: 989.0,
        fp8_tflops: 1_979.0,
        mxfp8: false,
        memory_gb: 80.0,
        hbm_gbps: 3_350.0,
        intra_node_gbps: 370.0,
        inter_node_gbps: 46.0,
        gpus_per_node: 8,
        scale_up_gpus: 8,
        tdp_w: 700.0,
    },
    Gpu {
        name: "h100-pcie",
        title: "NVIDIA H100 PCIe 80 GB",
        peak_tflops: 756.0,
        fp8_tflops: 1_513.0,
        mxfp8: false,
        memory_gb: 80.0,
        hbm_gbps: 2_000.0,
        intra_node_gbps: 40.0,
        inter_node_gbps: 46.0,
        gpus_per_node: 8,
        scale_up_gpus: 8,
        tdp_w: 350.0,
    },
    Gpu {
        name: "h200",
        title: "NVIDIA H200 SXM 141 GB",
        peak_tflops: 989.0,
        fp8_tflops: 1_979.0,
        mxfp8: false,
        memory_gb: 141.0,
        hbm_gbps: 4_800.0,
        intra_node_gbps: 368.0,
        inter_node_gbps: 46.0,
        gpus_per_node: 8,
        scale_up_gpus: 8,
        tdp_w: 700.0,
    },
    Gpu {
        name: "b200",
        title: "NVIDIA B200 (HGX) 180 GB",
        peak_tflops: 2_250.0,
        fp8_tflops: 4_500.0,
        mxfp8: true,
        memory_gb: 180.0,
        hbm_gbps: 8_000.0,
        intra_node_gbps: 682.0,
        inter_node_gbps: 46.0,
        gpus_per_node: 8,
        scale_up_gpus: 8,
        tdp_w: 1000.0,
    },
    Gpu {
        name: "mi300x",
        title: "AMD Instinct MI300X 192 GB",
        peak_tflops: 1_307.4,
        fp8_tflops: 2_614.9,
        mxfp8: false,
        memory_gb: 192.0,
        hbm_gbps: 5_300.0,
        intra_node_gbps: 313.0,
        inter_node_gbps: 46.0,
        gpus_per_node: 8,
        scale_up_gpus: 8,
        tdp_w: 750.0,
    },
];

/// Other names people use for the presets.
const ALIASES: [(&str, &str); 4] = [
    ("a100", "a100-80gb"),
    ("h100", "h100-sxm"),
    ("h200-sxm", "h200"),
    ("mi300", "mi300x"),
];

impl Gpu {
    /// The preset called `name` (any case; `a100`, `h100` and `mi300` are aliases).
    pub fn named(name: &str) -> Result<Gpu> {
        let wanted = name.trim().to_ascii_lowercase();
        let wanted = ALIASES
            .iter()
            .find(|(alias, _)| *alias == wanted)
            .map_or(wanted.as_str(), |(_, to)| to);
        PRESETS
            .iter()
            .find(|g| g.name == wanted)
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = PRESETS.iter().map(|g| g.name).collect();
                Error::invalid("gpu", name, format!("one of {}", names.join(", ")))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::brief::BriefPatch;
    use crate::brief::GpuName;

    #[test]
    fn the_h100_preset_is_the_default_brief_with_its_board_power() {
        // SPEC.md §1's brief names no power, so the default reports no energy; the preset
        // carries the H100's 700 W.
        let brief = BriefPatch::gpu(&Gpu::named("H100").unwrap()).apply(Brief::default());
        assert_eq!(brief.spend.gpu_power_w, Some(700.0));
        let mut default = Brief::default();
        default.spend.gpu_power_w = Some(700.0);
        assert_eq!(brief, default);
    }

    #[test]
    fn every_preset_gives_a_valid_brief() {
        for gpu in PRESETS {
            let brief = BriefPatch::gpu(&gpu).apply(Brief::default());
            brief.validate().unwrap();
            assert_eq!(brief.memory_cap_gb, gpu.memory_gb * 0.9);
        }
    }

    #[test]
    fn every_preset_here_is_its_own_scale_up_domain_and_says_nothing_of_it() {
        for gpu in PRESETS {
            assert_eq!(gpu.scale_up_gpus, gpu.gpus_per_node, "{}", gpu.name);
            let brief = BriefPatch::gpu(&gpu).apply(Brief::default());
            assert_eq!((brief.scale_up_gpus, brief.scale_up_used), (None, None));
            assert_eq!(brief.cluster().scale_up, 8);
        }
    }

    #[test]
    fn a_scale_up_domain_is_whole_hosts_and_a_job_uses_whole_hosts_of_it() {
        // B200 figures on NVL72-like hosts: 4 GPUs a host, 72 a domain.
        let nvl = |domain: Option<u64>, used: Option<u64>| {
            BriefPatch {
                gpu: Some(GpuName(Gpu::named("b200").unwrap())),
                gpus_per_node: Some(4),
                scale_up_gpus: domain,
                scale_up_used: used,
                ..BriefPatch::default()
            }
            .apply(Brief::default())
        };
        let b = nvl(Some(72), None);
        b.validate().unwrap();
        assert_eq!((b.cluster().scale_up, b.domain_gpus()), (72, 72));
        let b = nvl(Some(72), Some(64));
        b.validate().unwrap();
        assert_eq!((b.cluster().scale_up, b.domain_gpus()), (64, 72));
        // A domain of one host is no domain of its own: the brief holds none.
        assert_eq!(nvl(Some(4), None).scale_up_gpus, None);
        let e = nvl(Some(70), None).validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid brief.scale_up_gpus = 70: a multiple of the 4 GPUs per node (gpus_per_node), from 4 to 65,536"
        );
        let e = nvl(Some(72), Some(66)).validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid brief.scale_up_used = 66: a multiple of the 4 GPUs per node (gpus_per_node), from 4 to the 72 GPUs of a scale-up domain (scale_up_gpus)"
        );
        let e = nvl(None, Some(8)).validate().unwrap_err().to_string();
        assert!(e.starts_with("invalid brief.scale_up_used = 8:"), "{e}");
        let e = nvl(Some(2), None).validate().unwrap_err().to_string();
        assert!(e.starts_with("invalid brief.scale_up_gpus = 2:"), "{e}");
    }

    #[test]
    fn an_unknown_gpu_is_named_with_the_choices() {
        let e = Gpu::named("h300").unwrap_err().to_string();
        assert!(
            e.starts_with("invalid gpu = h300: one of a100-40gb, "),
            "{e}"
        );
    }
}
