//! A sweep of the digits CNN end to end through the library, with a test estimator (so no
//! yosys): every config evaluated, the invalid ones skipped with their reason, the front,
//! the outputs, and a second run that takes everything from the cache.

use std::sync::atomic::{AtomicUsize, Ordering};

use dse::cache::Cache;
use dse::explore::{explore, Estimate, Exploration, Observer, Options};
use dse::measure::CycleSource;
use dse::network::{Network, NetworkSpec};
use dse::resources::{Estimator, Target};
use dse::sweep::{expand, Axes, Param};
use dse::Error;
use isa::HwConfig;
use serde_json::{json, Value};

/// Resource counts from a formula of the GEMM shape: test figures, not synthesis.
struct TestEstimator {
    calls: AtomicUsize,
}

impl Estimator for TestEstimator {
    fn tool(&self) -> String {
        "test estimator".into()
    }
    fn cache_key(&self, rtl_hash: &str) -> String {
        format!("fit/{rtl_hash}-test.json")
    }
    fn synthesize(
        &self,
        g: &vta_hw::Generated,
        _progress: &mut dyn FnMut(&str),
    ) -> Result<Value, Error> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let macs = g.config.macs_per_uop();
        Ok(json!({
            "tool": "test estimator (formula)",
            "luts": 5000 + 60 * macs,
            "ffs": 4000 + 40 * macs,
            "dsps": macs / 2,
            "bram36": dse::resources::scratchpad_bram36(&g.config),
            "urams": 0,
        }))
    }
}

/// Counts what the exploration reports.
#[derive(Default)]
struct Counts {
    planned_work: AtomicUsize,
    planned_cached: AtomicUsize,
    worked: AtomicUsize,
}

