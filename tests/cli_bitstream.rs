//! End-to-end tests of `vta hw bitstream`: the fit pre-check refuses a config too large for a
//! board before any tool runs; for each of the five boards one command writes a project that
//! the Vivado stub (`bitstreams/tests/vivado_stub.tcl`, under tclsh) accepts, whose
//! constraints carry the config's clock and whose AXI shell lints clean with the accelerator;
//! `--cores N` builds N accelerators the stub accepts, and is refused beyond the board's
//! ports or its part.

#[path = "support/cli.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{fails, ok, scratch, vta, vta_in};

/// `vta` in `dir` with its cache in `dir/cache` (no estimate from an earlier run leaks in), and
/// with no Vivado on the PATH (so `--run` never starts an hour-long build here).
fn vta_at(dir: &Path, args: &[&str]) -> Output {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let without_vivado: Vec<_> = std::env::split_paths(&path)
        .filter(|d| !d.join("vivado").exists())
        .collect();
    Command::new(env!("CARGO_BIN_EXE_vta"))
        .args(args)
        .current_dir(dir)
        .env("VTA_CACHE_DIR", dir.join("cache"))
        .env("PATH", std::env::join_paths(without_vivado).unwrap())
        .output()
        .expect("the vta binary runs")
}

/// 1x32x32 with 512 KiB of weights: its scratchpads alone need more block RAM than a Zynq-7020
/// has.
const TOO_BIG: &str = r#"{"LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
    "LOG_BLOCK":5,"LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":15,"LOG_WGT_BUFF_SIZE":19,
    "LOG_ACC_BUFF_SIZE":17}"#;

#[test]
fn a_config_too_big_for_the_part_is_refused_before_any_tool() {
    let dir = scratch("bitstream_too_big");
    std::fs::write(dir.join("big.json"), TOO_BIG).unwrap();
    let e = fails(vta_at(
        &dir,
        &[
            "hw",
            "bitstream",
            "--board",
            "pynq-z1",
            "--config",
            "big.json",
            "-o",
            "out",
        ],
    ));
    assert!(
        e.contains("does not fit xc7z020clg400-1")
            && e.contains("BRAM36 needs 165.5")
            && e.contains("has 140")
            && e.contains("25.5 over"),
        "{e}"
    );
    assert!(!dir.join("out").exists(), "nothing written");
    // The same config fits the ZCU104's part as far as its scratchpads go; the refusal is
    // about the board, not the config.
    assert!(!e.contains("invalid"), "{e}");
}

#[test]
fn bad_board_and_clock_are_named() {
    let dir = scratch("bitstream_bad_board");
    let help = ok(vta(&["hw", "bitstream", "--help"]));
    assert!(
        help.contains("kv260") && help.contains("board file"),
        "{help}"
    );
    let e = fails(vta_in(
        &dir,
        &["hw", "bitstream", "--board", "zedboard", "-o", "out"],
    ));
    assert!(
        e.contains("unknown board 'zedboard'") && e.contains("pynq-z2"),
        "{e}"
    );
    std::fs::write(dir.join("b.json"), "{\"name\": \"x\"}").unwrap();
    let e = fails(vta_at(
        &dir,
        &["hw", "bitstream", "--board", "b.json", "-o", "out"],
    ));
    assert!(e.contains("b.json") && e.contains("missing field"), "{e}");
    std::fs::write(
        dir.join("fast.json"),
        r#"{"LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,"LOG_BLOCK":2,
            "LOG_UOP_BUFF_SIZE":12,"LOG_INP_BUFF_SIZE":11,"LOG_WGT_BUFF_SIZE":12,
            "LOG_ACC_BUFF_SIZE":13,"CLOCK_MHZ":400}"#,
    )
    .unwrap();
    let e = fails(vta_at(
        &dir,
        &[
            "hw",
            "bitstream",
            "--board",
            "pynq-z2",
            "--config",
            "fast.json",
            "-o",
            "out",
        ],
    ));
    assert!(e.contains("CLOCK_MHZ 400") && e.contains("250 MHz"), "{e}");
}

