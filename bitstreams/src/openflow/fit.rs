//! The fit pre-check of the open flow, in two steps before the long place and route:
//!
//! * [`check_memories`], instant: the block RAM the design's memories need at their best
//!   18 Kb aspect ratios (ECP5 DP16KD/PDPW16KD and Gowin BSRAM share the shapes) against the
//!   part. VTA's default buffers need 217 blocks, an ECP5-85F has 208.
//! * [`check_synthesis`], after yosys (seconds to minutes): the mapped cells (block RAM,
//!   multipliers, LUTs, flip-flops) against the part. nextpnr stops with "no BELs remaining"
//!   when a cell type overflows, but only after minutes of work.
//!
//! Both refuse with a message saying what to shrink.

use super::board::Resources;

/// One memory of the design.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Memory {
    /// e.g. `WGT`.
    pub name: String,
    /// The config key that sizes it, e.g. `LOG_WGT_BUFF_SIZE` (None: fixed by the design).
    pub key: Option<String>,
    pub depth: u64,
    pub width: u64,
}

impl Memory {
    /// Bytes of storage.
    pub fn bytes(&self) -> u64 {
        self.depth * self.width / 8
    }
}

/// 18 Kb block shapes (depth, width incl. parity), simple dual port.
const SHAPES: &[(u64, u64)] = &[
    (16384, 1),
    (8192, 2),
    (4096, 4),
    (2048, 9),
    (1024, 18),
    (512, 36),
];

/// 18 Kb blocks of a `depth` x `width` memory at its best aspect ratio.
pub fn blocks_for(depth: u64, width: u64) -> u64 {
    SHAPES
        .iter()
        .map(|&(d, w)| depth.div_ceil(d) * width.div_ceil(w))
        .min()
        .expect("shapes")
}

/// Why a design does not fit a part.
#[derive(Debug, thiserror::Error)]
#[error("the design does not fit {part}: {what}. {hint}")]
pub struct DoesNotFit {
    pub part: String,
    /// What overflows, with the figures.
    pub what: String,
    /// What to shrink.
    pub hint: String,
}

fn kib(bytes: u64) -> String {
    if bytes >= 1024 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// Block RAM of `mems` against the part; on success the blocks per memory.
pub fn check_memories(
    mems: &[Memory],
    r: &Resources,
    part: &str,
) -> Result<Vec<(String, u64)>, DoesNotFit> {
    let mut per: Vec<(&Memory, u64)> = mems
        .iter()
        .map(|m| (m, blocks_for(m.depth, m.width)))
        .collect();
    let total: u64 = per.iter().map(|p| p.1).sum();
    if total <= r.bram_blocks {
        return Ok(per.iter().map(|(m, b)| (m.name.clone(), *b)).collect());
    }
    per.sort_by_key(|p| std::cmp::Reverse(p.1));
    let list = per
        .iter()
        .map(|(m, b)| format!("{} {} ({})", m.name, b, kib(m.bytes())))
        .collect::<Vec<_>>()
        .join(", ");
    let over = total - r.bram_blocks;
    // Halving the largest resizable buffers until the rest fits.
    let mut hints = vec![];
    let mut saved = 0;
    for (m, b) in per.iter().filter(|p| p.0.key.is_some()) {
        if saved >= over {
            break;
        }
        let half = blocks_for(m.depth / 2, m.width);
        let key = m.key.as_deref().expect("filtered");
        let log = (m.bytes().max(1)).ilog2();
        hints.push(format!(
            "{key} {log} -> {} ({} -> {}, saves {} blocks)",
            log - 1,
            kib(m.bytes()),
            kib(m.bytes() / 2),
            b - half
        ));
        saved += b - half;
    }
    let hint = if hints.is_empty() {
        "Choose a larger part".to_string()
    } else {
        format!(
            "Shrink the buffers in the config: {} (or choose a board with more block RAM)",
            hints.join("; ")
        )
    };
    Err(DoesNotFit {
        part: part.into(),
        what: format!(
            "its memories need {total} block RAMs of 18 Kb but the part has {} ({over} over): {list}",
            r.bram_blocks
        ),
        hint,
    })
}

/// What yosys mapped, in the part's terms.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mapped {
    /// 4-input LUTs (carry cells and LUT RAM counted in LUTs).
    pub luts: u64,
    pub ffs: u64,
    /// Hard multipliers in 18x18 units.
    pub dsps: u64,
    /// 18 Kb block RAMs.
    pub bram_blocks: u64,
}

