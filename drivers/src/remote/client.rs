//! The client side: [`RemoteDevice`], a [`Device`] whose every operation is a request to a
//! `vta serve` server. Large writes are offered by content hash first, so data the server
//! has seen (a model's weights, run after run) is not sent again.

use std::io::{BufReader, BufWriter};
use std::net::{TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use isa::container::fnv1a;
use isa::HwConfig;

use super::wire::{read_frame, write_frame, Request, Response, ServerInfo, WireError};
use super::{BUSY, CACHE_MIN_BYTES, DEFAULT_MAX_FRAME, PROTOCOL_VERSION, TOKEN_ENV};
use crate::{check_range, Buffer, Device, DeviceError, RunReport, RunTimeout};

/// Longest piece of a write or read sent in one frame (less when the server's frames are
/// shorter).
const CHUNK: usize = 4 << 20;

/// How [`RemoteDevice::connect`] connects.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// The server's shared secret.
    pub token: String,
    pub connect_timeout: Duration,
    /// Longest wait for any answer but a run's report; it includes waiting behind other
    /// clients' requests, runs among them.
    pub io_timeout: Duration,
    /// Added to a run's wall-clock limit for the wait for its report. A run without a wall
    /// limit is waited for without one: the device's own work bound ends it.
    pub run_margin: Duration,
    /// The config the caller's programs are built for: a server whose ISA differs is refused
    /// at connection.
    pub expect: Option<HwConfig>,
    /// How long to keep retrying, with backoff, a server that answers "server busy".
    pub busy_timeout: Duration,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            token: String::new(),
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(600),
            run_margin: Duration::from_secs(30),
            expect: None,
            busy_timeout: Duration::from_secs(60),
        }
    }
}

impl RemoteOptions {
    /// The defaults, with the token from the `VTA_REMOTE_TOKEN` environment variable.
    pub fn from_env() -> Self {
        RemoteOptions {
            token: std::env::var(TOKEN_ENV).unwrap_or_default(),
            ..Self::default()
        }
    }
}

/// A device served by `vta serve` on another machine (or process).
pub struct RemoteDevice {
    addr: String,
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    info: ServerInfo,
    config: HwConfig,
    /// `DEVICE@ADDR`: what runs report as their backend.
    name: String,
    opts: RemoteOptions,
    chunk: usize,
    cache_hits: u64,
    sent_bytes: u64,
    /// Why the connection can no longer be used (a timeout or a broken stream).
    broken: Option<String>,
}

impl RemoteDevice {
    /// Connects to the server at `addr` (`HOST:PORT`), says hello and checks the config. A
    /// busy server is tried again, with backoff, for up to `opts.busy_timeout`.
    pub fn connect(addr: &str, opts: RemoteOptions) -> Result<Self, DeviceError> {
        let deadline = Instant::now() + opts.busy_timeout;
        let mut pause = Duration::from_millis(50);
        loop {
            match Self::connect_once(addr, opts.clone()) {
                Err(DeviceError::Remote { detail, .. })
                    if detail.starts_with(BUSY) && Instant::now() + pause < deadline =>
                {
                    // Spread the retries of clients turned away together.
                    let jitter = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_nanos() % 50);
                    thread::sleep(pause + Duration::from_millis(jitter.into()));
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(DeviceError::Remote { addr, detail }) if detail.starts_with(BUSY) => {
                    return Err(DeviceError::Remote {
                        addr,
                        detail: format!(
                            "{detail} (still busy after {} s of retries)",
                            opts.busy_timeout.as_secs_f64()
                        ),
                    })
                }
                other => return other,
            }
        }
    }

