//! The SoC (`vta_hw::soc`) simulated whole in Verilator and driven through its UART pins by
//! the serial driver (`drivers::serial::SerialDevice` over `vta_sim::soc::SimLine`), the
//! driver a board is reached with: the bridge's info registers and copies at every
//! alignment, a program bit-exact against the functional simulator, bytes lost or damaged
//! on the line in either direction caught and recovered from (or reported, for a register
//! write), a port at the wrong baud rate named as such, and the command line: `vta sim` and
//! `vta demo` on `--backend soc-sim`, `--backend serial://` errors, `vta hw verilog --soc`.
//!
//! Every simulation uses the `default` config's SoC, the model the conformance suite builds.

#[path = "support/cli.rs"]
mod cli;
#[path = "support/rtl.rs"]
mod rtl_support;

use rtl_support::{acc_alu_store, bytes, load_acc_row_at_0};
use std::io::{Read, Write};
use std::process::Command;

use drivers::serial::{SerialDevice, SerialOptions};
use drivers::{run_program, Device, DeviceError, RunTimeout};
use isa::{AluOp, DepFlags, HwConfig, Insn, MemInsn, MemType};
use vta_sim::soc::{self, LineFault, SimLine, SimOptions};
use vta_sim::FsimDevice;

fn options() -> SimOptions {
    SimOptions {
        cache_dir: Some(rtl_support::model_cache()),
        ..SimOptions::default()
    }
}

/// A fresh simulated SoC of the default config.
fn soc_device() -> SerialDevice<SimLine> {
    let cfg = HwConfig::default();
    soc::device(&cfg, &options(), &mut |s| eprintln!("[soc model] {s}"))
        .unwrap_or_else(|e| panic!("no simulated SoC: {e}"))
}

#[test]
fn info_copies_and_a_program_through_the_uart() {
    let cfg = HwConfig::default();
    let mut dev = soc_device();
    let info = dev.info().clone();
    let params = soc::sim_params(&cfg);
    assert_eq!(info.mem_base, params.mem_base);
    assert_eq!(info.mem_bytes, params.mem_bytes);
    assert_eq!((info.clock_hz, info.baud), (100_000_000, 25_000_000));
    assert_eq!((info.rx_errors, info.frame_errors), (0, 0));

    // Copies at every alignment, across frames.
    let buf = dev.alloc(8192, 4096).unwrap();
    let data = bytes(1500, 9);
    dev.copy_to_device(&buf, 0, &data).unwrap();
    for (off, len) in [(0, 1500), (1, 3), (3, 9), (6, 1), (7, 1100), (1021, 4)] {
        let mut got = vec![0; len];
        dev.copy_from_device(&buf, off as u64, &mut got).unwrap();
        assert_eq!(got, data[off..off + len], "read of {len} bytes at {off}");
    }
    let patch = bytes(7, 200);
    dev.copy_to_device(&buf, 5, &patch).unwrap();
    let mut want = data.clone();
    want[5..12].copy_from_slice(&patch);
    let mut got = vec![0; 20];
    dev.copy_from_device(&buf, 0, &mut got).unwrap();
    assert_eq!(got, want[..20]);
    let e = dev.copy_to_device(&buf, 8190, &[0; 4]).unwrap_err();
    assert!(matches!(e, DeviceError::OutOfBounds { .. }), "{e}");
    dev.free(buf).unwrap();

    let p = acc_alu_store(&cfg, 8, &[(AluOp::Add, 3), (AluOp::Shr, 1)]);
    let mut fsim = FsimDevice::new(&cfg);
    let want = run_program(&mut fsim, &p, &[], RunTimeout::default()).unwrap();
    for _ in 0..2 {
        let got = run_program(&mut dev, &p, &[], RunTimeout::default()).unwrap();
        assert_eq!(got.outputs, want.outputs);
        assert_eq!(got.report.counters, want.report.counters);
        assert!(got.report.get("cycles").is_some_and(|c| c > 0));
        assert_eq!(got.report.backend, "soc-sim");
    }
    assert_eq!(dev.stream().framing_errors(), 0);
    // The LEDs show CONTROL as the driver last read it: done, not busy, no error.
    let leds: Vec<bool> = ["led_busy", "led_done", "led_error"]
        .iter()
        .map(|l| dev.stream().pin(l))
        .collect();
    assert_eq!(leds, [false, true, false]);
    let after = dev.read_info().unwrap();
    assert_eq!((after.rx_errors, after.frame_errors), (0, 0));
    assert_eq!(dev.link_stats().repeats, 0);
}

