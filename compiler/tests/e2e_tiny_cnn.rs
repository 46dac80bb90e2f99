//! End to end on the committed tiny CNN (sklearn digits, 8x8; `tests/data/make_models.py`):
//! compile the float model (calibrated with `digits_calib.npy`) and its QDQ and QOperator
//! forms, write and read the compiled-model file, run on the functional simulator, check every
//! step against the integer reference, and measure accuracy against the fp32 model.

use std::path::{Path, PathBuf};

use compiler::compile::{BackendOptions, Compiled};
use compiler::frontend::{load_calibration_npy, npy_to_f32, FrontendOptions};
use compiler::graph::plan::StepKind;
use compiler::graph::{Layer, Tensor};
use ndarray::{ArrayD, Axis, IxDyn};
use vta_runtime::model::{Check, Model, Place};
use vta_runtime::resident::LoadOptions;
use vta_sim::FsimDevice;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn npy(name: &str) -> ArrayD<f32> {
    npy_to_f32(&isa::npy::read_file(&data().join(name)).unwrap()).unwrap()
}

fn images() -> Vec<Tensor> {
    npy("digits_test.npy")
        .axis_iter(Axis(0))
        .map(|x| {
            Tensor::F32(
                x.to_owned()
                    .into_shape_with_order(IxDyn(&[1, 1, 8, 8]))
                    .unwrap(),
            )
        })
        .collect()
}

fn labels() -> Vec<usize> {
    let a = isa::npy::read_file(&data().join("digits_test_labels.npy")).unwrap();
    a.data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as usize)
        .collect()
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold(0, |b, (i, x)| if *x > v[b] { i } else { b })
}

fn compile(model: &str, cfg: &str) -> Compiled {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join(model)).unwrap();
    let cfg = isa::HwConfig::preset(cfg).unwrap();
    Compiled::compile(bytes, model, &calib, &cfg, &FrontendOptions::default()).unwrap()
}

/// Runs `n` test images on fsim, checks every run against the integer reference, and
/// returns the output scores.
fn run_checked(m: &Model, n: usize) -> Vec<Vec<f32>> {
    let mut dev = FsimDevice::checking_races(&m.config);
    images()
        .into_iter()
        .take(n)
        .map(|x| {
            let inputs = [x];
            let r = m.run(&mut dev, &inputs).unwrap();
            let c = m.check(&inputs, &r).unwrap();
            assert!(c.is_exact(), "{}: {c}", m.source);
            r.outputs[0].as_f32().unwrap().iter().copied().collect()
        })
        .collect()
}

#[test]
fn float_model_is_bit_exact_and_as_accurate_as_fp32() {
    let m = compile("tiny_cnn.onnx", "default");
    let (accel, cpu) = m.counts();
    assert_eq!(accel, 8, "{}", m.compile_report());
    // quantize, flatten, dequantize, softmax
    assert_eq!(cpu, 4, "{}", m.compile_report());
    // Through the file: the plan and the programs are stored (no front end, no calibration data
    // at load), and writing again gives the same bytes.
    let bytes = m.to_bytes().unwrap();
    let m = Model::from_bytes(&bytes, "tiny_cnn.vtab").unwrap();
    assert_eq!(m.to_bytes().unwrap(), bytes);

    let ours = run_checked(&m, 100);
    let fp32: Vec<Vec<f32>> = npy("tiny_cnn_out.npy")
        .axis_iter(Axis(0))
        .map(|r| r.iter().copied().collect())
        .collect();
    let labels = labels();
    let acc = |s: &[Vec<f32>]| {
        s.iter()
            .zip(&labels)
            .filter(|(p, &l)| argmax(p) == l)
            .count()
    };
    let agree = ours
        .iter()
        .zip(&fp32)
        .filter(|(a, b)| argmax(a) == argmax(b))
        .count();
    let (acc_q, acc_f) = (acc(&ours), acc(&fp32));
    println!("tiny CNN on fsim: accuracy {acc_q}/100 (fp32 {acc_f}/100), top-1 agreement with fp32 {agree}/100");
    // Measured: 98/100 for both, 100/100 agreement.
    assert!(acc_f >= 97, "fp32 accuracy {acc_f}");
    assert!(acc_q + 1 >= acc_f, "int8 accuracy {acc_q} vs fp32 {acc_f}");
    assert!(agree >= 98, "agreement {agree}");
}

