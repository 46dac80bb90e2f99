//! Helpers shared by the integration tests: the execution core to build the top with, work
//! directories, and the tool checks.

#![allow(dead_code)]

pub mod rtl;

use std::path::PathBuf;

use hdl::{Module, ModuleBuilder};
use isa::{HwConfig, MemType};

/// A scratch directory for `what` under Cargo's target tmpdir.
pub fn work_dir(what: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("vta-hw")
        .join(what);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The execution core the tests build `vta_top` with: the real one, or the stand-in below
/// when `VTA_HW_STANDIN_EXEC` is set (to test the rest of the accelerator on its own).
pub fn exec_core(cfg: &HwConfig) -> Module {
    if std::env::var_os("VTA_HW_STANDIN_EXEC").is_some() {
        standin_exec(cfg)
    } else {
        vta_hw::exec::exec_core(cfg)
    }
}

fn aw(cfg: &HwConfig, mt: MemType) -> u32 {
    cfg.log_depth(mt).max(1)
}

/// A stand-in for `vta_exec` with its exact ports, until the real core lands: it owns UOP,
/// ACC and an OUT mirror (LOAD ACC/ACC8 data is visible to STORE), accepts one GEMM/ALU at
/// a time and reports it done a few cycles later without computing anything.
pub fn standin_exec(cfg: &HwConfig) -> Module {
    let m = ModuleBuilder::new("vta_exec");
    let insn_valid = m.input("insn_valid", 1);
    let insn = m.input("insn", 128);
    let uop_wr_en = m.input("uop_wr_en", 1);
    let uop_wr_addr = m.input("uop_wr_addr", aw(cfg, MemType::Uop));
    let uop_wr_data = m.input("uop_wr_data", 32);
    let inp_rd_data = m.input("inp_rd_data", cfg.elem_bits(MemType::Inp));
    let wgt_rd_data = m.input("wgt_rd_data", cfg.elem_bits(MemType::Wgt));
    let acc_wr_en = m.input("acc_wr_en", 1);
    let acc_wr_addr = m.input("acc_wr_addr", aw(cfg, MemType::Acc));
    let acc_wr_data = m.input("acc_wr_data", cfg.elem_bits(MemType::Acc));
    let out_rd_en = m.input("out_rd_en", 1);
    let out_rd_addr = m.input("out_rd_addr", aw(cfg, MemType::Acc));
    m.allow_unused(insn, "the stand-in only looks at the opcode");

    let busy = m.reg("busy_q", 1, 0);
    let timer = m.reg("timer", 3, 0);
    let insn_ready = m.output_from("insn_ready", !busy);
    let take = insn_valid & insn_ready;
    let finishing = busy & timer.eq(7);
    m.next(busy, take | (busy & !finishing));
    m.next(timer, m.mux(take, 0, timer + 1));
    m.output_from("done", finishing);
    m.output_from("busy", busy);

    let uop = m.mem("uop_sram", 32, cfg.depth(MemType::Uop).max(2));
    uop.write(uop_wr_en, uop_wr_addr, uop_wr_data);
    let acc = m.mem(
        "acc_sram",
        cfg.elem_bits(MemType::Acc),
        cfg.depth(MemType::Acc).max(2),
    );
    acc.write(acc_wr_en, acc_wr_addr, acc_wr_data);
    let out = m.mem(
        "out_sram",
        cfg.elem_bits(MemType::Out),
        cfg.depth(MemType::Acc).max(2),
    );
    let ow = cfg.out_width();
    let low: Vec<_> = acc_wr_data
        .lanes(cfg.acc_width())
        .into_iter()
        .map(|l| l.trunc(ow))
        .collect();
    out.write(acc_wr_en, acc_wr_addr, m.pack(&low));
    m.output_from("out_rd_data", out.read_en(out_rd_en, out_rd_addr));

    // Keep the UOP, ACC, INP and WGT memories alive: an opcode-7 instruction (which no valid
    // program has) reads them and may raise `fault`.
    let probe = take & insn.slice(2, 0).eq(7);
    let aa = aw(cfg, MemType::Acc);
    let a0 = m.zero(aa);
    let u = uop.read_en(probe, m.zero(aw(cfg, MemType::Uop)));
    let a = acc.read_en(probe, a0);
    m.output_from("inp_rd_en", probe);
    m.output_from("inp_rd_addr", m.zero(aw(cfg, MemType::Inp)));
    m.output_from("wgt_rd_en", probe);
    m.output_from("wgt_rd_addr", m.zero(aw(cfg, MemType::Wgt)));
    let fault = m.reg("fault_q", 1, 0);
    let probed = m.reg("probed", 1, 0);
    m.next(probed, probe);
    m.next(
        fault,
        fault | (probed & u.parity() & a.parity() & inp_rd_data.parity() & wgt_rd_data.parity()),
    );
    m.output_from("fault", fault);
    for ev in ["ev_gemm_uop", "ev_reset_uop", "ev_alu_uop"] {
        m.output_from(ev, m.bit(false));
    }
    m.finish().expect("stand-in exec is well formed")
}

/// A config by preset name.
pub fn preset(name: &str) -> HwConfig {
    HwConfig::preset(name).unwrap()
}

/// Custom configs at the edges: one-lane elements (8-bit INP/WGT/OUT rows, eight per beat of
/// a 64-bit bus) and a narrow int4/int16 config without ALU MUL on a 128-bit bus.
pub fn custom(json: &str) -> HwConfig {
    HwConfig::from_json_str(json, "test config").unwrap()
}

pub const TINY: &str = r#"{"TARGET":"sim","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,
    "LOG_BATCH":0,"LOG_BLOCK":0,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":8,
    "LOG_WGT_BUFF_SIZE":8,"LOG_ACC_BUFF_SIZE":10,"CMD_QUEUE_DEPTH":4,"TOKEN_QUEUE_DEPTH":2}"#;
pub const INT4: &str = r#"{"TARGET":"sim","LOG_INP_WIDTH":2,"LOG_WGT_WIDTH":2,"LOG_ACC_WIDTH":4,
    "LOG_BATCH":1,"LOG_BLOCK_IN":3,"LOG_BLOCK_OUT":2,"LOG_UOP_BUFF_SIZE":11,"LOG_INP_BUFF_SIZE":10,
    "LOG_WGT_BUFF_SIZE":11,"LOG_ACC_BUFF_SIZE":11,"AXI_DATA_WIDTH":128,"ALU_MUL":false,
    "CMD_QUEUE_DEPTH":100}"#;
