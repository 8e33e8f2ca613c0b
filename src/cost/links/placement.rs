//! Where a plan's ranks sit: hosts, scale-up (NVLink) domains, and which of the layout's
//! groups ride NVLink and which cross the NICs — what the time model assumed, for the reports.
//!
//! The rule (docs/model.md, "Scale-up domains"): ranks are numbered as Megatron-core numbers
//! them, TP fastest, then CP, then DP (EP within it for the experts), then PP (`RankGenerator`'s
//! order `tp-cp-ep-dp-pp`, `megatron/core/parallel_state.py`; the experts' `tp-ep-dp-pp` with
//! ETP as their TP), and fill hosts and domains in that order: rank `r` sits on host
//! `⌊r/host⌋` and in domain `⌊r/S⌋`, `S` the GPUs of a domain the job uses
//! ([`Cluster::scale_up`]). Hosts are whole; a GPU count that is not a multiple of `S` leaves the
//! last domain part full (512 GPUs in racks of 72: seven full racks and 8 GPUs, two hosts, of
//! an eighth). A group rides NVLink when every group of its kind lies in one domain
//! ([`in_one_domain`], exact); otherwise the NICs ([`crate::cost::links::link_for`]). The
//! failure domain is the host: failures are counted per GPU
//! ([`crate::cost::run::reliability`]), whatever the NVLink domain.

use serde::Serialize;

use crate::cost::links::{fewest_per_domain, in_one_domain};
use crate::model::layout::{Cluster, Layout};

/// Megatron-core's rank order, fastest first.
pub const RANK_ORDER: &str = "tp-cp-ep-dp-pp";

/// Where a plan's ranks sit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankPlacement {
    /// The rank order, fastest first ([`RANK_ORDER`]).
    pub order: &'static str,
    /// GPUs of the job.
    pub gpus: u64,
    /// GPUs of a host (the failure domain).
    pub gpus_per_host: u64,
    /// Hosts the job uses, `⌈GPUs / host⌉`.
    pub hosts: u64,
    /// GPUs of one scale-up (NVLink) domain.
    pub scale_up_gpus: u64,
    /// GPUs of each domain the job fills, in rank order.
    pub scale_up_used: u64,
    /// Domains the job is on, `⌈GPUs / used⌉`.
    pub domains: u64,
    /// GPUs of the last domain the job uses (the used count when it is full).
    pub last_domain_gpus: u64,
    /// The layout's groups of more than one rank, TP first.
    pub groups: Vec<GroupPlacement>,
}

/// One kind of group of a layout and the link it rides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupPlacement {
    /// Which group: `tp`, `cp`, `dp` (ZeRO's shard group over DP × CP), `replicas`, `ep`,
    /// `etp`, `expert_dp` or `pp`.
    pub group: &'static str,
    /// Ranks of a group.
    pub size: u64,
    /// Ranks between neighbours of a group.
    pub stride: u64,
    /// `nvlink` when every group of the kind lies in one domain, else `nic`.
    pub link: &'static str,
    /// The fewest ranks of one group in a domain it is on, where it crosses the NICs (the
    /// NICs its ring rides).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fewest_per_domain: Option<u64>,
}

impl GroupPlacement {
    /// The group's name in words: `TP`, `CP`, `DP`, `replicas`, `ETP`, `EP`, `expert DP`,
    /// `PP`.
    pub fn label(&self) -> &'static str {
        match self.group {
            "tp" => "TP",
            "cp" => "CP",
            "dp" => "DP",
            "replicas" => "replicas",
            "etp" => "ETP",
            "ep" => "EP",
            "expert_dp" => "expert DP",
            _ => "PP",
        }
    }
}

impl RankPlacement {
    /// The groups that ride `link` (`nvlink` or `nic`), each as `each` writes it, joined with
    /// commas; `none` where no group does. What the reports and the launchers' notes list.
    pub fn listed(&self, link: &str, each: impl Fn(&GroupPlacement) -> String) -> String {
        let v: Vec<String> = self
            .groups
            .iter()
            .filter(|g| g.link == link)
            .map(each)
            .collect();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    }

