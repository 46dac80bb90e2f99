//! The SoC with the ULX3S's SDR SDRAM as device memory: the LiteDRAM controller the open
//! flow generates for the board (`bitstreams::openflow::sdram`, installed and generated into
//! the tool cache on first use), simulated whole in Verilator with a behavioural model of
//! the chip on its pins (`vta_sim::sdram_model`) and driven through the UART by the serial
//! driver: copies across rows and banks, programs (ALU work; a blocked GEMM with two
//! virtual threads) bit-exact against the functional simulator, a DMA outside the memory refused (SLVERR, CONTROL's error bit), and no
//! protocol or timing fault seen by the chip model.
//!
//! The controller runs at the simulation's clock (the `default` config's 100 MHz, CAS
//! latency 2), the chip model at the same clock edge (see `vta_sim::sdram_model`).

#[path = "support/rtl.rs"]
mod rtl_support;
#[path = "support/sdram_soc.rs"]
mod sdram_support;

use drivers::serial::SerialDevice;
use drivers::{run_program, Device, DeviceError, RunTimeout};
use isa::{AluOp, DepFlags, HwConfig, Insn, MemInsn, MemType};
use rtl_support::{acc_alu_store, bytes, load_acc_row_at_0};
use vta_sim::bench::gemm::{blocked_gemm, GemmOperands};
use vta_sim::soc::{self, SimLine};
use vta_sim::FsimDevice;

/// A fresh simulated SoC of the default config with the ULX3S's SDRAM.
fn sdram_soc() -> SerialDevice<SimLine> {
    let cfg = HwConfig::default();
    let opts = sdram_support::sdram_options(&cfg, rtl_support::model_cache());
    soc::device(&cfg, &opts, &mut |s| eprintln!("[soc model] {s}"))
        .unwrap_or_else(|e| panic!("no simulated SoC with SDRAM: {e}"))
}

/// Runs `insns` on `dev`, expecting the run to fail; returns the error.
fn run_insns(dev: &mut SerialDevice<SimLine>, cfg: &HwConfig, insns: &[Insn]) -> String {
    let stream = isa::Codec::new(cfg).encode_stream(insns).unwrap();
    let ib = dev.alloc(stream.len() as u64, 16).unwrap();
    dev.copy_to_device(&ib, 0, &stream).unwrap();
    dev.run(ib.phys_addr, insns.len() as u32, RunTimeout::default())
        .unwrap_err()
        .to_string()
}

fn no_fault(dev: &SerialDevice<SimLine>) {
    if let Some((code, what)) = dev.stream().sdram_fault() {
        panic!("the SDRAM model saw fault {code}: {what}");
    }
}