#[test]
fn qdq_and_qoperator_forms_are_bit_exact() {
    for (model, min_accel) in [("tiny_cnn_qdq.onnx", 8), ("tiny_cnn_qop.onnx", 1)] {
        let c = compile(model, "default");
        let bytes = c.to_bytes().unwrap();
        let m = Model::from_bytes(&bytes, model).unwrap();
        assert!(m.counts().0 >= min_accel, "{}", c.compile_report());
        let ort: Vec<usize> = npy(&model.replace(".onnx", "_out.npy"))
            .axis_iter(Axis(0))
            .map(|r| argmax(r.as_slice().unwrap()))
            .collect();
        let ours = run_checked(&m, 25);
        let agree = ours
            .iter()
            .zip(&ort)
            .filter(|(a, &b)| argmax(a) == b)
            .count();
        assert!(
            agree >= 24,
            "{model}: top-1 agreement with onnxruntime {agree}/25"
        );
    }
}

#[test]
fn other_configs_run_bit_exact() {
    for cfg in ["batched", "rect", "small"] {
        let m = compile("tiny_cnn.onnx", cfg);
        assert!(m.counts().0 >= 6, "{cfg}:\n{}", m.compile_report());
        run_checked(&m, 3);
    }
}

fn compile_per_layer(model: &str) -> Compiled {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join(model)).unwrap();
    let cfg = isa::HwConfig::default();
    let backend = BackendOptions {
        launch_per_layer: true,
        ..Default::default()
    };
    let opts = FrontendOptions::default();
    Compiled::compile_observed(bytes, model, &calib, &cfg, &opts, &backend, &mut |_| {}).unwrap()
}

#[test]
fn consecutive_accelerator_layers_run_as_one_launch() {
    let m = compile("tiny_cnn.onnx", "default");
    // Quantize | conv, pool, dw, pw, add, conv, gap | Flatten | dense | Dequantize, Softmax
    let steps: Vec<Vec<usize>> = m.launches.iter().map(|l| l.steps.clone()).collect();
    assert_eq!(steps, vec![(1..=7).collect::<Vec<_>>(), vec![9]]);
    let mut dev = FsimDevice::checking_races(&m.config);
    let x = images().swap_remove(0);
    let r = m.run(&mut dev, &[x]).unwrap();
    assert_eq!(r.layers.len(), m.plan.steps.len());
    for l in &r.layers {
        assert_eq!(
            l.launch.is_some(),
            l.place == Place::Accelerator,
            "{}",
            l.name
        );
    }
    assert_eq!(r.launches.len(), 2);
    for l in &r.launches {
        assert!(l.get("gemm_uops").unwrap() > 0 && l.dram_bytes() > 0);
    }
    let table = r.table();
    assert!(
        table.contains("GEMM uops") && table.contains("/c1/Conv") && table.contains("L0     1-7"),
        "{table}"
    );
    assert!(
        table.contains("no cycle counts (fsim is not cycle-accurate)"),
        "{table}"
    );
    let report = m.compile_report();
    assert!(
        report.contains("co-outer") || report.contains("spatial-outer"),
        "{report}"
    );
}

#[test]
fn activations_stay_on_the_device_between_layers() {
    let m = compile("tiny_cnn.onnx", "default");
    let cfg = &m.config;
    let mut dev = FsimDevice::checking_races(cfg);
    let mut loaded = m.load(&mut dev, LoadOptions::default()).unwrap();
    let xs = images();
    let a = loaded.run(&xs[..1]).unwrap();
    let b = loaded.run(&xs[1..2]).unwrap();
    // Per inference the host writes the quantized image (1x1x8x8, packed into one channel
    // block) and the flattened features for the dense layer, and reads the features and the
    // logits: nothing of the layers in between, and no weights (they were loaded once).
    let block = cfg.block_out() as u64;
    let batch = cfg.batch() as u64;
    let image = 64 * block * batch;
    let flat = |c: u64| c.div_ceil(block) * block * batch;
    let feats = m.plan.values[m.launches[0].outputs[0]].fact.shape[1] as u64;
    let logits = m.plan.values[m.launches[1].outputs[0]].fact.shape[1] as u64;
    for r in [&a, &b] {
        assert_eq!(r.host_to_device_bytes(), image + flat(feats));
        assert_eq!(r.device_to_host_bytes(), flat(feats) + flat(logits));
        assert_eq!(r.launches.len(), 2);
    }
    // Only what the host needs was read back; the layers inside the launch were not.
    let inside = m.launches[0].internal[0].value;
    assert!(a.values[inside].is_none());
    // Liveness reuse: the arena is smaller than every activation side by side.
    let all: usize = m
        .launches
        .iter()
        .flat_map(|l| l.bindings())
        .map(|(_, t)| t.layout.bytes())
        .sum();
    assert!((a.memory.arena as usize) < all, "{:?} vs {all}", a.memory);
    // Same results as a run that keeps every intermediate (and is checked layer by layer).
    let full = m
        .run(&mut FsimDevice::checking_races(cfg), &xs[1..2])
        .unwrap();
    assert!(m.check(&xs[1..2], &full).unwrap().is_exact());
    assert_eq!(b.outputs, full.outputs);
}