    fn connect_once(addr: &str, opts: RemoteOptions) -> Result<Self, DeviceError> {
        let fail = |detail: String| DeviceError::Remote {
            addr: addr.into(),
            detail,
        };
        let targets: Vec<_> = addr
            .to_socket_addrs()
            .map_err(|e| fail(format!("cannot resolve the address: {e}")))?
            .collect();
        let mut last = None;
        let mut stream = None;
        for t in &targets {
            match TcpStream::connect_timeout(t, opts.connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let stream = stream.ok_or_else(|| {
            fail(format!(
                "cannot connect: {} (is `vta serve` running there?)",
                last.map_or_else(|| "no address".to_string(), |e| e.to_string())
            ))
        })?;
        let io = |e: std::io::Error| fail(format!("connection failed: {e}"));
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(opts.io_timeout)).map_err(io)?;
        stream
            .set_write_timeout(Some(opts.io_timeout))
            .map_err(io)?;
        let reader = BufReader::new(stream.try_clone().map_err(io)?);
        let writer = BufWriter::new(stream);
        // A placeholder until the welcome says who the server is.
        let mut dev = RemoteDevice {
            addr: addr.into(),
            reader,
            writer,
            info: ServerInfo {
                version: PROTOCOL_VERSION,
                server_id: String::new(),
                device: String::new(),
                config_string: String::new(),
                isa_hash: 0,
                config_json: String::new(),
                bitstream: String::new(),
                max_frame: DEFAULT_MAX_FRAME,
            },
            config: HwConfig::default(),
            name: format!("remote@{addr}"),
            chunk: CHUNK,
            cache_hits: 0,
            sent_bytes: 0,
            broken: None,
            opts,
        };
        let hello = Request::Hello {
            version: PROTOCOL_VERSION,
            token: dev.opts.token.clone(),
        };
        let info = match dev.call(&hello)? {
            Response::Welcome(info) => info,
            other => return Err(dev.unexpected("hello", &other)),
        };
        let config = HwConfig::from_json_str(&info.config_json, &format!("the config of {addr}"))
            .map_err(|e| {
            fail(format!(
                "the server sent a config this client cannot read: {e}"
            ))
        })?;
        if config.isa_hash() != info.isa_hash {
            return Err(fail(format!(
                "the server's config {} hashes to {:016x}, but it announced {:016x}",
                config.config_string(),
                config.isa_hash(),
                info.isa_hash
            )));
        }
        if let Some(want) = &dev.opts.expect {
            if want.isa_hash() != info.isa_hash {
                return Err(fail(format!(
                    "the server's {} device implements {} (ISA hash {:016x}), but the program \
                     is built for {} (ISA hash {:016x}); serve that config (`vta serve --config`) \
                     or build for the server's",
                    info.device,
                    info.config_string,
                    info.isa_hash,
                    want.config_string(),
                    want.isa_hash()
                )));
            }
        }
        if info.max_frame < 4096 {
            return Err(fail(format!(
                "the server's frame limit of {} bytes is too small to carry data",
                info.max_frame
            )));
        }
        dev.chunk = CHUNK.min(info.max_frame as usize - 1024);
        dev.name = format!("{}@{addr}", info.device);
        dev.config = config;
        dev.info = info;
        Ok(dev)
    }

    /// What the server said about itself.
    pub fn info(&self) -> &ServerInfo {
        &self.info
    }

    /// `HOST:PORT` of the server.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Pieces of writes the server already had, by content hash, and so were not sent.
    pub fn cache_hits(&self) -> u64 {
        self.cache_hits
    }

    /// Bytes of data this client has sent in writes.
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes
    }

    fn fail(&self, detail: String) -> DeviceError {
        DeviceError::Remote {
            addr: self.addr.clone(),
            detail,
        }
    }

    fn unexpected(&mut self, what: &str, got: &Response) -> DeviceError {
        let detail = format!("answered a {what} request with {got:?}");
        self.broken = Some(detail.clone());
        self.fail(format!("protocol error: the server {detail}"))
    }

    fn send(&mut self, req: &Request) -> Result<(), DeviceError> {
        if let Some(why) = &self.broken {
            return Err(self.fail(format!("the connection is unusable ({why}); connect again")));
        }
        write_frame(&mut self.writer, &req.encode()).map_err(|e| {
            self.broken = Some(format!("sending failed: {e}"));
            self.fail(format!("cannot send the {} request: {e}", req.name()))
        })
    }

    /// The next answer's body; a failure leaves the connection unusable.
    fn receive_frame(&mut self, what: &str) -> Result<Vec<u8>, DeviceError> {
        let limit = self.info.max_frame.max(DEFAULT_MAX_FRAME) + 1024;
        read_frame(&mut self.reader, limit).map_err(|e| {
            let detail = match &e {
                WireError::Closed => "the server closed the connection".to_string(),
                e if timed_out(e) => {
                    format!("no answer within {} s", self.opts.io_timeout.as_secs_f64())
                }
                e => e.to_string(),
            };
            self.broken = Some(detail.clone());
            self.fail(format!("{what}: {detail}"))
        })
    }

    fn decode(&mut self, what: &str, body: &[u8]) -> Result<Response, DeviceError> {
        match Response::decode(body) {
            Ok(Response::Error(m)) => Err(m.into_device(&self.addr)),
            Ok(r) => Ok(r),
            Err(e) => {
                self.broken = Some(e.to_string());
                Err(self.fail(format!("{what}: {e}")))
            }
        }
    }

    fn receive(&mut self, what: &str) -> Result<Response, DeviceError> {
        let body = self.receive_frame(what)?;
        self.decode(what, &body)
    }

    /// Sends `req` and returns its answer (a server error as a [`DeviceError`]).
    fn call(&mut self, req: &Request) -> Result<Response, DeviceError> {
        self.send(req)?;
        self.receive(req.name())
    }

    fn expect_ok(&mut self, req: &Request) -> Result<(), DeviceError> {
        match self.call(req)? {
            Response::Ok => Ok(()),
            other => Err(self.unexpected(req.name(), &other)),
        }
    }

