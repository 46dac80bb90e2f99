//! Several layers in one program, activations kept packed in DRAM between them.

#[path = "backend_util.rs"]
mod util;

use compiler::backend::{self, compile_sequence, BackendError, NetBuilder, QLayer};
use compiler::qlayer::{QAdd, QConv2d, QDense, QGlobalAvgPool, QMaxPool};
use isa::{HwConfig, Insn};
use ndarray::{Array4, Axis};
use util::{assert_same, config, requant, run, ConvSpec, Draw, Rng};

struct Block {
    c1: QConv2d,
    pool: QMaxPool,
    c2: QConv2d,
    c3: QConv2d,
    add: QAdd,
    gap: QGlobalAvgPool,
    fc: QDense,
}

/// A small residual network: conv-relu, max pool, two convs, residual add, global pool, dense.
fn block(n: usize, c: usize, hw: usize, seed: u64) -> Block {
    let mut rng = Rng::new(seed);
    let c1 = ConvSpec::new(n, 3, hw, c, 3, 1, 1)
        .relu()
        .build(&mut rng, "c1");
    let pool = QMaxPool {
        name: "pool".into(),
        kernel: (3, 3),
        stride: (2, 2),
        pad: [1; 4],
    };
    let ph = (hw + 2 - 3) / 2 + 1;
    let c2 = ConvSpec::new(n, c, ph, c, 3, 1, 1)
        .relu()
        .per_channel()
        .build(&mut rng, "c2");
    let c3 = ConvSpec::new(n, c, ph, c, 3, 1, 1).build(&mut rng, "c3");
    let add = QAdd {
        name: "add".into(),
        mul_a: 3,
        mul_b: 5,
        requant: requant(&mut rng, c, false, 128.0 * 8.0, true),
    };
    let gap = QGlobalAvgPool {
        name: "gap".into(),
        requant: requant(&mut rng, c, false, 64.0 * (ph * ph) as f64, false),
    };
    let fc = QDense {
        name: "fc".into(),
        weight: rng.mat(10, c, -128, 127),
        bias: (0..10).map(|_| rng.range(-999, 999)).collect(),
        requant: requant(&mut rng, 10, true, 74.0 * 64.0 * (c as f64).sqrt(), false),
    };
    Block {
        c1,
        pool,
        c2,
        c3,
        add,
        gap,
        fc,
    }
}

impl Block {
    fn layers(&self) -> Vec<QLayer<'_>> {
        vec![
            QLayer::Conv(&self.c1),
            QLayer::MaxPool(&self.pool),
            QLayer::Conv(&self.c2),
            QLayer::Conv(&self.c3),
            QLayer::Add {
                layer: &self.add,
                residual: 2,
            },
            QLayer::GlobalAvgPool(&self.gap),
            QLayer::Dense(&self.fc),
        ]
    }

    fn reference(&self, x: &Array4<i8>) -> Array4<i8> {
        let y1 = self.c1.reference(x.view());
        let y2 = self.pool.reference(y1.view());
        let y3 = self.c2.reference(y2.view());
        let y4 = self.c3.reference(y3.view());
        let y5 = self.add.reference(y4.view(), y2.view());
        let y6 = self.gap.reference(y5.view());
        let flat = y6.index_axis(Axis(3), 0).index_axis(Axis(2), 0).to_owned();
        backend::dense_input(&self.fc.reference(&flat))
    }
}

#[test]
fn a_residual_network_runs_as_one_program() {
    for (cfg_name, n) in [("default", 2), ("batched", 5), ("small", 1)] {
        let cfg = config(cfg_name);
        let net = block(n, 16, 10, 77);
        let x = Rng::new(78).act([n, 3, 10, 10], -128, 127);
        let lp = compile_sequence(&cfg, [n, 3, 10, 10], &net.layers()).unwrap();
        assert_eq!(lp.layers.len(), 7);
        let (out, _) = run(&cfg, &lp, &[x.view()]);
        assert_same(&out[0], &net.reference(&x), &format!("{cfg_name} network"));
        // one program, one FINISH; intermediate tensors are neither inputs nor outputs
        assert_eq!(
            lp.program
                .insns
                .iter()
                .filter(|i| matches!(i, Insn::Finish(_)))
                .count(),
            1
        );
        assert_eq!(
            lp.program.segments.iter().filter(|s| s.role.input).count(),
            1
        );
        assert_eq!(
            lp.program.segments.iter().filter(|s| s.role.output).count(),
            1
        );
    }
}

#[test]
fn a_dag_with_two_outputs() {
    let cfg = config("default");
    let net = block(1, 32, 8, 5);
    let mut b = NetBuilder::new(&cfg).unwrap();
    let x = b.input("x", [1, 3, 8, 8]);
    let y1 = b.conv(&net.c1, x).unwrap();
    let y2 = b.max_pool(&net.pool, y1).unwrap();
    let y3 = b.conv(&net.c2, y2).unwrap();
    let y4 = b.conv(&net.c3, y3).unwrap();
    let y5 = b.add(&net.add, y4, y2).unwrap();
    let lp = b.finish(&[y5, y1]).unwrap();
    let xv = Rng::new(6).act([1, 3, 8, 8], -128, 127);
    let (out, report) = run(&cfg, &lp, &[xv.view()]);
    let r1 = net.c1.reference(xv.view());
    let r2 = net.pool.reference(r1.view());
    let r5 = net.add.reference(
        net.c3.reference(net.c2.reference(r2.view()).view()).view(),
        r2.view(),
    );
    assert_same(&out[0], &r5, "add output");
    assert_same(&out[1], &r1, "first conv output");
    assert!(report.get("gemm_uops").unwrap() > 0);
}

#[test]
fn rectangular_blocks_refuse_to_feed_a_conv_from_the_accelerator() {
    let cfg = config("rect");
    let net = block(2, 16, 8, 9);
    let e = compile_sequence(&cfg, [2, 3, 8, 8], &net.layers()).unwrap_err();
    assert!(
        matches!(e, BackendError::Layout { .. }) && e.to_string().contains("BLOCK_IN"),
        "{e}"
    );
    // ALU layers share the BLOCK_OUT layout, so they chain on any config
    let shape = [2, 16, 8, 8];
    let lp = compile_sequence(
        &cfg,
        shape,
        &[
            QLayer::MaxPool(&net.pool),
            QLayer::Add {
                layer: &net.add,
                residual: 1,
            },
            QLayer::GlobalAvgPool(&net.gap),
        ],
    )
    .unwrap();
    let x = Rng::new(10).act(shape, -128, 127);
    let (out, _) = run(&cfg, &lp, &[x.view()]);
    let p = net.pool.reference(x.view());
    let want = net
        .gap
        .reference(net.add.reference(p.view(), p.view()).view());
    assert_same(&out[0], &want, "rect pool-add-gap");
}

#[test]
fn one_token_per_queue_and_a_wide_bus_still_run() {
    let cfg = HwConfig {
        token_queue_depth: 1,
        ..HwConfig::default()
    };
    let net = block(1, 48, 12, 11);
    let x = Rng::new(12).act([1, 3, 12, 12], -128, 127);
    let lp = compile_sequence(&cfg, [1, 3, 12, 12], &net.layers()).unwrap();
    let (out, _) = run(&cfg, &lp, &[x.view()]);
    assert_same(&out[0], &net.reference(&x), "token depth 1");
    let cfg = config("wide-bus");
    let lp = compile_sequence(&cfg, [1, 3, 12, 12], &net.layers()).unwrap();
    let (out, _) = run(&cfg, &lp, &[x.view()]);
    assert_same(&out[0], &net.reference(&x), "wide bus");
}
