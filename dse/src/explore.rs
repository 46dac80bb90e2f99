//! Evaluating a sweep: for every config, the network's cycles (compiled for it, then the
//! cycle model or the RTL simulator) and the accelerator's resources (the analytic block-RAM
//! check, then the target's estimator), each from the cache when it is there; whether it
//! fits; the Pareto front of the configs that fit; and, with validation, the cycle model
//! checked against the RTL on the front's configs. Configs run in parallel over `jobs`
//! threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use isa::HwConfig;
use serde_json::{json, Value};
use vta_sim::rtl::MemTiming;

use crate::accuracy::EvalSet;
use crate::cache::{build_id, Cache};
use crate::measure::{self, CycleSource};
use crate::network::Network;
use crate::resources::{rtl_hash, Estimator, Resources, Target};
use crate::sweep::{Plan, Shard, Skipped};
use crate::{pareto, Error};

/// How to explore.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where every config's cycles come from.
    pub cycles: CycleSource,
    /// With the model: how many configs (the front's first) to also run on the RTL simulator,
    /// to report the model's error.
    pub validate: usize,
    /// Configs evaluated at once.
    pub jobs: usize,
    /// Recompute everything, overwriting the cache.
    pub fresh: bool,
    /// Measure each config's top-1 accuracy on this set (on the functional simulator) and
    /// make it an objective of the front.
    pub eval: Option<EvalSet>,
    /// Take every result from the cache and measure nothing: what a merge of shards does. A
    /// result not there is an error naming it ([`NOT_CACHED`]).
    pub cache_only: bool,
}

/// How a result missing from the cache of a `cache_only` exploration is described.
pub const NOT_CACHED: &str = "not in the cache";

/// What an exploration tells its caller as it goes.
pub trait Observer: Sync {
    /// A phase (`evaluating`, `validating on the RTL`) starts: `work` configs to measure,
    /// `cached` more whose results are in the cache.
    fn planned(&self, phase: &str, work: usize, cached: usize);
    /// Config `config` is at `stage` (`compiling`, `synthesizing: ...`).
    fn stage(&self, config: &str, stage: &str);
    /// A config of the phase is done; `worked` when it was not all from the cache.
    fn done(&self, config: &str, worked: bool);
}

/// A network's cycles on one config.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycles {
    pub source: CycleSource,
    /// Accelerator cycles of one inference (all launches).
    pub total: u64,
    pub per_launch: Vec<u64>,
    /// Plan steps on the accelerator and on the CPU.
    pub accel_steps: usize,
    pub cpu_steps: usize,
    /// Accelerator layers the back end refused for this config (they run on the CPU, so
    /// `total` leaves them out).
    pub refused: Vec<String>,
    /// Top-1 accuracy (0..=1) on the evaluation set, when the sweep has one.
    pub accuracy: Option<f64>,
    /// Seconds the measurement took when it was made.
    pub seconds: f64,
    pub cached: bool,
}

/// A config's resources.
#[derive(Debug, Clone, PartialEq)]
pub enum Estimate {
    /// From the estimator; `tool` as its document names it (with the version).
    Synthesized {
        resources: Resources,
        tool: String,
        cached: bool,
    },
    /// The memories alone (the scratchpads; on an open-flow board also the SoC's device
    /// memory) need more block RAM than the part has (not synthesized).
    BramOverflow { bram36: f64 },
    /// The estimator failed.
    Failed(String),
}

/// One config of the sweep, evaluated.
#[derive(Debug, Clone)]
pub struct Point {
    pub config: HwConfig,
    pub cycles: Result<Cycles, String>,
    pub estimate: Estimate,
    /// The RTL simulator's cycles, when validated.
    pub rtl_check: Option<Result<u64, String>>,
    /// Why it does not fit the target (empty when it fits).
    pub misfit: Vec<String>,
    /// On the Pareto front (latency, LUT, DSP, BRAM, and accuracy with an evaluation set)
    /// of the configs that fit.
    pub pareto: bool,
}

impl Point {
    /// Accelerator time of one inference at the config's clock, milliseconds.
    pub fn latency_ms(&self) -> Option<f64> {
        let c = self.cycles.as_ref().ok()?;
        Some(c.total as f64 / f64::from(self.config.clock_mhz) / 1e3)
    }

    /// Top-1 accuracy on the sweep's evaluation set (0..=1).
    pub fn accuracy(&self) -> Option<f64> {
        self.cycles.as_ref().ok()?.accuracy
    }

