//! `cargo bench -p compiler --bench layers [-- CONFIG...] [--rtl]`: compiles the ResNet-18
//! convolutions C2..C11 (VTA's `test_benchmark_topi_conv2d`, batch = BATCH) for a config
//! (default: `default`), runs each on the functional simulator, checks it against the qlayer
//! reference, and prints per layer the tiling chosen, compile time, instructions, DRAM traffic
//! (measured, and the cost model's prediction), GEMM micro-ops and the simulator's run time.
//!
//! With `--rtl` each layer also runs on the cycle-accurate RTL simulator (the accelerator's
//! Verilog in Verilator, the default memory model: 20-cycle read latency, a bus beat per
//! cycle), whose output must equal fsim's, and a second table gives per layer the cycles,
//! the GEMM-core utilization (GEMM micro-ops per cycle), the GEMM core's memory roofline
//! (GEMM micro-ops over the larger of themselves, one per cycle, and the cycles the layer's
//! DRAM traffic takes at the bus width), and the layer's memory and compute bounds
//! (`compiler::backend::roofline`: the compute module also runs the ALU epilogue, beside the
//! GEMMs) with the share of the larger one the layer reaches.

use std::time::Instant;

use compiler::backend::roofline::{IssueRates, Work};
use compiler::backend::{self, LoopOrder};
use compiler::qlayer::{QConv2d, Requant};
use drivers::RunTimeout;
use isa::rng::Rng;
use isa::HwConfig;
use ndarray::Array4;
use vta_sim::FsimDevice;

/// (name, H=W, Cin, Cout, K, pad, stride), vta.md section 9.2.
const RESNET: [(&str, usize, usize, usize, usize, usize, usize); 10] = [
    ("C2", 56, 64, 64, 3, 1, 1),
    ("C3", 56, 64, 128, 3, 1, 2),
    ("C4", 56, 64, 128, 1, 0, 2),
    ("C5", 28, 128, 128, 3, 1, 1),
    ("C6", 28, 128, 256, 3, 1, 2),
    ("C7", 28, 128, 256, 1, 0, 2),
    ("C8", 14, 256, 256, 3, 1, 1),
    ("C9", 14, 256, 512, 3, 1, 2),
    ("C10", 14, 256, 512, 1, 0, 2),
    ("C11", 7, 512, 512, 3, 1, 1),
];

/// VTA's benchmark layer: conv, then `>> 8`-like requant and a relu clip to [0, 127].
fn layer(i: usize, batch: usize) -> QConv2d {
    let (name, hw, cin, cout, k, pad, stride) = RESNET[i];
    let mut rng = Rng::new(i as u64 + 1);
    QConv2d {
        name: name.into(),
        input_shape: [batch, cin, hw, hw],
        weight: Array4::from_shape_simple_fn((cout, cin, k, k), || rng.range(i8::MIN, i8::MAX)),
        bias: (0..cout).map(|c| (c as i32 - 64) * 37).collect(),
        stride: (stride, stride),
        pad: [pad; 4],
        groups: 1,
        requant: Requant {
            pre_shift: 0,
            acc_clamp: None,
            mul: vec![1],
            shift: 8,
            zero_point: 0,
            lo: 0,
            hi: 127,
        },
    }
}

fn kib(b: u64) -> String {
    format!("{:.1}", b as f64 / 1024.0)
}

