//! Several accelerators in one block design (`vta hw bitstream --cores N`): which PS slave
//! port each core's AXI master takes and where each core's control window sits.
//!
//! Every core gets a PS slave port of its own, so the cores do not share DRAM bandwidth in
//! the fabric. The ports are those of the board's data port's kind, the board's own first:
//! the four non-coherent HP ports (`S_AXI_HP0..3` on Zynq-7000, `S_AXI_HP0..3_FPD` on ZU+),
//! the two coherent ZU+ HPC ports, or the single Zynq-7000 ACP. Mixing kinds would give cores
//! different cache coherency under one driver, so a board on ACP builds one core only.
//!
//! Core `k` is the block-design cell `vta_k`; its registers sit at `control.base + k *
//! control.range` of the board's PS master port, all of them inside that port's address
//! window.

use crate::board::{Board, PsKind};

/// One core's place in the block design.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreSlot {
    /// The block-design cell, `vta_k`.
    pub instance: String,
    /// The PS slave port its AXI master reaches DRAM through, e.g. `S_AXI_HP1_FPD`.
    pub data_port: String,
    /// That port's DRAM address segment, e.g. `SAXIGP3/HP1_DDR_LOW`.
    pub segment: String,
    /// Base of its AXI4-Lite register window on the PS master port.
    pub ctrl_base: u64,
    /// Size of that window (the board's `control.range`).
    pub ctrl_range: u64,
}

/// Why a number of cores cannot be built on a board.
#[derive(Debug, thiserror::Error)]
pub enum CoresError {
    #[error("--cores 0: give at least one core")]
    Zero,
    #[error(
        "--cores {cores} on {board}: each core needs a PS slave port of its own and {board} \
         has {max} of its data port's kind ({ports}), so at most {max}; give \
         --cores {max} or fewer{hint}"
    )]
    TooMany {
        board: String,
        cores: u32,
        max: usize,
        ports: String,
        hint: &'static str,
    },
    #[error(
        "--cores {cores} on {board}: the control windows [{first:#x}, {end:#x}) run past the \
         {port} address window [{wbase:#x}, {wend:#x}); give fewer cores, or a lower \
         control.base or smaller control.range in the board file"
    )]
    Window {
        board: String,
        cores: u32,
        first: u64,
        end: u64,
        port: String,
        wbase: u64,
        wend: u64,
    },
    #[error("board {board}: {detail}")]
    Board { board: String, detail: String },
}

/// The address window of a PS master port, (base, size): Zynq-7000 TRM UG585 table 4-1,
/// ZU+ TRM UG1085 table 10-1 (the 32-bit windows).
fn master_window(port: &str) -> Option<(u64, u64)> {
    Some(match port {
        "M_AXI_GP0" => (0x4000_0000, 0x4000_0000),
        "M_AXI_GP1" => (0x8000_0000, 0x4000_0000),
        "M_AXI_HPM0_FPD" => (0xA000_0000, 0x1000_0000),
        "M_AXI_HPM1_FPD" => (0xB000_0000, 0x1000_0000),
        "M_AXI_HPM0_LPD" => (0x8000_0000, 0x2000_0000),
        _ => return None,
    })
}

/// The slave ports of the board's data port's kind, as (port, DRAM segment), the board's
/// own port first.
fn port_pool(b: &Board) -> Vec<(String, String)> {
    let kind: Vec<(String, String)> = match (b.ps, b.data.port.as_str()) {
        (PsKind::Ps7, "S_AXI_ACP") => vec![],
        (PsKind::Ps7, _) => (0..4)
            .map(|k| {
                (
                    format!("S_AXI_HP{k}"),
                    format!("S_AXI_HP{k}/HP{k}_DDR_LOWOCM"),
                )
            })
            .collect(),
        (PsKind::Ps8, p) if p.starts_with("S_AXI_HPC") => (0..2)
            .map(|k| {
                (
                    format!("S_AXI_HPC{k}_FPD"),
                    format!("SAXIGP{k}/HPC{k}_DDR_LOW"),
                )
            })
            .collect(),
        (PsKind::Ps8, _) => (0..4)
            .map(|k| {
                (
                    format!("S_AXI_HP{k}_FPD"),
                    format!("SAXIGP{}/HP{k}_DDR_LOW", k + 2),
                )
            })
            .collect(),
    };
    std::iter::once((b.data.port.clone(), b.data.segment.clone()))
        .chain(kind.into_iter().filter(|(p, _)| *p != b.data.port))
        .collect()
}

