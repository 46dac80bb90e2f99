//! Every board's generated project run through the Vivado stub (`tests/vivado_stub.tcl`)
//! under `tclsh`: the stub refuses unknown commands, options, IPs and properties and checks
//! the block design; the build.tcl text is snapshotted per board; the `.hwh` the stub writes
//! is read back for the accelerator's address and clock, and multi-core designs' (two cores
//! on a KV260, four on a PYNQ-Z2) for every core's.

use std::path::{Path, PathBuf};
use std::process::Command;

use bitstreams::{board, cores, hwh, project, shell, tcl::BuildSpec, Board};
use isa::HwConfig;

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes the project for `b` and `cfg` into a fresh directory.
fn make_project(b: &Board, cfg: &HwConfig, dir_name: &str) -> PathBuf {
    make_cores_project(b, cfg, 1, dir_name)
}

/// Writes the project of `n` cores for `b` and `cfg` into a fresh directory.
fn make_cores_project(b: &Board, cfg: &HwConfig, n: u32, dir_name: &str) -> PathBuf {
    let g = vta_hw::generate(cfg).unwrap();
    let ports = shell::top_ports(&g.ports_json).unwrap();
    let shell_v = shell::verilog(
        &ports,
        &shell::ShellSpec {
            clock_mhz: cfg.clock_mhz,
            coherent: b.data.coherent,
        },
    )
    .unwrap();
    let spec = BuildSpec {
        clock_mhz: cfg.clock_mhz,
        axi_bits: cfg.axi_data_width,
        config_string: cfg.config_string(),
        isa_hash: format!("{:016x}", cfg.isa_hash()),
        rtl_hash: project::rtl_hash(&g.verilog, &shell_v),
        fit_estimate: "test".into(),
        cores: cores::layout(b, n).unwrap(),
    };
    let dir = scratch(dir_name);
    project::write(&dir, &project::files(b, &spec, &g.verilog, &shell_v)).unwrap();
    dir
}

