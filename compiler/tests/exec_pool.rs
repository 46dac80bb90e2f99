//! The compiled model as a task graph, and the pool executor (`vta_runtime::exec`) running it
//! on several functional simulators and CPU workers at once: outputs bit-identical to the
//! serial run (`Resident::run`) under every policy, on the compiler's test networks (the
//! tiny CNN, a small ResNet, and an inception-style network with four parallel branches, one
//! of them through a CPU step).

mod onnx_builder;

use std::path::Path;

use compiler::compile::{BackendOptions, Compiled};
use compiler::frontend::{load_calibration_npy, FrontendOptions};
use compiler::graph::Tensor;
use ndarray::ArrayD;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use compiler::zoo::{self, ResNetOptions};
use drivers::{Buffer, Device, DeviceError, RunReport, RunTimeout};
use onnx_builder::{sample, Model, A};
use vta_runtime::exec::{DeviceSpec, ExecError, ExecOptions, Executor, Policy};
use vta_runtime::graph::TaskGraph;
use vta_runtime::resident::LoadOptions;
use vta_sim::FsimDevice;

/// An inception-style network on a `1 x 8 x 16 x 16` input: a stem convolution, then four
/// branches (1x1; 1x1 -> 3x3; 3x3 max pool -> 1x1; 1x1 -> softmax over channels, which runs
/// on the CPU) concatenated, a 1x1 convolution, global pooling and a classifier.
fn inception() -> Model {
    inception_sized(16, 16)
}

/// [`inception`] on `hw x hw` with `ch` channels per branch.
fn inception_sized(hw: usize, ch: usize) -> Model {
    let mut m = Model::new(17);
    m.input("x", &[1, 8, hw, hw]);
    let mut k = 0;
    let mut conv = |m: &mut Model, x: &str, c: usize, o: usize, kernel: usize, relu: bool| {
        k += 1;
        let (w, b, y) = (format!("w{k}"), format!("b{k}"), format!("c{k}"));
        let p = (kernel / 2) as i64;
        m.weight(
            &w,
            &[o, c, kernel, kernel],
            1.5 / ((c * kernel * kernel) as f32).sqrt(),
        )
        .weight(&b, &[o], 0.1)
        .node(
            &format!("conv{k}"),
            "Conv",
            &[x, &w, &b],
            &[&y],
            vec![("pads", A::Is(vec![p; 4]))],
        );
        if !relu {
            return y;
        }
        let r = format!("r{k}");
        m.node(&format!("relu{k}"), "Relu", &[&y], &[&r], vec![]);
        r
    };
    let stem = conv(&mut m, "x", 8, ch, 3, true);
    let a = conv(&mut m, &stem, ch, ch, 1, true);
    let b1 = conv(&mut m, &stem, ch, ch, 1, true);
    let b = conv(&mut m, &b1, ch, ch, 3, true);
    m.node(
        "pool",
        "MaxPool",
        &[&stem],
        &["p"],
        vec![
            ("kernel_shape", A::Is(vec![3, 3])),
            ("pads", A::Is(vec![1; 4])),
            ("strides", A::Is(vec![1, 1])),
        ],
    );
    let c = conv(&mut m, "p", ch, ch, 1, true);
    let d1 = conv(&mut m, &stem, ch, ch, 1, false);
    m.node(
        "softmax",
        "Softmax",
        &[&d1],
        &["d"],
        vec![("axis", A::I(1))],
    );
    m.node(
        "concat",
        "Concat",
        &[&a, &b, &c, "d"],
        &["cat"],
        vec![("axis", A::I(1))],
    );
    let y = conv(&mut m, "cat", 4 * ch, 32, 1, true);
    m.node("gap", "GlobalAveragePool", &[&y], &["g"], vec![])
        .node("flatten", "Flatten", &["g"], &["f"], vec![])
        .weight("wc", &[10, 32], 0.3)
        .weight("bc", &[10], 0.1)
        .node(
            "fc",
            "Gemm",
            &["f", "wc", "bc"],
            &["out"],
            vec![("transB", A::I(1))],
        )
        .output("out");
    m
}