/// The slots of `n` cores on `b`, core 0 first.
pub fn layout(b: &Board, n: u32) -> Result<Vec<CoreSlot>, CoresError> {
    if n == 0 {
        return Err(CoresError::Zero);
    }
    let bad = |detail: String| CoresError::Board {
        board: b.name.clone(),
        detail,
    };
    let base = b.control_base().map_err(bad)?;
    let range = b.control_range().map_err(bad)?;
    let pool = port_pool(b);
    if n as usize > pool.len() {
        return Err(CoresError::TooMany {
            board: b.name.clone(),
            cores: n,
            max: pool.len(),
            ports: pool
                .iter()
                .map(|(p, _)| p.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            hint: if b.data.port == "S_AXI_ACP" {
                " (the Zynq-7000 has one ACP; a board file on S_AXI_HP0 takes up to 4 cores)"
            } else {
                ""
            },
        });
    }
    let end = base + u64::from(n) * range;
    let (wbase, wsize) = master_window(&b.control.port).ok_or_else(|| {
        bad(format!(
            "control.port '{}' is not a PS master port",
            b.control.port
        ))
    })?;
    if base < wbase || end > wbase + wsize {
        return Err(CoresError::Window {
            board: b.name.clone(),
            cores: n,
            first: base,
            end,
            port: b.control.port.clone(),
            wbase,
            wend: wbase + wsize,
        });
    }
    Ok(pool
        .into_iter()
        .take(n as usize)
        .enumerate()
        .map(|(k, (data_port, segment))| CoreSlot {
            instance: format!("vta_{k}"),
            data_port,
            segment,
            ctrl_base: base + k as u64 * range,
            ctrl_range: range,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board;

    #[test]
    fn zu_plus_cores_take_the_hp_ports_in_order() {
        let b = board::load("kv260").unwrap();
        let s = layout(&b, 4).unwrap();
        let ports: Vec<_> = s.iter().map(|c| c.data_port.as_str()).collect();
        assert_eq!(
            ports,
            [
                "S_AXI_HP0_FPD",
                "S_AXI_HP1_FPD",
                "S_AXI_HP2_FPD",
                "S_AXI_HP3_FPD"
            ]
        );
        assert_eq!(s[3].segment, "SAXIGP5/HP3_DDR_LOW");
        assert_eq!(s[1].instance, "vta_1");
        assert_eq!(
            s.iter().map(|c| c.ctrl_base).collect::<Vec<_>>(),
            [0xA000_0000, 0xA001_0000, 0xA002_0000, 0xA003_0000]
        );
    }

    #[test]
    fn zynq_7000_takes_its_four_hp_ports() {
        let b = board::load("pynq-z2").unwrap();
        let s = layout(&b, 2).unwrap();
        assert_eq!(s[1].data_port, "S_AXI_HP1");
        assert_eq!(s[1].segment, "S_AXI_HP1/HP1_DDR_LOWOCM");
        assert_eq!(s[1].ctrl_base, 0x43C1_0000);
    }

    #[test]
    fn too_many_cores_name_the_limit() {
        let b = board::load("zcu104").unwrap();
        let e = layout(&b, 5).unwrap_err().to_string();
        assert!(
            e.contains("--cores 5 on zcu104")
                && e.contains("at most 4")
                && e.contains("S_AXI_HP3_FPD"),
            "{e}"
        );
        assert!(matches!(layout(&b, 0), Err(CoresError::Zero)));
        let mut acp = board::load("pynq-z2").unwrap();
        acp.data.port = "S_AXI_ACP".into();
        let e = layout(&acp, 2).unwrap_err().to_string();
        assert!(e.contains("at most 1") && e.contains("one ACP"), "{e}");
        let mut hpc = board::load("kv260").unwrap();
        hpc.data.port = "S_AXI_HPC0_FPD".into();
        assert_eq!(layout(&hpc, 2).unwrap()[1].segment, "SAXIGP1/HPC1_DDR_LOW");
        assert!(layout(&hpc, 3)
            .unwrap_err()
            .to_string()
            .contains("at most 2"));
    }

    #[test]
    fn control_windows_stay_in_the_master_window() {
        let mut b = board::load("kv260").unwrap();
        b.control.base = "0xAFFF0000".into();
        assert!(layout(&b, 1).is_ok());
        let e = layout(&b, 2).unwrap_err().to_string();
        assert!(
            e.contains("M_AXI_HPM0_FPD") && e.contains("0xb0010000") && e.contains("fewer cores"),
            "{e}"
        );
    }
}
