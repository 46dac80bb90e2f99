//! The remote runner on loopback: a server in this process serves the functional simulator,
//! and `run_program` on a `RemoteDevice` gives what it gives locally, byte for byte; uploads
//! by hash hit the server's cache; wrong tokens, wrong configs, garbage and vanished clients
//! are handled without harm to the server or to other clients.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use drivers::remote::wire::{read_frame, write_frame, Request, Response};
use drivers::remote::{serve, RemoteDevice, RemoteOptions, ServeOptions, PROTOCOL_VERSION};
use drivers::{run_program, Device, DeviceError, RunTimeout};
use isa::asm::{parse_program, AsmContext};
use isa::{HwConfig, Program};
use vta_sim::FsimDevice;

/// Serves the device `make` makes on a free loopback port, on a thread of its own; returns
/// `HOST:PORT`.
fn start_with<D: Device + 'static>(
    opts: ServeOptions,
    make: impl FnOnce() -> D + Send + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        let mut dev = make();
        serve(listener, &mut dev, opts).unwrap();
    });
    addr
}

/// Serves a fresh functional simulator (`mem` bytes of memory, or the default).
fn start(opts: ServeOptions, mem: Option<u64>) -> String {
    start_with(opts, move || {
        let cfg = HwConfig::default();
        match mem {
            Some(size) => FsimDevice::with_memory(&cfg, FsimDevice::DEFAULT_BASE, size),
            None => FsimDevice::new(&cfg),
        }
    })
}

/// The functional simulator, whose first run hangs for [`SlowDevice::HANG`] ignoring its
/// wall-clock limit (a device that overruns), and says when that run has begun.
struct SlowDevice {
    inner: FsimDevice,
    hung: Option<std::sync::mpsc::Sender<()>>,
}

impl SlowDevice {
    const HANG: Duration = Duration::from_millis(1500);
}

impl Device for SlowDevice {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn config(&self) -> &HwConfig {
        self.inner.config()
    }
    fn alloc(&mut self, size: u64, align: u64) -> Result<drivers::Buffer, DeviceError> {
        self.inner.alloc(size, align)
    }
    fn free(&mut self, buf: drivers::Buffer) -> Result<(), DeviceError> {
        self.inner.free(buf)
    }
    fn copy_to_device(
        &mut self,
        buf: &drivers::Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        self.inner.copy_to_device(buf, offset, data)
    }
    fn copy_from_device(
        &mut self,
        buf: &drivers::Buffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        self.inner.copy_from_device(buf, offset, out)
    }
    fn flush(&mut self, buf: &drivers::Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        self.inner.flush(buf, offset, size)
    }
    fn invalidate(
        &mut self,
        buf: &drivers::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<(), DeviceError> {
        self.inner.invalidate(buf, offset, size)
    }
    fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    ) -> Result<drivers::RunReport, DeviceError> {
        if let Some(hung) = self.hung.take() {
            hung.send(()).unwrap();
            thread::sleep(Self::HANG);
        }
        self.inner.run(insn_addr, insn_count, timeout)
    }
}

fn connect(addr: &str) -> RemoteDevice {
    RemoteDevice::connect(addr, RemoteOptions::default()).unwrap()
}

fn example() -> Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/dense_relu.vasm");
    let src = std::fs::read_to_string(&path).unwrap();
    let ctx = AsmContext {
        file_name: "dense_relu.vasm".into(),
        base_dir: path.parent().unwrap().to_path_buf(),
        config: None,
    };
    parse_program(&src, &ctx).unwrap()
}

/// The example with input `x` replaced by `seed`-derived bytes.
fn input(seed: u8) -> Vec<(String, Vec<u8>)> {
    let x = (0..64u32)
        .map(|i| (i * 7 + u32::from(seed)) as u8 % 29)
        .collect();
    vec![("x".to_string(), x)]
}

#[test]
fn run_program_on_a_remote_fsim_is_bit_exact_with_local_fsim() {
    let addr = start(ServeOptions::default(), None);
    let p = example();
    let mut local = FsimDevice::new(&p.config);
    let mut remote = connect(&addr);
    assert_eq!(remote.info().device, "fsim");
    assert_eq!(remote.info().bitstream, "none");
    assert_eq!(remote.config().isa_hash(), p.config.isa_hash());
    for seed in [0, 5] {
        let want = run_program(&mut local, &p, &input(seed), RunTimeout::default()).unwrap();
        let got = run_program(&mut remote, &p, &input(seed), RunTimeout::default()).unwrap();
        assert_eq!(got.outputs, want.outputs);
        assert_eq!(got.report.counters, want.report.counters);
        assert_eq!(got.report.extras, want.report.extras);
        assert_eq!(got.report.backend, format!("fsim@{addr}"));
    }
    // Errors come back as the device's own variants, with its words.
    let e = run_program(&mut remote, &p, &[], RunTimeout::work(3)).unwrap_err();
    assert!(matches!(e, DeviceError::Timeout { .. }), "{e}");
    let b = remote.alloc(100, 1).unwrap();
    let e = remote.copy_to_device(&b, 90, &[0; 20]).unwrap_err();
    assert!(matches!(e, DeviceError::OutOfBounds { .. }), "{e}");
    let e = remote.alloc(1, 3).unwrap_err();
    assert_eq!(e.to_string(), "alignment 3 is not a power of two");
    remote.free(b.clone()).unwrap();
    let e = remote.free(b).unwrap_err();
    assert!(matches!(e, DeviceError::UnknownBuffer { .. }), "{e}");
}

