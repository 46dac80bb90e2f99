//! Gates on the SoC (`vta_hw::soc`): its Verilog is lint clean, yosys infers the device
//! memory, the header carries the config and parameters, and bad parameters are refused with
//! what to change. (Simulations of the SoC through its UART are in the workspace's
//! `tests/soc.rs`.)
//!
//! Needs `verilator` and `yosys` (`apt-get install verilator yosys`).

mod common;

use common::work_dir;
use isa::HwConfig;
use vta_hw::soc::{self, SocParams};

fn small() -> HwConfig {
    HwConfig::preset("small").unwrap()
}

#[test]
fn lint_small_default_params_and_inverted_pins() {
    let cfg = small();
    for (name, params) in [
        ("soc-small", SocParams::for_config(&cfg)),
        (
            "soc-small-low",
            SocParams {
                reset_active_low: true,
                leds_active_low: true,
                clock_hz: 27_000_000,
                ..SocParams::for_config(&cfg)
            },
        ),
    ] {
        let g = soc::generate(&cfg, &params).unwrap();
        if let Err(e) = hdl::verilator::lint(&g.design, &work_dir(name)) {
            panic!("vta_soc ({name}) is not lint clean:\n{e}");
        }
    }
}

#[test]
fn lint_wide_bus() {
    let cfg = HwConfig::preset("wide-bus").unwrap();
    let params = SocParams {
        mem_bytes: 1 << 20,
        ..SocParams::for_config(&cfg)
    };
    let g = soc::generate(&cfg, &params).unwrap();
    if let Err(e) = hdl::verilator::lint(&g.design, &work_dir("soc-wide")) {
        panic!("vta_soc (wide-bus) is not lint clean:\n{e}");
    }
}

#[test]
fn header_and_ports() {
    let cfg = small();
    let params = SocParams {
        reset_active_low: true,
        ..SocParams::for_config(&cfg)
    };
    let g = soc::generate(&cfg, &params).unwrap();
    let head: String = g.verilog.lines().take(20).collect::<Vec<_>>().join("\n");
    for want in [
        cfg.config_string().as_str(),
        "115200 baud 8N1 (868 cycles per bit)",
        "32 KiB of block RAM at 0x10000000",
        "rst_n (synchronous, active low)",
    ] {
        assert!(head.contains(want), "no `{want}` in the header:\n{head}");
    }
    let top = g.design.top();
    let mut pins: Vec<String> = top.ports().iter().map(|p| p.name.clone()).collect();
    pins.sort();
    assert_eq!(
        pins,
        [
            "clk",
            "led_busy",
            "led_done",
            "led_error",
            "rst_n",
            "uart_rx",
            "uart_tx"
        ]
    );
}

#[test]
fn yosys_infers_the_device_memory() {
    let cfg = small();
    let g = soc::generate(&cfg, &SocParams::for_config(&cfg)).unwrap();
    let dir = work_dir("soc-yosys");
    let v = dir.join("vta_soc.v");
    std::fs::write(&v, &g.verilog).unwrap();
    let list = dir.join("memories.txt");
    let script = format!(
        "read_verilog {}; hierarchy -top vta_soc; proc; opt; memory -nomap; \
         tee -o {} select -list t:$mem_v2",
        v.display(),
        list.display()
    );
    let out = std::process::Command::new("yosys")
        .args(["-q", "-p", &script])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `yosys` ({e}); install it with `apt-get install yosys`")
        });
    assert!(
        out.status.success(),
        "yosys failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mems = std::fs::read_to_string(&list).unwrap();
    assert!(
        mems.lines()
            .any(|l| l.trim() == "soc_ram_w64_32k_at10000000/ram"),
        "no device memory among yosys' memories:\n{mems}"
    );
    for m in ["vta_top/inp_sram", "vta_top/wgt_sram"] {
        assert!(mems.lines().any(|l| l.trim() == m), "no {m}:\n{mems}");
    }
}

#[test]
fn bad_parameters_say_what_to_change() {
    let cfg = small();
    let base = SocParams::for_config(&cfg);
    let err = |p: SocParams| soc::build(&cfg, &p).unwrap_err().to_string();
    let e = err(SocParams {
        baud: 50_000_000,
        ..base.clone()
    });
    assert!(e.contains("at most 25000000 baud"), "{e}");
    let e = err(SocParams {
        clock_hz: 25_000_000,
        baud: 3_000_000,
        ..base.clone()
    });
    assert!(
        e.contains("8 cycles per bit") && e.contains("4.2 % off"),
        "{e}"
    );
    let e = err(SocParams {
        mem_bytes: 48 << 10,
        ..base.clone()
    });
    assert!(e.contains("power of two"), "{e}");
    let e = err(SocParams {
        mem_base: 0x1234_0000,
        mem_bytes: 1 << 20,
        ..base
    });
    assert!(e.contains("multiple of its size"), "{e}");
}
