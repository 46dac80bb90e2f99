//! The board device (`drivers::board::BoardDevice`) against an emulated board
//! (`support/board_emu.rs`: register window and DMA memory shared with a thread that runs the
//! functional simulator, behind a write-back cache model): programs and a compiled model
//! bit-exact with fsim, forgotten cache maintenance caught as stale data, a wrong bitstream
//! refused, a timed-out run followed by a working one, and bitstream loading through an
//! FPGA manager's files.

#![cfg(target_os = "linux")]

#[path = "support/board_emu.rs"]
mod board_emu;
#[path = "support/cli.rs"]
#[allow(dead_code)]
mod cli;

use std::path::Path;
use std::time::Duration;

use board_emu::{EmulatedBoard, Engine, Finish};
use drivers::board::{BoardDevice, BoardError, BoardPaths};
use drivers::{run_program, Buffer, Device, DeviceError, RunReport, RunTimeout};
use isa::asm::{parse_program, AsmContext};
use isa::{HwConfig, Program};
use vta_sim::FsimDevice;

const MEM: u64 = 32 << 20;

fn dense_relu() -> Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dense_relu.vasm");
    let ctx = AsmContext {
        file_name: path.display().to_string(),
        base_dir: path.parent().unwrap().to_path_buf(),
        config: None,
    };
    parse_program(&std::fs::read_to_string(&path).unwrap(), &ctx).unwrap()
}

fn board(cfg: &HwConfig) -> (EmulatedBoard, BoardDevice) {
    let emu = EmulatedBoard::new(cfg, cfg.isa_hash(), MEM);
    let dev = BoardDevice::open(cfg, &emu.options()).unwrap();
    (emu, dev)
}

fn fsim_outputs(p: &Program) -> Vec<(String, Vec<u8>)> {
    let mut fsim = FsimDevice::new(&p.config);
    run_program(&mut fsim, p, &[], RunTimeout::default())
        .unwrap()
        .outputs
}

#[test]
fn a_program_runs_bit_exact_with_fsim_and_reports_counters() {
    let p = dense_relu();
    let (emu, mut dev) = board(&p.config);
    let mut fsim = FsimDevice::new(&p.config);
    let want = run_program(&mut fsim, &p, &[], RunTimeout::default()).unwrap();
    assert!(
        want.outputs[0].1.iter().any(|&b| b != 0),
        "a non-zero result"
    );
    for _ in 0..2 {
        let got = run_program(&mut dev, &p, &[], RunTimeout::default()).unwrap();
        assert_eq!(got.outputs, want.outputs);
        assert_eq!(got.report.backend, "board");
        assert_eq!(got.report.counters, want.report.counters);
        assert!(got.report.get("cycles").unwrap() > 0);
        assert!(got.report.get("polls").unwrap() >= 1);
    }
    // Exactly the ranges asked for were synced: the region and the instructions to the
    // device, then the region back.
    let syncs = emu.syncs();
    assert_eq!(syncs.len(), 6, "{syncs:?}");
    assert_eq!(
        syncs[..3].iter().map(|s| s.0).collect::<Vec<_>>(),
        ["device", "device", "cpu"]
    );
    assert_eq!(syncs[0].2, p.dram_size(), "{syncs:?}");
    assert_eq!(dev.allocator().live(), 0);
}

/// Forwards to the board device but skips one kind of cache maintenance.
struct Forgetful<'a> {
    dev: &'a mut BoardDevice,
    flush: bool,
    invalidate: bool,
    flushes: usize,
}