/// `--cores` is refused, before any tool, beyond the board's free PS ports, beyond its part
/// (every core counts), at 0, and on the open flow.
#[test]
fn too_many_cores_are_refused_with_the_limit() {
    let dir = scratch("bitstream_cores_refused");
    let bitstream = |board: &str, cores: &str| {
        fails(vta_at(
            &dir,
            &[
                "hw",
                "bitstream",
                "--board",
                board,
                "--cores",
                cores,
                "-o",
                "out",
            ],
        ))
    };
    let e = bitstream("kv260", "5");
    assert!(
        e.contains("--cores 5 on kv260")
            && e.contains("at most 4")
            && e.contains("S_AXI_HP0_FPD, S_AXI_HP1_FPD, S_AXI_HP2_FPD, S_AXI_HP3_FPD"),
        "{e}"
    );
    // Two default cores' scratchpads (2 x 108.5 RAMB36) overflow the Zynq-7020's 140.
    let e = bitstream("pynq-z2", "2");
    assert!(
        e.contains("does not fit xc7z020clg400-1")
            && e.contains("BRAM36 needs 217")
            && e.contains("2 cores x")
            && e.contains("fewer --cores"),
        "{e}"
    );
    assert!(bitstream("zcu104", "0").contains("at least one core"));
    let e = bitstream("ulx3s-85f", "2");
    assert!(e.contains("--cores is for Zynq boards"), "{e}");
    assert!(!dir.join("out").exists(), "nothing written");
    let help = ok(vta(&["hw", "bitstream", "--help"]));
    assert!(
        help.contains("--cores <N>") && help.contains("--core K"),
        "{help}"
    );
}

/// One yosys estimate (the `small` preset, `vta hw report --json`), then one command per
/// board; each project goes through the stub. A user's board file works the same way.
#[test]
fn every_board_gets_a_project_the_stub_accepts() {
    let dir = scratch("bitstream_boards");
    let report = ok(vta_at(
        &dir,
        &["hw", "report", "--config", "small", "--json"],
    ));
    std::fs::write(dir.join("small.json"), &report).unwrap();
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert!(
        v["luts"].as_u64().unwrap() > 0 && v["rtl_hash"].is_string(),
        "{report}"
    );

    // A user's board: PYNQ-Z2 with the coherent ACP port, from a file.
    let z2 = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("bitstreams/boards/pynq-z2.json"),
    )
    .unwrap();
    let acp = z2
        .replace("\"pynq-z2\"", "\"pynq-z2-acp\"")
        .replace("\"S_AXI_HP0\"", "\"S_AXI_ACP\"")
        .replace("S_AXI_HP0/HP0_DDR_LOWOCM", "S_AXI_ACP/ACP_DDR_LOWOCM")
        .replace("\"coherent\": false", "\"coherent\": true");
    std::fs::write(dir.join("pynq-z2-acp.json"), acp).unwrap();

    let stub = Path::new(env!("CARGO_MANIFEST_DIR")).join("bitstreams/tests/vivado_stub.tcl");
    for (board, cores) in [
        ("pynq-z1", "1"),
        ("pynq-z2", "1"),
        ("ultra96-v2", "1"),
        ("zcu104", "1"),
        ("kv260", "1"),
        ("pynq-z2-acp.json", "1"),
        ("zcu104", "2"),
    ] {
        let out = format!("proj-{board}-{cores}");
        let text = ok(vta_at(
            &dir,
            &[
                "hw",
                "bitstream",
                "--board",
                board,
                "--config",
                "small",
                "--estimate",
                "small.json",
                "--cores",
                cores,
                "-o",
                &out,
                "--run",
            ],
        ));
        if cores == "2" {
            assert!(
                text.contains(
                    "vta_1: registers at 0xA0010000 on M_AXI_HPM0_FPD, DRAM through S_AXI_HP1_FPD"
                ) && text.contains("2 cores x ("),
                "{text}"
            );
        }
        assert!(
            text.contains("fit pre-check") && text.contains("LUT"),
            "{text}"
        );
        assert!(
            text.contains("vivado is not on the PATH")
                && text.contains("vivado -mode batch -source build.tcl"),
            "--run without Vivado prints the command:\n{text}"
        );
        let project = dir.join(&out);
        let xdc = std::fs::read_to_string(project.join("constraints/clock.xdc")).unwrap();
        assert!(xdc.contains("create_clock -period 10.000"), "{xdc}");
        let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
        assert!(readme.contains("Overlay(\"vta.bit\")"), "{readme}");
        let run = Command::new("tclsh")
            .arg(&stub)
            .arg(&project)
            .output()
            .expect("tclsh runs (./test.sh installs the `tcl` package)");
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(
            run.status.success() && log.contains("vivado-stub: OK"),
            "{board}: {log}"
        );
        let hwh = bitstreams::hwh::read_file(&project.join("output/vta.hwh")).unwrap();
        assert_eq!(hwh.cores().len().to_string(), cores, "{board}");
        let lint = Command::new("verilator")
            .args(["--lint-only", "-Wall", "--top-module", "vta_shell"])
            .arg(project.join("rtl/vta_shell.v"))
            .arg(project.join("rtl/vta_top.v"))
            .output()
            .expect("verilator runs (./test.sh installs it)");
        assert!(
            lint.status.success() && lint.stderr.is_empty(),
            "{board}: {}",
            String::from_utf8_lossy(&lint.stderr)
        );
        let shell = std::fs::read_to_string(project.join("rtl/vta_shell.v")).unwrap();
        assert_eq!(
            shell.contains("4'b1111"),
            board.ends_with("acp.json"),
            "coherent ports get snooping AxCACHE"
        );
    }
    // An estimate of other RTL is refused.
    let e = fails(vta_at(
        &dir,
        &[
            "hw",
            "bitstream",
            "--board",
            "kv260",
            "--estimate",
            "small.json",
            "-o",
            "x",
        ],
    ));
    assert!(e.contains("estimates other RTL"), "{e}");
}