fn run_stub(dir: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let stub = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vivado_stub.tcl");
    let mut c = Command::new("tclsh");
    c.arg(&stub).arg(dir);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output()
        .expect("tclsh runs (./test.sh installs the `tcl` package)")
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn every_board_builds_under_the_stub() {
    let cfg = HwConfig::default();
    for b in board::builtin() {
        let dir = make_project(&b, &cfg, &format!("stub_{}", b.name));
        let tcl = std::fs::read_to_string(dir.join("build.tcl")).unwrap();
        // The RTL hash follows every change of the accelerator; the script around it is what
        // the snapshot pins.
        let redacted: String = tcl
            .lines()
            .map(|l| {
                if l.starts_with("set rtl_hash") {
                    "set rtl_hash      <rtl hash>"
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        insta::assert_snapshot!(format!("build_tcl_{}", b.name), redacted);
        let xdc = std::fs::read_to_string(dir.join("constraints/clock.xdc")).unwrap();
        assert!(xdc.contains("create_clock -period 10.000"), "{xdc}");
        for board_files in ["0", "1"] {
            let out = run_stub(&dir, &[("STUB_BOARD_FILES", board_files)]);
            let log = text(&out);
            assert!(out.status.success(), "{}: {log}", b.name);
            assert!(log.contains("vivado-stub: OK"), "{log}");
        }
        let calls = std::fs::read_to_string(dir.join("stub_calls.txt")).unwrap();
        for step in [
            "validate_bd_design",
            "make_wrapper",
            "launch_runs impl_1 -to_step write_bitstream",
        ] {
            assert!(calls.contains(step), "{}: {step} missing:\n{calls}", b.name);
        }
        assert!(!calls.contains("version -short") || !tcl.contains("string first"));
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("output/manifest.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(manifest["config_string"], cfg.config_string());
        assert_eq!(manifest["part"], b.part.as_str());
        assert_eq!(manifest["timing_met"], true);
        // The hand-off file the stub wrote from the block design, read back.
        let h = hwh::parse(&std::fs::read_to_string(dir.join("output/vta.hwh")).unwrap()).unwrap();
        let (base, high) = h.registers("vta_0").expect("vta_0 registers in the .hwh");
        assert_eq!(base, b.control_base().unwrap(), "{}", b.name);
        assert_eq!(high + 1 - base, b.control_range().unwrap());
        assert_eq!(h.clock_hz("vta_0"), Some(100_000_000));
    }
}

#[test]
fn config_clock_reaches_constraints_and_block_design() {
    let cfg = HwConfig {
        clock_mhz: 150,
        axi_data_width: 128,
        ..HwConfig::default()
    };
    let b = board::load("zcu104").unwrap();
    let dir = make_project(&b, &cfg, "stub_clock150");
    let xdc = std::fs::read_to_string(dir.join("constraints/clock.xdc")).unwrap();
    assert!(
        xdc.contains("-period 6.667") && xdc.contains("PS8_i/PLCLK"),
        "{xdc}"
    );
    let tcl = std::fs::read_to_string(dir.join("build.tcl")).unwrap();
    assert!(
        tcl.contains("CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ {150}"),
        "{tcl}"
    );
    assert!(
        tcl.contains("CONFIG.PSU__SAXIGP2__DATA_WIDTH {128}"),
        "{tcl}"
    );
    let out = run_stub(&dir, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let h = hwh::parse(&std::fs::read_to_string(dir.join("output/vta.hwh")).unwrap()).unwrap();
    assert_eq!(h.clock_hz("vta_0"), Some(150_000_000));
}

#[test]
fn negative_slack_fails_naming_the_report() {
    let b = board::load("pynq-z2").unwrap();
    let dir = make_project(&b, &HwConfig::default(), "stub_wns");
    let out = run_stub(&dir, &[("STUB_WNS", "-1.601")]);
    let log = text(&out);
    assert!(!out.status.success(), "{log}");
    assert!(
        log.contains("-1.601") && log.contains("reports/timing.rpt"),
        "{log}"
    );
    assert!(
        !dir.join("output/vta.bit").exists(),
        "no bitstream copied out"
    );
    let m = std::fs::read_to_string(dir.join("output/manifest.json")).unwrap();
    assert!(m.contains("\"timing_met\": false"), "{m}");
}

#[test]
fn a_ps_clock_faster_than_the_constraint_is_refused() {
    let b = board::load("pynq-z1").unwrap();
    let dir = make_project(&b, &HwConfig::default(), "stub_fast_ps");
    let out = run_stub(&dir, &[("STUB_ACTUAL_MHZ", "111.111")]);
    let log = text(&out);
    assert!(!out.status.success() && log.contains("111.111"), "{log}");
}

/// The stub is not a rubber stamp: a broken script or design is refused.
#[test]
fn the_stub_refuses_what_vivado_would() {
    let b = board::load("kv260").unwrap();
    let dir = make_project(&b, &HwConfig::default(), "stub_refuses");
    let tcl = std::fs::read_to_string(dir.join("build.tcl")).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        // An IP property PG201 does not have.
        (
            "CONFIG.PSU__FPGA_PL0_ENABLE",
            "CONFIG.PSU__FPGA_PL9_ENABLE",
            "not in the table",
        ),
        // A hard-coded IP version this Vivado does not have (get_ipdefs would have found it).
        (
            "[ipdef smartconnect] data_ic_0",
            "xilinx.com:ip:smartconnect:0.9 data_ic",
            "not from get_ipdefs",
        ),
        // An interface left unconnected.
        (
            "connect_bd_intf_net [get_bd_intf_pins data_ic_0/M00_AXI]",
            "list [get_bd_intf_pins data_ic_0/M00_AXI]",
            "not connected",
        ),
        // The control registers outside HPM0_FPD's window.
        ("-offset 0xA0000000", "-offset 0x40000000", "outside"),
        // An option Vivado's launch_runs does not have.
        (
            "launch_runs synth_1 -jobs $jobs",
            "launch_runs synth_1 -cores $jobs",
            "option '-cores'",
        ),
        // A command that does not exist.
        ("validate_bd_design", "validate_design", "unknown command"),
    ];
    for (from, to, why) in cases {
        assert!(tcl.contains(from), "{from}");
        std::fs::write(dir.join("build.tcl"), tcl.replacen(from, to, 1)).unwrap();
        let out = run_stub(&dir, &[]);
        let log = text(&out);
        assert!(
            !out.status.success() && log.contains(why),
            "{from} -> {to}: {log}"
        );
    }
}

/// Two cores on a ZU+ board: two accelerator cells, each on its own HP port and its own
/// control window, both in the manifest and in the `.hwh` the stub writes; and the stub
/// refuses the two-core design's own mistakes.
#[test]
fn two_cores_on_kv260() {
    let b = board::load("kv260").unwrap();
    let dir = make_cores_project(&b, &HwConfig::default(), 2, "stub_two_cores");
    let tcl = std::fs::read_to_string(dir.join("build.tcl")).unwrap();
    for line in [
        "CONFIG.PSU__USE__S_AXI_GP2 {1}",
        "CONFIG.PSU__USE__S_AXI_GP3 {1}",
        "CONFIG.NUM_MI {2}",
        "[get_bd_intf_pins ctrl_ic/M01_AXI] [get_bd_intf_pins vta_1/s_axi_ctrl]",
        "[get_bd_intf_pins data_ic_1/M00_AXI] [get_bd_intf_pins ps/S_AXI_HP1_FPD]",
        "-offset 0xA0010000 -range $ctrl_range [get_bd_addr_segs vta_1/s_axi_ctrl/*]",
        "[get_bd_addr_segs ps/SAXIGP3/HP1_DDR_LOW]",
    ] {
        assert!(tcl.contains(line), "{line} missing:\n{tcl}");
    }
    let out = run_stub(&dir, &[]);
    let log = text(&out);
    assert!(
        out.status.success() && log.contains("vivado-stub: OK"),
        "{log}"
    );

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("output/manifest.json")).unwrap())
            .unwrap();
    let listed: Vec<_> = manifest["cores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["instance"].as_str().unwrap(),
                c["control_base"].as_str().unwrap(),
                c["data_port"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("vta_0", "0xA0000000", "S_AXI_HP0_FPD"),
            ("vta_1", "0xA0010000", "S_AXI_HP1_FPD")
        ]
    );
    assert_eq!(manifest["cores"][1]["control_range"], "0x10000");

    let h = hwh::read_file(&dir.join("output/vta.hwh")).unwrap();
    let found: Vec<_> = h
        .cores()
        .into_iter()
        .map(|c| (c.instance, c.base))
        .collect();
    assert_eq!(
        found,
        [
            ("vta_0".to_string(), 0xA000_0000),
            ("vta_1".to_string(), 0xA001_0000)
        ]
    );
    assert_eq!(h.clock_hz("vta_1"), Some(100_000_000));
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains("| `vta_1` | `0xA0010000` | `S_AXI_HP1_FPD` |"),
        "{readme}"
    );

    let cases: &[(&str, &str, &str)] = &[
        // Both cores on one HP port.
        (
            "[get_bd_intf_pins data_ic_1/M00_AXI] [get_bd_intf_pins ps/S_AXI_HP1_FPD]",
            "[get_bd_intf_pins data_ic_1/M00_AXI] [get_bd_intf_pins ps/S_AXI_HP0_FPD]",
            "already connected",
        ),
        // Core 1's window on top of core 0's.
        ("-offset 0xA0010000", "-offset 0xA0000000", "overlaps"),
        // The control SmartConnect with one master interface for two cores.
        (
            "CONFIG.NUM_MI {2}",
            "CONFIG.NUM_MI {1}",
            "has no pin 'M01_AXI'",
        ),
        // More master interfaces than a SmartConnect has.
        (
            "CONFIG.NUM_MI {2}",
            "CONFIG.NUM_MI {17}",
            "between 1 and 16",
        ),
        // Core 1's control port left dangling.
        (
            "connect_bd_intf_net [get_bd_intf_pins ctrl_ic/M01_AXI]",
            "list [get_bd_intf_pins ctrl_ic/M01_AXI]",
            "is not connected",
        ),
        // An HP port enabled but not wired (the second core's port given up).
        (
            "connect_bd_intf_net [get_bd_intf_pins data_ic_1/M00_AXI]",
            "list [get_bd_intf_pins data_ic_1/M00_AXI]",
            "is not connected",
        ),
    ];
    for (from, to, why) in cases {
        assert!(tcl.contains(from), "{from}");
        std::fs::write(dir.join("build.tcl"), tcl.replacen(from, to, 1)).unwrap();
        let out = run_stub(&dir, &[]);
        let log = text(&out);
        assert!(
            !out.status.success() && log.contains(why),
            "{from} -> {to}: {log}"
        );
    }
}

/// The Zynq-7000's PS7 takes a core on each of its four HP ports the same way (the fit check,
/// not exercised here, is what keeps big configs off the Zynq-7020).
#[test]
fn four_cores_on_the_ps7() {
    let b = board::load("pynq-z2").unwrap();
    let dir = make_cores_project(&b, &HwConfig::default(), 4, "stub_ps7_four_cores");
    let out = run_stub(&dir, &[]);
    let log = text(&out);
    assert!(
        out.status.success() && log.contains("vivado-stub: OK"),
        "{log}"
    );
    let tcl = std::fs::read_to_string(dir.join("build.tcl")).unwrap();
    assert!(
        tcl.contains("CONFIG.PCW_USE_S_AXI_HP3 {1}")
            && tcl.contains("[get_bd_addr_segs ps/S_AXI_HP3/HP3_DDR_LOWOCM]"),
        "{tcl}"
    );
    let h = hwh::read_file(&dir.join("output/vta.hwh")).unwrap();
    let bases: Vec<_> = h.cores().into_iter().map(|c| c.base).collect();
    assert_eq!(bases, [0x43C0_0000, 0x43C1_0000, 0x43C2_0000, 0x43C3_0000]);
}