#[test]
fn large_writes_are_sent_once_per_server_then_taken_from_its_cache() {
    // Frames of 80 KiB: a 300 KiB write travels as three 79 KiB pieces (each offered by
    // hash) and a 63 KiB rest (too small to offer).
    let addr = start(
        ServeOptions {
            max_frame: 80 << 10,
            ..ServeOptions::default()
        },
        None,
    );
    let blob: Vec<u8> = (0..300u32 << 10).map(|i| (i * 31 % 251) as u8).collect();
    let mut a = connect(&addr);
    let buf = a.alloc(blob.len() as u64, 1).unwrap();
    a.copy_to_device(&buf, 0, &blob).unwrap();
    assert_eq!((a.cache_hits(), a.sent_bytes()), (0, blob.len() as u64));
    // Zeros: the first large piece is sent, the two more like it are not.
    a.copy_to_device(&buf, 0, &vec![0; blob.len()]).unwrap();
    assert_eq!(a.cache_hits(), 2);
    a.copy_to_device(&buf, 0, &blob).unwrap();
    assert_eq!(
        a.cache_hits(),
        5,
        "the blob's three large pieces were cached"
    );
    let mut back = vec![0; blob.len()];
    a.copy_from_device(&buf, 0, &mut back).unwrap();
    assert!(back == blob, "the cached copy is what was uploaded");

    // Another client of the same server finds the blob there too.
    let mut b = connect(&addr);
    let other = b.alloc(blob.len() as u64 + 4096, 1).unwrap();
    b.copy_to_device(&other, 4096, &blob).unwrap();
    assert_eq!(b.cache_hits(), 3);
    assert_eq!(
        b.sent_bytes(),
        (300 - 3 * 79) << 10,
        "only the small rest is sent"
    );
    let mut back = vec![0; blob.len()];
    b.copy_from_device(&other, 4096, &mut back).unwrap();
    assert!(back == blob);
}

