//! GPU presets: the accelerators people plan on, with the figures the brief and the time model
//! use. `--gpu h200` (or `gpu = "h200"` in a brief file) lays one over the brief; any field can
//! still be set after it.
//!
//! Figures per GPU: dense BF16, FP8 and FP4 peaks (no sparsity) and the block-scaled formats
//! the tensor cores run, memory as marketed (GB = 10^9 bytes), HBM
//! bandwidth, the all-reduce bus bandwidth NCCL reaches inside a node (an NVL72's NVLink domain
//! for the GB200 and GB300) with its ring
//! algorithm (the time model's collectives are ring collectives, and reduce-scatter and
//! all-gather stay near the ring figure even where NVLink SHARP lifts all-reduce), and the
//! bus bandwidth of one NIC between nodes: 46 GB/s for 400 Gb/s (the default brief's, SPEC.md
//! §4), 23 GB/s for 200 Gb/s and 92 GB/s for 800 Gb/s in proportion. The memory cap is 90 % of the card, the default
//! brief's 72 of 80 GB.

use serde::Serialize;

use crate::cost::links::topology::{
    is_pcie_gen5, DGX_H100_HOST_MEMORY_GBPS, PCIE_GEN4_X16_GBPS, PCIE_GEN5_X16_GBPS,
};
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
    /// Dense FP4 (E2M1) peak, TFLOP/s; 0 without FP4 tensor cores.
    pub fp4_tflops: f64,
    /// Whether it runs NVFP4 (E2M1 with an E4M3 scale per 16 elements: Blackwell only).
    pub nvfp4: bool,
    /// Whether it runs MXFP4 (E2M1 with an E8M0 scale per 32 elements, OCP microscaling:
    /// Blackwell and the MI355X).
    pub mxfp4: bool,
    /// Memory, GB.
    pub memory_gb: f64,
    /// HBM bandwidth, GB/s.
    pub hbm_gbps: f64,
    /// Ring all-reduce bus bandwidth inside a node, GB/s.
    pub intra_node_gbps: f64,
    /// Bus bandwidth of one GPU's NIC between nodes, GB/s.
    pub inter_node_gbps: f64,
    /// One GPU's link to host memory, GB/s each way (PCIe, or its share of a Grace
    /// superchip's NVLink-C2C); listed where it is not PCIe Gen5 x16's 64.
    #[serde(skip_serializing_if = "is_pcie_gen5")]
    pub host_link_gbps: f64,
    /// The host's memory bandwidth per GPU, GB/s (its DRAM's over the GPUs it serves); listed
    /// where it is not a DGX H100's 76.8.
    #[serde(skip_serializing_if = "is_dgx_h100_host")]
    pub host_memory_gbps: f64,
    /// GPUs per node (a host: the failure domain, and what a launcher's `--nproc-per-node`
    /// counts).
    pub gpus_per_node: u64,
    /// GPUs of one scale-up (NVLink) domain: the node's 8 on an HGX/DGX board, 72 on an NVL72
    /// rack of 18 hosts of 4 ([`crate::brief::Brief::scale_up_gpus`]).
    pub scale_up_gpus: u64,
    /// Board power (TDP), W: what energy is counted at under load.
    pub tdp_w: f64,
}

fn is_dgx_h100_host(x: &f64) -> bool {
    *x == DGX_H100_HOST_MEMORY_GBPS
}

/// A DGX A100's host memory bandwidth per GPU, GB/s: two AMD EPYC 7742 (DGX A100 user guide:
/// "Dual AMD Rome 7742"), 8 channels of DDR4-3200 each (AMD's EPYC 7742 specifications): 8 ×
/// 3,200 MT/s × 8 bytes = 204.8 GB/s a socket, 409.6 over 8 GPUs (*derived*, nominal).
pub const DGX_A100_HOST_MEMORY_GBPS: f64 = 51.2;

/// A DGX B200's host memory bandwidth per GPU, GB/s: two Intel Xeon Platinum 8570 (DGX B200
/// user guide), 8 channels of DDR5-5600 each (Intel's 5th-generation Xeon Scalable
/// specifications): 358.4 GB/s a socket, 716.8 over 8 GPUs (*derived*, nominal).
pub const DGX_B200_HOST_MEMORY_GBPS: f64 = 89.6;

