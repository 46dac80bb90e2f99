//! End-to-end tests of `vta hw`: Verilog, register map and port manifest for any valid config,
//! the resource report through yosys, and the config validation error for a bad config
//! (`vta hw bitstream` is tested in `cli_bitstream.rs`).

#[path = "support/cli.rs"]
mod support;

use support::{fails, ok, scratch, vta, vta_in};

#[test]
fn verilog_for_a_config_nobody_built_before() {
    let dir = scratch("hw_verilog");
    // A config that is no preset: 2x8x16 with a 128-bit bus.
    std::fs::write(
        dir.join("cfg.json"),
        r#"{"LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":1,
            "LOG_BLOCK_IN":3,"LOG_BLOCK_OUT":4,"LOG_UOP_BUFF_SIZE":13,"LOG_INP_BUFF_SIZE":13,
            "LOG_WGT_BUFF_SIZE":15,"LOG_ACC_BUFF_SIZE":15,"AXI_DATA_WIDTH":128}"#,
    )
    .unwrap();
    let text = ok(vta_in(
        &dir,
        &["hw", "verilog", "--config", "cfg.json", "-o", "out"],
    ));
    assert!(text.contains("2x8x16_i8w8a32_13_13_15_15"), "{text}");
    let v = std::fs::read_to_string(dir.join("out/vta_top.v")).unwrap();
    assert!(v.contains("config: 2x8x16_i8w8a32_13_13_15_15") && v.contains("module vta_top"));
    let regs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/regs.json")).unwrap()).unwrap();
    assert!(regs.to_string().contains("INSN_ADDR"), "{regs}");
    let ports: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/ports.json")).unwrap())
            .unwrap();
    assert!(
        ports.to_string().contains("m_axi"),
        "the manifest lists the AXI master"
    );
    let lint = std::process::Command::new("verilator")
        .args(["--lint-only", "-Wall", "--top-module", "vta_top"])
        .arg(dir.join("out/vta_top.v"))
        .output()
        .expect("verilator runs (./test.sh installs it)");
    assert!(
        lint.status.success() && lint.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&lint.stderr)
    );
}

/// `vta hw verilog --cores 2`: the two-core design, its control ports named per core; a
/// count outside 2..=8 is refused saying the range.
#[test]
fn verilog_of_two_cores_sharing_one_memory() {
    let dir = scratch("hw_verilog_cores");
    let text = ok(vta_in(
        &dir,
        &[
            "hw", "verilog", "--config", "small", "--cores", "2", "-o", "out",
        ],
    ));
    assert!(text.contains("top vta_multicore_2"), "{text}");
    let v = std::fs::read_to_string(dir.join("out/vta_multicore_2.v")).unwrap();
    assert!(v.contains("module vta_multicore_2"));
    assert!(v.contains("s_axi_control1_awaddr") && v.contains("vta_axi_interconnect_n2"));
    let e = fails(vta_in(
        &dir,
        &["hw", "verilog", "--cores", "9", "-o", "out"],
    ));
    assert!(e.contains("a multi-core design has 2 to 8"), "{e}");
    let text = ok(vta_in(
        &dir,
        &["hw", "verilog", "--cores", "1", "-o", "one"],
    ));
    assert!(text.contains("top vta_top"), "{text}");
}

#[test]
fn invalid_config_gets_the_validation_error() {
    let dir = scratch("hw_bad");
    std::fs::write(
        dir.join("bad.json"),
        r#"{"LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,"LOG_BLOCK":11,
            "LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":15,"LOG_WGT_BUFF_SIZE":18,"LOG_ACC_BUFF_SIZE":17}"#,
    )
    .unwrap();
    let e = fails(vta_in(
        &dir,
        &["hw", "verilog", "--config", "bad.json", "-o", "out"],
    ));
    assert!(e.contains("LOG_BLOCK = 11"), "{e}");
    assert!(
        !dir.join("out").exists(),
        "nothing written for a bad config"
    );
}

#[test]
fn report_lists_resources_against_the_part() {
    let text = ok(vta(&[
        "hw", "report", "--config", "small", "--part", "xc7z020",
    ]));
    for resource in ["LUT", "FF", "DSP48E1", "BRAM36"] {
        assert!(
            text.lines().any(|l| l.starts_with(resource)),
            "{resource} missing:\n{text}"
        );
    }
    assert!(text.contains("53200"), "{text}");
    insta::assert_snapshot!("help_hw_verilog", ok(vta(&["hw", "verilog", "--help"])));
    insta::assert_snapshot!("help_hw_report", ok(vta(&["hw", "report", "--help"])));
    insta::assert_snapshot!("help_hw_bitstream", ok(vta(&["hw", "bitstream", "--help"])));
}

/// `--compare`: the small preset with and without the activation table, side by side; the
/// table costs LUTs (or block RAM) and `--json` does not combine with it.
#[test]
fn report_compares_a_config_with_the_lut_option_against_one_without() {
    let dir = scratch("hw_compare");
    let small = isa::HwConfig::preset("small").unwrap();
    let with_lut = isa::HwConfig {
        alu_lut: true,
        ..small
    };
    std::fs::write(dir.join("small_lut.json"), with_lut.to_json()).unwrap();
    let text = ok(vta_in(
        &dir,
        &[
            "hw",
            "report",
            "--config",
            "small_lut.json",
            "--compare",
            "small",
        ],
    ));
    assert!(
        text.contains("A = 1x4_i8w8a32_12_11_12_13_lut, B = 1x4_i8w8a32_12_11_12_13"),
        "{text}"
    );
    let delta = |resource: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(resource))
            .unwrap_or_else(|| panic!("{resource} missing:\n{text}"));
        line.split_whitespace().nth(3).unwrap().parse().unwrap()
    };
    assert!(
        delta("LUT") > 0.0 || delta("BRAM36") > 0.0,
        "the table costs nothing?\n{text}"
    );
    let out = vta(&["hw", "report", "--compare", "small", "--json"]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a usage error: {e}");
    assert!(e.contains("--json") && e.contains("--compare"), "{e}");
}

/// The issue's fit requirement, as a gate: VTA's default config fits the PYNQ's Zynq-7020 with
/// at most 70% of its LUTs, 80% of its block RAM and all of its 220 DSP48E1 (yosys estimate;
/// about 1.5 minutes).
#[test]
fn default_config_fits_the_zynq_7020() {
    let text = ok(vta(&["hw", "report", "--part", "xc7z020"]));
    let used = |resource: &str| -> (f64, f64) {
        let line = text
            .lines()
            .find(|l| l.starts_with(resource))
            .unwrap_or_else(|| panic!("{resource} missing:\n{text}"));
        let f: Vec<f64> = line
            .split_whitespace()
            .skip(1)
            .take(2)
            .map(|v| v.parse().unwrap())
            .collect();
        (f[0], f[1])
    };
    let (lut, lut_total) = used("LUT");
    let (bram, bram_total) = used("BRAM36");
    let (dsp, dsp_total) = used("DSP48E1");
    assert!(lut <= 0.70 * lut_total, "LUT {lut} of {lut_total}:\n{text}");
    assert!(
        bram <= 0.80 * bram_total,
        "BRAM36 {bram} of {bram_total}:\n{text}"
    );
    assert!(dsp <= dsp_total, "DSP48E1 {dsp} of {dsp_total}:\n{text}");
}