#[test]
fn a_launch_per_layer_gives_per_layer_counters_and_the_same_results() {
    let grouped = compile("tiny_cnn.onnx", "default");
    let m = compile_per_layer("tiny_cnn.onnx");
    assert_eq!(
        m.launches.iter().map(|l| l.steps.len()).sum::<usize>(),
        m.counts().0
    );
    // A launch per layer, but a residual add runs in its convolution's epilogue.
    assert!(m.launches.iter().all(|l| match l.steps[..] {
        [_] => true,
        [conv, add] => matches!(
            (&m.plan.steps[conv].kind, &m.plan.steps[add].kind),
            (
                StepKind::Accel(Layer::Conv2d(_)),
                StepKind::Accel(Layer::Add(_))
            )
        ),
        _ => false,
    }));
    assert!(m.launches.iter().any(|l| l.steps.len() == 2));
    let x = images().swap_remove(3);
    let r = m
        .run(
            &mut FsimDevice::checking_races(&m.config),
            std::slice::from_ref(&x),
        )
        .unwrap();
    for l in &r.launches {
        let step = &m.plan.steps[l.steps[0]];
        let kind = &step.kind_name();
        assert!(l.get("alu_uops").is_some() && l.dram_bytes() > 0, "{kind}");
        // Depthwise convolutions run on the ALU alone.
        let depthwise = matches!(&step.kind, StepKind::Accel(Layer::Conv2d(c)) if c.groups > 1);
        if (kind == "QConv2d" && !depthwise) || kind == "QDense" {
            assert!(l.get("gemm_uops").unwrap() > 0, "{kind}");
        }
    }
    let g = grouped
        .run(&mut FsimDevice::checking_races(&m.config), &[x])
        .unwrap();
    assert_eq!(r.outputs, g.outputs);
    // A tensor one launch writes and the next reads in the same layout stays on the device,
    // so the host copies no more than with grouped launches (keeping every intermediate, it
    // reads back the same values).
    assert_eq!(r.host_to_device_bytes(), g.host_to_device_bytes());
    assert_eq!(r.device_to_host_bytes(), g.device_to_host_bytes());
}

#[test]
fn check_reports_the_first_mismatch() {
    let m = compile("tiny_cnn.onnx", "default");
    let mut dev = FsimDevice::checking_races(&m.config);
    let inputs = [images().swap_remove(1)];
    let mut r = m.run(&mut dev, &inputs).unwrap();
    let c = m.check(&inputs, &r).unwrap();
    assert!(
        matches!(
            c,
            Check::BitExact {
                layers: 11,
                accel_layers: 7,
                ..
            }
        ),
        "{c}"
    );
    // (A convolution with a residual add in its epilogue writes no output of its own.)
    assert!(c.to_string().starts_with("bit-exact: 11 layers"), "{c}");
    // Corrupt the third accelerator step output as if the device had computed it wrongly.
    let (k, v) = m
        .accel
        .iter()
        .map(|a| (a.step, m.plan.steps[a.step].outputs[0]))
        .filter(|&(_, v)| r.values[v].is_some())
        .nth(2)
        .unwrap();
    if let Some(Tensor::I8(a)) = &mut r.values[v] {
        let e = a.iter_mut().nth(5).unwrap();
        *e = e.wrapping_add(1);
    }
    let c = m.check(&inputs, &r).unwrap();
    let Check::Mismatch(mm) = &c else {
        panic!("{c}")
    };
    assert_eq!((mm.mismatch.step, mm.mismatch.flat_index), (k, 5));
    assert_eq!(mm.place, Place::Accelerator);
    assert!(c.to_string().contains(&m.plan.steps[k].name), "{c}");
}

