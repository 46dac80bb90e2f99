//! The execution core passes `verilator --lint-only -Wall` on every preset and on configs
//! exercising the other datapath variants, keeps exactly one UOP, ACC and OUT memory, and
//! keeps its port contract.

use std::path::PathBuf;

use hdl::Dir;
use isa::{HwConfig, MemType, PRESETS};
use vta_hw::exec::{acc_banks, exec_design, ExecParams};

#[path = "exec_common.rs"]
mod common;
use common::{config as exec_common_config, extra_configs};

fn work_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("exec-lint")
        .join(name)
}

fn all_configs() -> Vec<(String, HwConfig)> {
    let mut v: Vec<(String, HwConfig)> = PRESETS
        .iter()
        .map(|(n, _, _)| (n.to_string(), HwConfig::preset(n).unwrap()))
        .collect();
    v.extend(extra_configs());
    v
}

#[test]
fn lint_clean_on_every_preset_and_variant() {
    if let Err(e) = hdl::verilator::verilator_version() {
        panic!("{e}: install Verilator with `apt-get install verilator g++` (./test.sh does)");
    }
    let mut failures = vec![];
    for (name, cfg) in all_configs() {
        let design = exec_design(&cfg);
        if let Err(e) = hdl::verilator::lint(&design, &work_dir(&name)) {
            failures.push(format!("{name} ({cfg}):\n{e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn one_uop_memory_and_two_banks_of_acc_and_out() {
    for (name, cfg) in all_configs() {
        let v = exec_design(&cfg).verilog("");
        let banks = acc_banks(cfg.depth(MemType::Acc));
        let mut names = vec!["uop_mem".to_string()];
        for b in 0..banks {
            names.push(format!("acc_mem{b}"));
            names.push(format!("out_mem{b}"));
        }
        for mem in &names {
            let decls = v.matches(&format!(" {mem} [0:")).count();
            assert_eq!(decls, 1, "{name}: {mem} declared {decls} times");
        }
        // No other memory anywhere (INP and WGT live outside), but the activation table's
        // 256 x 8 memory per lane with ALU_LUT.
        let mems = v
            .lines()
            .filter(|l| l.trim_start().starts_with("reg ") && l.contains(" [0:"))
            .count();
        let tables = if cfg.alu_lut {
            (cfg.batch() * cfg.block_out()) as usize
        } else {
            0
        };
        assert_eq!(mems, names.len() + tables, "{name}: extra memories");
        for l in 0..tables {
            assert!(
                v.contains(&format!(" lut_mem{l} [0:255];")),
                "{name}: lut_mem{l}"
            );
        }
        // One read port per bank (each serves one pipeline at a time), two on UOP (the ALU
        // pipeline's shares its address with the write port: true dual port).
        for b in 0..banks {
            assert_eq!(
                v.matches(&format!("<= acc_mem{b}[")).count(),
                1,
                "{name}: ACC bank {b} has more than one read port"
            );
        }
        assert_eq!(
            v.matches("<= uop_mem[").count(),
            2,
            "{name}: UOP read ports"
        );
        let depth = cfg.depth(MemType::Acc).max(2) / banks;
        assert!(
            v.contains(&format!(" acc_mem0 [0:{}];", depth - 1)),
            "{name}"
        );
    }
}

#[test]
fn ports_follow_the_contract() {
    for (name, cfg) in all_configs() {
        let design = exec_design(&cfg);
        let top = design.top();
        assert_eq!(top.name(), "vta_exec");
        let a = |m: MemType| cfg.log_depth(m).max(1);
        let expect: Vec<(&str, Dir, u32)> = vec![
            ("insn_valid", Dir::Input, 1),
            ("insn_ready", Dir::Output, 1),
            ("insn", Dir::Input, 128),
            ("done_gemm", Dir::Output, 1),
            ("done_alu", Dir::Output, 1),
            ("uop_wr_en", Dir::Input, 1),
            ("uop_wr_addr", Dir::Input, a(MemType::Uop)),
            ("uop_wr_data", Dir::Input, 32),
            ("inp_rd_en", Dir::Output, 1),
            ("inp_rd_addr", Dir::Output, a(MemType::Inp)),
            ("inp_rd_data", Dir::Input, cfg.elem_bits(MemType::Inp)),
            ("wgt_rd_en", Dir::Output, 1),
            ("wgt_rd_addr", Dir::Output, a(MemType::Wgt)),
            ("wgt_rd_data", Dir::Input, cfg.elem_bits(MemType::Wgt)),
            ("acc_wr_en", Dir::Input, 1),
            ("acc_wr_addr", Dir::Input, a(MemType::Acc)),
            ("acc_wr_data", Dir::Input, cfg.elem_bits(MemType::Acc)),
            ("out_rd_en", Dir::Input, 1),
            ("out_rd_addr", Dir::Input, a(MemType::Acc)),
            ("out_rd_data", Dir::Output, cfg.elem_bits(MemType::Out)),
            ("ev_gemm_uop", Dir::Output, 1),
            ("ev_reset_uop", Dir::Output, 2),
            ("ev_alu_uop", Dir::Output, 1),
            ("busy", Dir::Output, 1),
            ("fault", Dir::Output, 1),
        ];
        for (port, dir, width) in &expect {
            let info = top
                .ports()
                .iter()
                .find(|p| p.name == *port)
                .unwrap_or_else(|| panic!("{name}: no port {port}"));
            assert_eq!(
                (info.dir, info.width),
                (*dir, *width),
                "{name}: port {port}"
            );
        }
        // Plus the clock and the reset, nothing else.
        assert_eq!(top.ports().len(), expect.len() + 2, "{name}: extra ports");
    }
}

#[test]
fn default_config_packs_int8_products() {
    let p = ExecParams::new(&HwConfig::default());
    assert_eq!(p.packing.fields, 2);
    assert_eq!(p.timing().done_latency, 10);
    assert_eq!(p.timing().mul_done_latency, 12);
}

#[test]
fn port_manifest_snapshot() {
    let design = exec_design(&HwConfig::preset("small").unwrap());
    insta::assert_snapshot!("exec_ports_small", design.manifest_json());
}

#[test]
fn single_element_buffers_build_and_lint() {
    // ACC, INP and WGT of one element each: micro-ops have no index bits at all.
    let cfg = HwConfig::from_json_str(
        r#"{"LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
            "LOG_BLOCK":2,"LOG_UOP_BUFF_SIZE":5,"LOG_INP_BUFF_SIZE":2,
            "LOG_WGT_BUFF_SIZE":4,"LOG_ACC_BUFF_SIZE":4}"#,
        "single-element buffers",
    )
    .unwrap();
    assert_eq!(cfg.depth(MemType::Acc), 1);
    let v = exec_design(&cfg).verilog("");
    assert!(v.contains("module vta_exec"));
    // Not linted: the UOP write ports are unread here, and the hdl printer emits no waiver
    // for an input nothing reads at all, even with `allow_unused` (reported upstream). The
    // "depth1" variant (ACC and WGT of one element) is linted with the others.
}

/// Runs yosys `script` on the core of `cfg` written to `dir`.
fn yosys(name: &str, cfg: &HwConfig, script: &str) -> String {
    let dir = work_dir(&format!("yosys-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vta_exec.v");
    std::fs::write(&path, exec_design(cfg).verilog(name)).unwrap();
    let out = std::process::Command::new("yosys")
        .arg("-p")
        .arg(format!("read_verilog {}; {script}", path.display()))
        .output();
    let out = out.unwrap_or_else(|e| {
        panic!("cannot run yosys ({e}): install it with `apt-get install yosys` (./test.sh does)")
    });
    let log = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "yosys failed:\n{log}");
    log
}

/// The `stat` numbers of the whole hierarchy (the last statistics block of the log).
fn cell_counts(log: &str) -> std::collections::HashMap<String, u64> {
    let block = log
        .rsplit("=== design hierarchy ===")
        .next()
        .expect("a design hierarchy block");
    block
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (name, count) = (it.next()?, it.next()?);
            Some((name.to_string(), count.parse().ok()?))
        })
        .collect()
}

#[test]
fn yosys_sees_acc_out_and_uop_as_memories() {
    for name in ["small", "i4w4a16"] {
        let cfg = exec_common_config(name);
        let log = yosys(
            name,
            &cfg,
            "hierarchy -top vta_exec; proc; opt; memory -nomap; stat",
        );
        let counts = cell_counts(&log);
        assert_eq!(counts.get("$mem_v2"), Some(&5), "{name}: {counts:?}");
        for mem in ["acc_mem0", "acc_mem1", "out_mem0", "out_mem1", "uop_mem"] {
            assert!(log.contains(&format!("\\{mem}")), "{name}: no memory {mem}");
        }
    }
}