impl Device for Forgetful<'_> {
    fn name(&self) -> &str {
        self.dev.name()
    }
    fn config(&self) -> &HwConfig {
        self.dev.config()
    }
    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        self.dev.alloc(size, align)
    }
    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError> {
        self.dev.free(buf)
    }
    fn copy_to_device(&mut self, b: &Buffer, off: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.dev.copy_to_device(b, off, data)
    }
    fn copy_from_device(
        &mut self,
        b: &Buffer,
        off: u64,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        self.dev.copy_from_device(b, off, out)
    }
    /// The first flush of a run (the program's data region) is forgotten; the instructions'
    /// flush is kept, so the accelerator runs the right stream on stale data.
    fn flush(&mut self, b: &Buffer, off: u64, size: u64) -> Result<(), DeviceError> {
        self.flushes += 1;
        if self.flush || self.flushes > 1 {
            self.dev.flush(b, off, size)
        } else {
            Ok(())
        }
    }
    fn invalidate(&mut self, b: &Buffer, off: u64, size: u64) -> Result<(), DeviceError> {
        if self.invalidate {
            self.dev.invalidate(b, off, size)
        } else {
            Ok(())
        }
    }
    fn run(&mut self, a: u64, n: u32, t: RunTimeout) -> Result<RunReport, DeviceError> {
        self.dev.run(a, n, t)
    }
}

#[test]
fn the_rtl_services_the_board_with_real_cycles() {
    let p = dense_relu();
    let cfg = p.config.clone();
    let emu = EmulatedBoard::with_engine(&cfg, cfg.isa_hash(), MEM, Engine::Rtl);
    let mut dev = BoardDevice::open(&cfg, &emu.options()).unwrap();
    let mut rtl = vta_sim::rtl::RtlDevice::new(&cfg).unwrap();
    let want = run_program(&mut rtl, &p, &[], RunTimeout::default()).unwrap();
    let got = run_program(&mut dev, &p, &[], RunTimeout::wall(Duration::from_secs(60))).unwrap();
    assert_eq!(got.outputs, fsim_outputs(&p));
    assert_eq!(got.report.counters, want.report.counters);
    assert_eq!(got.report.get("cycles"), want.report.get("cycles"));
}

#[test]
fn forgotten_flush_or_invalidate_gives_stale_data() {
    let p = dense_relu();
    let want = fsim_outputs(&p);
    let (_emu, mut dev) = board(&p.config);
    for (flush, invalidate) in [(false, true), (true, false)] {
        let mut f = Forgetful {
            dev: &mut dev,
            flush,
            invalidate,
            flushes: 0,
        };
        let got = run_program(&mut f, &p, &[], RunTimeout::default()).unwrap();
        assert_ne!(
            got.outputs, want,
            "flush {flush}, invalidate {invalidate}: stale data must show"
        );
    }
    // The same device with its maintenance done is right again.
    let got = run_program(&mut dev, &p, &[], RunTimeout::default()).unwrap();
    assert_eq!(got.outputs, want);
}

#[test]
fn a_wrong_bitstream_is_refused_naming_both_hashes() {
    let cfg = HwConfig::default();
    let stale = cfg.isa_hash() ^ 0x0123_4567_89ab_cdef;
    let emu = EmulatedBoard::new(&cfg, stale, MEM);
    let e = BoardDevice::open(&cfg, &emu.options())
        .err()
        .expect("refused");
    assert!(matches!(e, BoardError::Identity { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("{stale:016x}")) && msg.contains(&format!("{:016x}", cfg.isa_hash())),
        "{msg}"
    );
    assert!(
        msg.contains("Load the bitstream built for this config"),
        "{msg}"
    );
    emu.reload(cfg.isa_hash());
    BoardDevice::open(&cfg, &emu.options()).unwrap();
}

#[test]
fn a_run_that_times_out_leaves_the_device_usable() {
    let p = dense_relu();
    let want = fsim_outputs(&p);
    let (emu, mut dev) = board(&p.config);

    // Slow: the wall-clock deadline passes; the next run waits for the accelerator and works.
    emu.set_finish(Finish::After(Duration::from_millis(300)));
    let e = run_program(
        &mut dev,
        &p,
        &[],
        RunTimeout::wall(Duration::from_millis(20)),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("timed out") && e.contains("no reset register"),
        "{e}"
    );
    emu.set_finish(Finish::After(Duration::ZERO));
    let got = run_program(&mut dev, &p, &[], RunTimeout::wall(Duration::from_secs(30))).unwrap();
    assert_eq!(got.outputs, want);

    // A poll bound (RunTimeout::work) stops a run as well.
    emu.set_finish(Finish::After(Duration::from_millis(200)));
    let e = run_program(&mut dev, &p, &[], RunTimeout::work(3))
        .unwrap_err()
        .to_string();
    assert!(e.contains("after 3 polls"), "{e}");
    emu.set_finish(Finish::After(Duration::ZERO));
    let got = run_program(&mut dev, &p, &[], RunTimeout::wall(Duration::from_secs(30))).unwrap();
    assert_eq!(got.outputs, want);

    // Hung: the next run says the accelerator is still busy and how to reset it; after a
    // reload it works.
    emu.set_finish(Finish::Never);
    let short = RunTimeout::wall(Duration::from_millis(50));
    assert!(run_program(&mut dev, &p, &[], short).is_err());
    let e = run_program(&mut dev, &p, &[], short)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("still running an earlier run") && e.contains("reload the bitstream"),
        "{e}"
    );
    emu.set_finish(Finish::After(Duration::ZERO));
    emu.reload(p.config.isa_hash());
    let got = run_program(&mut dev, &p, &[], RunTimeout::wall(Duration::from_secs(30))).unwrap();
    assert_eq!(got.outputs, want);
    assert_eq!(dev.allocator().live(), 0);
}