#[test]
fn compiled_model_file_rejects_bad_files() {
    let m = compile("tiny_cnn.onnx", "default");
    let bytes = m.to_bytes().unwrap();
    assert_eq!(&bytes[..8], b"VTAMODEL");
    let err = |b: &[u8]| Model::from_bytes(b, "m.vtab").unwrap_err().to_string();

    // Same ISA (bus width only differs): accepted; another ISA: refused, naming both configs.
    let wide = isa::HwConfig::preset("wide-bus").unwrap();
    assert!(Model::from_bytes_for(&bytes, "m.vtab", &wide).is_ok());
    let batched = isa::HwConfig::preset("batched").unwrap();
    let e = Model::from_bytes_for(&bytes, "m.vtab", &batched)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("m.vtab: ")
            && e.contains("compiled for config 1x16_i8w8a32_15_15_18_17")
            && e.contains(&batched.config_string()),
        "{e}"
    );
    // A newer format version is refused before anything else is read; versions 1 (which
    // rebuilt the plan from a stored ONNX model), 2 (a program per layer), 3 (no element-wise
    // layers), 4 (no folded input layouts), 5 (no accumulator clamp), 6 (no tensor views)
    // 7 (no lane widths), 8 (no narrow QuantizeLinear saturation), 9 (no
    // DynamicQuantizeLinear or recurrent operators) and 10 (no digit planes) ask for a
    // recompile.
    let mut b = bytes.clone();
    b[8..12].copy_from_slice(&12u32.to_le_bytes());
    assert!(
        err(&b).contains("format version 12 is newer"),
        "{}",
        err(&b)
    );
    for old in [1u32, 2, 3, 4, 5, 6, 7, 8, 9, 10] {
        b[8..12].copy_from_slice(&old.to_le_bytes());
        let e = err(&b);
        assert!(
            e.contains(&format!("format version {old} ")) && e.contains("recompile the model"),
            "{e}"
        );
    }
    // Corruption anywhere after the length is caught by the checksum; truncation is called
    // truncation, and trailing bytes are refused.
    for i in (20..bytes.len()).step_by(61) {
        let mut b = bytes.clone();
        b[i] ^= 0x20;
        assert!(
            err(&b).contains("checksum mismatch"),
            "byte {i}: {}",
            err(&b)
        );
    }
    for n in (0..bytes.len()).step_by(89) {
        let e = err(&bytes[..n]);
        assert!(e.starts_with("m.vtab: "), "{e}");
        if n >= 8 {
            assert!(e.contains("truncated"), "{n} bytes: {e}");
        }
    }
    let mut long = bytes.clone();
    long.push(0);
    assert!(
        err(&long).contains("1 byte after the end"),
        "{}",
        err(&long)
    );
    // Other files say what they are.
    assert!(err(b"").contains("the file is empty"), "{}", err(b""));
    let onnx = std::fs::read(data().join("tiny_cnn.onnx")).unwrap();
    assert!(
        err(&onnx).contains("compile it with `vta compile`"),
        "{}",
        err(&onnx)
    );
    let vtab = isa::container::write(&m.launches[0].program.program).unwrap();
    assert!(err(&vtab).contains("program container"), "{}", err(&vtab));
    // A plan that refers to values it does not have, or programs that do not match its
    // accelerator steps, are refused (a well-formed file with a valid checksum can still be
    // inconsistent).
    let mut bad = m.model.clone();
    bad.plan.steps[3].inputs[0] = 9999;
    let e = err(&bad.to_bytes().unwrap());
    assert!(e.contains("refers to value 9999"), "{e}");
    // Layer parameters that do not fit their tensors (a bias too short for the output
    // channels) would panic a kernel: refused at load, naming the step.
    let mut bad = m.model.clone();
    let k = bad.accel[0].step;
    let StepKind::Accel(Layer::Conv2d(conv)) = &mut bad.plan.steps[k].kind else {
        panic!("the first accelerator step is a convolution")
    };
    conv.bias.pop();
    let e = err(&bad.to_bytes().unwrap());
    assert!(
        e.contains(&format!("step {k}")) && e.contains("biases"),
        "{e}"
    );
    let mut bad = m.model.clone();
    bad.accel.remove(3);
    let e = err(&bad.to_bytes().unwrap());
    assert!(e.contains("the plan has accelerator steps"), "{e}");
    // Launches must match the plan: their steps, and the values their segments hold.
    let mut bad = m.model.clone();
    bad.launches[0].steps.pop();
    let e = err(&bad.to_bytes().unwrap());
    assert!(e.contains("launch 0:"), "{e}");
    let mut bad = m.model.clone();
    bad.launches.swap(0, 1);
    let e = err(&bad.to_bytes().unwrap());
    assert!(e.contains("does not run it"), "{e}");
    let mut bad = m.model.clone();
    bad.launches[0].inputs[0] = bad.launches[0].outputs[0];
    let e = err(&bad.to_bytes().unwrap());
    assert!(e.contains("launch 0:"), "{e}");
    let mut bad = m.model.clone();
    bad.launches[1].outputs[0] = bad.launches[0].outputs[0];
    let e = err(&bad.to_bytes().unwrap());
    assert!(e.contains("launch 1:"), "{e}");
}