/// Reads `stat -json`'s cell counts of the top module.
pub fn mapped_from_stat(json: &str) -> Result<Mapped, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("yosys stat output is not JSON: {e}"))?;
    let design = v["design"]
        .as_object()
        .ok_or("yosys stat output has no \"design\"")?;
    let cells = design["num_cells_by_type"]
        .as_object()
        .ok_or("yosys stat output has no cell counts")?;
    let mut m = Mapped::default();
    for (cell, n) in cells {
        let n = n.as_u64().unwrap_or(0);
        match cell.as_str() {
            "LUT4" | "LUT3" | "LUT2" | "LUT1" | "ALU" => m.luts += n,
            "CCU2C" | "TRELLIS_DPR16X4" => m.luts += 2 * n,
            "RAM16SDP4" | "RAM16SDP2" | "RAM16SDP1" => m.luts += 4 * n,
            "DP16KD" | "PDPW16KD" | "DPB" | "DPX9B" | "SDPB" | "SDPX9B" | "pROM" | "pROMX9" => {
                m.bram_blocks += n
            }
            "MULT18X18D" | "MULT18X18" | "MULTALU18X18" | "MULTADDALU18X18" => m.dsps += n,
            "MULT9X9" | "MULTALU9X9" => m.dsps += n.div_ceil(2),
            "MULT36X36" | "MULTALU36X18" => m.dsps += 4 * n,
            c if c.starts_with("TRELLIS_FF") || c.starts_with("DFF") => m.ffs += n,
            _ => {}
        }
    }
    Ok(m)
}

/// The mapped design against the part.
pub fn check_synthesis(m: &Mapped, r: &Resources, part: &str) -> Result<(), DoesNotFit> {
    let over = |what: &str, used: u64, avail: u64, hint: &str| DoesNotFit {
        part: part.into(),
        what: format!("yosys mapped {used} {what} but the part has {avail}"),
        hint: hint.into(),
    };
    if m.bram_blocks > r.bram_blocks {
        return Err(over(
            "block RAMs of 18 Kb",
            m.bram_blocks,
            r.bram_blocks,
            "Shrink the buffers (LOG_*_BUFF_SIZE) in the config",
        ));
    }
    if m.dsps > r.dsps {
        return Err(over(
            "18x18 multipliers",
            m.dsps,
            r.dsps,
            "Shrink the GEMM (LOG_BLOCK, LOG_BLOCK_IN/OUT or LOG_BATCH: each product is a \
             multiplier), or set \"ALU_MUL\": false (3 multipliers per ALU lane)",
        ));
    }
    if m.luts > r.luts {
        return Err(over(
            "LUT4s",
            m.luts,
            r.luts,
            "Shrink the GEMM (LOG_BLOCK or LOG_BATCH) or the command queues (CMD_QUEUE_DEPTH)",
        ));
    }
    if m.ffs > r.ffs {
        return Err(over(
            "flip-flops",
            m.ffs,
            r.ffs,
            "Shrink the GEMM (LOG_BLOCK or LOG_BATCH)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::board;

    fn vta_buffers(log_wgt: u32) -> Vec<Memory> {
        // VTA's default: 1x16x16 int8, UOP 32 KiB, INP 32 KiB, WGT 2^log_wgt B, ACC 128 KiB,
        // OUT (int8 mirror of ACC) 32 KiB.
        let m = |name: &str, key: &str, depth: u64, width: u64| Memory {
            name: name.into(),
            key: Some(key.into()),
            depth,
            width,
        };
        vec![
            m("UOP", "LOG_UOP_BUFF_SIZE", 8192, 32),
            m("INP", "LOG_INP_BUFF_SIZE", 2048, 128),
            m("WGT", "LOG_WGT_BUFF_SIZE", (1 << log_wgt) / 256, 2048),
            m("ACC", "LOG_ACC_BUFF_SIZE", 2048, 512),
            Memory {
                name: "OUT".into(),
                key: None,
                depth: 2048,
                width: 128,
            },
        ]
    }

    #[test]
    fn vta_default_buffers_overflow_an_ecp5_85f_and_128k_weights_fit() {
        let b = board::builtin()
            .into_iter()
            .find(|b| b.name == "ulx3s-85f")
            .unwrap();
        let e = check_memories(&vta_buffers(18), &b.resources, &b.part)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("need 217 block RAMs") && e.contains("has 208 (9 over)"),
            "{e}"
        );
        assert!(
            e.contains("LOG_WGT_BUFF_SIZE 18 -> 17 (256 KiB -> 128 KiB, saves 57 blocks)"),
            "{e}"
        );
        let ok = check_memories(&vta_buffers(17), &b.resources, &b.part).unwrap();
        assert_eq!(ok.iter().map(|p| p.1).sum::<u64>(), 160);
    }

    #[test]
    fn block_shapes() {
        assert_eq!(blocks_for(512, 36), 1);
        assert_eq!(blocks_for(1024, 2048), 114);
        assert_eq!(blocks_for(2048, 128), 15);
        assert_eq!(blocks_for(16, 8), 1);
    }

    #[test]
    fn synthesis_overflow_names_the_resource() {
        let stat = r#"{"design": {"num_cells_by_type": {"LUT4": 1000, "CCU2C": 100,
            "TRELLIS_FF": 900, "DP16KD": 10, "PDPW16KD": 2, "MULT18X18D": 30}}}"#;
        let m = mapped_from_stat(stat).unwrap();
        assert_eq!(
            m,
            Mapped {
                luts: 1200,
                ffs: 900,
                dsps: 30,
                bram_blocks: 12
            }
        );
        let b = board::builtin()
            .into_iter()
            .find(|b| b.name == "ulx3s-25f")
            .unwrap();
        let e = check_synthesis(&m, &b.resources, &b.part)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("30 18x18 multipliers but the part has 28") && e.contains("ALU_MUL"),
            "{e}"
        );
        assert!(mapped_from_stat("{}").is_err());
    }
}
