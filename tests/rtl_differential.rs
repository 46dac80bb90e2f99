//! Randomized differential testing of the cycle-accurate RTL simulator against the functional
//! simulator: random valid programs with random token choreography on the five presets and on
//! random configs, each run on both backends with a random memory latency and bandwidth (and,
//! for a quarter of them, random stalls on every AXI channel); outputs must agree byte for
//! byte and counters exactly.
//!
//! The generator, the comparison and the bisection of a mismatch to the first differing STORE
//! are `vta_sim::diff`'s (the library `vta check diff` runs); these tests run its campaigns at
//! fixed sizes and check its mismatch report.
//!
//! Besides the presets, `random_programs_on_random_configs` draws configs at random within the
//! valid ranges and builds each into a Verilator model on demand.
//!
//! `VTA_DIFF_PROGRAMS=N` scales the number of programs per config (default: as below);
//! `VTA_DIFF_CONFIGS=N` sets the number of random configs (default 2); `VTA_DIFF_SEED=S`
//! changes the seeds (of programs and of random configs).

#[path = "support/rtl.rs"]
mod rtl_support;

use drivers::{run_program, RunTimeout};
use isa::{HwConfig, Insn};
use vta_sim::diff::compare::{diagnose, first_diff};
use vta_sim::diff::plant::Planted;
use vta_sim::diff::{campaign, check, Case};
use vta_sim::FsimDevice;

/// The value of the environment variable `key`, or `default` when it is not set; a value
/// that is not a number fails the test naming the variable.
fn env_number(key: &str, default: u64) -> u64 {
    match std::env::var(key) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{key}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

fn differential(preset: &str, programs: u64) {
    differential_on(preset, &HwConfig::preset(preset).unwrap(), programs);
}

fn differential_on(name: &str, cfg: &HwConfig, programs: u64) {
    let scale = env_number("VTA_DIFF_PROGRAMS", 1);
    let base = env_number("VTA_DIFF_SEED", 0);
    let mut rtl = rtl_support::device(cfg);
    let (mut cycles, mut insns, mut nonzero) = (0u64, 0usize, 0u64);
    let start = std::time::Instant::now();
    let total = programs * scale;
    for j in 0..total {
        let seed = campaign::program_seed(base, cfg, j);
        let case = Case::generated(cfg, seed).unwrap_or_else(|e| panic!("{name}: {e}"));
        match check(&case, &mut rtl) {
            Ok(agreed) => {
                nonzero += agreed.nonzero as u64;
                cycles += agreed.cycles;
                insns += agreed.instructions;
            }
            Err(m) => panic!(
                "{name} program {seed} ({} insns, memory {:?}, stalls {:?}): {m}\nprogram:\n{}",
                case.program.insns.len(),
                case.timing,
                case.stalls,
                isa::asm::print_program(&case.program)
            ),
        }
    }
    eprintln!(
        "{name}: {total} random programs, {insns} instructions, {cycles} cycles, identical on fsim and rtl ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    assert!(
        nonzero * 10 >= total * 9,
        "only {nonzero} of {total} programs stored anything but zeros"
    );
}

#[test]
fn random_programs_small() {
    differential("small", 1000);
}

#[test]
fn random_programs_default() {
    differential("default", 200);
}

#[test]
fn random_programs_batched() {
    differential("batched", 200);
}

#[test]
fn random_programs_rect() {
    differential("rect", 200);
}

#[test]
fn random_programs_wide_bus() {
    differential("wide-bus", 200);
}

/// 2-bit lanes on both backends: the small preset with int2 inputs and weights and 16-bit
/// accumulators, where four lanes share a byte and ACC arithmetic wraps at 16 bits.
#[test]
fn random_programs_int2() {
    let mut cfg = HwConfig::preset("small").unwrap();
    (cfg.log_inp_width, cfg.log_wgt_width, cfg.log_acc_width) = (1, 1, 4);
    cfg.validate().unwrap();
    differential_on("small, int2 x int2 -> int16", &cfg, 300);
}

/// 4-bit lanes on both backends: the small preset with int4 inputs and weights (three
/// products per DSP48E1 and a fourth on its own) and 16-bit accumulators.
#[test]
fn random_programs_int4() {
    let mut cfg = HwConfig::preset("small").unwrap();
    (cfg.log_inp_width, cfg.log_wgt_width, cfg.log_acc_width) = (2, 2, 4);
    cfg.validate().unwrap();
    differential_on("small, int4 x int4 -> int16", &cfg, 300);
}

/// Random configs within the valid ranges (`campaign::random_bounds`), each built into a
/// Verilator model on demand: `VTA_DIFF_CONFIGS` of them (default 2), 100 programs each (times
/// `VTA_DIFF_PROGRAMS`). A failure names the config seed and prints the config's JSON.
#[test]
fn random_programs_on_random_configs() {
    let configs = env_number("VTA_DIFF_CONFIGS", 2);
    let base = env_number("VTA_DIFF_SEED", 0);
    for c in 0..configs {
        let seed = campaign::config_seed(base, c);
        let cfg = campaign::random_config(seed).unwrap();
        let name = format!("random config {seed} ({cfg})");
        eprintln!("{name}:\n{}", cfg.to_json());
        differential_on(&name, &cfg, 100);
    }
}

/// The mismatch report: a backend whose STORE number 2 corrupts a byte (the planted fault of
/// `vta check diff --plant-mismatch`, on a later STORE) is found out, and the report names that
/// STORE (its index in the stream), the output byte, its ACC row and both values; a program
/// that runs the same on both backends is not blamed.
#[test]
fn a_mismatch_is_bisected_to_the_first_differing_store() {
    let cfg = HwConfig::preset("small").unwrap();
    let stores_of = |p: &isa::Program| -> Vec<usize> {
        p.insns
            .iter()
            .enumerate()
            .filter(|(_, i)| matches!(i, Insn::Store(m) if m.x_size > 0))
            .map(|(k, _)| k)
            .collect()
    };
    let mut case = (1..)
        .map(|s| Case::generated(&cfg, s).unwrap())
        .find(|c| stores_of(&c.program).len() >= 4)
        .unwrap();
    let p = case.program.clone();
    let stores = stores_of(&p);
    let mut rtl = rtl_support::device(&cfg);
    let msg = diagnose(&cfg, &p, &mut rtl);
    assert!(msg.contains("no prefix of STOREs reproduces"), "{msg}");
    assert!(check(&case, &mut rtl).is_ok());
    let run =
        |dev: &mut dyn drivers::Device| run_program(dev, &p, &[], RunTimeout::default()).unwrap();
    let want = run(&mut FsimDevice::new(&cfg));
    let got = run(&mut Planted {
        rtl: &mut rtl,
        store: 2,
    });
    assert!(first_diff(&want, &got).is_some());
    let msg = diagnose(
        &cfg,
        &p,
        &mut Planted {
            rtl: &mut rtl,
            store: 2,
        },
    );
    eprintln!("{msg}");
    assert!(
        msg.contains(&format!(
            "first differing STORE: instruction {} (",
            stores[2]
        )),
        "{msg}"
    );
    assert!(
        msg.contains("OUT/ACC row") && msg.contains("last writer of ACC row"),
        "{msg}"
    );
    // The same through `check`, as the campaign plants it.
    case.plant = Some(2);
    let m = check(&case, &mut rtl).unwrap_err();
    assert_eq!(m.kind, vta_sim::diff::MismatchKind::Outputs);
    assert!(
        m.detail.contains(&format!("instruction {} (", stores[2])),
        "{m}"
    );
}