/// `program` without the `k`-th token on `q`: the flag of its k-th push and of its k-th pop
/// cleared (the queue stays balanced, so only the ordering is lost).
fn without_token(program: &isa::Program, q: isa::Queue, k: usize) -> Option<isa::Program> {
    use isa::tokens::{route, DepFlag};
    let mut p = program.clone();
    let mut cleared = [false; 2];
    for (push, slot) in [(true, 0), (false, 1)] {
        let mut n = 0;
        for insn in &mut p.insns {
            let module = insn.module();
            let flag = DepFlag::ALL.into_iter().find(|&f| {
                f.is_push() == push && insn.deps().get(f) && route(module, f) == Some(q)
            });
            if let Some(f) = flag {
                if n == k {
                    insn.deps_mut().set(f, false);
                    cleared[slot] = true;
                    break;
                }
                n += 1;
            }
        }
    }
    (cleared == [true, true]).then_some(p)
}

#[test]
fn the_race_detector_catches_every_dropped_barrier_token() {
    let m = compile("tiny_cnn.onnx", "default");
    let program = &m.launches[0].program.program;
    let run = |p: &isa::Program| {
        let mut dev = FsimDevice::checking_races(&m.config);
        drivers::run_program(&mut dev, p, &[], drivers::RunTimeout::default())
    };
    run(program).expect("the compiled program is race-free");
    // Drop each token in turn; count the mutants the detector refuses.
    let (mut caught, mut total) = (0, 0);
    let mut uncaught = Vec::new();
    for q in isa::Queue::ALL {
        for k in 0.. {
            let Some(p) = without_token(program, q, k) else {
                break;
            };
            total += 1;
            match run(&p) {
                Err(e) if e.to_string().contains("race on") => caught += 1,
                Err(e) => panic!("{q:?} #{k}: not a race: {e}"),
                Ok(_) => uncaught.push(format!("{q:?} #{k}")),
            }
        }
    }
    assert!(total >= 20, "{total} tokens");
    // Tokens that only bound the queues' depth or order the FINISH drain are not needed for
    // data, so not every dropped token is a race; but the detector must catch most, and
    // every store -> compute token here orders a layer's stores before the next layer.
    assert!(
        caught * 2 > total,
        "{caught} of {total} caught; missed {uncaught:?}"
    );
    assert!(
        !uncaught.iter().any(|u| u.starts_with("S2g")),
        "missed {uncaught:?}"
    );
}