/// One GPU's share of a Grace CPU's LPDDR5X, GB/s: "up to 512 GB/s" a GB200 superchip (NVIDIA
/// GB200 NVL72 specifications, CPU memory bandwidth of one Grace), shared by its two GPUs,
/// which step their optimizers at once: 256 (*derived*).
pub const GRACE_HOST_MEMORY_PER_GPU_GBPS: f64 = 256.0;

/// An MI300X platform's host memory bandwidth per GPU, GB/s, *assumed*: two AMD EPYC 9004
/// (Genoa), the hosts of AMD's MI300X reference platforms, 12 channels of DDR5-4800 each
/// (AMD's EPYC 9004 specifications): 460.8 GB/s a socket, 921.6 over 8 GPUs; OEM hosts vary.
pub const EPYC_9004_HOST_MEMORY_GBPS: f64 = 115.2;

/// Share of the card a plan may use: SPEC.md §1's 72 GB of 80.
pub const CAP_FRACTION: f64 = 0.9;

/// Bytes in the binary gigabyte (GiB) that cards' memory is marketed in.
const GIB: f64 = 1_073_741_824.0;

/// The H200 of `../shared/calibration`: torch's `total_memory` in bytes, and its marketed GB.
const H200_TOTAL_MEMORY: f64 = 150_109_880_320.0;
const H200_MARKETED_GB: f64 = 141.0;

/// Bytes a training process can allocate on a card whose memory is marketed as `marketed_gb`.
///
/// The marketed figure counts binary gigabytes: nvidia-smi shows an H100 SXM's "80 GB" as
/// 81,559 MiB (85.5 × 10^9 bytes), and torch's `total_memory` on the H200 of
/// `../shared/calibration` is 150,109,880,320 bytes for its "141 GB", 99.15 % of 141 GiB (the
/// rest the driver keeps). That share, measured on the H200, is taken for every card:
/// `card_bytes(g) = g · 2^30 · 150,109,880,320 / (141 · 2^30)`.
///
/// Plans keep to the brief's memory cap, in GB of 10^9 bytes as SPEC.md fixes them (the
/// default brief's 72 of its 80 GB card), well inside this; what a published run held is
/// graded against this, the card it ran on ([`crate::plan::calibrate::Run::predict`]).
pub fn card_bytes(marketed_gb: f64) -> f64 {
    marketed_gb * GIB * (H200_TOTAL_MEMORY / (H200_MARKETED_GB * GIB))
}

/// One GPU's share of a Grace superchip's NVLink-C2C, GB/s each way: 900 GB/s bidirectional
/// between the Grace CPU and its GPUs (NVIDIA GB200 NVL72 and GB300 NVL72 specifications;
/// Transformer Engine's CPU-offloading guide: "900 GB/s bidirectional ... The GB200 pairs a
/// Grace CPU ... and two Blackwell GPUs"), 450 each way, shared by the superchip's two GPUs,
/// which offload at once in data-parallel training: 225 (*derived*; read as 900 a GPU the link
/// would give 450). The PCIe presets keep each GPU's own x16 link whole: on an HGX board each
/// GPU has one to its PCIe switch, and what the eight share beyond it (the CPUs' root ports and
/// DRAM) is not divided here, so eight GPUs offloading at once may see less; `--host-link-gbps`
/// says what a cluster measures.
pub const GRACE_C2C_PER_GPU_GBPS: f64 = 225.0;

/// The presets that others are built from (`..BASE`), with their own figures; sources in
/// [`PRESETS`]'s comment.
const A100_80GB: Gpu = Gpu {
    name: "a100-80gb",
    title: "NVIDIA A100 SXM 80 GB",
    peak_tflops: 312.0,
    fp8_tflops: 0.0,
    mxfp8: false,
    fp4_tflops: 0.0,
    nvfp4: false,
    mxfp4: false,
    memory_gb: 80.0,
    hbm_gbps: 2_039.0,
    intra_node_gbps: 230.0,
    inter_node_gbps: 23.0,
    host_link_gbps: PCIE_GEN4_X16_GBPS,
    host_memory_gbps: DGX_A100_HOST_MEMORY_GBPS,
    gpus_per_node: 8,
    scale_up_gpus: 8,
    tdp_w: 400.0,
};