    /// The placement of `layout` on `cluster`, whose scale-up domains hold `domain_gpus` GPUs
    /// each (of which the ranks fill [`Cluster::scale_up`]).
    pub fn of(cluster: &Cluster, domain_gpus: u64, layout: &Layout) -> RankPlacement {
        let (tp, cp, dp, pp) = (layout.tp, layout.cp, layout.dp, layout.pp);
        let shards = layout.shard_group();
        let mut kinds = vec![
            ("tp", 1, tp),
            ("cp", tp, cp),
            ("dp", tp, shards),
            ("replicas", tp * shards, layout.replicate),
        ];
        if layout.ep > 1 {
            let grid = layout.etp * layout.ep;
            if layout.etp != tp {
                kinds.push(("etp", 1, layout.etp));
            }
            kinds.push(("ep", layout.etp, layout.ep));
            kinds.push(("expert_dp", grid, layout.expert_shard_group()));
        }
        kinds.push(("pp", tp * cp * dp, pp));
        let groups = kinds
            .into_iter()
            .filter(|&(_, _, size)| size > 1)
            .map(|(group, stride, size)| {
                let inside = in_one_domain(cluster, stride, size);
                GroupPlacement {
                    group,
                    size,
                    stride,
                    link: if inside { "nvlink" } else { "nic" },
                    fewest_per_domain: (!inside).then(|| fewest_per_domain(cluster, stride, size)),
                }
            })
            .collect();
        let used = cluster.scale_up.max(1);
        let last = cluster.gpus % used;
        RankPlacement {
            order: RANK_ORDER,
            gpus: cluster.gpus,
            gpus_per_host: cluster.gpus_per_node,
            hosts: cluster.gpus.div_ceil(cluster.gpus_per_node.max(1)),
            scale_up_gpus: domain_gpus,
            scale_up_used: used,
            domains: cluster.gpus.div_ceil(used),
            last_domain_gpus: if last == 0 {
                used.min(cluster.gpus)
            } else {
                last
            },
            groups,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief::Brief;
    use crate::model::layout::{Degrees, ZeroStage};

    #[test]
    fn tp_8_cp_2_ep_4_on_512_gpus_in_racks_of_72_worked_by_hand() {
        // A mixture of 64 experts on hosts of 4 in NVL72 racks: TP 8 × CP 2 × PP 4 (DP 8),
        // EP 4 at ETP 8.
        let mut s = crate::cost::step::experts::tests::mixtral();
        if let Some(e) = s.experts.as_mut() {
            e.routed = 64;
        }
        let rack = Brief {
            gpus: 512,
            gpus_per_node: 4,
            scale_up_gpus: Some(72),
            ..Brief::default()
        };
        let degrees = Degrees {
            cp: 2,
            ep: 4,
            ..Degrees::tp_pp(8, 4)
        };
        let l = Layout::with(&rack, &s, degrees, ZeroStage::new(1).unwrap()).unwrap();
        assert_eq!(l.dp, 8);
        let p = RankPlacement::of(&rack.cluster(), 72, &l);
        // 128 hosts; 8 racks, the last with 512 − 7 × 72 = 8 GPUs.
        assert_eq!((p.hosts, p.domains, p.last_domain_gpus), (128, 8, 8));
        let links: Vec<_> = p
            .groups
            .iter()
            .map(|g| (g.group, g.size, g.stride, g.link, g.fewest_per_domain))
            .collect();
        // TP 8 (runs of 8 divide 72) in a rack; CP 2 over TP 8 is runs of 16, which 72 does
        // not divide (ranks 64 to 79: 8 in each of two racks); DP × CP = 16 ranks 8 apart,
        // runs of 128; EP 4 at ETP 8, runs of 32 (the run at 64: one block of 8 in the first
        // rack, three in the second); the 4 stages 128 apart.
        assert_eq!(
            links,
            vec![
                ("tp", 8, 1, "nvlink", None),
                ("cp", 2, 8, "nic", Some(1)),
                ("dp", 16, 8, "nic", Some(1)),
                ("ep", 4, 8, "nic", Some(1)),
                ("expert_dp", 4, 32, "nic", Some(1)),
                ("pp", 4, 128, "nic", Some(1)),
            ]
        );
        // Using 64 of each 72: runs of 16, 32 and 64 all lie in one rack.
        let used = Brief {
            scale_up_used: Some(64),
            ..rack
        };
        let p = RankPlacement::of(&used.cluster(), 72, &l);
        assert_eq!((p.domains, p.last_domain_gpus), (8, 64));
        let nvlink: Vec<_> = p
            .groups
            .iter()
            .filter(|g| g.link == "nvlink")
            .map(|g| g.group)
            .collect();
        assert_eq!(nvlink, vec!["tp", "cp", "ep"]);
    }
}