#[test]
fn compiled_model_loader_refuses_oversized_tensors_and_survives_resealed_corruption() {
    let m = compile("tiny_cnn.onnx", "default");
    let err = |b: &[u8]| Model::from_bytes(b, "m.vtab").unwrap_err().to_string();
    // A value whose fact asks for more than the memory budget is refused at load, named,
    // before anything of that size is allocated.
    let mut bad = m.model.clone();
    let v = bad.plan.outputs[0];
    bad.plan.values[v].fact.shape = vec![1, 1 << 20, 1 << 20];
    let e = err(&bad.to_bytes().unwrap());
    assert!(
        e.contains(&format!("tensor '{}'", bad.plan.values[v].name))
            && e.contains("beyond the memory budget of 4.0 GiB"),
        "{e}"
    );
    // Random byte changes after the header, with the checksum recomputed so that the body
    // decoder and the plan checks see them: an error naming the file, or a model, never a
    // panic.
    let bytes = m.to_bytes().unwrap();
    let body = 20..bytes.len() - 8;
    let mut state = 0x9e37_79b9u32;
    for round in 0..400 {
        let mut b = bytes.clone();
        for _ in 0..1 + round % 4 {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let i = body.start + (state as usize >> 8) % body.len();
            b[i] = (state >> 24) as u8;
        }
        let n = b.len() - 8;
        let sum = isa::container::fnv1a(&b[..n]);
        b[n..].copy_from_slice(&sum.to_le_bytes());
        if let Err(e) = Model::from_bytes(&b, "m.vtab") {
            assert!(e.to_string().starts_with("m.vtab: "), "{e}");
        }
    }
}

/// A compiled model whose embedded program container has an old format version is refused
/// with advice for the model (recompile it), not the container's own (re-assemble it).
#[test]
fn an_old_embedded_container_asks_to_recompile_the_model() {
    use isa::container::frame;
    let m = compile("tiny_cnn.onnx", "default");
    let mut b = m.to_bytes().unwrap();
    let at = b
        .windows(isa::container::MAGIC.len())
        .position(|w| w == isa::container::MAGIC)
        .expect("the model embeds a program container");
    let len = u64::from_le_bytes(b[at + 12..at + 20].try_into().unwrap()) as usize;
    // Version 1, the container resealed, then the model.
    let mut c = b[at..at + len - frame::CHECKSUM_BYTES].to_vec();
    c[8..12].copy_from_slice(&1u32.to_le_bytes());
    b.splice(at..at + len, frame::finish(c));
    b.truncate(b.len() - frame::CHECKSUM_BYTES);
    let e = Model::from_bytes(&frame::finish(b), "m.vtab")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("launch 0: its program container has format version 1")
            && e.contains("recompile the model with `vta compile`")
            && !e.contains("vta asm"),
        "{e}"
    );
}

/// By default, below 8-bit weights, the first convolution and the last dense layer keep
/// 8-bit weights (error-feedback rounding for the others): on a 2- or 4-bit core they run on
/// the accelerator bit-sliced (one GEMM pass per weight digit, as the report says), every
/// convolution and dense layer is on the accelerator, and the network stays bit-exact and
/// close to float.
#[test]
fn the_first_and_last_layers_keep_8bit_weights_and_run_bit_sliced() {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join("tiny_cnn.onnx")).unwrap();
    for (log_inp, log_wgt, sliced, passes, min_right) in [
        (3, 1, "bit-sliced: 5 passes of 2-bit weight digits", 5, 25),
        (2, 2, "bit-sliced: 3 passes of 4-bit weight digits", 3, 25),
    ] {
        let cfg = narrow(log_inp, log_wgt);
        let c = Compiled::compile(
            bytes.clone(),
            "tiny_cnn.onnx",
            &calib,
            &cfg,
            &FrontendOptions::default(),
        )
        .unwrap();
        let report = c.compile_report();
        assert!(
            report.contains("w8 x i")
                && report.contains("error-feedback rounding over")
                && report.matches(sliced).count() == 2,
            "{cfg}: {report}"
        );
        // The JSON report gives each GEMM layer's widths and passes.
        let json = c.report_json();
        let gemm: Vec<(String, u64)> = json["layers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| Some((l["widths"].as_str()?.to_string(), l["passes"].as_u64()?)))
            .collect();
        assert_eq!(gemm.first().map(|g| g.1), Some(passes), "{json}");
        assert_eq!(gemm.last().map(|g| g.1), Some(passes), "{json}");
        assert!(gemm.first().unwrap().0.starts_with("w8 x "), "{json}");
        assert!(gemm[1..gemm.len() - 1].iter().all(|g| g.1 == 1), "{json}");
        let m = Model::from_bytes(&c.to_bytes().unwrap(), "tiny_cnn.vtab").unwrap();
        let wide: Vec<i32> = m
            .plan
            .layers()
            .filter_map(|l| match l {
                Layer::Conv2d(conv) => conv.weight.iter().map(|&w| i32::from(w).abs()).max(),
                Layer::Dense(d) => d.weight.iter().map(|&w| i32::from(w).abs()).max(),
                _ => None,
            })
            .collect();
        let wmax = (1i32 << ((1 << log_wgt) - 1)) - 1;
        assert_eq!(wide.first(), Some(&127), "{wide:?}");
        assert_eq!(wide.last(), Some(&127), "{wide:?}");
        assert!(
            wide[1..wide.len() - 1].iter().all(|&w| w <= wmax),
            "{wide:?}"
        );
        // Every convolution and dense step runs on the accelerator.
        let on_accel: Vec<usize> = m
            .accel
            .iter()
            .filter(|a| a.launch().is_some())
            .map(|a| a.step)
            .collect();
        for (i, st) in m.plan.steps.iter().enumerate() {
            let kind = st.kind_name();
            if kind == "QConv2d" || kind == "QDense" {
                assert!(
                    on_accel.contains(&i),
                    "{cfg}: step {i} {kind} on the CPU\n{report}"
                );
            }
        }
        let labels = labels();
        let right = run_checked(&m, 30)
            .iter()
            .zip(&labels)
            .filter(|(p, &l)| argmax(p) == l)
            .count();
        assert!(right >= min_right, "{cfg}: {right}/30");
    }
}