/// The tiny CNN compiled into `dir/tiny.vtab` by the `vta` binary, read back.
fn compiled_tiny(dir: &Path) -> vta_runtime::Model {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("compiler/tests/data");
    cli::ok(cli::vta_in(
        dir,
        &[
            "compile",
            &data.join("tiny_cnn.onnx").display().to_string(),
            "--calibrate",
            &data.join("digits_calib.npy").display().to_string(),
            "-o",
            "tiny.vtab",
        ],
    ));
    let bytes = std::fs::read(dir.join("tiny.vtab")).unwrap();
    vta_runtime::file::read(&bytes, None, vta_runtime::budget::DEFAULT_MEMORY_BUDGET).unwrap()
}

/// The first `n` test digits as runs of the model.
fn digit_runs(model: &vta_runtime::Model, n: usize) -> Vec<Vec<vta_runtime::Tensor>> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("compiler/tests/data");
    let digits = isa::npy::read_file(&data.join("digits_test.npy")).unwrap();
    let all = vta_runtime::io::tensor_from_npy(&digits).unwrap();
    let mut runs = model.split_samples(vec![all]).unwrap();
    runs.truncate(n);
    runs
}

#[test]
fn a_compiled_model_runs_bit_exact_with_fsim() {
    let model = compiled_tiny(&cli::scratch("board-model"));
    let cfg = model.config.clone();
    let (_emu, mut dev) = board(&cfg);
    let mut fsim = FsimDevice::new(&cfg);
    for x in digit_runs(&model, 4) {
        let want = model.run(&mut fsim, &x).unwrap();
        let got = model.run(&mut dev, &x).unwrap();
        assert_eq!(got.outputs, want.outputs);
        assert_eq!(got.backend, "board");
    }
}

/// The board served to workstations (what `vta-board serve` runs): `vta demo` and `vta run`
/// with `--backend remote://` on the emulated board, bit-exact with local fsim.
#[test]
fn the_board_serves_remote_clients_bit_exact() {
    let cfg = HwConfig::default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        // The emulated board lives as long as the server, for the rest of the test process.
        let (_emu, mut dev) = board(&cfg);
        let opts = drivers::remote::ServeOptions {
            server_id: "emulated-board".into(),
            ..Default::default()
        };
        drivers::remote::serve(listener, &mut dev, opts).unwrap();
    });
    let backend = format!("remote://{addr}");
    let demo = cli::ok(cli::vta(&["demo", "--backend", &backend]));
    assert!(
        demo.contains(&format!("test digits on board@{addr}"))
            && demo.contains("bit-exact against the integer reference: 100 digits")
            && demo.contains("accuracy: accelerator (int8) 98/100"),
        "{demo}"
    );
    let dir = cli::scratch("board-remote");
    let model = compiled_tiny(&dir);
    let runs = digit_runs(&model, 5);
    let x = vta_runtime::io::concat_samples(&runs.iter().map(|r| r[0].clone()).collect::<Vec<_>>())
        .unwrap();
    let (elem, shape, data) = vta_runtime::io::tensor_to_npy(&x);
    isa::npy::write_file(&dir.join("x.npy"), elem, &shape, &data).unwrap();
    for (backend, out) in [("fsim", "local.npy"), (backend.as_str(), "board.npy")] {
        cli::ok(cli::vta_in(
            &dir,
            &[
                "run",
                "tiny.vtab",
                "-i",
                "x.npy",
                "-o",
                out,
                "--backend",
                backend,
            ],
        ));
    }
    assert_eq!(
        std::fs::read(dir.join("board.npy")).unwrap(),
        std::fs::read(dir.join("local.npy")).unwrap()
    );
}