#[test]
fn a_wrong_token_is_refused_and_the_right_one_accepted() {
    let addr = start(
        ServeOptions {
            token: "s3cret".into(),
            ..ServeOptions::default()
        },
        None,
    );
    let e = RemoteDevice::connect(&addr, RemoteOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains(&addr) && e.contains("token mismatch"), "{e}");
    let e = RemoteDevice::connect(
        &addr,
        RemoteOptions {
            token: "secret".into(),
            ..RemoteOptions::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("token mismatch"), "{e}");
    let mut ok = RemoteDevice::connect(
        &addr,
        RemoteOptions {
            token: "s3cret".into(),
            ..RemoteOptions::default()
        },
    )
    .unwrap();
    run_program(&mut ok, &example(), &[], RunTimeout::default()).unwrap();
}

#[test]
fn connection_failures_and_config_mismatches_name_the_address() {
    let free_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = RemoteDevice::connect(&free_port.to_string(), RemoteOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(&free_port.to_string()) && e.contains("cannot connect"),
        "{e}"
    );
    let e = RemoteDevice::connect("no-such-host.invalid:9091", RemoteOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no-such-host.invalid:9091"), "{e}");

    let addr = start(ServeOptions::default(), None);
    let small = HwConfig::preset("small").unwrap();
    let e = RemoteDevice::connect(
        &addr,
        RemoteOptions {
            expect: Some(small.clone()),
            ..RemoteOptions::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains(&addr)
            && e.contains(&small.config_string())
            && e.contains(&HwConfig::default().config_string()),
        "{e}"
    );
}

/// A raw connection that has said hello.
fn raw_session(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let hello = Request::Hello {
        version: PROTOCOL_VERSION,
        token: String::new(),
    };
    write_frame(&mut s, &hello.encode()).unwrap();
    let welcome = read_frame(&mut s, 1 << 20).unwrap();
    assert!(matches!(
        Response::decode(&welcome).unwrap(),
        Response::Welcome(_)
    ));
    s
}

/// The error the server sent before closing `s`.
fn last_words(s: &mut TcpStream) -> String {
    let body = read_frame(s, 1 << 20).unwrap();
    let Response::Error(m) = Response::decode(&body).unwrap() else {
        panic!("expected an error frame");
    };
    let mut rest = Vec::new();
    assert_eq!(
        s.read_to_end(&mut rest).unwrap(),
        0,
        "then the server closes"
    );
    m.message
}

#[test]
fn garbage_closes_that_connection_only() {
    let addr = start(ServeOptions::default(), None);
    let mut keep = connect(&addr);
    let p = example();
    let want = run_program(&mut keep, &p, &[], RunTimeout::default()).unwrap();

    // Not our protocol at all: "GET " as a length is half a gigabyte, refused unread.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let m = last_words(&mut s);
    assert!(m.contains("longer than the limit"), "{m}");

    // A well-framed request with an unknown tag, after a proper hello.
    let mut s = raw_session(&addr);
    write_frame(&mut s, &[0x7f, 1, 2, 3]).unwrap();
    let m = last_words(&mut s);
    assert!(m.contains("unknown request tag 0x7f"), "{m}");

    // A frame cut short by the client going away.
    let mut s = raw_session(&addr);
    s.write_all(&100u32.to_le_bytes()).unwrap();
    s.write_all(&[0x04; 10]).unwrap();
    drop(s);

    // A request before the hello.
    let mut s = TcpStream::connect(&addr).unwrap();
    write_frame(&mut s, &Request::Bye.encode()).unwrap();
    let m = last_words(&mut s);
    assert!(m.contains("expected a hello"), "{m}");

    // The server, and a client connected all along, are fine; so is a new one.
    let again = run_program(&mut keep, &p, &[], RunTimeout::default()).unwrap();
    assert_eq!(again.outputs, want.outputs);
    let mut fresh = connect(&addr);
    let got = run_program(&mut fresh, &p, &[], RunTimeout::default()).unwrap();
    assert_eq!(got.outputs, want.outputs);
}

#[test]
fn two_clients_at_once_both_get_their_own_results() {
    let addr = start(ServeOptions::default(), None);
    let p = example();
    let mut local = FsimDevice::new(&p.config);
    let want: Vec<_> = [1u8, 2]
        .iter()
        .map(|&s| {
            run_program(&mut local, &p, &input(s), RunTimeout::default())
                .unwrap()
                .outputs
        })
        .collect();
    let clients: Vec<_> = [1u8, 2]
        .into_iter()
        .map(|seed| {
            let (addr, p) = (addr.clone(), p.clone());
            thread::spawn(move || {
                let mut dev = connect(&addr);
                (0..20)
                    .map(|_| {
                        run_program(&mut dev, &p, &input(seed), RunTimeout::default())
                            .unwrap()
                            .outputs
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for (client, want) in clients.into_iter().zip(want) {
        for got in client.join().unwrap() {
            assert_eq!(got, want);
        }
    }
}

#[test]
fn buffers_are_per_connection_and_freed_when_it_goes() {
    // 1 MiB of device memory: a client holding all of it blocks everyone else until freed.
    let addr = start(ServeOptions::default(), Some(1 << 20));
    let mut a = connect(&addr);
    let all = a.alloc(1 << 20, 1).unwrap();
    let mut b = connect(&addr);
    assert!(matches!(
        b.alloc(4096, 1),
        Err(DeviceError::OutOfMemory { .. })
    ));
    let e = b.free(all.clone()).unwrap_err();
    assert!(
        matches!(e, DeviceError::UnknownBuffer { .. }),
        "another connection's buffer cannot be freed: {e}"
    );
    let e = b.copy_to_device(&all, 0, &[1]).unwrap_err();
    assert!(matches!(e, DeviceError::UnknownBuffer { .. }), "{e}");
    // Saying bye frees the buffers before the server answers it.
    drop(a);
    let whole = b.alloc(1 << 20, 1).unwrap();
    b.free(whole).unwrap();

    // A client that vanishes mid-session (no bye) leaves nothing allocated either.
    let mut s = raw_session(&addr);
    let alloc = Request::Alloc {
        size: 1 << 20,
        align: 4096,
    };
    write_frame(&mut s, &alloc.encode()).unwrap();
    let got = Response::decode(&read_frame(&mut s, 1 << 20).unwrap()).unwrap();
    assert!(matches!(got, Response::Buffer(_)), "{got:?}");
    drop(s);
    // The server learns of the disconnection asynchronously: wait for it (bounded).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match b.alloc(1 << 20, 1) {
            Ok(buf) => break b.free(buf).unwrap(),
            Err(DeviceError::OutOfMemory { .. }) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("the vanished client's buffer was not freed: {e}"),
        }
    }
}

#[test]
fn a_run_overrunning_its_deadline_times_out_and_a_queued_one_is_not_charged_the_wait() {
    let (hung, started) = std::sync::mpsc::channel();
    let addr = start_with(ServeOptions::default(), move || SlowDevice {
        inner: FsimDevice::new(&HwConfig::default()),
        hung: Some(hung),
    });
    let quick = RemoteOptions {
        run_margin: Duration::from_millis(100),
        ..RemoteOptions::default()
    };
    let limit = RunTimeout::wall(Duration::from_millis(100));
    let p = example();
    let first = {
        let (addr, p, quick) = (addr.clone(), p.clone(), quick.clone());
        thread::spawn(move || {
            let mut dev = RemoteDevice::connect(&addr, quick).unwrap();
            let e = run_program(&mut dev, &p, &[], limit).unwrap_err();
            // The buffers cannot be freed on a connection given up: the server frees them.
            let again = dev.alloc(4096, 1).unwrap_err().to_string();
            (e, again)
        })
    };
    started.recv().unwrap();
    // Queued behind the hung run for longer than its own limit and margin, this run still
    // gets its full time once the device takes it.
    let mut second = RemoteDevice::connect(&addr, quick).unwrap();
    let got = run_program(&mut second, &p, &[], limit).unwrap();
    let want = run_program(
        &mut FsimDevice::new(&p.config),
        &p,
        &[],
        RunTimeout::default(),
    )
    .unwrap();
    assert_eq!(got.outputs, want.outputs);

    let (e, again) = first.join().unwrap();
    let DeviceError::Timeout { backend, detail } = &e else {
        panic!("expected a timeout, got {e}");
    };
    assert_eq!(backend, &format!("fsim@{addr}"));
    assert!(
        detail.contains("no report within 0.2 s") && detail.contains(&addr),
        "{e}"
    );
    assert!(again.contains("connect again"), "{again}");
}

#[test]
fn clients_beyond_the_limit_wait_their_turn_and_all_get_their_results() {
    // 2 served at once, 16 wanting to be: the others wait in the queue, none is refused.
    let addr = start(
        ServeOptions {
            max_clients: 2,
            max_waiting: 16,
            ..ServeOptions::default()
        },
        None,
    );
    let p = example();
    let mut local = FsimDevice::new(&p.config);
    let clients: Vec<_> = (0..16u8)
        .map(|seed| {
            let want = run_program(&mut local, &p, &input(seed), RunTimeout::default())
                .unwrap()
                .outputs;
            let (addr, p) = (addr.clone(), p.clone());
            thread::spawn(move || {
                let mut dev = connect(&addr);
                for _ in 0..3 {
                    let got = run_program(&mut dev, &p, &input(seed), RunTimeout::default());
                    assert_eq!(got.unwrap().outputs, want, "client {seed}");
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}

#[test]
fn a_full_server_is_retried_then_named_busy_and_serves_again_once_free() {
    let addr = start(
        ServeOptions {
            max_clients: 1,
            max_waiting: 0,
            ..ServeOptions::default()
        },
        None,
    );
    let holder = connect(&addr);
    let impatient = RemoteOptions {
        busy_timeout: Duration::from_millis(300),
        ..RemoteOptions::default()
    };
    let e = RemoteDevice::connect(&addr, impatient.clone())
        .err()
        .expect("a second client while the only slot is taken");
    let msg = e.to_string();
    assert!(
        msg.contains("server busy: 1 clients connected and 0 waiting"),
        "{msg}"
    );
    assert!(msg.contains("still busy after 0.3 s of retries"), "{msg}");
    // The slot frees while a client is retrying: its retry gets in.
    let waiter = thread::spawn({
        let addr = addr.clone();
        move || {
            RemoteDevice::connect(
                &addr,
                RemoteOptions {
                    busy_timeout: Duration::from_secs(30),
                    ..RemoteOptions::default()
                },
            )
            .map(|_| ())
        }
    });
    thread::sleep(Duration::from_millis(200));
    drop(holder);
    waiter.join().unwrap().unwrap();
}

#[test]
fn a_queued_client_is_refused_when_its_wait_runs_out() {
    let addr = start(
        ServeOptions {
            max_clients: 1,
            max_waiting: 4,
            queue_timeout: Duration::from_millis(200),
            ..ServeOptions::default()
        },
        None,
    );
    let _holder = connect(&addr);
    let e = RemoteDevice::connect(
        &addr,
        RemoteOptions {
            busy_timeout: Duration::ZERO,
            ..RemoteOptions::default()
        },
    )
    .err()
    .expect("the queue's wait runs out while the holder stays");
    let msg = e.to_string();
    assert!(
        msg.contains("server busy: waited 0.2 s in the queue"),
        "{msg}"
    );
}