const H100_SXM: Gpu = Gpu {
    name: "h100-sxm",
    title: "NVIDIA H100 SXM 80 GB",
    peak_tflops: 989.0,
    fp8_tflops: 1_979.0,
    mxfp8: false,
    fp4_tflops: 0.0,
    nvfp4: false,
    mxfp4: false,
    memory_gb: 80.0,
    hbm_gbps: 3_350.0,
    intra_node_gbps: 370.0,
    inter_node_gbps: 46.0,
    host_link_gbps: PCIE_GEN5_X16_GBPS,
    host_memory_gbps: DGX_H100_HOST_MEMORY_GBPS,
    gpus_per_node: 8,
    scale_up_gpus: 8,
    tdp_w: 700.0,
};

const B200: Gpu = Gpu {
    name: "b200",
    title: "NVIDIA B200 (HGX) 180 GB",
    peak_tflops: 2_250.0,
    fp8_tflops: 4_500.0,
    mxfp8: true,
    fp4_tflops: 9_000.0,
    nvfp4: true,
    mxfp4: true,
    memory_gb: 180.0,
    hbm_gbps: 8_000.0,
    intra_node_gbps: 682.0,
    inter_node_gbps: 46.0,
    host_link_gbps: PCIE_GEN5_X16_GBPS,
    host_memory_gbps: DGX_B200_HOST_MEMORY_GBPS,
    gpus_per_node: 8,
    scale_up_gpus: 8,
    tdp_w: 1000.0,
};

const GB200: Gpu = Gpu {
    name: "gb200",
    title: "NVIDIA GB200 NVL72 186 GB",
    peak_tflops: 2_500.0,
    fp8_tflops: 5_000.0,
    mxfp8: true,
    fp4_tflops: 10_000.0,
    nvfp4: true,
    mxfp4: true,
    memory_gb: 186.0,
    hbm_gbps: 8_000.0,
    intra_node_gbps: 682.0,
    inter_node_gbps: 46.0,
    host_link_gbps: GRACE_C2C_PER_GPU_GBPS,
    host_memory_gbps: GRACE_HOST_MEMORY_PER_GPU_GBPS,
    gpus_per_node: 4,
    scale_up_gpus: 72,
    tdp_w: 1200.0,
};