/// `onnx` compiled for the default config, calibrated on its input `x`; its input as a run.
fn compile_on(
    onnx: Vec<u8>,
    name: &str,
    x: ArrayD<f32>,
    split_branches: bool,
) -> (Compiled, Vec<Tensor>) {
    let c = Compiled::compile_observed(
        onnx,
        name,
        std::slice::from_ref(&x),
        &isa::HwConfig::default(),
        &FrontendOptions::default(),
        &BackendOptions {
            split_branches,
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    (c, vec![Tensor::F32(x)])
}

fn compile_inception(split_branches: bool) -> (Compiled, Vec<Tensor>) {
    let x = sample(&[1, 8, 16, 16], 7, 2.0);
    compile_on(inception().bytes(), "inception.onnx", x, split_branches)
}

fn data() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn compile_tiny() -> (Compiled, Vec<Tensor>) {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join("tiny_cnn.onnx")).unwrap();
    let c = Compiled::compile(
        bytes,
        "tiny_cnn.onnx",
        &calib,
        &isa::HwConfig::default(),
        &FrontendOptions::default(),
    )
    .unwrap();
    let x = calib[0]
        .slice(ndarray::s![0..1, .., .., ..])
        .to_owned()
        .into_dyn();
    (c, vec![Tensor::F32(x)])
}

#[test]
fn split_branches_make_the_inception_branches_independent_tasks() {
    let (joined, _) = compile_inception(false);
    let (split, _) = compile_inception(true);
    let gj = TaskGraph::of_model(&joined);
    let gs = TaskGraph::of_model(&split);
    let (sj, ss) = (gj.summary(), gs.summary());
    println!("joined: {sj}\nsplit:  {ss}");
    assert!(ss.launches > sj.launches, "{sj} / {ss}");
    // The four branches (the softmax one through its CPU steps) leave the stem's task.
    let fork = gs
        .branches()
        .into_iter()
        .find(|f| f.branches.len() >= 4)
        .unwrap_or_else(|| panic!("no 4-way fork in {ss}\n{}", split.plan));
    assert!(fork.fork.is_some());
    assert!(ss.critical_path < ss.tasks, "{ss}");
    assert!(ss.width >= 4, "{ss}");
    assert!(split.compile_report().contains("independent branches"));
}

/// Two SqueezeNet fire modules on a `1 x 16 x 8 x 8` input: a 1x1 squeeze, then a 1x1 and a
/// 3x3 expand of it concatenated, twice; global pooling.
fn fire_modules() -> Model {
    let mut m = Model::new(17);
    m.input("x", &[1, 16, 8, 8]);
    let mut k = 0;
    let mut conv = |m: &mut Model, x: &str, c: usize, o: usize, kernel: usize| {
        k += 1;
        let (w, b, y, r) = (
            format!("w{k}"),
            format!("b{k}"),
            format!("c{k}"),
            format!("r{k}"),
        );
        let p = (kernel / 2) as i64;
        m.weight(
            &w,
            &[o, c, kernel, kernel],
            1.5 / ((c * kernel * kernel) as f32).sqrt(),
        )
        .weight(&b, &[o], 0.1)
        .node(
            &format!("conv{k}"),
            "Conv",
            &[x, &w, &b],
            &[&y],
            vec![("pads", A::Is(vec![p; 4]))],
        )
        .node(&format!("relu{k}"), "Relu", &[&y], &[&r], vec![]);
        r
    };
    let mut x = "x".to_string();
    for f in 0..2 {
        let sq = conv(&mut m, &x, if f == 0 { 16 } else { 32 }, 16, 1);
        let e1 = conv(&mut m, &sq, 16, 16, 1);
        let e3 = conv(&mut m, &sq, 16, 16, 3);
        let cat = format!("cat{f}");
        m.node(
            &format!("concat{f}"),
            "Concat",
            &[&e1, &e3],
            &[&cat],
            vec![("axis", A::I(1))],
        );
        x = cat;
    }
    let y = conv(&mut m, &x, 32, 16, 1);
    m.node("gap", "GlobalAveragePool", &[&y], &["out"], vec![])
        .output("out");
    m
}

/// Each fire module's two expands become launches of their own, independent of each other
/// (the squeeze's launch ends at the fork, the second expand's at the join), so two devices
/// run them at once; every policy gives the serial run's outputs.
#[test]
fn split_branches_make_the_fire_module_expands_independent_tasks() {
    let x = sample(&[1, 16, 8, 8], 3, 2.0);
    let compile = |split| compile_on(fire_modules().bytes(), "fire.onnx", x.clone(), split);
    let ((joined, _), (split, xs)) = (compile(false), compile(true));
    let (sj, ss) = (
        TaskGraph::of_model(&joined).summary(),
        TaskGraph::of_model(&split).summary(),
    );
    println!("joined: {sj}\nsplit:  {ss}");
    assert_eq!(sj.width, 1, "{sj}");
    assert!(
        ss.width >= 2 && ss.critical_path < ss.tasks,
        "{ss}\n{}",
        split.plan
    );
    let forks = TaskGraph::of_model(&split).branches();
    assert_eq!(
        forks.iter().filter(|f| f.branches.len() == 2).count(),
        2,
        "{ss}"
    );
    every_policy_matches_serial("fire split", &split, &xs);
}

fn compile_resnet(split_branches: bool) -> (Compiled, Vec<Tensor>) {
    let size = 32;
    let onnx = zoo::resnet18_bytes(&ResNetOptions {
        size,
        ..Default::default()
    })
    .unwrap();
    let x = zoo::sample_input(&[1, 3, size, size], 1);
    compile_on(onnx, "resnet18.onnx", x, split_branches)
}

fn fsim(cfg: &isa::HwConfig) -> DeviceSpec {
    let cfg = cfg.clone();
    DeviceSpec::new("fsim", move || {
        Ok(Box::new(FsimDevice::new(&cfg)) as Box<dyn Device>)
    })
}

/// Inputs of `n` requests: the compile sample, then variations of it.
fn requests(x: &[Tensor], n: usize) -> Vec<Vec<Tensor>> {
    (0..n)
        .map(|i| {
            x.iter()
                .map(|t| match t {
                    Tensor::F32(a) => Tensor::F32(a.mapv(|v| v * (1.0 - 0.1 * i as f32))),
                    other => other.clone(),
                })
                .collect()
        })
        .collect()
}

/// Every policy, on 1 and 2 fsim devices with 2 CPU workers and 3 requests in flight, gives
/// the serial run's outputs bit for bit.
fn every_policy_matches_serial(name: &str, m: &vta_runtime::Model, x: &[Tensor]) {
    let reqs = requests(x, 4);
    let mut dev = FsimDevice::new(&m.config);
    let mut serial = m.load(&mut dev, LoadOptions::default()).unwrap();
    let want: Vec<Vec<Tensor>> = reqs
        .iter()
        .map(|r| serial.run(r).unwrap().outputs)
        .collect();
    drop(serial);
    let m = Arc::new(m.clone());
    for devices in [1, 2] {
        for policy in Policy::ALL {
            let ex = Executor::new(
                m.clone(),
                (0..devices).map(|_| fsim(&m.config)).collect(),
                ExecOptions {
                    policy,
                    cpu_threads: 2,
                    in_flight: 3,
                    trace: true,
                },
            )
            .unwrap();
            if policy == Policy::Auto {
                ex.choose(&reqs[0], 2).unwrap();
            }
            let done = ex.run_many(&reqs).unwrap();
            for (i, (d, w)) in done.iter().zip(&want).enumerate() {
                assert!(
                    d.outputs == *w,
                    "{name}: {policy} on {devices} device(s): request {i} differs from serial"
                );
            }
            let stats = ex.take_timeline().stats();
            assert_eq!(stats.workers.len(), devices + 2);
            let runs: usize = stats.workers.iter().map(|w| w.tasks).sum();
            assert!(runs >= reqs.len() * ex.graph().len(), "{name}: {policy}");
        }
    }
}

#[test]
fn every_policy_matches_serial_on_the_inception_network() {
    for split in [false, true] {
        let (c, x) = compile_inception(split);
        every_policy_matches_serial(&format!("inception split={split}"), &c, &x);
    }
}

#[test]
fn every_policy_matches_serial_on_the_tiny_cnn() {
    let (c, x) = compile_tiny();
    every_policy_matches_serial("tiny cnn", &c, &x);
}

#[test]
fn every_policy_matches_serial_on_resnet18() {
    let (c, x) = compile_resnet(true);
    every_policy_matches_serial("resnet18 split", &c, &x);
}

#[test]
fn by_op_puts_the_inception_branches_on_both_devices() {
    let (c, _) = compile_inception(true);
    let m = Arc::new(c.model.clone());
    let ex = Executor::new(
        m.clone(),
        vec![fsim(&m.config), fsim(&m.config)],
        ExecOptions {
            policy: Policy::ByOp,
            cpu_threads: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let g = ex.graph();
    let fork = g
        .branches()
        .into_iter()
        .find(|f| f.branches.len() >= 4)
        .unwrap();
    let s = ex.schedule();
    let devices: std::collections::BTreeSet<usize> = fork
        .branches
        .iter()
        .flatten()
        .filter(|&&t| g.tasks[t].is_launch())
        .map(|&t| s.assign[t])
        .collect();
    assert_eq!(devices.len(), 2, "{s:?}");
}

/// A fsim device whose first `fail` runs fail.
struct Flaky {
    inner: FsimDevice,
    fail: Arc<AtomicUsize>,
}

impl Device for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }
    fn config(&self) -> &isa::HwConfig {
        self.inner.config()
    }
    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        self.inner.alloc(size, align)
    }
    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError> {
        self.inner.free(buf)
    }
    fn copy_to_device(&mut self, b: &Buffer, o: u64, d: &[u8]) -> Result<(), DeviceError> {
        self.inner.copy_to_device(b, o, d)
    }
    fn copy_from_device(&mut self, b: &Buffer, o: u64, d: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.copy_from_device(b, o, d)
    }
    fn flush(&mut self, b: &Buffer, o: u64, s: u64) -> Result<(), DeviceError> {
        self.inner.flush(b, o, s)
    }
    fn invalidate(&mut self, b: &Buffer, o: u64, s: u64) -> Result<(), DeviceError> {
        self.inner.invalidate(b, o, s)
    }
    fn run(&mut self, a: u64, n: u32, t: RunTimeout) -> Result<RunReport, DeviceError> {
        if self
            .fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1))
            .is_ok()
        {
            return Err(DeviceError::Timeout {
                backend: "flaky".into(),
                detail: "injected failure".into(),
            });
        }
        self.inner.run(a, n, t)
    }
}

