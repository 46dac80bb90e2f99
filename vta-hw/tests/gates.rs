//! Gates on the generated Verilog of `vta_top`: `verilator --lint-only -Wall` is silent,
//! and yosys infers every scratchpad (INP, WGT, ACC, OUT, UOP) as a memory cell.
//!
//! Needs `verilator` and `yosys` (`apt-get install verilator yosys`).

mod common;

use common::{preset, work_dir};

const PRESETS: [&str; 6] = ["default", "batched", "rect", "wide-bus", "small", "lut"];

fn lint(name: &str) {
    lint_config(name, &preset(name));
}

fn lint_config(name: &str, cfg: &isa::HwConfig) {
    let cfg = cfg.clone();
    let g = vta_hw::generate(&cfg).unwrap();
    if let Err(e) = hdl::verilator::lint(&g.design, &work_dir(&format!("lint-{name}"))) {
        panic!("vta_top for preset {name} is not lint clean:\n{e}");
    }
}

#[test]
fn lint_default() {
    lint("default");
}
#[test]
fn lint_batched() {
    lint("batched");
}
#[test]
fn lint_rect() {
    lint("rect");
}
#[test]
fn lint_wide_bus() {
    lint("wide-bus");
}
#[test]
fn lint_small() {
    lint("small");
}
#[test]
fn lint_lut() {
    lint("lut");
}

/// Configs at the edges (one-byte elements; int4 with 16-bit accumulators, no MUL, a
/// non-power-of-two command queue depth).
#[test]
fn lint_edge_configs() {
    lint_config("tiny", &common::custom(common::TINY));
    lint_config("int4", &common::custom(common::INT4));
}

#[test]
fn presets_are_covered() {
    for (name, _, _) in isa::PRESETS {
        assert!(PRESETS.contains(name), "preset {name} has no gate");
    }
}

/// Runs yosys' memory inference on the generated `vta_top` and returns the memory cells
/// as `module/memory` names.
fn yosys_memories(name: &str) -> Vec<String> {
    let cfg = preset(name);
    let g = vta_hw::generate(&cfg).unwrap();
    let dir = work_dir(&format!("yosys-{name}"));
    let v = dir.join("vta_top.v");
    std::fs::write(&v, &g.verilog).unwrap();
    let list = dir.join("memories.txt");
    let script = format!(
        "read_verilog {}; hierarchy -top vta_top; proc; opt; memory -nomap; stat; \
         tee -o {} select -list t:$mem_v2",
        v.display(),
        list.display()
    );
    let out = std::process::Command::new("yosys")
        .arg("-q")
        .arg("-p")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `yosys` ({e}); install it with `apt-get install yosys`")
        });
    assert!(
        out.status.success(),
        "yosys failed on preset {name}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&list)
        .unwrap()
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn memories_gate(name: &str) {
    let mems = yosys_memories(name);
    // INP and WGT are memories of the top; ACC, OUT and UOP live in the execution core.
    for want in ["vta_top/inp_sram", "vta_top/wgt_sram"] {
        assert!(
            mems.iter().any(|m| m == want),
            "{name}: no memory {want} in {mems:?}"
        );
    }
    for buf in ["acc", "out", "uop"] {
        assert!(
            mems.iter()
                .any(|m| m.starts_with("vta_exec/") && m.to_lowercase().contains(buf)),
            "{name}: no {} memory in vta_exec: {mems:?}",
            buf.to_uppercase()
        );
    }
}

#[test]
fn memories_default() {
    memories_gate("default");
}
#[test]
fn memories_batched() {
    memories_gate("batched");
}
#[test]
fn memories_rect() {
    memories_gate("rect");
}
#[test]
fn memories_wide_bus() {
    memories_gate("wide-bus");
}
#[test]
fn memories_small() {
    memories_gate("small");
}
#[test]
fn memories_lut() {
    memories_gate("lut");
    // The activation table: one memory per lane, in the ALU pipeline.
    let mems = yosys_memories("lut");
    for l in 0..16 {
        let want = format!("vta_exec_alu/lut_mem{l}");
        assert!(mems.contains(&want), "no memory {want} in {mems:?}");
    }
}