const MI300X: Gpu = Gpu {
    name: "mi300x",
    title: "AMD Instinct MI300X 192 GB",
    peak_tflops: 1_307.4,
    fp8_tflops: 2_614.9,
    mxfp8: false,
    fp4_tflops: 0.0,
    nvfp4: false,
    mxfp4: false,
    memory_gb: 192.0,
    hbm_gbps: 5_300.0,
    intra_node_gbps: 313.0,
    inter_node_gbps: 46.0,
    host_link_gbps: PCIE_GEN5_X16_GBPS,
    host_memory_gbps: EPYC_9004_HOST_MEMORY_GBPS,
    gpus_per_node: 8,
    scale_up_gpus: 8,
    tdp_w: 750.0,
};

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
///   Blackwell and the MI355X scale FP8 by blocks in hardware, so only they have MXFP8),
///   MI300X 2,614.9;
///   the A100 has no FP8 tensor cores (0).
/// - MI300X: AMD Instinct MI300X specifications (1,307.4 TFLOP/s BF16 dense, 192 GB HBM3,
///   5,300 GB/s); 8 per platform, 400 Gb/s NICs 1:1 (ROCm docs); RCCL all-reduce 313 GB/s
///   over 8 GPUs (stas00/ml-engineering) — far less for smaller groups, which one figure cannot
///   say.
/// - Board power (TDP, the most the board draws, the figure energy is counted at): A100 SXM
///   400 W (A100 datasheet); H100 SXM up to 700 W and H100 PCIe 350 W (H100 datasheet); H200
///   SXM up to 700 W (H200 product page); B200 1,000 W (HGX B200 specifications); MI300X 750 W
///   (AMD Instinct MI300X specifications).
///
/// The 2026 presets (issue 40). Sources are collected, with quotes, in the research
/// notes; "MLE" is stas00/ml-engineering @744d01e (`compute/accelerator/README.md`, its
/// TFLOPS, memory, power and network tables, each row citing the vendor's datasheet), "XLA"
/// the device captures in openxla/xla `xla/backends/gpu/target_config/specs/`. Where a figure
/// is *derived* the rule is given; where sources disagree, the one chosen and why.
/// - FP4 and the formats (dense, no sparsity): NVFP4 runs on Blackwell only and MXFP4 and
///   MXFP8 on Blackwell and the MI355X (Transformer Engine's MXFP8 and NVFP4 recipes: "SM
///   10.0, SM 10.3"; MLE marks MX formats "X" on the MI300X and MI325X and NVFP4 "X" on the
///   MI355X). B200 9,000 TFLOP/s (DGX B200 datasheet via MLE: 72 PFLOP/s dense for 8; 18 PF
///   sparse per GPU); MXFP4 and NVFP4 alike run at the FP4 rate.
/// - H800 SXM: no NVIDIA specification page was found; it is the H100 SXM's die with
///   NVLink cut to 400 GB/s bidirectional against the H100's 900 (third-party tables:
///   feifeibear/LLMRoofline `"H800": {"flops": 989.5, "bwd": 3.35}`, LLM-Prof
///   `interconnect_bandwidth: 400` against the H100's 900). Compute, memory, HBM, NIC
///   (ConnectX-7 400 Gb/s, DeepEP's ~50 GB/s per GPU) and board power are the H100 SXM's
///   (*derived*: the same board); the ring all-reduce figure is *derived* as the H100's 370
///   GB/s × 400/900 = 164 GB/s (a ring's bus bandwidth scales with the link's).
/// - B300 (HGX, Blackwell Ultra): 2,250 TFLOP/s BF16 and 4,500 FP8 dense (DGX B300 datasheet
///   via MLE); FP4 12,600 dense from MLE's table, the one figure citing the DGX B300 datasheet
///   (glennklockwood 13,125, Verda 14,000 and MLE's unexplained "nvfp4" column 15,000 cite no
///   vendor page); 288 GB (MLE's memory table, DGX B300; the XLA capture sees 297.0 GB of
///   device memory, HGX's "2.1 TB" for 8 and Verda's 270 are the lower readings), 8,000 GB/s
///   (NVIDIA via MLE; XLA 7,936); NVLink 5 as the B200's, so the ring figure is the B200's
///   measured 682 GB/s (*derived*: the same links and switches); 8 ConnectX-8 at 800 Gb/s
///   (MLE: "100GBps per accelerator ... 8x ConnectX-8, as on DGX B300"), so 92 GB/s, twice the
///   400 Gb/s figure (*derived* in proportion); 1,000 W, the DGX B300 power-capping document's
///   maximum TGP (MLE; Verda 1.1 kW and glennklockwood's 1,400 W are GB300 figures or
///   unsourced).
/// - GB200 NVL72 (per GPU): 2,500 TFLOP/s BF16, 5,000 FP8 and 10,000 FP4 dense — the Blackwell
///   technical brief's rack totals (180, 360 and 720 PFLOP/s) ÷ 72 (MLE; marin-community/marin
///   PR #7334) — not the HGX B200's 2,250 that some tables copy into a GB200 column (Verda);
///   186 GB (NVIDIA's MIG table via MLE; MLCommons v6.1 Crusoe GB200-NVL72
///   `"accelerator_memory_capacity": "186 GB"`), 8,000 GB/s (XLA capture 7,928); NVLink 5 at
///   900 GB/s a direction in a 72-GPU domain (Megatron-LM's DeepSeek-V3 GB200 guide), ring
///   figure the B200's 682 (*derived* as for the B300); one ConnectX-7 at 400 Gb/s per GPU,
///   46 GB/s (scaling-book's rack egress `4 * 18 * 400 / 8 = 3.6TB/s`, i.e. 72 × 400 Gb/s);
///   1,200 W (NVIDIA Mission Control power FAQ via MLE).
/// - GB300 NVL72 (per GPU): 2,500 / 5,000 / 15,000 TFLOP/s dense (rack 180 / 360 / 1,080
///   PFLOP/s ÷ 72: Verda's "without sparsity" table, glennklockwood's "1.1 EF dense FP4");
///   288 GB (MLE; Verda 279, XLA 297.0 GB of device memory); 8,000 GB/s (Verda); the ring
///   figure the B200's 682 (*derived*); a ConnectX-8 at 800 Gb/s per GPU (glennklockwood: "72
///   ConnectX-8 NICs"), 92 GB/s (*derived* in proportion); 1,400 W (MLE: NVIDIA's GB300
///   rack-planning example, "four 1.4kW GPUs").
/// - Host links (`host_link_gbps`, GB/s each way, nominal): PCIe Gen5 x16, 64, for the H100
///   (SXM and PCIe), H200, H800, B200 (DGX B200 user guide: Xeon Platinum 8570 hosts, PCIe
///   Gen5) and the MI300X, MI325X and MI355X (AMD's specifications: "PCIe Gen 5 x16"); PCIe
///   Gen4 x16, 32, for the A100; the B300 64 too (*derived*: Blackwell Ultra and its
///   ConnectX-8 switches speak PCIe Gen6, but DGX B300's Xeon 6 hosts are Gen5, which bounds
///   the path to host memory); GB200 and GB300 225, their share of Grace's NVLink-C2C
///   ([`GRACE_C2C_PER_GPU_GBPS`]). Copies reach some 80–90 % of a PCIe link's nominal figure
///   (its packet overheads); `--host-link-gbps` sets a measured one.
/// - Host memory (`host_memory_gbps`, GB/s per GPU, nominal DRAM bandwidth of the host over
///   its GPUs, which an offloaded optimizer's CPU step reads and writes): DGX A100 51.2
///   ([`DGX_A100_HOST_MEMORY_GBPS`]); DGX H100 76.8, for the H100 (SXM and PCIe), H200 and
///   H800 ([`DGX_H100_HOST_MEMORY_GBPS`]; the H100 PCIe's and H800's hosts *assumed* alike);
///   DGX B200 89.6 ([`DGX_B200_HOST_MEMORY_GBPS`]), the B300's too (*assumed*: DGX B300's Xeon
///   6 hosts not checked); GB200 and GB300 256, half a Grace's LPDDR5X
///   ([`GRACE_HOST_MEMORY_PER_GPU_GBPS`]); the MI300X, MI325X and MI355X 115.2, two EPYC 9004
///   hosts (*assumed*, [`EPYC_9004_HOST_MEMORY_GBPS`]). `--host-memory-gbps` sets a measured
///   one.
/// - Scale-up domains: every preset but the NVL72 ones is an 8-GPU board whose NVLink
///   (Infinity Fabric on AMD's) reaches its own 8 GPUs and no further: the domain is the node.
///   GB200 and GB300 NVL72 racks are one NVLink domain of 72 GPUs (`scale_up_gpus`) on 18
///   hosts of 4 (`gpus_per_node`: Megatron-Bridge `NUM_GPUS_PER_NODE_MAP`: `"gb200": 4,
///   "gb300": 4`; MLCommons v6.1 Crusoe GB200-NVL72 `"accelerators_per_node": 4`), so TP, CP
///   and EP groups may span the rack over NVLink while the host is what fails and restarts.
/// - MI325X: the MI300X's compute (the same 304 CUs of CDNA3 at the same clock: ROCm's
///   `gpu-arch-specs.rst`; MLE rounds both to 1,300 and 2,610), 256 GB HBM3e at 6,000 GB/s
///   and 1,000 W typical board power (MLE, AMD's specifications); the MI300X's Infinity
///   Fabric (MLE: "MI300X/MI325X are 64GBps GPU-to-GPU"), so its measured 313 GB/s ring
///   figure (*derived*); ConnectX-7 400 Gb/s 1:1 (ROCm MoRI guide), 46 GB/s.
/// - MI355X: 2,500 TFLOP/s BF16 and 5,000 FP8 dense (AMD, via MLE: "AMD's dense figures ...
///   10.1 PFLOPS for OCP-FP8" with sparsity); MXFP8 at the FP8 rate (no separate figure);
///   MXFP4 10,100 dense (MLE: the FP4 entry "carries no sparsity qualifier ... and is dense";
///   Tom's Hardware's 20.1 PFLOPS would be four times the FP8 rate where every other chip's
///   FP4 is twice, so it is read as sparse); 288 GB HBM3e at 8,000 GB/s and 1,400 W (MLE);
///   Infinity Fabric at 76.5 GB/s a link against the MI300X's 64 (MLE), so the ring figure
///   is *derived* as 313 × 76.5/64 = 374 GB/s; Pollara 400 Gb/s NICs 1:1 (ROCm MoRI guide;
///   MLCommons Crusoe MI355X), 46 GB/s.
pub const PRESETS: [Gpu; 13] = [
    Gpu {
        name: "a100-40gb",
        title: "NVIDIA A100 SXM 40 GB",
        memory_gb: 40.0,
        hbm_gbps: 1_555.0,
        ..A100_80GB
    },
    A100_80GB,
    H100_SXM,
    Gpu {
        name: "h100-pcie",
        title: "NVIDIA H100 PCIe 80 GB",
        peak_tflops: 756.0,
        fp8_tflops: 1_513.0,
        hbm_gbps: 2_000.0,
        intra_node_gbps: 40.0,
        tdp_w: 350.0,
        ..H100_SXM
    },
    Gpu {
        name: "h200",
        title: "NVIDIA H200 SXM 141 GB",
        memory_gb: 141.0,
        hbm_gbps: 4_800.0,
        intra_node_gbps: 368.0,
        ..H100_SXM
    },
    Gpu {
        name: "h800",
        title: "NVIDIA H800 SXM 80 GB",
        intra_node_gbps: 164.0,
        ..H100_SXM
    },
    B200,
    Gpu {
        name: "b300",
        title: "NVIDIA B300 (HGX) 288 GB",
        fp4_tflops: 12_600.0,
        memory_gb: 288.0,
        inter_node_gbps: 92.0,
        ..B200
    },
    GB200,
    Gpu {
        name: "gb300",
        title: "NVIDIA GB300 NVL72 288 GB",
        fp4_tflops: 15_000.0,
        memory_gb: 288.0,
        inter_node_gbps: 92.0,
        tdp_w: 1400.0,
        ..GB200
    },
    MI300X,
    Gpu {
        name: "mi325x",
        title: "AMD Instinct MI325X 256 GB",
        memory_gb: 256.0,
        hbm_gbps: 6_000.0,
        tdp_w: 1000.0,
        ..MI300X
    },
    Gpu {
        name: "mi355x",
        title: "AMD Instinct MI355X 288 GB",
        peak_tflops: 2_500.0,
        fp8_tflops: 5_000.0,
        mxfp8: true,
        fp4_tflops: 10_100.0,
        nvfp4: false,
        mxfp4: true,
        memory_gb: 288.0,
        hbm_gbps: 8_000.0,
        intra_node_gbps: 374.0,
        inter_node_gbps: 46.0,
        host_link_gbps: PCIE_GEN5_X16_GBPS,
        host_memory_gbps: EPYC_9004_HOST_MEMORY_GBPS,
        gpus_per_node: 8,
        scale_up_gpus: 8,
        tdp_w: 1400.0,
    },
];

