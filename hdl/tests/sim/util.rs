//! Shared helpers: the cache directory, model building with timing, a small PRNG.

use std::path::PathBuf;
use std::time::Instant;

use hdl::verilator::Model;
use hdl::{Design, Module};

/// The cache shared by all simulation tests of this crate.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hdl-cache")
}

/// Builds (or loads from the cache) a model of `top`, printing each stage with its time.
pub fn build(top: Module) -> Model {
    let name = top.name().to_string();
    let design = Design::new(top);
    // Every simulated design also passes the lint gate.
    let lint_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("hdl-sim-lint")
        .join(&name);
    if let Err(e) = hdl::verilator::lint(&design, &lint_dir) {
        panic!("`{name}` is not lint clean:\n{e}");
    }
    let start = Instant::now();
    let mut last = start;
    let mut progress = |stage: &str| {
        let now = Instant::now();
        eprintln!(
            "[{name}] {stage} (+{:.2}s)",
            now.duration_since(last).as_secs_f64()
        );
        last = now;
    };
    let model = match Model::build(&design, &cache_dir(), &mut progress) {
        Ok(m) => m,
        Err(e) => panic!("building the Verilator model of `{name}` failed: {e}"),
    };
    eprintln!("[{name}] ready in {:.2}s", start.elapsed().as_secs_f64());
    model
}

/// xorshift64*: deterministic, seedable, good enough for stimulus.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability `p_percent` / 100.
    pub fn chance(&mut self, p_percent: u64) -> bool {
        self.below(100) < p_percent
    }
    pub fn bits(&mut self, width: u32) -> u64 {
        if width >= 64 {
            self.next()
        } else {
            self.next() & ((1u64 << width) - 1)
        }
    }
}