#[test]
fn a_failing_device_fails_its_request_and_the_others_go_on() {
    let (c, x) = compile_tiny();
    let m = Arc::new(c.model.clone());
    let fail = Arc::new(AtomicUsize::new(1));
    let (cfg, f) = (m.config.clone(), fail.clone());
    let flaky = DeviceSpec::new("flaky", move || {
        Ok(Box::new(Flaky {
            inner: FsimDevice::new(&cfg),
            fail: f,
        }) as Box<dyn Device>)
    });
    let ex = Executor::new(
        m.clone(),
        vec![flaky],
        ExecOptions {
            policy: Policy::Dynamic,
            cpu_threads: 1,
            in_flight: 2,
            trace: false,
        },
    )
    .unwrap();
    let a = ex.submit(x.clone()).unwrap();
    let b = ex.submit(x.clone()).unwrap();
    let ea = ex.wait(a, Some(std::time::Duration::from_secs(600)));
    let eb = ex.wait(b, Some(std::time::Duration::from_secs(600)));
    // Exactly one of the two hit the failing run (the first launch run on the device).
    let (failed, ok) = match (ea, eb) {
        (Err(e), Ok(d)) | (Ok(d), Err(e)) => (e, d),
        (a, b) => panic!("expected one failure: {a:?} / {b:?}"),
    };
    match &failed {
        ExecError::Task {
            worker, message, ..
        } => {
            assert_eq!(worker, "dev0 flaky");
            assert!(message.contains("injected failure"), "{message}");
        }
        e => panic!("{e}"),
    }
    let mut dev = FsimDevice::new(&m.config);
    let want = m
        .load(&mut dev, LoadOptions::default())
        .unwrap()
        .run(&x)
        .unwrap();
    assert_eq!(ok.outputs, want.outputs);
    // And the executor still serves requests.
    assert_eq!(ex.run(&x).unwrap().outputs, want.outputs);
}

