//! Shared helpers: the cache directory, model building with timing, the PRNG.

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

/// The toolkit's seeded generator: stimulus is reproducible from the seed in a failure.
pub use isa::rng::Rng;
