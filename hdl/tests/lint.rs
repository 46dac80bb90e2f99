//! Gates on the generated Verilog: `verilator --lint-only -Wall` is silent for every widget,
//! yosys infers memories as memory cells (block RAM candidates), and a memory asked to be
//! distributed becomes LUT-RAM.
//!
//! These tests need `verilator` and `yosys` (`apt-get install verilator yosys`); without
//! them they fail with a message saying so.

use std::path::PathBuf;

use hdl::widgets;
use hdl::{Design, Module};

fn work_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("hdl-lint")
        .join(name)
}

#[track_caller]
fn lint(m: Module) {
    let name = m.name().to_string();
    let d = Design::new(m);
    if let Err(e) = hdl::verilator::lint(&d, &work_dir(&name)) {
        panic!("lint of `{name}` failed:\n{e}");
    }
}

#[test]
fn fifos_lint_clean() {
    lint(widgets::sync_fifo(32, 16));
    lint(widgets::sync_fifo(1, 2));
    lint(widgets::small_fifo(8, 4));
    lint(widgets::small_fifo(1, 2));
}

#[test]
fn arbiters_lint_clean() {
    lint(widgets::rr_arbiter(1));
    lint(widgets::rr_arbiter(2));
    lint(widgets::rr_arbiter(5));
}

#[test]
fn axi_lite_lint_clean() {
    use widgets::{RegKind, RegSpec};
    let regs = [
        RegSpec::new("ctrl", RegKind::ReadWrite { reset: 0 }),
        RegSpec::new("status", RegKind::ReadOnly),
        RegSpec::new("start", RegKind::WritePulse),
    ];
    lint(widgets::axi_lite_regfile(
        "regs3",
        "s_axi_control",
        12,
        &regs,
    ));
    lint(widgets::axi_lite_regfile(
        "regs4",
        "s_axil",
        4,
        &[
            regs[0].clone(),
            regs[1].clone(),
            regs[2].clone(),
            RegSpec::new("x", RegKind::ReadWrite { reset: 7 }),
        ],
    ));
    lint(widgets::axi_lite_regfile("regs1", "s_axil", 32, &regs[..1]));
}

#[test]
fn axi4_master_lint_clean() {
    for (dw, burst, out) in [(64, 256, 4), (128, 16, 1), (512, 256, 3), (32, 1, 16)] {
        let cfg = widgets::AxiMasterConfig {
            data_width: dw,
            max_burst_beats: burst,
            max_outstanding_reads: out,
            max_outstanding_writes: out,
            ..Default::default()
        };
        lint(widgets::axi4_master(&format!("axi_master_{dw}"), &cfg));
    }
}

/// Runs `pass` (a yosys script after reading `m`'s Verilog) and returns the cell counts of
/// the last `stat`, by cell type.
fn yosys_cells(m: Module, pass: &str) -> Vec<(String, usize)> {
    let name = m.name().to_string();
    let dir = work_dir(&format!("yosys_{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.v"));
    std::fs::write(&path, Design::new(m).verilog("yosys")).unwrap();
    let script = format!(
        "read_verilog {}; {}; stat",
        path.display(),
        pass.replace("{top}", &name)
    );
    let out = match std::process::Command::new("yosys")
        .arg("-p")
        .arg(&script)
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!("cannot run `yosys` ({e}); install it with `apt-get install yosys`"),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "yosys failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The last `stat` block lists cells by type, e.g. "     $mem_v2    1".
    let stat = &text[text
        .rfind("Number of cells")
        .expect("yosys printed no statistics")..];
    stat.lines()
        .skip(1)
        .map_while(|l| {
            let mut f = l.split_whitespace();
            let (cell, n) = (f.next()?, f.next()?.parse::<usize>().ok()?);
            Some((cell.to_string(), n))
        })
        .collect()
}

/// How many memory cells yosys' memory inference makes of `m`.
fn yosys_memories(m: Module) -> usize {
    yosys_cells(m, "hierarchy -top {top}; proc; opt; memory -nomap")
        .iter()
        .filter(|(c, _)| c == "$mem_v2" || c == "$mem")
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn yosys_infers_memories() {
    assert_eq!(yosys_memories(widgets::sync_fifo(32, 512)), 1, "sync_fifo");
    // Byte-lane writes and two read ports still make one memory.
    let m = hdl::ModuleBuilder::new("lanes");
    let wa = m.input("wa", 6);
    let ra = m.input("ra", 6);
    let rb = m.input("rb", 6);
    let we = m.input("we", 8);
    let wd = m.input("wd", 64);
    let mem = m.mem("ram", 64, 64);
    mem.write_lanes(we, wa, wd);
    let x = mem.read(ra);
    let y = mem.read_en(we.any(), rb);
    m.output_from("x", x);
    m.output_from("y", y);
    let lanes = m.finish().unwrap();
    lint(lanes.clone());
    assert_eq!(yosys_memories(lanes), 1, "byte-lane memory");
    // The small FIFO keeps its entries in registers.
    assert_eq!(yosys_memories(widgets::small_fifo(8, 4)), 0, "small_fifo");
}

/// A memory marked [`hdl::Mem::distributed`] prints its `ram_style` and becomes LUT-RAM
/// where the same memory unmarked becomes block RAM (yosys for a 7-series part).
#[test]
fn distributed_memory_maps_to_lut_ram() {
    let table = |name: &str, distributed: bool| {
        let m = hdl::ModuleBuilder::new(name);
        let wa = m.input("wa", 8);
        let ra = m.input("ra", 8);
        let we = m.input("we", 1);
        let re = m.input("re", 1);
        let wd = m.input("wd", 32);
        let mem = m.mem("words", 32, 256);
        if distributed {
            mem.distributed();
        }
        mem.write(we, wa, wd);
        m.output_from("rd", mem.read_en(re, ra));
        m.finish().unwrap()
    };
    let lut = table("lut_table", true);
    let text = Design::new(lut.clone()).verilog("");
    assert!(
        text.contains("(* ram_style = \"distributed\" *) reg [31:0] words [0:255];"),
        "{text}"
    );
    lint(lut.clone());
    // (block RAMs, LUT-RAMs) after synthesis.
    let rams = |m: Module| {
        let cells = yosys_cells(m, "synth_xilinx -family xc7 -top {top}");
        let count = |is: &dyn Fn(&str) -> bool| -> usize {
            cells.iter().filter(|(c, _)| is(c)).map(|(_, n)| n).sum()
        };
        (
            count(&|c| c.starts_with("RAMB")),
            count(&|c| c.starts_with("RAM") && !c.starts_with("RAMB")),
        )
    };
    let (bram, lutram) = rams(lut);
    assert_eq!(bram, 0, "block RAM in the distributed table");
    assert!(lutram > 0, "no LUT-RAM in the distributed table");
    let (bram, lutram) = rams(table("bram_table", false));
    assert!(
        bram > 0 && lutram == 0,
        "the unmarked table: {bram} block RAMs, {lutram} LUT-RAMs"
    );
}