#[test]
fn a_program_runs_bit_exact_from_sdram() {
    let cfg = HwConfig::default();
    let mut dev = sdram_soc();
    let info = dev.info().clone();
    assert_eq!((info.mem_base, info.mem_bytes), (0x1000_0000, 32 << 20));

    // Copies at odd alignments, and one spanning rows of every bank (a row is 1 KiB; the
    // controller maps bank above column, so 4 KiB crosses all four banks).
    let buf = dev.alloc(16384, 4096).unwrap();
    let data = bytes(9000, 5);
    dev.copy_to_device(&buf, 3, &data).unwrap();
    for (off, len) in [(3, 9000), (4, 5), (1030, 77), (4099, 1)] {
        let mut got = vec![0; len];
        dev.copy_from_device(&buf, off as u64, &mut got).unwrap();
        assert_eq!(
            got,
            data[off - 3..off - 3 + len],
            "read of {len} bytes at {off}"
        );
    }
    no_fault(&dev);
    // High rows: 24 MiB into the memory.
    let big = dev.alloc(24 << 20, 4096).unwrap();
    dev.copy_to_device(&big, (24 << 20) - 8, &[0xa5; 8])
        .unwrap();
    let mut got = [0; 8];
    dev.copy_from_device(&big, (24 << 20) - 8, &mut got)
        .unwrap();
    assert_eq!(got, [0xa5; 8]);
    dev.free(big).unwrap();
    let e = dev.copy_to_device(&buf, 16380, &[0; 8]).unwrap_err();
    assert!(matches!(e, DeviceError::OutOfBounds { .. }), "{e}");

    // ALU work, and a blocked GEMM with two virtual threads (LOAD INP/WGT/ACC/UOP, GEMM,
    // STORE).
    let ops = GemmOperands::random(&cfg, 32, 32, 7);
    let gemm = blocked_gemm(&cfg, 32, 32, 16, true, 2, ops).unwrap();
    for p in [
        acc_alu_store(&cfg, 16, &[(AluOp::Add, 3), (AluOp::Shr, 1)]),
        gemm,
    ] {
        let mut fsim = FsimDevice::new(&cfg);
        let want = run_program(&mut fsim, &p, &[], RunTimeout::default()).unwrap();
        let got = run_program(&mut dev, &p, &[], RunTimeout::default()).unwrap();
        assert_eq!(got.outputs, want.outputs);
        assert_eq!(got.report.counters, want.report.counters);
        assert!(got.report.get("cycles").is_some_and(|c| c > 0));
        no_fault(&dev);
    }
    let leds: Vec<bool> = ["led_busy", "led_done", "led_error"]
        .iter()
        .map(|l| dev.stream().pin(l))
        .collect();
    assert_eq!(leds, [false, true, false]);
    assert_eq!(dev.stream().framing_errors(), 0);
    no_fault(&dev);

    // A LOAD from address 0, outside the memory: the window answers SLVERR and CONTROL's
    // error bit is set, as with block RAM (LiteDRAM alone would alias the address).
    let load = load_acc_row_at_0();
    let e = run_insns(
        &mut dev,
        &cfg,
        &[Insn::Load(load), Insn::Finish(DepFlags::default())],
    );
    assert!(
        e.contains("run failed: the accelerator reported an error (CONTROL = 0x6"),
        "{e}"
    );
    assert!(dev.stream().pin("led_error"));
    no_fault(&dev);

    // A STORE to address 0, outside the memory: the window takes the burst's data, writes
    // nothing and answers SLVERR. Without it LiteDRAM would alias address 0 to the memory's
    // first bytes (`buf`'s); they are unchanged. (The accelerator's DMA does not check
    // BRESP, so the run reports no error, with block RAM as here.)
    assert_eq!(
        buf.phys_addr, 0x1000_0000,
        "buf is the memory's first bytes"
    );
    let mut before = vec![0; 64];
    dev.copy_from_device(&buf, 0, &mut before).unwrap();
    let mut store = MemInsn::transfer(MemType::Out, 0, 0, 1, 1, 1);
    store.deps.push_prev = true;
    let finish = DepFlags {
        pop_next: true,
        ..DepFlags::NONE
    };
    let stream = isa::Codec::new(&cfg)
        .encode_stream(&[Insn::Store(store), Insn::Finish(finish)])
        .unwrap();
    let ib = dev.alloc(stream.len() as u64, 16).unwrap();
    dev.copy_to_device(&ib, 0, &stream).unwrap();
    let report = dev.run(ib.phys_addr, 2, RunTimeout::default()).unwrap();
    assert_eq!(report.get("out_store_bytes"), Some(16));
    let mut after = vec![0; 64];
    dev.copy_from_device(&buf, 0, &mut after).unwrap();
    assert_eq!(after, before);
    no_fault(&dev);
}

/// The SoC with the generated LiteDRAM controller, and the test bench with the chip model,
/// pass `verilator --lint-only -Wall` with no warning (LiteDRAM's Verilog is wrapped in its
/// own lint exemptions by `hdl::external_module`).
#[test]
fn the_sdram_soc_verilog_is_lint_clean() {
    let cfg = HwConfig::default();
    let opts = sdram_support::sdram_options(&cfg, rtl_support::model_cache());
    let vta_sim::soc::SimMemory::Sdram { controller, chip } = &opts.memory else {
        panic!("SDRAM options without SDRAM");
    };
    let params = opts.params.clone().unwrap();
    let g = vta_hw::soc::generate_with(&cfg, &params, controller).unwrap();
    assert!(g.verilog.contains("module vta_sdram_ctrl"));
    let dir = std::env::temp_dir().join(format!("vta-sdram-lint-{}", std::process::id()));
    hdl::verilator::lint(&g.design, &dir).unwrap_or_else(|e| panic!("{e}"));
    let model = hdl::Design::new(vta_sim::sdram_model::model(chip, params.clock_hz));
    hdl::verilator::lint(&model, &dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(&dir).unwrap();
}