/// Writes `data` at the start of a fresh buffer with `fault` injected, and checks that it
/// arrived whole, that the link repeated one frame, and that the bridge counted the error
/// frames it answered (`bridge_errors`).
fn recovers(fault: LineFault, bridge_errors: u32) {
    let mut dev = soc_device();
    let buf = dev.alloc(4096, 4096).unwrap();
    let data = bytes(64, 1);
    dev.stream_mut().inject(fault);
    dev.copy_to_device(&buf, 0, &data).unwrap();
    let mut got = vec![0; data.len()];
    dev.copy_from_device(&buf, 0, &mut got).unwrap();
    assert_eq!(got, data, "{fault:?}");
    assert_eq!(dev.link_stats().repeats, 1, "{fault:?}");
    let info = dev.read_info().unwrap();
    assert_eq!(info.frame_errors, bridge_errors, "{fault:?}");
}

#[test]
fn lost_and_damaged_bytes_are_caught_and_the_frame_repeated() {
    // A data byte lost: the bridge times out on the frame.
    recovers(LineFault::LoseHostByte(20), 1);
    // A data byte damaged: the data's check byte does not match.
    recovers(LineFault::DamageHostByte(20), 1);
    // The header's address damaged: the header's check byte does not match.
    recovers(LineFault::DamageHostByte(4), 1);
    // The response lost on its way back: the host times out and repeats the write.
    recovers(LineFault::LoseDeviceByte(1), 0);
}

#[test]
fn a_damaged_register_write_is_reported_not_repeated() {
    let cfg = HwConfig::default();
    let mut dev = soc_device();
    let p = acc_alu_store(&cfg, 4, &[(AluOp::Add, 3), (AluOp::Shr, 1)]);
    let region = dev.alloc(p.dram_size(), 4096).unwrap();
    for seg in &p.segments {
        let init = seg.init.clone().unwrap_or(vec![0; seg.size() as usize]);
        dev.copy_to_device(&region, seg.offset, &init).unwrap();
    }
    let insns = p.relocated(region.phys_addr).unwrap();
    let stream = isa::Codec::new(&cfg).encode_stream(&insns).unwrap();
    let ib = dev.alloc(stream.len() as u64, 16).unwrap();
    dev.copy_to_device(&ib, 0, &stream).unwrap();
    // The run's frames: read the stream back (8 bytes), read CONTROL (8), write INSN_ADDR
    // (13), INSN_COUNT (13), then CONTROL: damage the first byte of its data.
    dev.stream_mut()
        .inject(LineFault::DamageHostByte(8 + 8 + 13 + 13 + 8));
    let before = dev.link_stats();
    let e = dev
        .run(ib.phys_addr, insns.len() as u32, RunTimeout::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "the bridge refused a write of 1 word(s) at 0x00000000: the data's check byte did \
             not match"
        ),
        "{e}"
    );
    let after = dev.link_stats();
    assert_eq!((after.frames - before.frames, after.repeats), (5, 0));
    assert_eq!(dev.read_info().unwrap().frame_errors, 1);
    // The device is usable afterwards.
    let got = run_program(&mut dev, &p, &[], RunTimeout::default()).unwrap();
    assert!(got.report.get("cycles").is_some_and(|c| c > 0));
}

#[test]
fn dma_outside_the_device_memory_is_an_error_on_the_led_too() {
    let cfg = HwConfig::default();
    let mut dev = soc_device();
    // LOAD ACC from address 0 (the device memory is at 0x1000_0000), then FINISH.
    let load = load_acc_row_at_0();
    let insns = [Insn::Load(load), Insn::Finish(DepFlags::default())];
    let stream = isa::Codec::new(&cfg).encode_stream(&insns).unwrap();
    let ib = dev.alloc(stream.len() as u64, 16).unwrap();
    dev.copy_to_device(&ib, 0, &stream).unwrap();
    let e = dev
        .run(ib.phys_addr, 2, RunTimeout::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("soc-sim: run failed: the accelerator reported an error (CONTROL = 0x6"),
        "{e}"
    );
    assert!(dev.stream().pin("led_error") && dev.stream().pin("led_done"));
}