    fn write_piece(&mut self, buf: &Buffer, offset: u64, data: &[u8]) -> Result<(), DeviceError> {
        if data.len() as u64 >= CACHE_MIN_BYTES {
            let offer = Request::WriteCached {
                buf: buf.clone(),
                offset,
                len: data.len() as u64,
                hash: fnv1a(data),
            };
            match self.call(&offer)? {
                Response::CacheHit => {
                    self.cache_hits += 1;
                    return Ok(());
                }
                Response::CacheMiss => {}
                other => return Err(self.unexpected(offer.name(), &other)),
            }
        }
        self.sent_bytes += data.len() as u64;
        self.expect_ok(&Request::Write {
            buf: buf.clone(),
            offset,
            data: data.to_vec(),
        })
    }

    fn wait_for_report(&mut self, timeout: RunTimeout) -> Result<RunReport, DeviceError> {
        match self.receive("run")? {
            Response::Running => {}
            other => return Err(self.unexpected("run", &other)),
        }
        // The device has started: from here the run's own limit (plus a margin) applies.
        let limit = timeout.wall.map(|w| w + self.opts.run_margin);
        let set = self.reader.get_ref().set_read_timeout(limit);
        if let Err(e) = set {
            self.broken = Some(e.to_string());
            return Err(self.fail(format!("cannot set the run's deadline: {e}")));
        }
        let limit_bytes = self.info.max_frame.max(DEFAULT_MAX_FRAME) + 1024;
        let answer = read_frame(&mut self.reader, limit_bytes);
        let _ = self
            .reader
            .get_ref()
            .set_read_timeout(Some(self.opts.io_timeout));
        let body = match answer {
            Ok(body) => body,
            Err(e) if timed_out(&e) => {
                let waited = limit.unwrap_or_default().as_secs_f64();
                self.broken = Some(format!("a run's report did not come within {waited:.1} s"));
                return Err(DeviceError::Timeout {
                    backend: self.name.clone(),
                    detail: format!(
                        "no report within {waited:.1} s (the run's wall-clock limit plus a \
                         {:.1} s margin); the connection to {} is given up",
                        self.opts.run_margin.as_secs_f64(),
                        self.addr
                    ),
                });
            }
            Err(e) => {
                let detail = match e {
                    WireError::Closed => "the server closed the connection".to_string(),
                    e => e.to_string(),
                };
                self.broken = Some(detail.clone());
                return Err(self.fail(format!("run: {detail}")));
            }
        };
        match self.decode("run", &body)? {
            Response::Report(mut r) => {
                r.backend = self.name.clone();
                Ok(r)
            }
            other => Err(self.unexpected("run", &other)),
        }
    }
}

/// Whether a read failed for want of an answer in time.
fn timed_out(e: &WireError) -> bool {
    matches!(e, WireError::Io(io) if matches!(
        io.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ))
}

impl Device for RemoteDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn config(&self) -> &HwConfig {
        &self.config
    }

    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        let req = Request::Alloc { size, align };
        match self.call(&req)? {
            Response::Buffer(b) => Ok(b),
            other => Err(self.unexpected("alloc", &other)),
        }
    }

    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError> {
        self.expect_ok(&Request::Free { buf })
    }

    fn copy_to_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        // Checked whole here, so a bad range is refused before any piece is written.
        check_range("copy to device", buf, offset, data.len() as u64)?;
        let chunk = self.chunk;
        for (i, piece) in data.chunks(chunk).enumerate() {
            self.write_piece(buf, offset + (i * chunk) as u64, piece)?;
        }
        Ok(())
    }

    fn copy_from_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        check_range("copy from device", buf, offset, out.len() as u64)?;
        let chunk = self.chunk;
        for (i, piece) in out.chunks_mut(chunk).enumerate() {
            let req = Request::Read {
                buf: buf.clone(),
                offset: offset + (i * chunk) as u64,
                len: piece.len() as u64,
            };
            match self.call(&req)? {
                Response::Data(d) if d.len() == piece.len() => piece.copy_from_slice(&d),
                other => return Err(self.unexpected("read", &other)),
            }
        }
        Ok(())
    }

    fn flush(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        self.expect_ok(&Request::Flush {
            buf: buf.clone(),
            offset,
            size,
        })
    }

    fn invalidate(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        self.expect_ok(&Request::Invalidate {
            buf: buf.clone(),
            offset,
            size,
        })
    }

    fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    ) -> Result<RunReport, DeviceError> {
        self.send(&Request::Run {
            insn_addr,
            insn_count,
            timeout,
        })?;
        self.wait_for_report(timeout)
    }
}

impl Drop for RemoteDevice {
    /// Says bye, so the server frees this client's buffers before it answers; a server that
    /// does not answer soon frees them when it sees the connection close.
    fn drop(&mut self) {
        if self.broken.is_none() {
            let _ = self
                .reader
                .get_ref()
                .set_read_timeout(Some(Duration::from_secs(2)));
            if self.send(&Request::Bye).is_ok() {
                let _ = read_frame(&mut self.reader, 64);
            }
        }
    }
}