    pub fn resources(&self) -> Option<&Resources> {
        match &self.estimate {
            Estimate::Synthesized { resources, .. } => Some(resources),
            _ => None,
        }
    }

    /// It fits, and every accelerator layer of the network runs on it: a candidate.
    pub fn fits(&self) -> bool {
        self.misfit.is_empty()
            && self.resources().is_some()
            && self.cycles.as_ref().is_ok_and(|c| c.refused.is_empty())
    }

    /// The cycle model's error against the RTL, percent.
    pub fn model_error(&self) -> Option<f64> {
        let rtl = *self.rtl_check.as_ref()?.as_ref().ok()?;
        let c = self.cycles.as_ref().ok()?;
        (c.source == CycleSource::Model && rtl > 0)
            .then(|| 100.0 * (c.total as f64 - rtl as f64) / rtl as f64)
    }
}

/// A finished exploration.
#[derive(Debug, Clone)]
pub struct Exploration {
    pub network: String,
    pub target: Target,
    /// The estimator's tool.
    pub tool: String,
    pub cycle_source: CycleSource,
    /// The evaluation set's name, when accuracy was measured.
    pub eval: Option<String>,
    /// Combinations of the sweep's axes, valid or not.
    pub combinations: usize,
    pub points: Vec<Point>,
    pub skipped: Vec<Skipped>,
    pub elapsed: Duration,
    /// Work done in this run (the rest came from the cache).
    pub compiled: usize,
    pub synthesized: usize,
    pub rtl_runs: usize,
}

impl Exploration {
    /// The config that fits with the lowest latency (fewest LUTs on a tie).
    pub fn best(&self) -> Option<&Point> {
        self.points.iter().filter(|p| p.fits()).min_by(|a, b| {
            let l = |p: &Point| p.latency_ms().unwrap_or(f64::INFINITY);
            let luts = |p: &Point| p.resources().map_or(u64::MAX, |r| r.luts);
            l(a).total_cmp(&l(b)).then(luts(a).cmp(&luts(b)))
        })
    }

    /// For a merge of `full` run as `count` shards: each config whose results are not in the
    /// cache, with the shard that evaluates it (in the order of the points).
    pub fn not_cached(&self, full: &Plan, count: usize) -> Vec<(&HwConfig, Shard)> {
        self.points
            .iter()
            .filter(|p| {
                p.cycles.as_ref().is_err_and(|e| e.contains(NOT_CACHED))
                    || matches!(&p.estimate, Estimate::Failed(e) if e.contains(NOT_CACHED))
            })
            .map(|p| {
                let k = full
                    .configs
                    .iter()
                    .position(|c| c == &p.config)
                    .expect("a merged point is one of the sweep's configs");
                (
                    &p.config,
                    Shard {
                        index: k % count,
                        count,
                    },
                )
            })
            .collect()
    }

    /// The validated configs' model errors: (mean |error|, max |error|, count).
    pub fn model_error(&self) -> Option<(f64, f64, usize)> {
        let errs: Vec<f64> = self
            .points
            .iter()
            .filter_map(Point::model_error)
            .map(f64::abs)
            .collect();
        (!errs.is_empty()).then(|| {
            (
                errs.iter().sum::<f64>() / errs.len() as f64,
                errs.iter().copied().fold(0.0, f64::max),
                errs.len(),
            )
        })
    }
}

/// The evaluation context shared by the jobs.
struct Context<'a> {
    network: &'a Network,
    target: &'a Target,
    estimator: &'a dyn Estimator,
    cache: &'a Cache,
    opts: &'a Options,
    observer: &'a dyn Observer,
    build: String,
    compiled: AtomicUsize,
    synthesized: AtomicUsize,
    rtl_runs: AtomicUsize,
}

