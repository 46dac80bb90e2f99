//! The tiler: every tiling it may choose is exact, its cost model predicts the traffic the
//! simulator measures, and its choices keep data resident when it fits.

#[path = "backend_util.rs"]
mod util;

use compiler::backend::tiling::{self, Budget, ConvGeom};
use compiler::backend::{self, LayerProgram, LoopOrder, NetBuilder, Tiling};
use compiler::qlayer::{QConv2d, QDense, Requant};
use isa::{AluOp, HwConfig, Insn, MemType};
use util::{assert_same, config, requant, run, ConvSpec, Draw, Rng};

fn geom(cfg: &HwConfig, layer: &QConv2d) -> ConvGeom {
    NetBuilder::plan_conv(cfg, layer, None).unwrap().1
}

/// Every `step`-th feasible tiling of the search space, plus the last one.
fn sample(cfg: &HwConfig, g: &ConvGeom, want: usize) -> Vec<Tiling> {
    let b = Budget::new(cfg);
    let all: Vec<Tiling> = tiling::search_space(g)
        .into_iter()
        .filter(|t| tiling::estimate(&b, g, t).is_some())
        .collect();
    let step = (all.len() / want).max(1);
    let mut v: Vec<Tiling> = all.iter().step_by(step).copied().collect();
    v.extend(all.last());
    v
}

/// Compiles `layer` with tiling `t`, runs it (checking races) and checks it against the
/// reference and, with `exact_estimate`, its traffic against the cost model's; returns the
/// program.
fn run_tiled(
    cfg: &HwConfig,
    layer: &QConv2d,
    t: Tiling,
    seed: u64,
    exact_estimate: bool,
) -> LayerProgram {
    let mut net = NetBuilder::new(cfg).unwrap();
    let x = net.input("x", layer.input_shape);
    let y = net.conv_tiled(layer, x, t).unwrap();
    let lp = net.finish(&[y]).unwrap();
    let xv = Rng::new(seed).act(layer.input_shape, -128, 127);
    let (out, report) = run(cfg, &lp, &[xv.view()]);
    assert_same(
        &out[0],
        &layer.reference(xv.view()),
        &format!("{cfg} {} {t:?}", layer.name),
    );
    if exact_estimate {
        let e = lp.layers[0].estimate.unwrap();
        for (what, want) in [
            ("inp_load_bytes", e.inp_bytes),
            ("wgt_load_bytes", e.wgt_bytes),
            ("acc_load_bytes", e.acc_bytes),
            ("out_store_bytes", e.out_bytes),
        ] {
            assert_eq!(
                report.get(what),
                Some(want),
                "{cfg} {} {t:?}: {what}",
                layer.name
            );
        }
    }
    lp
}

#[test]
fn sampled_tilings_are_exact_and_predicted() {
    let cases = [
        ("small", ConvSpec::new(1, 12, 9, 12, 3, 1, 1), true),
        (
            "small",
            ConvSpec::new(2, 8, 10, 8, 1, 2, 0).per_channel(),
            true,
        ),
        ("default", ConvSpec::new(1, 40, 9, 36, 3, 2, 1), true),
        ("rect", ConvSpec::new(3, 20, 5, 20, 3, 1, 2), true),
        (
            "batched",
            ConvSpec::new(5, 16, 7, 16, 3, 2, 1).groups(2),
            false,
        ),
        (
            "default",
            ConvSpec::new(1, 48, 6, 48, 3, 1, 1).groups(48),
            false,
        ),
    ];
    for (i, (cfg_name, spec, exact)) in cases.into_iter().enumerate() {
        let cfg = config(cfg_name);
        let layer = spec.build(&mut Rng::new(400 + i as u64), &format!("case{i}"));
        let g = geom(&cfg, &layer);
        for (k, t) in sample(&cfg, &g, 14).into_iter().enumerate() {
            run_tiled(&cfg, &layer, t, (i * 100 + k) as u64, exact);
        }
    }
}

#[test]
fn dense_tilings_over_the_batch_are_exact() {
    let cfg = config("default");
    let mut rng = Rng::new(3);
    let d = QDense {
        name: "fc".into(),
        weight: rng.mat(40, 48, -128, 127),
        bias: (0..40).map(|_| rng.range(-99, 99)).collect(),
        requant: requant(&mut rng, 40, true, 74.0 * 74.0 * 7.0, false),
    };
    let layer = backend::dense_as_conv(&d, 37);
    let g = geom(&cfg, &layer);
    assert!(g.pixel);
    for (k, t) in sample(&cfg, &g, 10).into_iter().enumerate() {
        run_tiled(&cfg, &layer, t, 50 + k as u64, true);
    }
}

