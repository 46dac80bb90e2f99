//! `cargo bench -p compiler --bench resnet [-- CONFIG] [--size N] [--no-check] [--rtl]`:
//! ResNet-18 (`compiler::zoo`, torchvision's architecture, 224x224 by default) end to end on a
//! config (default: `default`): the compile time by phase (goal: under 1 s without
//! calibration, which runs the float network), the compiled-model file's size and load time,
//! loading it onto the functional simulator and two device-resident inferences with their
//! tables (launches, bytes copied between host and device, device memory), and a run keeping
//! every intermediate compared layer by layer with the integer reference executor.
//!
//! With `--rtl`, the cycle-accurate simulator (the accelerator's Verilog in Verilator, the
//! default memory model) runs the network twice, bit-exact against the integer reference
//! both times: compiled with a launch per layer, for the **per-layer table** — every layer's
//! cycles, GEMM-core utilization, its memory and compute bounds and how close it gets to the
//! larger of them (`compiler::backend::roofline`), and what tensor-operand ALU micro-ops at
//! one per cycle would save (an estimate) — and compiled as usual, for the whole network's
//! cycles and time at 100 MHz. Cycles are simulated, so they do not depend on the machine's
//! load.

use std::time::{Duration, Instant};

use compiler::backend::roofline::{IssueRates, Work};
use compiler::compile::{BackendOptions, Compiled, LayerReport};
use compiler::frontend::FrontendOptions;
use compiler::graph::Tensor;
use compiler::zoo::{self, ResNetOptions};
use drivers::Device;
use isa::HwConfig;
use vta_runtime::model::Model;
use vta_runtime::plan::StepKind;
use vta_runtime::resident::LoadOptions;
use vta_sim::FsimDevice;

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

type BenchResult = Result<(), Box<dyn std::error::Error>>;

fn bench(cfg_name: &str, size: usize, check: bool, rtl: bool) -> BenchResult {
    let cfg = isa::HwConfig::preset(cfg_name).or_else(|_| isa::HwConfig::load(cfg_name))?;
    let t = Instant::now();
    let onnx = zoo::resnet18_bytes(&ResNetOptions {
        size,
        ..Default::default()
    })?;
    println!(
        "ResNet-18 {size}x{size} on {cfg_name} ({}): ONNX model {:.1} MB built in {}",
        cfg.config_string(),
        onnx.len() as f64 / 1e6,
        ms(t.elapsed())
    );
    let x = zoo::sample_input(&[1, 3, size, size], 1);
    let compile = |per_layer: bool| {
        Compiled::compile_observed(
            onnx.clone(),
            "resnet18.onnx",
            std::slice::from_ref(&x),
            &cfg,
            &FrontendOptions::default(),
            &BackendOptions {
                launch_per_layer: per_layer,
                ..Default::default()
            },
            &mut |_| {},
        )
    };
    let m = compile(false)?;
    let tm = m.times;
    println!(
        "compile time: {} (import {}, quantization and lowering {}, back end {} for {} launches); calibration on 1 sample {}",
        ms(tm.compile()),
        ms(tm.import),
        ms(tm.lowering),
        ms(tm.backend),
        m.launches.len(),
        ms(tm.calibration)
    );
    print!("{}", m.layer_report());
    let t = Instant::now();
    let bytes = m.to_bytes()?;
    let t_write = t.elapsed();
    let t = Instant::now();
    let m = Model::from_bytes(&bytes, "resnet18.vtab")?;
    println!(
        "compiled model: {:.1} MB, written in {}, loaded (no front end: the plan and programs are stored) in {}",
        bytes.len() as f64 / 1e6,
        ms(t_write),
        ms(t.elapsed())
    );
    let mut dev = FsimDevice::new(&cfg);
    let inputs = [Tensor::F32(x.clone())];
    let t = Instant::now();
    let mut resident = m.load(&mut dev, LoadOptions::default())?;
    println!("loaded onto fsim in {}", ms(t.elapsed()));
    for i in 1..=2 {
        let r = resident.run(&inputs)?;
        println!("inference {i} on fsim:");
        print!("{}", r.table());
    }
    drop(resident);
    if check {
        let r = m.run(&mut dev, &inputs)?;
        let t = Instant::now();
        let c = m.check(&inputs, &r)?;
        println!("check ({}): {c}", ms(t.elapsed()));
        if !c.is_exact() {
            return Err("the run differs from the integer reference".into());
        }
    }
    println!();
    if rtl {
        let per_layer = compile(true)?;
        rtl_tables(&cfg, &per_layer, &m, &Tensor::F32(x))?;
    }
    Ok(())
}