/// One layer's RTL run: (name, cycles, GEMM micro-ops, memory bound, compute bound, sim
/// seconds).
type RtlRow = (&'static str, u64, u64, u64, u64, f64);

fn bench(cfg_name: &str, rtl: bool) -> Result<(), Box<dyn std::error::Error>> {
    let cfg = HwConfig::preset(cfg_name).or_else(|_| HwConfig::load(cfg_name))?;
    println!("ResNet-18 conv layers on {cfg_name} ({cfg}); DRAM KiB = bytes loaded by LOAD (INP+WGT+ACC+UOP), prediction in brackets");
    println!(
        "{:<4} {:<22} {:<28} {:>8} {:>6} {:>19} {:>8} {:>9} {:>9} {:>8} {:>10} {:>6}",
        "",
        "shape",
        "tiling (tco tci th tw ord)",
        "comp ms",
        "insns",
        "DRAM load KiB",
        "store",
        "GEMM uops",
        "ALU uops",
        "fsim ms",
        "model kcyc",
        "exact"
    );
    let mut total_ms = 0.0;
    let mut rtl_dev = if rtl {
        Some(vta_sim::rtl::RtlDevice::with_options(
            &cfg,
            &vta_sim::rtl::RtlOptions::default(),
            &mut |s| eprintln!("rtl model: {s}"),
        )?)
    } else {
        None
    };
    let mut rtl_rows: Vec<RtlRow> = vec![];
    for (i, &(name, _, cin, cout, k, _, s)) in RESNET.iter().enumerate() {
        let l = layer(i, cfg.batch() as usize);
        let t0 = Instant::now();
        let lp = backend::compile_conv(&cfg, &l)?;
        let compile = t0.elapsed().as_secs_f64() * 1e3;
        let mut x_rng = Rng::new(100 + i as u64);
        let [n, c, h, w] = l.input_shape;
        let x = Array4::from_shape_simple_fn((n, c, h, w), || x_rng.range(i8::MIN, i8::MAX));
        let mut dev = FsimDevice::new(&cfg);
        let (out, rep) = lp.run_all(&mut dev, &[x.view()], RunTimeout::default())?;
        let exact = out[0] == l.reference(x.view());
        let g = |k: &str| rep.get(k).unwrap_or(0);
        let loaded =
            g("inp_load_bytes") + g("wgt_load_bytes") + g("acc_load_bytes") + g("uop_load_bytes");
        let info = &lp.layers[0];
        let (t, e) = (info.tiling.unwrap(), info.estimate.unwrap());
        let ord = if t.order == LoopOrder::CoOuter {
            "co"
        } else {
            "sp"
        };
        let run_ms = rep.wall_time.as_secs_f64() * 1e3;
        total_ms += run_ms;
        println!(
            "{:<4} {:<22} {:<28} {:>8.1} {:>6} {:>19} {:>8} {:>9} {:>9} {:>8.1} {:>10.1} {:>6}",
            name,
            format!("{h}x{w} {cin}->{cout} k{k} s{s}"),
            format!("{} {} {} {} {ord}", t.tco, t.tci, t.th, t.tw),
            compile,
            lp.program.insns.len(),
            format!("{} [{}]", kib(loaded), kib(e.load_bytes())),
            kib(g("out_store_bytes")),
            g("gemm_uops"),
            g("alu_uops"),
            run_ms,
            e.cycles / 1e3,
            if exact { "yes" } else { "NO" }
        );
        if !exact {
            return Err(format!("{name}: the output differs from the reference").into());
        }
        if let Some(d) = rtl_dev.as_mut() {
            let (rout, rrep) = lp.run_all(d, &[x.view()], RunTimeout::default())?;
            if rout != out {
                return Err(format!("{name}: the RTL output differs from fsim's").into());
            }
            let w = Work::of(&cfg, &lp.program);
            rtl_rows.push((
                name,
                rrep.get("cycles").unwrap_or(0),
                g("gemm_uops"),
                w.memory_bound(&cfg),
                w.compute_bound(&cfg, IssueRates::RTL),
                rrep.wall_time.as_secs_f64(),
            ));
        }
    }
    println!("total fsim time {total_ms:.1} ms\n");
    if rtl {
        println!(
            "GEMM-core utilization on the RTL (Verilator), memory: 20-cycle read latency, {} bytes/cycle; GEMM roof = GEMM uops / max(GEMM uops, memory); memory, compute = lower bounds (DRAM traffic on the bus; GEMM, reset and ALU micro-ops at the core's issue rates and the compute module's own loads); roof = the larger / cycles",
            cfg.axi_data_width / 8
        );
        println!(
            "{:<4} {:>11} {:>11} {:>8} {:>9} {:>10} {:>10} {:>7} {:>8}",
            "",
            "cycles",
            "GEMM uops",
            "util %",
            "GEMM roof",
            "memory",
            "compute",
            "roof",
            "M cyc/s"
        );
        let (mut c, mut u, mut t) = (0u64, 0u64, 0.0);
        for (name, cycles, uops, mem, comp, secs) in &rtl_rows {
            let gemm_roof = *uops as f64 / (*uops).max(*mem).max(1) as f64;
            println!(
                "{:<4} {:>11} {:>11} {:>7.1}% {:>8.1}% {:>10} {:>10} {:>6.1}% {:>8.2}",
                name,
                cycles,
                uops,
                100.0 * *uops as f64 / (*cycles).max(1) as f64,
                100.0 * gemm_roof,
                mem,
                comp,
                100.0 * (*mem).max(*comp) as f64 / (*cycles).max(1) as f64,
                *cycles as f64 / secs / 1e6
            );
            c += cycles;
            u += uops;
            t += secs;
        }
        println!(
            "all  {c:>11} {u:>11} {:>7.1}% {:>41} {:>8.2}\n",
            100.0 * u as f64 / c.max(1) as f64,
            "",
            c as f64 / t / 1e6
        );
    }
    Ok(())
}

fn main() {
    let configs: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let configs = if configs.is_empty() {
        vec!["default".to_string()]
    } else {
        configs
    };
    let rtl = std::env::args().any(|a| a == "--rtl");
    for c in &configs {
        if let Err(e) = bench(c, rtl) {
            eprintln!("benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