fn resnet(i: usize) -> QConv2d {
    let s = [
        ConvSpec::new(1, 64, 56, 64, 3, 1, 1),
        ConvSpec::new(1, 512, 7, 512, 3, 1, 1),
        ConvSpec::new(1, 64, 56, 128, 1, 2, 0),
    ][i];
    s.relu().build(&mut Rng::new(i as u64), "resnet")
}

#[test]
fn resident_weights_and_inputs_are_loaded_once() {
    let cfg = config("default");
    // C11: 2.25 MiB of weights streamed once; the small 7x7 input is what gets re-read,
    // once per tile (the 512 output channels' accumulators take several).
    let c11 = resnet(1);
    let (_, g, _, e) = NetBuilder::plan_conv(&cfg, &c11, None).unwrap();
    assert_eq!(e.wgt_bytes as usize, g.wl.tiles * 256);
    assert!(e.tiles <= 4, "{e:?}");
    assert!(e.inp_bytes <= e.tiles * 512 * 7 * 7, "{e:?}");
    // C2: all weights fit half of WGT, so they are fetched once.
    let c2 = resnet(0);
    let (_, g, t, e) = NetBuilder::plan_conv(&cfg, &c2, None).unwrap();
    assert_eq!(e.wgt_bytes as usize, g.wl.tiles * 256);
    assert_eq!(t.tco, 4, "every output channel in one tile");
    // Input traffic is the input plus the halos of the row bands only.
    assert!(e.inp_bytes < 56 * 56 * 64 * 13 / 10, "{e:?}");
}

#[test]
fn a_resident_tiling_loads_each_chunk_once_and_runs_its_loads_ahead() {
    // ResNet-18's layer3 downsample (1x1, stride 2): its input's used columns and its
    // weights fit INP and WGT whole, so small channel tiles keep both resident.
    let cfg = config("default");
    let layer = ConvSpec::new(1, 128, 28, 256, 1, 2, 0)
        .per_channel()
        .relu()
        .build(&mut Rng::new(5), "ds");
    let (_, g, t, e) = NetBuilder::plan_conv(&cfg, &layer, None).unwrap();
    assert!(t.resident && t.col_skip && t.tco < g.cob, "{t:?}");
    assert_eq!(e.inp_bytes, 14 * 14 * 128, "every used input element once");
    assert_eq!(e.wgt_bytes, 256 * 128, "every weight once");
    let lp = run_tiled(&cfg, &layer, t, 7, true);
    // No load waits for the compute module within the layer: no place is overwritten.
    let waits = lp
        .program
        .insns
        .iter()
        .filter(|i| {
            matches!(i, Insn::Load(m) if m.memory_type != MemType::Acc) && i.deps().pop_next
        })
        .count();
    assert_eq!(waits, 0);
}

#[test]
fn tapered_channel_tiles_halve_down_to_an_eighth_of_the_first() {
    let t = |tco| Tiling {
        tn: 1,
        th: 7,
        tw: 7,
        tco,
        tci: 2,
        order: LoopOrder::CoOuter,
        col_skip: false,
        resident: true,
        taper: true,
    };
    let sizes = |cob, tco| -> Vec<usize> {
        let s = tiling::co_splits(cob, &t(tco));
        let mut at = 0;
        for &(ob0, len) in &s {
            assert_eq!(ob0, at, "contiguous");
            at += len;
        }
        assert_eq!(at, cob, "every block once");
        s.into_iter().map(|(_, len)| len).collect()
    };
    assert_eq!(sizes(32, 14), [14, 7, 4, 2, 2, 2, 1]);
    assert_eq!(sizes(32, 16), [16, 8, 4, 2, 2]);
    assert_eq!(sizes(32, 32), [32]);
    assert_eq!(sizes(5, 4), [4, 1]);
    assert_eq!(sizes(64, 24), [24, 12, 6, 3, 3, 3, 3, 3, 3, 3, 1]);
}