/// Runs `model` on the RTL simulator, checked against the integer reference; returns the
/// run's per-launch cycles.
fn rtl_run(
    dev: &mut dyn Device,
    model: &Model,
    x: &Tensor,
) -> Result<Vec<u64>, Box<dyn std::error::Error>> {
    let inputs = std::slice::from_ref(x);
    let r = model.run(dev, inputs)?;
    let c = model.check(inputs, &r)?;
    if !c.is_exact() {
        return Err(format!("the RTL run differs from the integer reference: {c}").into());
    }
    Ok(r.launches
        .iter()
        .map(|l| l.get("cycles").unwrap_or(0))
        .collect())
}

fn pct(a: u64, b: u64) -> String {
    format!("{:.1}%", 100.0 * a as f64 / b.max(1) as f64)
}

/// The cost model's cycle prediction for plan step `step` (convolutions and dense layers).
fn predicted(c: &Compiled, step: usize) -> Option<f64> {
    c.steps
        .iter()
        .find(|r| r.step == step)
        .and_then(|r| match &r.report {
            LayerReport::Compiled(_, info) => info.estimate.map(|e| e.cycles),
            LayerReport::Refused(_) => None,
        })
}

/// The per-layer table (a launch per layer) and the whole network's cycles.
fn rtl_tables(cfg: &HwConfig, per_layer: &Compiled, whole: &Model, x: &Tensor) -> BenchResult {
    let mut dev = vta_sim::rtl::RtlDevice::with_options(
        cfg,
        &vta_sim::rtl::RtlOptions::default(),
        &mut |s| eprintln!("rtl model: {s}"),
    )?;
    let t = std::time::Instant::now();
    let cycles = rtl_run(&mut dev, &per_layer.model, x)?;
    let sim_per_layer = t.elapsed();
    let t = std::time::Instant::now();
    let whole_cycles: u64 = rtl_run(&mut dev, whole, x)?.iter().sum();
    let sim_whole = t.elapsed();
    let bus = u64::from(cfg.axi_data_width / 8).max(1);
    println!(
        "per layer on the RTL (Verilator; memory: 20-cycle read latency, {bus} bytes/cycle), a launch per layer, bit-exact against the integer reference"
    );
    println!("  util: GEMM micro-ops per cycle; memory, compute: lower bounds in cycles (DRAM traffic on the bus; GEMM, reset and ALU micro-ops at the core's issue rates plus the compute module's own loads); roof: the larger bound / cycles; GEMM roof: the GEMM core's memory roofline, GEMM uops / max(GEMM uops, memory); model: the tiling cost model's prediction; alu1: estimated cycles saved by tensor-operand ALU micro-ops at one per cycle");
    let tensor_alu_1 = IssueRates::TENSOR_ALU_1;
    let mut rows = Vec::new();
    // cycles, GEMM, ALU, roofline, and the saving
    let mut sums = [0u64; 5];
    for (l, launch) in per_layer.launches.iter().enumerate() {
        // A launch is one layer, or a convolution with the residual add in its epilogue.
        let step = launch.steps[0];
        let steps: Vec<_> = launch
            .steps
            .iter()
            .map(|&k| &per_layer.plan.steps[k])
            .collect();
        let kinds: Option<Vec<String>> = steps
            .iter()
            .map(|st| match &st.kind {
                StepKind::Accel(layer) => Some(layer.kind().to_string()),
                _ => None,
            })
            .collect();
        let Some(kinds) = kinds else {
            continue;
        };
        let names: Vec<&str> = steps.iter().map(|st| st.name.as_str()).collect();
        let w = Work::of(cfg, &launch.program.program);
        let c = cycles[l];
        let (mem, comp) = (w.memory_bound(cfg), w.compute_bound(cfg, IssueRates::RTL));
        // A faster compute module saves what it saves on its bound, down to the memory bound.
        let saved =
            |new: u64| c.saturating_sub(mem.max(c.saturating_sub(comp.saturating_sub(new))));
        let saves = [saved(w.compute_bound(cfg, tensor_alu_1))];
        let gemm_roof = if w.gemm_uops > 0 {
            pct(w.gemm_uops, w.gemm_uops.max(mem))
        } else {
            "-".into()
        };
        let model = predicted(per_layer, step).map_or("-".into(), |p| format!("{p:.0}"));
        rows.push(vec![
            step.to_string(),
            names.join(" + "),
            kinds.join("+"),
            c.to_string(),
            w.gemm_uops.to_string(),
            w.alu_uops().to_string(),
            pct(w.gemm_uops, c),
            mem.to_string(),
            comp.to_string(),
            pct(mem.max(comp), c),
            gemm_roof,
            model,
            saves[0].to_string(),
        ]);
        for (sum, v) in sums.iter_mut().zip(
            [c, w.gemm_uops, w.alu_uops(), mem.max(comp)]
                .into_iter()
                .chain(saves),
        ) {
            *sum += v;
        }
    }
    rows.push(vec![
        String::new(),
        "all layers".into(),
        String::new(),
        sums[0].to_string(),
        sums[1].to_string(),
        sums[2].to_string(),
        pct(sums[1], sums[0]),
        String::new(),
        String::new(),
        pct(sums[3], sums[0]),
        String::new(),
        String::new(),
        sums[4].to_string(),
    ]);
    let head = [
        "step",
        "layer",
        "kind",
        "cycles",
        "GEMM",
        "ALU",
        "util",
        "memory",
        "compute",
        "roof",
        "GEMM roof",
        "model",
        "alu1",
    ];
    let right = [
        true, false, false, true, true, true, true, true, true, true, true, true, true,
    ];
    print!("{}", vta_runtime::report::columns(&head, &rows, &right));
    println!(
        "per-layer launches: {} cycles ({:.4} s at 100 MHz), {:.1} s of simulation",
        sums[0],
        sums[0] as f64 / 1e8,
        sim_per_layer.as_secs_f64()
    );
    println!(
        "ResNet-18 in {} launch(es): {whole_cycles} cycles = {:.4} s at 100 MHz ({:.2} M cycles/s of simulation, {:.1} s)",
        whole.launches.len(),
        whole_cycles as f64 / 1e8,
        whole_cycles as f64 / sim_whole.as_secs_f64() / 1e6,
        sim_whole.as_secs_f64(),
    );
    let c = whole_cycles.saturating_sub(sums[4]);
    println!(
        "  estimated with tensor-operand ALU micro-ops at one per cycle: {c} cycles = {:.4} s at 100 MHz",
        c as f64 / 1e8
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut size = 224;
    let mut check = true;
    let mut rtl = false;
    let mut configs = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--size" => {
                size = it.next().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
                    eprintln!("--size needs a number");
                    std::process::exit(2)
                })
            }
            "--no-check" => check = false,
            "--rtl" => rtl = true,
            s if s.starts_with("--") => {} // cargo bench's own flags (--bench)
            s => configs.push(s.to_string()),
        }
    }
    if configs.is_empty() {
        configs.push("default".into());
    }
    for c in &configs {
        if let Err(e) = bench(c, size, check, rtl) {
            eprintln!("benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