/// With Vivado on the PATH and `VTA_VIVADO_TEST=1`, builds the PYNQ-Z2 project for real (an
/// hour or more) and checks that timing is met.
#[test]
#[ignore = "needs Vivado on the PATH; run with VTA_VIVADO_TEST=1 cargo test -- --ignored"]
fn vivado_builds_pynq_z2_with_positive_slack() {
    if std::env::var_os("VTA_VIVADO_TEST").is_none() {
        eprintln!("note: set VTA_VIVADO_TEST=1 (with vivado on the PATH) to run this build");
        return;
    }
    let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("vivado").is_file());
    assert!(
        on_path,
        "VTA_VIVADO_TEST is set but vivado is not on the PATH"
    );
    let dir = scratch("bitstream_vivado");
    let text = ok(Command::new(env!("CARGO_BIN_EXE_vta"))
        .args([
            "hw",
            "bitstream",
            "--board",
            "pynq-z2",
            "-o",
            "proj",
            "--run",
        ])
        .current_dir(&dir)
        .output()
        .expect("the vta binary runs"));
    assert!(text.contains("worst negative slack"), "{text}");
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("proj/output/manifest.json")).unwrap(),
    )
    .unwrap();
    assert!(m["wns_ns"].as_f64().unwrap() >= 0.0, "{m}");
    assert!(dir.join("proj/output/vta.bit").exists() && dir.join("proj/output/vta.hwh").exists());
}

/// The open flow refuses what it cannot build before any tool runs: a clock a board without
/// a PLL calculator cannot make, a Zynq-only option.
#[test]
fn the_open_flow_refuses_early_with_the_reason() {
    let dir = scratch("openflow_refusals");
    let fast = r#"{"LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,
        "LOG_BLOCK":2,"LOG_UOP_BUFF_SIZE":11,"LOG_INP_BUFF_SIZE":11,"LOG_WGT_BUFF_SIZE":12,
        "LOG_ACC_BUFF_SIZE":13,"CLOCK_MHZ":60}"#;
    std::fs::write(dir.join("fast.json"), fast).unwrap();
    let args = |board: &'static str| {
        vec![
            "hw",
            "bitstream",
            "--board",
            board,
            "--config",
            "fast.json",
            "-o",
            "out",
        ]
    };
    let e = fails(vta_at(&dir, &args("tang-mega-138k-pro")));
    assert!(
        e.contains("CLOCK_MHZ 60 differs from the 50 MHz oscillator")
            && e.contains("\"CLOCK_MHZ\": 50"),
        "{e}"
    );
    // VTA's default buffers need more block RAM than an ECP5-85F has.
    let e = fails(vta_at(
        &dir,
        &[
            "hw",
            "bitstream",
            "--board",
            "ulx3s-85f",
            "--config",
            "default",
            "-o",
            "out",
        ],
    ));
    assert!(
        e.contains("does not fit LFE5U-85F-6BG381C") && e.contains("LOG_WGT_BUFF_SIZE 18 -> 17"),
        "{e}"
    );
    let mut with_estimate = args("ulx3s-25f");
    with_estimate.extend(["--estimate", "x.json"]);
    let e = fails(vta_at(&dir, &with_estimate));
    assert!(e.contains("--estimate is for Zynq boards"), "{e}");
    let mut sdram = args("orangecrab-85f");
    sdram.extend(["--memory", "sdram"]);
    let e = fails(vta_at(&dir, &sdram));
    assert!(
        e.contains("board orangecrab-85f has no SDRAM in its board file")
            && e.contains("--memory bram"),
        "{e}"
    );
    let mut sized = args("ulx3s-85f");
    sized.extend(["--memory", "sdram", "--memory-kib", "64"]);
    let e = fails(vta_at(&dir, &sized));
    assert!(
        e.contains("with --memory sdram the device memory is the board's SDRAM"),
        "{e}"
    );
    assert!(!dir.join("out").exists(), "nothing written");
}