#[test]
fn a_tapered_tiling_is_exact_and_its_model_counts_what_it_emits() {
    // ResNet-18's layer4 downsample (1x1, stride 2, 256 -> 512 channels on 7x7), which the
    // tiler runs tapered in ResNet-18 (channel tiles of 11, 6, 3, 2, ... blocks): its first
    // channel tile needs the whole input, and the GEMMs of a large first tile hide the
    // input's arrival; the small last ones leave a short epilogue and store.
    let cfg = config("default");
    let layer = ConvSpec::new(1, 256, 14, 512, 1, 2, 0).build(&mut Rng::new(6), "ds4");
    let g = geom(&cfg, &layer);
    let t = Tiling {
        tn: 1,
        th: 7,
        tw: 7,
        tco: 11,
        tci: 2,
        order: LoopOrder::CoOuter,
        col_skip: false,
        resident: true,
        taper: true,
    };
    let e = tiling::estimate(&Budget::new(&cfg), &g, &t).expect("feasible");
    assert_eq!(e.wgt_bytes, 256 * 512, "every weight once");
    let lp = run_tiled(&cfg, &layer, t, 4, true);
    // The cost model puts each tile's reset on the pipeline the emission does.
    let xv = Rng::new(4).act(layer.input_shape, -128, 127);
    let (_, report) = run(&cfg, &lp, &[xv.view()]);
    let est = lp.layers[0].estimate.unwrap();
    assert_eq!(est.tiles as usize, tiling::co_splits(g.cob, &t).len());
    assert_eq!(report.get("reset_uops"), Some(est.reset_uops));
    assert_eq!(report.get("alu_uops"), Some(est.alu_uops));
}

#[test]
fn the_choice_is_the_cheapest_feasible_tiling() {
    for cfg_name in ["default", "small"] {
        let cfg = config(cfg_name);
        for i in 0..3 {
            let layer = resnet(i);
            let g = geom(&cfg, &layer);
            let b = Budget::new(&cfg);
            let (t, e) = tiling::choose(&cfg, "x", &g).unwrap();
            let best = tiling::search_space(&g)
                .iter()
                .filter_map(|t| tiling::estimate(&b, &g, t))
                .map(|e| e.score)
                .fold(f64::INFINITY, f64::min);
            assert_eq!(e.score, best, "{cfg_name} {t:?}");
            // the chosen tiles fit half of each scratchpad
            assert!(t.tci * g.in_rows(t.th) * g.in_cols(t.tw, t.col_skip) <= b.inp_half);
            assert!(t.tco * t.tci.min(g.cib) * g.kh * g.kw <= b.wgt_half);
            assert!(t.tco * t.th * t.tw <= b.acc_half);
        }
    }
}

#[test]
fn small_scratchpads_split_the_reduction_and_stream_weights() {
    let cfg = config("small");
    let c2 = resnet(0);
    let (_, g, t, e) = NetBuilder::plan_conv(&cfg, &c2, None).unwrap();
    // 16 x 16 x 9 weight tiles cannot stay in a 128-tile half: several chunks per tile
    assert!(t.tci < g.cib || t.tco < g.cob, "{t:?}");
    assert!(e.wgt_bytes as usize > g.wl.tiles * 16);
}

#[test]
fn dense_layers_fetch_weights_once_per_batch_tile() {
    let cfg = config("default");
    let mut rng = Rng::new(8);
    let d = QDense {
        name: "fc".into(),
        weight: rng.mat(256, 512, -128, 127),
        bias: vec![0; 256],
        requant: requant(&mut rng, 256, false, 1e5, false),
    };
    let layer = backend::dense_as_conv(&d, 64);
    let (_, g, t, e) = NetBuilder::plan_conv(&cfg, &layer, None).unwrap();
    assert!(t.tn > 1, "{t:?}");
    assert_eq!(
        e.wgt_bytes as usize,
        g.wl.tiles * 256 * g.nb.div_ceil(t.tn),
        "{t:?}"
    );
    assert!(g.nb.div_ceil(t.tn) <= 2, "{t:?}");
}