/// Throughput of the inception network (64 x 64, 64 channels per branch, split branches) on
/// two fsim devices and two CPU workers, serial vs each policy (a measurement, not a test:
/// `cargo test --release -p compiler --test exec_pool -- --ignored --nocapture`).
#[test]
#[ignore]
fn measure_inception_throughput() {
    let x = sample(&[1, 8, 64, 64], 7, 2.0);
    let c = Compiled::compile_observed(
        inception_sized(64, 64).bytes(),
        "inception64.onnx",
        std::slice::from_ref(&x),
        &isa::HwConfig::default(),
        &FrontendOptions::default(),
        &BackendOptions {
            split_branches: true,
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap();
    println!("{}", TaskGraph::of_model(&c).summary());
    let m = Arc::new(c.model.clone());
    let x = vec![Tensor::F32(x)];
    let reqs = vec![x.clone(); 16];
    for in_flight in [1, 4] {
        for policy in [
            Policy::Serial,
            Policy::Pipeline,
            Policy::ByOp,
            Policy::ByPath,
            Policy::Dynamic,
        ] {
            let ex = Executor::new(
                m.clone(),
                vec![fsim(&m.config), fsim(&m.config)],
                ExecOptions {
                    policy: Policy::Serial,
                    cpu_threads: 2,
                    in_flight,
                    trace: true,
                },
            )
            .unwrap();
            ex.run(&x).unwrap();
            ex.set_policy(policy).unwrap();
            ex.take_timeline();
            let t = std::time::Instant::now();
            let done = ex.run_many(&reqs).unwrap();
            let wall = t.elapsed().as_secs_f64();
            let s = ex.take_timeline().stats();
            let mut lat: Vec<f64> = done.iter().map(|d| d.latency.as_secs_f64() * 1e3).collect();
            lat.sort_by(f64::total_cmp);
            let util: Vec<String> = s
                .workers
                .iter()
                .map(|w| format!("{:.0}%", w.utilization * 100.0))
                .collect();
            println!(
                "in flight {in_flight} {policy:9}: {:.1} req/s, latency p50 {:.1} ms, util {}, overlap {:.0} ms of {:.0} ms, lower bound {:.1} req/s",
                reqs.len() as f64 / wall,
                lat[lat.len() / 2],
                util.join("/"),
                s.overlap * 1e3,
                s.span * 1e3,
                reqs.len() as f64 / s.lower_bound
            );
        }
    }
}