/// The cross-built armv7 `vta-board` under `qemu-arm` on the emulated board: the digits of
/// the tiny CNN bit-exact with fsim. Opt-in (the cross build takes minutes): run
/// `scripts/cross-build.sh armv7`, then `cargo test --test board -- --ignored`
/// (`VTA_CROSS=1 ./test.sh` does both).
#[test]
#[ignore = "needs scripts/cross-build.sh armv7 and qemu-arm"]
fn the_cross_built_armv7_binary_runs_a_model_under_qemu() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = root.join("target/cross/vta-board-armv7");
    assert!(
        bin.exists(),
        "{} missing: run scripts/cross-build.sh armv7 first",
        bin.display()
    );
    let dir = cli::scratch("board-qemu");
    let model = compiled_tiny(&dir);
    let cfg = model.config.clone();
    let runs = digit_runs(&model, 3);
    let x = vta_runtime::io::concat_samples(&runs.iter().map(|r| r[0].clone()).collect::<Vec<_>>())
        .unwrap();
    let (elem, shape, data) = vta_runtime::io::tensor_to_npy(&x);
    isa::npy::write_file(&dir.join("x.npy"), elem, &shape, &data).unwrap();
    let mut fsim = FsimDevice::new(&cfg);
    let want: Vec<_> = runs
        .iter()
        .map(|r| model.run(&mut fsim, r).unwrap().outputs.remove(0))
        .collect();
    let want = vta_runtime::io::concat_samples(&want).unwrap();

    let emu = EmulatedBoard::new(&cfg, cfg.isa_hash(), MEM);
    let out = std::process::Command::new("qemu-arm")
        .args(["-L", "/usr/arm-linux-gnueabihf"])
        .arg(&bin)
        .args([
            "run",
            "tiny.vtab",
            "--input",
            "x.npy",
            "--output",
            "y.npy",
            "--root",
        ])
        .arg(emu.dir.path())
        .current_dir(&dir)
        .output()
        .expect("qemu-arm runs (apt-get install qemu-user)");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "vta-board under qemu-arm failed:\n{log}"
    );
    assert!(
        log.contains("inference 3:") && log.contains("device cycles"),
        "{log}"
    );
    let got = vta_runtime::io::tensor_from_npy(&isa::npy::read_file(&dir.join("y.npy")).unwrap())
        .unwrap();
    assert_eq!(got, want);
    assert!(emu.syncs().iter().filter(|s| s.0 == "cpu").count() >= 3);
}