impl Observer for Counts {
    fn planned(&self, _phase: &str, work: usize, cached: usize) {
        self.planned_work.fetch_add(work, Ordering::Relaxed);
        self.planned_cached.fetch_add(cached, Ordering::Relaxed);
    }
    fn stage(&self, _config: &str, _stage: &str) {}
    fn done(&self, _config: &str, worked: bool) {
        if worked {
            self.worked.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn sweep(
    network: &Network,
    estimator: &TestEstimator,
    cache: &Cache,
    fresh: bool,
) -> (Exploration, Counts) {
    let mut axes = Axes::default();
    // 1x8, 1x16 and 1x32 (whose 512 multipliers overflow the xc7z020's 220 DSPs) with 2048
    // INP rows, 256 WGT tiles and 1024 ACC rows, each on a 64-bit bus and on a 96-bit one
    // that the config validation refuses.
    axes.set(Param::Block, vec![8, 16, 32]).unwrap();
    axes.set(Param::InpDepth, vec![2048]).unwrap();
    axes.set(Param::WgtDepth, vec![256]).unwrap();
    axes.set(Param::AccDepth, vec![1024]).unwrap();
    axes.set(Param::Bus, vec![64, 96]).unwrap();
    let plan = expand(&HwConfig::default(), &axes);
    let target = Target::part("xc7z020").unwrap();
    let opts = Options {
        cycles: CycleSource::Model,
        validate: 0,
        jobs: 2,
        fresh,
        eval: None,
        cache_only: false,
    };
    let counts = Counts::default();
    let x = explore(&plan, network, &target, estimator, cache, &opts, &counts).unwrap();
    (x, counts)
}

#[test]
fn a_sweep_evaluates_skips_marks_the_front_and_resumes_from_its_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(dir.path());
    let network = Network::load(&NetworkSpec::Digits).unwrap();
    let estimator = TestEstimator {
        calls: AtomicUsize::new(0),
    };

    let (x, counts) = sweep(&network, &estimator, &cache, false);
    assert_eq!(x.combinations, 6);
    assert_eq!(x.points.len(), 3);
    assert_eq!(x.skipped.len(), 3);
    assert!(x
        .skipped
        .iter()
        .all(|s| s.reason.contains("AXI_DATA_WIDTH = 96")));
    assert_eq!((x.compiled, x.synthesized), (3, 3));
    assert_eq!(estimator.calls.load(Ordering::Relaxed), 3);
    assert_eq!(counts.planned_work.load(Ordering::Relaxed), 3);
    assert_eq!(counts.worked.load(Ordering::Relaxed), 3);

    let by_shape = |s: &str| {
        x.points
            .iter()
            .find(|p| p.config.config_string().starts_with(s))
            .unwrap()
    };
    let (p8, p16, p32) = (by_shape("1x8_"), by_shape("1x16_"), by_shape("1x32_"));
    let cycles = |p: &dse::explore::Point| p.cycles.as_ref().unwrap().total;
    assert!(cycles(p8) > 1000 && cycles(p16) > 1000 && cycles(p32) > 1000);
    assert!(p8.fits() && p16.fits());
    assert!(!p32.fits());
    assert!(
        p32.misfit.iter().any(|m| m.starts_with("DSP 512 > 220")),
        "{:?}",
        p32.misfit
    );
    // The front: the fitting configs no other fitting one beats in latency, LUT, DSP and BRAM.
    let objectives = |p: &dse::explore::Point| {
        let r = p.resources().unwrap();
        vec![
            p.latency_ms().unwrap(),
            r.luts as f64,
            r.dsps as f64,
            r.bram36,
        ]
    };
    for p in [p8, p16] {
        let beaten = [p8, p16]
            .iter()
            .any(|q| dse::pareto::dominates(&objectives(q), &objectives(p)));
        assert_eq!(p.pareto, !beaten, "{}", p.config);
    }
    assert!(!p32.pareto);
    let best = if p8.latency_ms() <= p16.latency_ms() {
        p8
    } else {
        p16
    };
    assert_eq!(
        x.best().unwrap().config.config_string(),
        best.config.config_string()
    );

    // The outputs.
    let csv = dse::report::csv(&x);
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.starts_with("config,batch,block_in,"), "{csv}");
    assert!(csv.contains("test estimator (formula)"), "{csv}");
    let doc = dse::report::json(&x);
    assert_eq!(doc["skipped"].as_array().unwrap().len(), 3);
    assert_eq!(doc["best"], best.config.config_string());
    let text = dse::report::summary(&x);
    assert!(
        text.contains(
            "skipped 3 invalid combination(s) of block, inp_depth, wgt_depth, acc_depth, bus:"
        ),
        "{text}"
    );
    assert!(
        text.contains("3 x AXI_DATA_WIDTH = 96 is not a power of two"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "best config that fits xc7z020: {}",
            best.config.config_string()
        )),
        "{text}"
    );
    let svg = dse::plot::svg(&x).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("latency vs LUTs"),
        "{}",
        &svg[..200]
    );
    assert!(svg.contains(&format!("best: {}", best.config.config_string())));

    // Again: everything from the cache, no work, the same figures.
    let (again, counts) = sweep(&network, &estimator, &cache, false);
    assert_eq!((again.compiled, again.synthesized), (0, 0));
    assert_eq!(estimator.calls.load(Ordering::Relaxed), 3);
    assert_eq!(counts.planned_work.load(Ordering::Relaxed), 0);
    assert_eq!(counts.planned_cached.load(Ordering::Relaxed), 3);
    assert_eq!(counts.worked.load(Ordering::Relaxed), 0);
    for (a, b) in x.points.iter().zip(&again.points) {
        assert_eq!(
            a.cycles.as_ref().unwrap().total,
            b.cycles.as_ref().unwrap().total
        );
        assert!(b.cycles.as_ref().unwrap().cached);
        assert!(matches!(
            b.estimate,
            Estimate::Synthesized { cached: true, .. }
        ));
        assert_eq!(a.resources(), b.resources());
    }

    // Fresh: all of it again.
    let (fresh, _) = sweep(&network, &estimator, &cache, true);
    assert_eq!((fresh.compiled, fresh.synthesized), (3, 3));
    assert_eq!(estimator.calls.load(Ordering::Relaxed), 6);
}
