//! `cargo bench -p compiler --bench resnet [-- CONFIG] [--size N] [--no-check]`: ResNet-18
//! (`compiler::zoo`, torchvision's architecture, 224x224 by default) end to end on a config
//! (default: `default`): the compile time by phase (goal: under 1 s without calibration, which
//! runs the float network), the compiled-model file's size and load time, loading it onto the
//! functional simulator and two device-resident inferences with their tables (launches, bytes
//! copied between host and device, device memory), and a run keeping every intermediate
//! compared layer by layer with the integer reference executor. Cycle counts per convolution
//! against the roofline are in the `layers` bench (`-- --rtl`).

use std::time::{Duration, Instant};

use compiler::compile::Compiled;
use compiler::frontend::FrontendOptions;
use compiler::graph::Tensor;
use compiler::zoo::{self, ResNetOptions};
use vta_runtime::model::Model;
use vta_runtime::resident::LoadOptions;
use vta_sim::FsimDevice;

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn bench(cfg_name: &str, size: usize, check: bool) -> Result<(), Box<dyn std::error::Error>> {
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
    let m = Compiled::compile(
        onnx,
        "resnet18.onnx",
        std::slice::from_ref(&x),
        &cfg,
        &FrontendOptions::default(),
    )?;
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
    let inputs = [Tensor::F32(x)];
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
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut size = 224;
    let mut check = true;
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
            s if s.starts_with("--") => {} // cargo bench's own flags (--bench)
            s => configs.push(s.to_string()),
        }
    }
    if configs.is_empty() {
        configs.push("default".into());
    }
    for c in &configs {
        if let Err(e) = bench(c, size, check) {
            eprintln!("benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