/// Evaluates every config of `plan` for `network` on `target`, its resources from
/// `estimator` (normally [`Target::estimator`]).
pub fn explore(
    plan: &Plan,
    network: &Network,
    target: &Target,
    estimator: &dyn Estimator,
    cache: &Cache,
    opts: &Options,
    observer: &dyn Observer,
) -> Result<Exploration, Error> {
    let start = Instant::now();
    let cx = Context {
        network,
        target,
        estimator,
        cache,
        opts,
        observer,
        build: build_id(),
        compiled: AtomicUsize::new(0),
        synthesized: AtomicUsize::new(0),
        rtl_runs: AtomicUsize::new(0),
    };
    let cached = if opts.fresh {
        0
    } else {
        plan.configs.iter().filter(|c| cx.is_cached(c)).count()
    };
    observer.planned("evaluating", plan.configs.len() - cached, cached);
    let mut points = parallel(plan.configs.len(), opts.jobs, |i| {
        cx.evaluate(&plan.configs[i])
    });
    mark_front(&mut points);

    if opts.cycles == CycleSource::Model && opts.validate > 0 {
        let chosen = validation_set(&points, opts.validate);
        let cached = chosen
            .iter()
            .filter(|&&i| {
                !opts.fresh
                    && cx
                        .cached_cycles(&points[i].config, CycleSource::Rtl)
                        .is_some()
            })
            .count();
        observer.planned("validating on the RTL", chosen.len() - cached, cached);
        let checks = parallel(chosen.len(), opts.jobs, |k| {
            let cfg = &points[chosen[k]].config;
            let r = cx.cycles(cfg, CycleSource::Rtl);
            observer.done(&cfg.config_string(), r.as_ref().is_ok_and(|c| !c.cached));
            r.map(|c| c.total)
        });
        for (i, check) in chosen.into_iter().zip(checks) {
            points[i].rtl_check = Some(check);
        }
    }
    Ok(Exploration {
        network: network.name.clone(),
        target: target.clone(),
        tool: estimator.tool(),
        cycle_source: opts.cycles,
        eval: opts.eval.as_ref().map(|e| e.name.clone()),
        combinations: plan.combinations,
        points,
        skipped: plan.skipped.clone(),
        elapsed: start.elapsed(),
        compiled: cx.compiled.into_inner(),
        synthesized: cx.synthesized.into_inner(),
        rtl_runs: cx.rtl_runs.into_inner(),
    })
}

/// Marks the Pareto front (latency, LUT, DSP, BRAM36, and accuracy when measured) among the
/// configs that fit.
fn mark_front(points: &mut [Point]) {
    let candidates: Vec<usize> = (0..points.len()).filter(|&i| points[i].fits()).collect();
    let objectives: Vec<Vec<f64>> = candidates
        .iter()
        .map(|&i| {
            let p = &points[i];
            let r = p.resources().expect("a fitting point has resources");
            let mut v = vec![
                p.latency_ms().expect("a fitting point has cycles"),
                r.luts as f64,
                r.dsps as f64,
                r.bram36,
            ];
            // Every objective is minimized: higher accuracy is a lower error.
            v.extend(p.accuracy().map(|a| 1.0 - a));
            v
        })
        .collect();
    for (on, i) in pareto::front(&objectives).into_iter().zip(candidates) {
        points[i].pareto = on;
    }
}

/// The configs to run on the RTL: the front's, fastest first, then the other configs that
/// fit.
fn validation_set(points: &[Point], n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].cycles.is_ok())
        .collect();
    let key = |i: usize| {
        let p = &points[i];
        (!p.pareto, !p.fits())
    };
    order.sort_by(|&a, &b| {
        key(a).cmp(&key(b)).then(
            points[a]
                .latency_ms()
                .unwrap_or(f64::INFINITY)
                .total_cmp(&points[b].latency_ms().unwrap_or(f64::INFINITY)),
        )
    });
    order.truncate(n);
    order
}