/// Other names people use for the presets.
const ALIASES: [(&str, &str); 7] = [
    ("a100", "a100-80gb"),
    ("h100", "h100-sxm"),
    ("h200-sxm", "h200"),
    ("h800-sxm", "h800"),
    ("mi300", "mi300x"),
    ("mi325", "mi325x"),
    ("mi355", "mi355x"),
];

impl Gpu {
    /// The preset called `name` (any case; `a100`, `h100`, `mi300`, `mi325` and `mi355` are aliases).
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

    #[test]
    fn a_cards_usable_bytes_are_its_marketed_binary_gigabytes_less_the_drivers_share() {
        // Measured on the H200 itself.
        assert!((card_bytes(141.0) - 150_109_880_320.0).abs() < 1.0);
        // The H100 SXM: nvidia-smi's 81,559 MiB, of which the driver keeps a few hundred MiB
        // more than of the H200's; within 0.5 %.
        let smi = 81_559.0 * 1_048_576.0;
        assert!(
            (card_bytes(80.0) / smi - 1.0).abs() < 0.005,
            "{}",
            card_bytes(80.0)
        );
        // More than the marketed figure read as 10^9 bytes: 7 % more.
        assert!((card_bytes(186.0) / 186e9 - 1.0 - 0.0646).abs() < 0.001);
    }
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
    fn every_preset_but_the_nvl72_racks_is_its_own_scale_up_domain_and_says_nothing_of_it() {
        for gpu in PRESETS {
            let brief = BriefPatch::gpu(&gpu).apply(Brief::default());
            if gpu.name.starts_with("gb") {
                // 18 hosts of 4 in one NVLink domain of 72.
                assert_eq!((gpu.gpus_per_node, gpu.scale_up_gpus), (4, 72));
                assert_eq!(brief.scale_up_gpus, Some(72));
                assert_eq!(brief.cluster().scale_up, 72);
                continue;
            }
            assert_eq!(gpu.scale_up_gpus, gpu.gpus_per_node, "{}", gpu.name);
            assert_eq!((brief.scale_up_gpus, brief.scale_up_used), (None, None));
            assert_eq!(brief.cluster().scale_up, 8);
        }
    }