#[test]
fn loop_order_decides_what_stays_resident() {
    // Many output-channel tiles and one chunk: spatial-outer keeps the input, co-outer the
    // weights.
    let cfg = config("default");
    let layer = ConvSpec::new(1, 16, 16, 64, 3, 1, 1).build(&mut Rng::new(1), "order");
    let g = geom(&cfg, &layer);
    let b = Budget::new(&cfg);
    let mk = |order| Tiling {
        tn: 1,
        th: 4,
        tw: 16,
        tco: 1,
        tci: 1,
        order,
        col_skip: false,
        resident: false,
        taper: false,
    };
    let co = tiling::estimate(&b, &g, &mk(LoopOrder::CoOuter)).unwrap();
    let sp = tiling::estimate(&b, &g, &mk(LoopOrder::SpatialOuter)).unwrap();
    assert!(
        co.wgt_bytes < sp.wgt_bytes && co.inp_bytes > sp.inp_bytes,
        "{co:?} {sp:?}"
    );
    run_tiled(&cfg, &layer, mk(LoopOrder::CoOuter), 1, true);
    run_tiled(&cfg, &layer, mk(LoopOrder::SpatialOuter), 2, true);
}

#[test]
fn kernels_are_registered_once_and_stay_resident() {
    let cfg = config("default");
    let layer = resnet(0);
    let lp = backend::compile_conv(&cfg, &layer).unwrap();
    let uop_loads: Vec<u64> = lp
        .program
        .insns
        .iter()
        .filter_map(|i| match i {
            Insn::Load(m) if m.memory_type == MemType::Uop && m.x_size > 0 => {
                Some(u64::from(m.x_size))
            }
            _ => None,
        })
        .collect();
    let kernel_uops = lp
        .program
        .segments
        .iter()
        .find(|s| s.name == "uops")
        .map_or(0, |s| s.shape.iter().product::<usize>() as u64);
    let uses = lp
        .program
        .insns
        .iter()
        .filter(|i| matches!(i, Insn::Gemm(_) | Insn::Alu(_)))
        .count();
    let info = &lp.layers[0];
    // Each kernel loaded once (a LOAD UOP may bring several).
    assert_eq!(uop_loads.iter().sum::<u64>(), kernel_uops, "{uop_loads:?}");
    assert!(uop_loads.len() <= info.kernels);
    assert!(
        info.kernels <= 12 && uses >= 10 * info.kernels,
        "{} kernels for {uses} GEMM/ALU instructions",
        info.kernels
    );
    // the micro-op segment holds each kernel once, and every kernel is distinct
    let loaded: usize = lp
        .program
        .insns
        .iter()
        .filter_map(|i| match i {
            Insn::Load(m) if m.memory_type == MemType::Uop => Some(m.x_size as usize),
            _ => None,
        })
        .sum();
    assert_eq!(lp.program.segment("uops").unwrap().len(), loaded);
}

#[test]
fn span_and_split_helpers() {
    assert_eq!(tiling::valid_span(-2, 6, 1, 3), (2, 5));
    assert_eq!(tiling::valid_span(-3, 4, 2, 5), (2, 4));
    assert_eq!(tiling::valid_span(5, 4, 1, 5), (0, 0));
    assert_eq!(tiling::valid_span(-20, 4, 1, 5), (4, 4));
    assert_eq!(tiling::candidates(7), vec![7, 4, 3, 2, 1]);
    assert_eq!(
        tiling::splits(10, 4).collect::<Vec<_>>(),
        vec![(0, 4), (4, 4), (8, 2)]
    );
}

/// Random layers under random feasible tilings: exact, and for `groups == 1` the cost
/// model's traffic prediction equals the simulator's counters.
#[test]
fn random_layers_under_random_tilings() {
    for cfg_name in util::CONFIGS {
        let cfg = config(cfg_name);
        for seed in 0..20u64 {
            let mut rng = Rng::new(0xABC + seed);
            let r = |rng: &mut Rng, lo: usize, hi: usize| rng.range(lo as i64, hi as i64) as usize;
            let (kh, kw) = (r(&mut rng, 1, 4), r(&mut rng, 1, 4));
            let pad = [0; 4].map(|_| r(&mut rng, 0, 2));
            let h = r(&mut rng, kh.saturating_sub(pad[0] + pad[2]).max(1), 10);
            let w = r(&mut rng, kw.saturating_sub(pad[1] + pad[3]).max(1), 10);
            let groups = [1, 1, 2][r(&mut rng, 0, 2)];
            let (cg, og) = (r(&mut rng, 1, 24), r(&mut rng, 1, 24));
            let spec = ConvSpec {
                n: r(&mut rng, 1, 5),
                c: cg * groups,
                h,
                w,
                o: og * groups,
                k: (kh, kw),
                stride: (r(&mut rng, 1, 3), r(&mut rng, 1, 3)),
                pad,
                groups,
                per_channel: rng.coin(),
                relu: rng.coin(),
            };
            let layer = spec.build(&mut rng, &format!("rand{seed}"));
            let g = geom(&cfg, &layer);
            let b = Budget::new(&cfg);
            let all: Vec<Tiling> = tiling::search_space(&g)
                .into_iter()
                .filter(|t| tiling::estimate(&b, &g, t).is_some())
                .collect();
            for k in 0..2 {
                let t = all[r(&mut rng, 0, all.len() - 1)];
                run_tiled(&cfg, &layer, t, seed * 10 + k, groups == 1);
            }
        }
    }
}