/// The open flow's result, checked: exit 0, timing met at the board's default clock, the
/// bitstream file as reported, and the text report's main lines.
fn open_flow(
    board: &str,
    design: &str,
    scratch_name: &str,
) -> (std::path::PathBuf, serde_json::Value) {
    open_flow_with(board, design, &[], scratch_name)
}

/// [`open_flow`] with more options.
fn open_flow_with(
    board: &str,
    design: &str,
    extra: &[&str],
    scratch_name: &str,
) -> (std::path::PathBuf, serde_json::Value) {
    let dir = scratch(scratch_name);
    let mut args = vec![
        "hw",
        "bitstream",
        "--board",
        board,
        "--design",
        design,
        "-o",
        "out",
        "--json",
    ];
    args.extend(extra);
    let out = ok(vta_in(&dir, &args));
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["timing_met"], true, "{r:#}");
    let clk = &r["clocks"][0];
    assert_eq!(clk["clock"], "clk");
    assert!(
        clk["fmax_mhz"].as_f64().unwrap() >= clk["target_mhz"].as_f64().unwrap(),
        "{clk}"
    );
    let file = dir.join(if r["family"] == "ecp5" {
        "out/vta.bit"
    } else {
        "out/vta.fs"
    });
    assert_eq!(
        r["bitstream_bytes"],
        std::fs::metadata(&file).unwrap().len()
    );
    let text = std::fs::read_to_string(dir.join("out/report.txt")).unwrap();
    for needle in [
        "Fmax",
        ": met, slack",
        "critical path",
        "load it with:",
        "run time:",
    ] {
        assert!(text.contains(needle), "{needle} missing in\n{text}");
    }
    (file, r)
}

/// An ECP5 bitstream as ecppack writes it: the header names the part, the configuration
/// preamble follows.
fn assert_ecp5_bitstream(file: &Path, part: &str) {
    let bit = std::fs::read(file).unwrap();
    assert_eq!(bit[..2], [0xff, 0x00], "no ecppack header");
    let name = format!("Part: {part}\0");
    assert!(
        bit[..64].windows(name.len()).any(|w| w == name.as_bytes()),
        "{name} not in the header {:?}",
        &bit[..64]
    );
    assert!(
        bit.windows(4).any(|w| w == [0xff, 0xff, 0xbd, 0xb3]),
        "no preamble"
    );
}

/// The whole open flow on an ECP5-25F (ULX3S) with the counter design: yosys, ecppll,
/// nextpnr-ecp5 and ecppack to a real bitstream with timing met, in seconds (the first run on
/// a machine also installs the tools from PyPI into the user's tool cache, about a minute).
#[test]
fn ulx3s_25f_counter_gets_a_real_bitstream() {
    let (file, r) = open_flow("ulx3s-25f", "counter", "openflow_ulx3s_25f_counter");
    assert_eq!(r["part"], "LFE5U-25F-6BG381C");
    assert_eq!(r["clocks"][0]["target_mhz"], 50.0);
    assert_ecp5_bitstream(&file, "LFE5U-25F-6CABGA381");
}

