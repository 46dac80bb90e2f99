//! Gates on the multi-core design (`vta_hw::multicore`): its Verilog is lint clean with two
//! and three cores and with a wide bus. (Its runs are in vta-sim's `rtl_multicore` tests.)
//!
//! Needs `verilator` (`apt-get install verilator`).

mod common;

use common::work_dir;
use isa::HwConfig;
use vta_hw::multicore;

fn lint(name: &str, cfg: &HwConfig, cores: u32) {
    let g = multicore::generate(cfg, cores).unwrap();
    assert!(g
        .verilog
        .contains(&format!("vta_multicore_{cores}: {cores} VTA-class")));
    if let Err(e) = hdl::verilator::lint(&g.design, &work_dir(name)) {
        panic!("vta_multicore_{cores} ({name}) is not lint clean:\n{e}");
    }
}

#[test]
fn lint_two_cores_of_the_small_preset() {
    lint("multicore-small-2", &HwConfig::preset("small").unwrap(), 2);
}

#[test]
fn lint_three_cores_on_a_wide_bus() {
    lint(
        "multicore-wide-3",
        &HwConfig::preset("wide-bus").unwrap(),
        3,
    );
}