impl Context<'_> {
    fn evaluate(&self, cfg: &HwConfig) -> Point {
        let name = cfg.config_string();
        let cycles = self.cycles(cfg, self.opts.cycles);
        let estimate = self.estimate(cfg);
        let worked = cycles.as_ref().is_ok_and(|c| !c.cached)
            || matches!(estimate, Estimate::Synthesized { cached: false, .. });
        self.observer.done(&name, worked);
        let mut misfit = Vec::new();
        match &estimate {
            Estimate::Synthesized { resources, .. } => {
                misfit.extend(resources.overflows(&self.target.capacity));
                misfit.extend(Target::timing_problem(cfg, resources));
            }
            Estimate::BramOverflow { bram36 } => misfit.push(format!(
                "BRAM36 {bram36} > {} (memories alone)",
                self.target.capacity.bram36
            )),
            Estimate::Failed(e) => misfit.push(format!("no estimate: {e}")),
        }
        misfit.extend(self.target.clock_problem(cfg));
        Point {
            config: cfg.clone(),
            cycles,
            estimate,
            rtl_check: None,
            misfit,
            pareto: false,
        }
    }

    /// Whether both of `cfg`'s results (or its compile failure) are in the cache.
    fn is_cached(&self, cfg: &HwConfig) -> bool {
        let key = self.cycles_key(cfg, self.opts.cycles);
        self.result_at(&key, self.opts.cycles).is_some()
            && (self.target.memory_bram36(cfg) > self.target.capacity.bram36
                || vta_hw::generate(cfg)
                    .ok()
                    .and_then(|g| {
                        self.cache
                            .get(&self.estimator.cache_key(&rtl_hash(&g.verilog)))
                    })
                    .is_some())
    }

    fn cycles_key(&self, cfg: &HwConfig, source: CycleSource) -> String {
        let mem = self.target.mem_timing(cfg);
        let identity = format!(
            "{}|{}|{}|{:?}|{}|{}",
            self.network.hash,
            cfg.to_json(),
            source.name(),
            mem,
            self.build,
            self.opts.eval.as_ref().map_or("", |e| e.hash.as_str())
        );
        format!(
            "dse/cycles/{}-{:016x}.json",
            self.network.name,
            isa::container::fnv1a(identity.as_bytes())
        )
    }

    fn cached_cycles(&self, cfg: &HwConfig, source: CycleSource) -> Option<Cycles> {
        self.cycles_at(&self.cycles_key(cfg, source), source)
    }

    /// The RTL's cycles are a function of the programs, the hardware and the memory timing
    /// alone: this second key lets another build of the toolkit that compiles the same
    /// programs for the same Verilog reuse them (RTL runs are what a sweep avoids most).
    fn rtl_key(&self, model: &compiler::compile::Compiled, mem: &MemTiming) -> Option<String> {
        let programs = model.to_bytes().ok()?;
        let verilog = vta_hw::generate(&model.config).ok()?.verilog;
        let mut identity = programs;
        identity.extend(format!("|{}|{mem:?}", rtl_hash(&verilog)).bytes());
        Some(format!(
            "dse/rtl/{}-{:016x}.json",
            self.network.name,
            isa::container::fnv1a(&identity)
        ))
    }

    /// The cycle record at cache entry `key`.
    fn cycles_at(&self, key: &str, source: CycleSource) -> Option<Cycles> {
        cycles_from(&self.cache.get(key)?, source)
    }

    /// The cycle record or the compile failure at cache entry `key` (read once): a config
    /// the back end refuses is refused again by the same build, and a merge of shards must
    /// see that it was tried.
    fn result_at(&self, key: &str, source: CycleSource) -> Option<Result<Cycles, String>> {
        let v = self.cache.get(key)?;
        match v["failed"].as_str() {
            Some(e) => Some(Err(e.to_string())),
            None => cycles_from(&v, source).map(Ok),
        }
    }

    /// Writes `c` to the cache entries `keys`. A cache that cannot be written costs the next
    /// run this work again, nothing more.
    fn store(&self, keys: &[&str], cfg: &HwConfig, c: &Cycles) {
        let record = json!({
            "network": self.network.name,
            "config_string": cfg.config_string(),
            "source": c.source.name(),
            "cycles": c.total,
            "per_launch": c.per_launch,
            "accel_steps": c.accel_steps,
            "cpu_steps": c.cpu_steps,
            "refused": c.refused,
            "accuracy": c.accuracy,
            "seconds": c.seconds,
        });
        for key in keys {
            let _ = self.cache.put(key, &record);
        }
    }

    /// The network's cycles on `cfg` from `source`, cached.
    fn cycles(&self, cfg: &HwConfig, source: CycleSource) -> Result<Cycles, String> {
        let key = self.cycles_key(cfg, source);
        if !self.opts.fresh {
            if let Some(r) = self.result_at(&key, source) {
                return r;
            }
        }
        if self.opts.cache_only {
            return Err(format!("cycles {NOT_CACHED}"));
        }
        let name = cfg.config_string();
        let t = Instant::now();
        self.observer.stage(&name, "compiling");
        let model = self.network.compile(cfg).map_err(|e| {
            let e = e.to_string();
            let record = json!({
                "network": self.network.name,
                "config_string": name,
                "failed": e,
            });
            let _ = self.cache.put(&key, &record);
            e
        })?;
        self.compiled.fetch_add(1, Ordering::Relaxed);
        let mem = self.target.mem_timing(cfg);
        let rtl_key = match source {
            CycleSource::Rtl => self.rtl_key(&model, &mem),
            CycleSource::Model => None,
        };
        let accuracy = match &self.opts.eval {
            Some(set) => {
                self.observer.stage(&name, "accuracy");
                Some(set.top1(&model.model)?)
            }
            None => None,
        };
        if let (Some(k), false) = (&rtl_key, self.opts.fresh) {
            if let Some(mut c) = self.cycles_at(k, source) {
                // The RTL record is shared by sweeps with and without an evaluation set.
                c.accuracy = accuracy;
                self.store(&[&key], cfg, &c);
                return Ok(c);
            }
        }
        let per_launch = match source {
            CycleSource::Model => measure::modelled(&model, &mem),
            CycleSource::Rtl => {
                self.observer.stage(&name, "RTL simulation");
                let r = measure::simulated(&model, &mem, &mut |s| {
                    self.observer.stage(&name, &format!("RTL model: {s}"))
                });
                self.rtl_runs.fetch_add(1, Ordering::Relaxed);
                r
            }
        }
        .map_err(|e| e.to_string())?;
        let (accel_steps, cpu_steps) = model.counts();
        let refused: Vec<String> = model
            .steps
            .iter()
            .filter(|s| s.is_refused())
            .map(|s| s.name.clone())
            .collect();
        let c = Cycles {
            source,
            total: per_launch.iter().sum(),
            per_launch,
            accel_steps,
            cpu_steps,
            refused,
            accuracy,
            seconds: t.elapsed().as_secs_f64(),
            cached: false,
        };
        match &rtl_key {
            Some(k) => self.store(&[&key, k], cfg, &c),
            None => self.store(&[&key], cfg, &c),
        }
        Ok(c)
    }

    /// `cfg`'s resources: the block-RAM check, then the cache or the estimator.
    fn estimate(&self, cfg: &HwConfig) -> Estimate {
        let bram36 = self.target.memory_bram36(cfg);
        if bram36 > self.target.capacity.bram36 {
            return Estimate::BramOverflow { bram36 };
        }
        let name = cfg.config_string();
        let g = match vta_hw::generate(cfg) {
            Ok(g) => g,
            Err(e) => return Estimate::Failed(format!("cannot generate the accelerator: {e}")),
        };
        let key = self.estimator.cache_key(&rtl_hash(&g.verilog));
        if !self.opts.fresh {
            if let Some(doc) = self.cache.get(&key) {
                if let Some(resources) = Resources::from_report(&doc) {
                    return Estimate::Synthesized {
                        resources,
                        tool: tool_of(&doc, self.estimator),
                        cached: true,
                    };
                }
            }
        }
        if self.opts.cache_only {
            return Estimate::Failed(format!("resources {NOT_CACHED}"));
        }
        self.observer.stage(&name, "synthesizing");
        let doc = match self.estimator.synthesize(&g, &mut |s| {
            self.observer.stage(&name, &format!("synthesizing: {s}"))
        }) {
            Ok(doc) => doc,
            Err(e) => return Estimate::Failed(e.to_string()),
        };
        self.synthesized.fetch_add(1, Ordering::Relaxed);
        let _ = self.cache.put(&key, &doc);
        match Resources::from_report(&doc) {
            Some(resources) => Estimate::Synthesized {
                resources,
                tool: tool_of(&doc, self.estimator),
                cached: false,
            },
            None => Estimate::Failed("the estimate has no resource counts".into()),
        }
    }
}