    #[test]

    fn every_preset_finds_its_own_kernel_figures() {
        // B200 and B300, GB200 and GB300 share peak and bandwidth, as do the GB200 and MI355X
        // and the H100 and H800: the ties are broken by formats, FP4 peak and links.
        for gpu in PRESETS {
            let machine = BriefPatch::gpu(&gpu).apply(Brief::default()).machine();
            let chip = crate::cost::chip::Chip::on(&machine).unwrap();
            assert_eq!(chip.name, gpu.name);
        }
        // The default brief is the H100 SXM's.
        let chip = crate::cost::chip::Chip::on(&Brief::default().machine()).unwrap();
        assert_eq!(chip.name, "h100-sxm");
    }

    #[test]
    fn the_derived_link_figures_follow_their_rules() {
        let g = |n| Gpu::named(n).unwrap();
        // H800: the H100's ring scaled by NVLink 400 against 900 GB/s bidirectional.
        assert_eq!(
            g("h800").intra_node_gbps,
            (370.0_f64 * 400.0 / 900.0).round()
        );
        assert_eq!(g("h800").peak_tflops, g("h100").peak_tflops);
        // MI355X: the MI300X's ring scaled by Infinity Fabric 76.5 against 64 GB/s a link.
        assert_eq!(
            g("mi355x").intra_node_gbps,
            (313.0_f64 * 76.5 / 64.0).round()
        );
        // ConnectX-8 at 800 Gb/s: twice the 400 Gb/s figure.
        assert_eq!(g("b300").inter_node_gbps, 2.0 * g("b200").inter_node_gbps);
        assert_eq!(g("gb300").inter_node_gbps, 92.0);
        // NVL72: hosts of 4 in an NVLink domain of 72.
        assert_eq!(
            (g("gb200").gpus_per_node, g("gb200").scale_up_gpus),
            (4, 72)
        );
        // NVFP4 on Blackwell only; MXFP4 and MXFP8 on Blackwell and the MI355X.
        for gpu in PRESETS {
            let blackwell = gpu.name.starts_with('b') || gpu.name.starts_with("gb");
            assert_eq!(gpu.nvfp4, blackwell, "{}", gpu.name);
            assert_eq!(gpu.mxfp4, blackwell || gpu.name == "mi355x", "{}", gpu.name);
            assert_eq!(gpu.mxfp8, gpu.mxfp4, "{}", gpu.name);
            assert_eq!(gpu.fp4_tflops > 0.0, gpu.mxfp4, "{}", gpu.name);
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
