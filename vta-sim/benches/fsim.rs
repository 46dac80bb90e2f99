//! `cargo bench -p vta-sim`: functional-simulator throughput on the default config.

use vta_sim::bench::{fsim, BenchSize};

fn main() {
    let cfg = isa::HwConfig::default();
    match fsim(&cfg, BenchSize::default()) {
        Ok(figures) => println!("{figures}"),
        Err(e) => {
            eprintln!("benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