/// The tool an estimate document names, else the estimator's.
fn tool_of(doc: &Value, estimator: &dyn Estimator) -> String {
    doc["tool"]
        .as_str()
        .map_or_else(|| estimator.tool(), str::to_string)
}

/// `f(0..n)` over `jobs` threads, results in order.
fn parallel<T: Send>(n: usize, jobs: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                results.lock().expect("no job panicked")[i] = Some(r);
            });
        }
    });
    results
        .into_inner()
        .expect("no job panicked")
        .into_iter()
        .map(|r| r.expect("every item evaluated"))
        .collect()
}

/// A cycle record of the cache, read back.
fn cycles_from(v: &Value, source: CycleSource) -> Option<Cycles> {
    let refused = v["refused"]
        .as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()?;
    Some(Cycles {
        source,
        total: v["cycles"].as_u64()?,
        per_launch: v["per_launch"]
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect::<Option<Vec<_>>>()?,
        accel_steps: v["accel_steps"].as_u64()? as usize,
        cpu_steps: v["cpu_steps"].as_u64()? as usize,
        refused,
        accuracy: v["accuracy"].as_f64(),
        seconds: v["seconds"].as_f64()?,
        cached: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_keeps_the_order_and_uses_every_item_once() {
        let calls = AtomicUsize::new(0);
        let out = parallel(50, 4, |i| {
            calls.fetch_add(1, Ordering::Relaxed);
            i * i
        });
        assert_eq!(out, (0..50).map(|i| i * i).collect::<Vec<_>>());
        assert_eq!(calls.into_inner(), 50);
        assert!(parallel(0, 4, |i| i).is_empty());
    }
}