/// The SoC (1x4x4, 32 KiB device memory) on an ECP5-25F, to a bitstream with timing met at
/// 50 MHz: about 5 minutes of CPU for place and route (15 minutes here on a busy machine), so
/// `./test.sh` runs it (VTA_OPENFLOW=0 skips it) rather than every `cargo test`.
#[test]
#[ignore = "5 CPU-minutes (15 on a busy machine); ./test.sh runs it, or cargo test --test cli_bitstream -- --ignored ulx3s"]
fn ulx3s_25f_soc_gets_a_real_bitstream_with_timing_met() {
    let (file, r) = open_flow("ulx3s-25f", "soc", "openflow_ulx3s_25f_soc");
    assert_eq!(r["design"], "vta_soc");
    // 27 before ACC and OUT became two banks each (half as deep, the same width).
    assert_eq!(r["mapped"]["bram_blocks"], 33);
    assert_ecp5_bitstream(&file, "LFE5U-25F-6CABGA381");
}

/// The SoC (1x8x8 at 45 MHz) with the ULX3S's 32 MB SDRAM as device memory behind the
/// LiteDRAM controller (generated on first use) on an ECP5-85F, to a bitstream with timing
/// met: an opt-in benchmark (LiteDRAM from PyPI, and nextpnr's placement of the 85F).
#[test]
#[ignore = "long: about 30-40 minutes here; run with cargo test --test cli_bitstream -- --ignored ulx3s_85f_sdram"]
fn ulx3s_85f_sdram_soc_gets_a_real_bitstream_with_timing_met() {
    let (file, r) = open_flow_with(
        "ulx3s-85f",
        "soc",
        &["--memory", "sdram"],
        "openflow_ulx3s_85f_sdram_soc",
    );
    assert_eq!(r["design"], "vta_soc");
    assert_eq!(r["device_memory"], "sdram");
    assert!(
        r["description"]
            .as_str()
            .is_some_and(|d| d.contains("32 MiB SDR SDRAM through LiteDRAM")),
        "{r:#}"
    );
    assert_ecp5_bitstream(&file, "LFE5U-85F-6CABGA381");
}

/// The SoC (1x4x4) on a Tang Nano 20K (Gowin): an opt-in benchmark (it fills 82 % of the
/// part's LUT positions, and nextpnr's placer is slow there).
#[test]
#[ignore = "long: 78 minutes here (placement about 50); run with cargo test --test cli_bitstream -- --ignored tang_nano"]
fn tang_nano_20k_soc_gets_a_real_bitstream_with_timing_met() {
    let (file, r) = open_flow("tang-nano-20k", "soc", "openflow_tang_nano_20k_soc");
    assert_eq!(r["design"], "vta_soc");
    assert_gowin_bitstream(&file);
}

/// A Gowin bitstream as gowin_pack writes it: ASCII lines of bits, the sync word 0xA5C3
/// after the padding; returns its lines.
fn assert_gowin_bitstream(file: &Path) -> Vec<String> {
    let fs = std::fs::read_to_string(file).unwrap();
    assert!(fs.lines().any(|l| l == "1010010111000011"), "no sync word");
    assert!(fs.bytes().all(|c| c == b'0' || c == b'1' || c == b'\n'));
    fs.lines().map(String::from).collect()
}

/// The SoC at its default config (1x8x8, 256 KiB of device memory) on a Tang Mega 138K Pro
/// (Gowin GW5AST-138): an opt-in benchmark like the Tang Nano 20K's.
#[test]
#[ignore = "long: 61 minutes here (placement 30, routing 12.5, gowin_pack 15); run with cargo test --test cli_bitstream -- --ignored tang_mega"]
fn tang_mega_138k_pro_soc_gets_a_real_bitstream_with_timing_met() {
    let (file, r) = open_flow("tang-mega-138k-pro", "soc", "openflow_tang_mega_138k_soc");
    assert_eq!(r["design"], "vta_soc");
    assert_eq!(r["config_string"], "1x8_i8w8a32_13_13_15_15_nomul");
    assert_eq!(r["clocks"][0]["target_mhz"], 50.0);
    assert_eq!(r["mapped"]["dsps"], 0, "yosys maps no GW5A DSP");
    let lines = assert_gowin_bitstream(&file);
    // The IDCODE check command (0x06) names the GW5AST-138 (0x0001081B) the board carries.
    let idcode = format!("00000110{:056b}", 0x0001_081B_u64);
    assert!(lines.contains(&idcode), "no GW5AST-138 IDCODE line");
}