/// The cross-built armv7 `vta-board serve` under `qemu-arm` on the emulated board whose runs
/// the RTL simulator executes, and the workstation's `vta demo --backend remote://`: the
/// digits bit-exact, 98/100. Opt-in like the test above.
#[test]
#[ignore = "needs scripts/cross-build.sh armv7 and qemu-arm"]
fn the_cross_built_armv7_binary_serves_the_demo_under_qemu() {
    use std::io::{BufRead, BufReader};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = root.join("target/cross/vta-board-armv7");
    assert!(
        bin.exists(),
        "{} missing: run scripts/cross-build.sh armv7 first",
        bin.display()
    );
    let cfg = HwConfig::default();
    // The accelerator's Verilog services the board: the demo's launches run cycle by cycle.
    let emu = EmulatedBoard::with_engine(&cfg, cfg.isa_hash(), MEM, Engine::Rtl);
    let mut server = std::process::Command::new("qemu-arm")
        .args(["-L", "/usr/arm-linux-gnueabihf"])
        .arg(&bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(emu.dir.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("qemu-arm runs (apt-get install qemu-user)");
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let first = lines.next().and_then(|l| l.ok()).unwrap_or_default();
    let addr = first
        .strip_prefix("vta-board serve: listening on ")
        .and_then(|r| r.split(' ').next())
        .map(str::to_string);
    std::thread::spawn(move || lines.for_each(drop));
    let result = addr.map(|addr| cli::vta(&["demo", "--backend", &format!("remote://{addr}")]));
    let _ = server.kill();
    let _ = server.wait();
    let demo = cli::ok(result.unwrap_or_else(|| panic!("vta-board serve said: {first}")));
    assert!(
        demo.contains("bit-exact against the integer reference: 100 digits")
            && demo.contains("accuracy: accelerator (int8) 98/100"),
        "{demo}"
    );
}

/// The board build of the Python package, as a PYNQ user installs it: the wheel
/// `scripts/cross-wheel.sh ARCH` cross-built, installed by pip into the target's CPython
/// (Debian's, with its numpy) under qemu-user, then `scripts/board-wheel-smoke.py` on the
/// emulated board: `vta.load(...).run(x, backend="board")` bit-exact with the workstation's
/// `vta run`, and the typed errors. Opt-in like the board binary's qemu tests:
/// `scripts/cross-wheel.sh ARCH`, then `cargo test --test board -- --ignored wheel`.
fn board_wheel_under_qemu(arch: &str, wheel_arch: &str, qemu: &str) {
    use std::process::Command;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cross = root.join("target/cross");
    let py = cross.join(format!("python-{arch}"));
    let sysroot = py.join("sysroot");
    let python = sysroot.join("usr/bin/python3.11");
    let wheel = std::fs::read_dir(cross.join("wheels"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with("vta-") && name.ends_with(&format!("_{wheel_arch}.whl"))
        });
    let (Some(wheel), true) = (wheel, python.exists()) else {
        panic!(
            "no board wheel or target Python for {arch}: run scripts/cross-wheel.sh {arch} first"
        );
    };
    let target_python = |args: &[&std::ffi::OsStr]| {
        let mut c = Command::new(qemu);
        c.arg("-L").arg(&sysroot).arg(&python).args(args);
        c
    };
    let dir = cli::scratch(&format!("wheel-qemu-{arch}"));
    let site = dir.join("site");
    let _ = std::fs::remove_dir_all(&site);
    // pip on the target checks the wheel's tags (cp39-abi3, manylinux_2_27, the machine).
    let out = target_python(&[
        py.join("pip.whl/pip").as_os_str(),
        "install".as_ref(),
        "--no-index".as_ref(),
        "--no-deps".as_ref(),
        "--target".as_ref(),
        site.as_os_str(),
        wheel.as_os_str(),
    ])
    .output()
    .unwrap_or_else(|e| panic!("{qemu} runs (apt-get install qemu-user): {e}"));
    assert!(
        out.status.success(),
        "pip install of {} under {qemu} failed:\n{}{}",
        wheel.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The first digits, and the workstation's outputs for them (`vta run`, fsim).
    let model_file = root.join("fuzz/seeds/model/tiny_cnn.vtab");
    let bytes = std::fs::read(&model_file).unwrap();
    let model =
        vta_runtime::file::read(&bytes, None, vta_runtime::budget::DEFAULT_MEMORY_BUDGET).unwrap();
    let runs = digit_runs(&model, 3);
    let x = vta_runtime::io::concat_samples(&runs.iter().map(|r| r[0].clone()).collect::<Vec<_>>())
        .unwrap();
    let (elem, shape, data) = vta_runtime::io::tensor_to_npy(&x);
    isa::npy::write_file(&dir.join("x.npy"), elem, &shape, &data).unwrap();
    let model_arg = model_file.display().to_string();
    cli::ok(cli::vta_in(
        &dir,
        &["run", &model_arg, "-i", "x.npy", "-o", "want.npy"],
    ));

    let cfg = model.config.clone();
    let emu = EmulatedBoard::new(&cfg, cfg.isa_hash(), MEM);
    let smoke = root.join("scripts/board-wheel-smoke.py");
    let out = target_python(&[
        smoke.as_os_str(),
        "--root".as_ref(),
        emu.dir.path().as_os_str(),
        "--model".as_ref(),
        model_file.as_os_str(),
        "--input".as_ref(),
        dir.join("x.npy").as_os_str(),
        "--expect".as_ref(),
        dir.join("want.npy").as_os_str(),
    ])
    .env("PYTHONPATH", &site)
    .current_dir(&dir)
    .output()
    .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && log.contains("board wheel smoke test: ok"),
        "the board wheel's smoke test under {qemu} failed:\n{log}"
    );
    // The board ran them: its DMA buffer was synced for the CPU after the launches.
    assert!(
        emu.syncs().iter().filter(|s| s.0 == "cpu").count() >= 3,
        "{log}"
    );
    eprintln!("{log}");
}

#[test]
#[ignore = "needs scripts/cross-wheel.sh armv7 and qemu-arm"]
fn the_armv7_board_wheel_runs_a_model_under_qemu() {
    board_wheel_under_qemu("armv7", "armv7l", "qemu-arm");
}

#[test]
#[ignore = "needs scripts/cross-wheel.sh aarch64 and qemu-aarch64"]
fn the_aarch64_board_wheel_runs_a_model_under_qemu() {
    board_wheel_under_qemu("aarch64", "aarch64", "qemu-aarch64");
}

#[test]
fn a_bitstream_loads_through_the_fpga_manager() {
    let dir = tempfile::tempdir().unwrap();
    let paths = BoardPaths::under(dir.path());
    let mgr = paths.fpga_manager();
    std::fs::create_dir_all(&mgr).unwrap();
    std::fs::create_dir_all(&paths.firmware).unwrap();
    let data: Vec<u8> = [0xffu8; 8]
        .into_iter()
        .chain([0xaa, 0x99, 0x55, 0x66, 0x30, 0x00, 0x80, 0x01])
        .collect();
    let bit = bit_file(&data);
    std::fs::write(mgr.join("state"), "operating\n").unwrap();
    let (h, fw) = drivers::board::bitstream::load(&paths, &bit, "vta.bit", "vta").unwrap();
    assert_eq!(h.part, "xc7z020clg400-1");
    assert_eq!(fw, paths.firmware.join("vta.bin"));
    assert_eq!(
        std::fs::read(&fw).unwrap()[8..],
        [0x66, 0x55, 0x99, 0xaa, 0x01, 0x80, 0x00, 0x30]
    );
    assert_eq!(std::fs::read_to_string(mgr.join("flags")).unwrap(), "0");
    assert_eq!(
        std::fs::read_to_string(mgr.join("firmware")).unwrap(),
        "vta.bin"
    );
    std::fs::write(mgr.join("state"), "write error\n").unwrap();
    let e = drivers::board::bitstream::load(&paths, &bit, "vta.bit", "vta")
        .unwrap_err()
        .to_string();
    assert!(e.contains("'write error'") && e.contains("vta.bin"), "{e}");
}

/// A `.bit` file around `data`, its header as Vivado writes it.
fn bit_file(data: &[u8]) -> Vec<u8> {
    let mut b = vec![
        0x00, 0x09, 0x0f, 0xf0, 0x0f, 0xf0, 0x0f, 0xf0, 0x0f, 0xf0, 0x00, 0x00, 0x01,
    ];
    for (key, s) in [
        (b'a', "vta_shell_wrapper;UserID=0XFFFFFFFF;Version=2023.2"),
        (b'b', "xc7z020clg400-1"),
        (b'c', "2025/02/01"),
        (b'd', "10:00:00"),
    ] {
        b.push(key);
        b.extend((s.len() as u16 + 1).to_be_bytes());
        b.extend(s.as_bytes());
        b.push(0);
    }
    b.push(b'e');
    b.extend((data.len() as u32).to_be_bytes());
    b.extend(data);
    b
}