/// The default config with other input and weight widths (`log` = log2 of the bits) and
/// as many INP and WGT elements (scratchpads of fewer bytes).
fn narrow(log_inp: u32, log_wgt: u32) -> isa::HwConfig {
    let mut cfg = isa::HwConfig::default();
    (cfg.log_inp_width, cfg.log_wgt_width) = (log_inp, log_wgt);
    cfg.log_inp_buff_size -= 3 - log_inp;
    cfg.log_wgt_buff_size -= 3 - log_wgt;
    cfg.validate().unwrap();
    cfg
}

/// Post-training quantization to a core's narrower widths: the convolutions and the dense
/// layer run on the accelerator with weights (and activations) packed at those widths,
/// bit-exact with the integer reference; layers reading activations through 8-bit ACC
/// loads run on the CPU when activations are narrower. The weights of every accelerator
/// layer fit the lanes, and so does every activation that crosses the host boundary. (All
/// layers narrow: `keep_ends_8bit` off.)
#[test]
fn low_bit_configs_run_convolutions_on_the_accelerator_bit_exact() {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join("tiny_cnn.onnx")).unwrap();
    let labels = labels();
    for (log_inp, log_wgt, min_accel) in [(3, 2, 8), (3, 1, 8), (2, 2, 4), (1, 2, 4), (2, 1, 4)] {
        let cfg = narrow(log_inp, log_wgt);
        let opts = FrontendOptions {
            keep_ends_8bit: false,
            ..FrontendOptions::default()
        };
        let c = Compiled::compile(bytes.clone(), "tiny_cnn.onnx", &calib, &cfg, &opts).unwrap();
        let report = c.compile_report();
        let m = Model::from_bytes(&c.to_bytes().unwrap(), "tiny_cnn.vtab").unwrap();
        let wmax = (1i32 << ((1 << log_wgt) - 1)) - 1;
        let amax = (1i32 << ((1 << log_inp) - 1)) - 1;
        for l in m.plan.layers() {
            if let Layer::Conv2d(conv) = l {
                assert!(
                    conv.weight.iter().all(|&w| i32::from(w).abs() <= wmax),
                    "{}",
                    conv.name
                );
                assert!(i32::from(conv.requant.hi) <= amax, "{}", conv.name);
            }
        }
        let kinds: Vec<String> = m
            .accel
            .iter()
            .filter(|a| a.launch().is_some())
            .map(|a| m.plan.steps[a.step].kind_name())
            .collect();
        assert!(kinds.len() >= min_accel, "{cfg}: {kinds:?}\n{report}");
        assert!(
            kinds.iter().any(|k| k == "QDense"),
            "{cfg}: {kinds:?}\n{report}"
        );
        let scores = run_checked(&m, 30);
        let right = scores
            .iter()
            .zip(&labels)
            .filter(|(p, &l)| argmax(p) == l)
            .count();
        println!(
            "tiny CNN {cfg}: {} layers on the accelerator, {right}/30 right",
            kinds.len()
        );
    }
}