#[test]
fn a_tiles_reset_runs_on_the_alu_beside_the_chunks_of_the_tile_before() {
    assert_eq!(tiling::early_reset(&[100, 100, 100], 150, 50), Some(1));
    assert_eq!(tiling::early_reset(&[100, 100], 0, 100), Some(0));
    assert_eq!(
        tiling::early_reset(&[100, 100], 0, 101),
        None,
        "too short a last chunk"
    );
    assert_eq!(
        tiling::early_reset(&[100, 100, 100], 201, 0),
        None,
        "drained too late"
    );
    assert_eq!(tiling::early_reset(&[300], 0, 0), None, "a single chunk");
    let mut no_mul = config("default");
    no_mul.alu_mul = false;
    for (cfg, first_op) in [(config("default"), AluOp::Mul), (no_mul, AluOp::Min)] {
        // 4 tiles (2 channel tiles x 2 row bands) of 4 chunks, each chunk 9 GEMM micro-ops
        // per accumulator row: every reset but the first runs early.
        let mut layer = ConvSpec::new(1, 64, 8, 32, 3, 1, 1).build(&mut Rng::new(7), "early");
        layer.requant = Requant {
            pre_shift: 0,
            acc_clamp: None,
            mul: vec![1],
            shift: 8,
            zero_point: 0,
            lo: 0,
            hi: 127,
        };
        let t = Tiling {
            tn: 1,
            th: 4,
            tw: 8,
            tco: 1,
            tci: 1,
            order: LoopOrder::CoOuter,
            col_skip: false,
            resident: false,
            taper: false,
        };
        let lp = run_tiled(&cfg, &layer, t, 11, true);
        let resets = lp
            .program
            .insns
            .iter()
            .filter(|i| matches!(i, Insn::Gemm(g) if g.lp.reset_reg))
            .count();
        // The epilogue's clamp has a MAX 0 too, never a MIN 0 or a MUL 0.
        let zeroing = lp
            .program
            .insns
            .iter()
            .filter(|i| matches!(i, Insn::Alu(a) if a.op == first_op && a.use_imm && a.imm == 0))
            .count();
        assert_eq!((resets, zeroing), (1, 3), "{cfg}");
        let e = lp.layers[0].estimate.unwrap();
        assert_eq!(e.reset_uops, 32, "{cfg}: the first tile's rows");
    }
    // Two tiles, the second one smaller (rows 4 + 3): only it resets early, and the cost
    // model counts its rows, not a full tile's.
    let cfg = config("default");
    let layer = ConvSpec::new(1, 64, 7, 16, 3, 1, 1)
        .relu()
        .build(&mut Rng::new(8), "partial");
    let t = Tiling {
        tn: 1,
        th: 4,
        tw: 7,
        tco: 1,
        tci: 1,
        order: LoopOrder::CoOuter,
        col_skip: false,
        resident: false,
        taper: false,
    };
    let mut net = NetBuilder::new(&cfg).unwrap();
    let x = net.input("x", layer.input_shape);
    let y = net.conv_tiled(&layer, x, t).unwrap();
    let lp = net.finish(&[y]).unwrap();
    let xv = Rng::new(9).act(layer.input_shape, -128, 127);
    let (out, report) = run(&cfg, &lp, &[xv.view()]);
    assert_same(&out[0], &layer.reference(xv.view()), "partial second tile");
    let e = lp.layers[0].estimate.unwrap();
    assert_eq!((e.tiles, e.reset_uops), (2, 28));
    assert_eq!(report.get("alu_uops"), Some(e.alu_uops));
}