#[test]
fn a_run_that_never_finishes_times_out() {
    let cfg = HwConfig::default();
    let mut dev = soc_device();
    // A stream without FINISH.
    let insns = [Insn::Load(MemInsn::sync(MemType::Uop))];
    let stream = isa::Codec::new(&cfg).encode_stream(&insns).unwrap();
    let ib = dev.alloc(stream.len() as u64, 16).unwrap();
    dev.copy_to_device(&ib, 0, &stream).unwrap();
    let e = dev
        .run(ib.phys_addr, 1, RunTimeout::work(20))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("soc-sim: run timed out: no DONE after 20 polls of CONTROL"),
        "{e}"
    );
    assert!(dev.stream().pin("led_busy"));
    // It is still running: the next run says so instead of starting.
    let wall = std::time::Duration::from_millis(50);
    let e = dev
        .run(ib.phys_addr, 1, RunTimeout::wall(wall))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the accelerator is still running an earlier run that timed out"),
        "{e}"
    );
}

/// Sends `frame` on the line as it is and returns the bridge's whole response.
fn exchange(line: &mut SimLine, frame: &[u8]) -> Vec<u8> {
    line.write_all(frame).unwrap();
    line.flush().unwrap();
    let mut got = vec![];
    let mut buf = [0u8; 64];
    loop {
        match line.read(&mut buf) {
            Ok(n) => got.extend(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return got,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn the_bridge_answers_each_request_with_its_status() {
    use drivers::serial::protocol::{crc8, request, response, Op, Status};
    let mut dev = soc_device();
    let info = dev.info().clone();
    let (base, end) = (info.mem_base, info.mem_base + info.mem_bytes);
    let line = dev.stream_mut();
    let ok = |data: &[u32]| response(Status::Ok, data);
    let refused = response(Status::BadAddress, &[]);
    assert_eq!(exchange(line, &request(Op::Nop, 0, 1, &[])), ok(&[]));
    // The last word of the memory, and the control registers' VERSION and ISA hash.
    assert_eq!(
        exchange(line, &request(Op::Write, end - 4, 1, &[0xfeed_f00d])),
        ok(&[])
    );
    assert_eq!(
        exchange(line, &request(Op::Read, end - 4, 1, &[])),
        ok(&[0xfeed_f00d])
    );
    let hash = HwConfig::default().isa_hash();
    assert_eq!(
        exchange(line, &request(Op::Read, 4, 1, &[])),
        ok(&[drivers::regs::VERSION_VALUE])
    );
    assert_eq!(
        exchange(line, &request(Op::Read, 0x10, 2, &[])),
        ok(&[hash as u32, (hash >> 32) as u32])
    );
    for (what, frame) in [
        (
            "one word past the memory",
            request(Op::Read, end - 4, 2, &[]),
        ),
        ("below the memory", request(Op::Write, base - 4, 1, &[1])),
        ("unaligned", request(Op::Read, base + 2, 1, &[])),
        (
            "across the register regions",
            request(Op::Read, 0xfc, 2, &[]),
        ),
        (
            "a write to the info registers",
            request(Op::Write, 0x100, 1, &[1]),
        ),
        (
            "a register write of two words",
            request(Op::Write, 8, 2, &[1, 2]),
        ),
    ] {
        assert_eq!(exchange(line, &frame), refused, "{what}");
    }
    let mut bad_op = request(Op::Nop, 0, 1, &[]);
    bad_op[1] = 7;
    bad_op[7] = crc8(0, &bad_op[..7]);
    assert_eq!(exchange(line, &bad_op), response(Status::BadOp, &[]));
    let mut damaged = request(Op::Read, base, 1, &[]);
    damaged[7] ^= 1;
    assert_eq!(exchange(line, &damaged), response(Status::HeaderCheck, &[]));
    // Half a frame, then silence.
    assert_eq!(
        exchange(line, &request(Op::Read, base, 1, &[])[..5]),
        response(Status::Timeout, &[])
    );
    assert_eq!(dev.read_info().unwrap().frame_errors, 9);
}

#[test]
fn a_port_at_the_wrong_baud_rate_is_named() {
    let cfg = HwConfig::default();
    let opts = SimOptions {
        host_divisor: Some(5),
        serial: SerialOptions {
            repeats: 0,
            ..options().serial
        },
        ..options()
    };
    let e = soc::device(&cfg, &opts, &mut |_| {})
        .err()
        .expect("no bridge at the wrong rate")
        .to_string();
    assert!(
        e.contains("the simulated SoC's UART (25000000 baud): no VTA UART bridge answers")
            && e.contains("the baud rate is the one it was built for"),
        "{e}"
    );
}

/// Stderr of a command line the parser refuses (exit code 2).
fn usage_error(out: std::process::Output) -> String {
    let err = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected a usage error, got:\n{err}"
    );
    err
}

fn vta_env(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vta"))
        .args(args)
        .current_dir(env!("CARGO_TARGET_TMPDIR"))
        .env("VTA_HDL_CACHE", rtl_support::model_cache())
        .output()
        .expect("the vta binary runs")
}

#[test]
fn vta_sim_and_demo_on_the_simulated_soc() {
    let ex = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/dense_relu.vasm")
        .display()
        .to_string();
    let outputs = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("output "))
            .map(String::from)
            .collect()
    };
    let f = cli::ok(cli::vta(&["sim", &ex]));
    let s = cli::ok(vta_env(&["sim", &ex, "--backend", "soc-sim"]));
    assert_eq!(outputs(&f), outputs(&s));
    assert!(s.contains("11 instructions on soc-sim"), "{s}");
    assert!(
        s.contains("cycles: ") && s.contains("polls of CONTROL"),
        "{s}"
    );

    let d = cli::ok(vta_env(&["demo", "--backend", "soc-sim"]));
    assert!(d.contains("ran 100 test digits on soc-sim"), "{d}");
    assert!(
        d.contains("bit-exact against the integer reference: 100 digits x 11 layers"),
        "{d}"
    );
    assert!(d.contains("accuracy: accelerator (int8) 98/100"), "{d}");
}

#[test]
fn serial_backend_errors_name_the_port() {
    let e = usage_error(cli::vta(&[
        "sim",
        "x.vasm",
        "--backend",
        "serial:///dev/ttyUSB0?baud=fast",
    ]));
    assert!(e.contains("baud 'fast' is not a positive number"), "{e}");
    let ex = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/dense_relu.vasm")
        .display()
        .to_string();
    let e = cli::fails(cli::vta(&[
        "sim",
        &ex,
        "--backend",
        "serial:///dev/no-such-tty",
    ]));
    assert!(e.contains("cannot open /dev/no-such-tty"), "{e}");
    // A port with nothing behind it: one ping, then an error naming the port.
    // SAFETY: standard pty allocation; ptsname_r writes a NUL-terminated path, and the
    // master descriptor stays open (silent) until the command has failed.
    let (master, tty) = unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(fd >= 0 && libc::grantpt(fd) == 0 && libc::unlockpt(fd) == 0);
        let mut buf = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(fd, buf.as_mut_ptr(), buf.len()), 0);
        let path = std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap();
        (fd, path.to_string())
    };
    let e = cli::fails(cli::vta(&[
        "sim",
        &ex,
        "--backend",
        &format!("serial://{tty}"),
    ]));
    assert!(
        e.starts_with(&format!(
            "error: {tty}: no VTA UART bridge answers: no answer to a NOP: expected 2 more \
             bytes"
        )),
        "{e}"
    );
    // SAFETY: closes the descriptor opened above, once.
    unsafe { libc::close(master) };
    let e = cli::fails(cli::vta(&[
        "sim",
        &ex,
        "--backend",
        "serial:///dev/null?baud=1234",
    ]));
    assert!(
        e.contains("/dev/null: 1234 baud is not a rate this port can be set to; use one of 9600"),
        "{e}"
    );
}

#[test]
fn hw_verilog_soc_writes_the_soc() {
    let dir = cli::scratch("hw-verilog-soc");
    let out = cli::ok(cli::vta_in(
        &dir,
        &[
            "hw",
            "verilog",
            "--soc",
            "--config",
            "small",
            "--clock-hz",
            "27000000",
            "-o",
            "v",
        ],
    ));
    assert!(
        out.contains("SoC: 27000000 Hz clock, 115200 baud (234 cycles per bit), 32 KiB"),
        "{out}"
    );
    let v = std::fs::read_to_string(dir.join("v/vta_soc.v")).unwrap();
    assert!(v.contains("module vta_soc ("), "no top");
    assert!(dir.join("v/regs.json").exists() && dir.join("v/ports.json").exists());
    let e = usage_error(cli::vta(&["hw", "verilog", "--baud", "9600", "-o", "x"]));
    assert!(
        e.contains("required arguments were not provided:\n  --soc"),
        "{e}"
    );
    let e = cli::fails(cli::vta_in(
        &dir,
        &["hw", "verilog", "--soc", "--baud", "30000000", "-o", "v"],
    ));
    assert!(
        e.contains("UART: 30000000 baud from a 100000000 Hz clock"),
        "{e}"
    );
}
