//! The SoC (`vta_hw::soc`) simulated whole in Verilator and driven through its UART pins by
//! the serial driver (`drivers::serial::SerialDevice` over `vta_sim::soc::SimLine`), the
//! same driver a board is reached with: the link's info and copies, a program bit-exact
//! against the functional simulator, lost bytes caught by the bridge, and a bridge that is
//! not there named as such.

#[path = "support/rtl.rs"]
mod rtl_support;

use drivers::serial::SerialDevice;
use drivers::{run_program, Device, RunTimeout};
use isa::builder::{Operand, ProgramBuilder, UopLoops};
use isa::{AluOp, DType, HwConfig, MemType, Module, Program, Uop};
use vta_sim::soc::{self, SimLine, SimOptions};
use vta_sim::FsimDevice;

fn small() -> HwConfig {
    HwConfig::preset("small").unwrap()
}

/// A fresh simulated SoC for `cfg`, its model built into the tests' cache.
fn soc_device(cfg: &HwConfig) -> SerialDevice<SimLine> {
    let opts = SimOptions {
        cache_dir: Some(rtl_support::model_cache()),
        ..SimOptions::default()
    };
    let name = cfg.config_string();
    soc::device(cfg, &opts, &mut |s| eprintln!("[soc model {name}] {s}"))
        .unwrap_or_else(|e| panic!("{cfg}: no simulated SoC: {e}"))
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed))
        .collect()
}

/// LOAD ACC, ALU ops, STORE.
fn acc_alu_store(cfg: &HwConfig, rows: u16) -> Program {
    let lanes = (cfg.batch() * cfg.block_out()) as usize;
    let mut b = ProgramBuilder::new(cfg);
    let a = b.input(
        "a",
        DType::I32,
        vec![rows as usize, lanes],
        bytes(rows as usize * lanes * 4, 3),
    );
    let y = b.output("y", DType::I8, vec![rows as usize, lanes]);
    b.load_2d(MemType::Acc, 0, a, 0, 1, rows, rows);
    let k = b.kernel(&[Uop::default()]);
    b.alu(k, UopLoops::inner(rows, 1, 1), AluOp::Add, Operand::Imm(3));
    b.alu(k, UopLoops::inner(rows, 1, 1), AluOp::Shr, Operand::Imm(1));
    b.dep_push(Module::Compute, Module::Store);
    b.dep_pop(Module::Compute, Module::Store);
    b.store_2d(0, y, 0, 1, rows, rows);
    b.finish().unwrap()
}

#[test]
fn info_copies_and_a_program_through_the_uart() {
    let cfg = small();
    let mut dev = soc_device(&cfg);
    let info = dev.info().clone();
    let params = soc::sim_params(&cfg);
    assert_eq!(info.mem_base, params.mem_base);
    assert_eq!(info.mem_bytes, params.mem_bytes);
    assert_eq!(info.baud, params.baud);
    assert_eq!((info.rx_errors, info.frame_errors), (0, 0));

    // Copies at every alignment, across frames.
    let buf = dev.alloc(8192, 4096).unwrap();
    let data = bytes(1500, 9);
    dev.copy_to_device(&buf, 0, &data).unwrap();
    for (off, len) in [(0, 1500), (1, 3), (3, 9), (6, 1), (7, 1100), (1021, 4)] {
        let mut got = vec![0; len];
        dev.copy_from_device(&buf, off as u64, &mut got).unwrap();
        assert_eq!(got, data[off..off + len], "read of {len} bytes at {off}");
    }
    let patch = bytes(7, 200);
    dev.copy_to_device(&buf, 5, &patch).unwrap();
    let mut want = data.clone();
    want[5..12].copy_from_slice(&patch);
    let mut got = vec![0; 20];
    dev.copy_from_device(&buf, 0, &mut got).unwrap();
    assert_eq!(got, want[..20]);
    dev.free(buf).unwrap();

    let p = acc_alu_store(&cfg, 8);
    let mut fsim = FsimDevice::new(&cfg);
    let want = run_program(&mut fsim, &p, &[], RunTimeout::default()).unwrap();
    let got = run_program(&mut dev, &p, &[], RunTimeout::default()).unwrap();
    assert_eq!(got.outputs, want.outputs);
    assert_eq!(got.report.counters, want.report.counters);
    assert!(got.report.get("cycles").is_some_and(|c| c > 0));
    assert_eq!(got.report.backend, "soc-sim");
    assert_eq!(dev.stream().framing_errors(), 0);
    let after = dev.read_info().unwrap();
    assert_eq!((after.rx_errors, after.frame_errors), (0, 0));
    eprintln!(
        "{} cycles on the line, link {:?}",
        dev.stream().cycles(),
        dev.link_stats()
    );
}
