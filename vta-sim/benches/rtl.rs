//! `cargo bench -p vta-sim --bench rtl [-- CONFIG]`: the cycle-accurate simulator's speed
//! (simulated cycles per second, one core) and the GEMM core's utilization on VTA's blocked
//! GEMM with one and two virtual threads (`vta_sim::bench::rtl`; `vta bench rtl` prints the
//! same). CONFIG is a preset or a config file (default: `default`).

fn main() {
    let spec = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_else(|| "default".into());
    let result = isa::HwConfig::load(&spec)
        .map_err(|e| e.to_string())
        .and_then(|cfg| {
            let b = vta_sim::bench::rtl::RtlBench::for_config(&cfg);
            vta_sim::bench::rtl::rtl(&cfg, &b, &mut |s| eprintln!("rtl model: {s}"))
                .map_err(|e| e.to_string())
        });
    match result {
        Ok(figures) => println!("{figures}"),
        Err(e) => {
            eprintln!("benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
