//! The remote protocol's bytes: frames (a little-endian `u32` length, then the body) and the
//! requests and responses they carry, encoded and decoded exactly as the module docs of
//! [`crate::remote`] specify. Decoding never panics and never allocates more than the frame
//! holds: a short, long or garbled body is a [`WireError`].

use std::io::{self, Read, Write};
use std::time::Duration;

use crate::{Buffer, DeviceError, RunReport, RunTimeout};

/// The four bytes every hello starts with.
pub const MAGIC: [u8; 4] = *b"VTAR";

/// What can be wrong with a frame or a message body.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("the connection closed")]
    Closed,
    #[error("a frame of {len} bytes is longer than the limit of {limit} bytes")]
    TooLong { len: u32, limit: u32 },
    #[error("an empty frame (every message has at least its tag byte)")]
    Empty,
    #[error("the frame ended early: {0}")]
    Truncated(io::Error),
    #[error("{0}")]
    Io(io::Error),
    #[error("malformed {what}: {problem}")]
    Malformed { what: &'static str, problem: String },
}

/// Writes one frame: `body.len()` as a little-endian `u32`, then `body`.
pub fn write_frame(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame over 4 GiB"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(body)?;
    w.flush()
}

/// Reads one frame of at most `limit` body bytes; a longer one is refused from its length
/// alone, before anything is allocated for it.
pub fn read_frame(r: &mut impl Read, limit: u32) -> Result<Vec<u8>, WireError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(WireError::Closed),
            Ok(0) => {
                return Err(WireError::Truncated(io::ErrorKind::UnexpectedEof.into()));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WireError::Io(e)),
        }
    }
    let len = u32::from_le_bytes(len);
    if len == 0 {
        return Err(WireError::Empty);
    }
    if len > limit {
        return Err(WireError::TooLong { len, limit });
    }
    let mut body = vec![0; len as usize];
    r.read_exact(&mut body).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => WireError::Truncated(e),
        _ => WireError::Io(e),
    })?;
    Ok(body)
}

/// A client's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Hello {
        version: u16,
        token: String,
    },
    Alloc {
        size: u64,
        align: u64,
    },
    Free {
        buf: Buffer,
    },
    Write {
        buf: Buffer,
        offset: u64,
        data: Vec<u8>,
    },
    WriteCached {
        buf: Buffer,
        offset: u64,
        len: u64,
        hash: u64,
    },
    Read {
        buf: Buffer,
        offset: u64,
        len: u64,
    },
    Flush {
        buf: Buffer,
        offset: u64,
        size: u64,
    },
    Invalidate {
        buf: Buffer,
        offset: u64,
        size: u64,
    },
    Run {
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    },
    Bye,
}

/// What the server says about itself in its welcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    pub version: u16,
    /// The server's name for itself (the board's, or the host's).
    pub server_id: String,
    /// The served device's [`crate::Device::name`].
    pub device: String,
    pub config_string: String,
    pub isa_hash: u64,
    /// The device's config as JSON ([`isa::HwConfig::to_json`]).
    pub config_json: String,
    /// The loaded bitstream's hash, or `none` on a simulator.
    pub bitstream: String,
    /// The longest frame body the server accepts.
    pub max_frame: u32,
}

/// A server's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Welcome(ServerInfo),
    Ok,
    Buffer(Buffer),
    CacheHit,
    CacheMiss,
    Data(Vec<u8>),
    /// The device has taken the run from the queue; the report or error follows.
    Running,
    Report(RunReport),
    Error(ErrorMsg),
}

/// An error as it travels: its kind with the fields that rebuild the [`DeviceError`], and the
/// text the server printed for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorMsg {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    OutOfMemory {
        requested: u64,
        align: u64,
        free: u64,
        largest: u64,
    },
    BadAlign {
        align: u64,
    },
    UnknownBuffer {
        id: u64,
        phys_addr: u64,
    },
    OutOfBounds {
        what: String,
        id: u64,
        offset: u64,
        len: u64,
        size: u64,
    },
    ConfigMismatch {
        program: String,
        device: String,
    },
    Program,
    Unavailable {
        backend: String,
    },
    Timeout {
        backend: String,
        detail: String,
    },
    Run {
        backend: String,
    },
    /// Anything else: a refused hello, a bad frame, a busy server, a device error with no
    /// wire form of its own.
    Protocol,
}

/// `what` strings the simulated devices use in [`DeviceError::OutOfBounds`].
const ACCESS_KINDS: [&str; 4] = ["copy to device", "copy from device", "flush", "invalidate"];

impl ErrorMsg {
    pub fn protocol(message: impl Into<String>) -> Self {
        ErrorMsg {
            kind: ErrorKind::Protocol,
            message: message.into(),
        }
    }

    /// The wire form of a device's error.
    pub fn from_device(e: &DeviceError) -> Self {
        let kind = match e {
            &DeviceError::OutOfMemory {
                requested,
                align,
                free,
                largest,
            } => ErrorKind::OutOfMemory {
                requested,
                align,
                free,
                largest,
            },
            &DeviceError::BadAlign { align } => ErrorKind::BadAlign { align },
            &DeviceError::UnknownBuffer { id, phys_addr } => {
                ErrorKind::UnknownBuffer { id, phys_addr }
            }
            &DeviceError::OutOfBounds {
                what,
                id,
                offset,
                len,
                size,
            } => ErrorKind::OutOfBounds {
                what: what.into(),
                id,
                offset,
                len,
                size,
            },
            DeviceError::ConfigMismatch { program, device } => ErrorKind::ConfigMismatch {
                program: program.clone(),
                device: device.clone(),
            },
            DeviceError::Program(_) => ErrorKind::Program,
            DeviceError::Unavailable { backend, .. } => ErrorKind::Unavailable {
                backend: backend.clone(),
            },
            DeviceError::Timeout { backend, detail } => ErrorKind::Timeout {
                backend: backend.clone(),
                detail: detail.clone(),
            },
            DeviceError::Run { backend, .. } => ErrorKind::Run {
                backend: backend.clone(),
            },
            _ => ErrorKind::Protocol,
        };
        let message = match e {
            // These carry their source's text alone; the variant adds its own words around it.
            DeviceError::Program(m) => m.clone(),
            DeviceError::Unavailable { source, .. } | DeviceError::Run { source, .. } => {
                source.to_string()
            }
            _ => e.to_string(),
        };
        ErrorMsg { kind, message }
    }

    /// The [`DeviceError`] on the client of server `addr`, with the server's text.
    pub fn into_device(self, addr: &str) -> DeviceError {
        let source = |m: String| -> Box<dyn std::error::Error + Send + Sync> { m.into() };
        match self.kind {
            ErrorKind::OutOfMemory {
                requested,
                align,
                free,
                largest,
            } => DeviceError::OutOfMemory {
                requested,
                align,
                free,
                largest,
            },
            ErrorKind::BadAlign { align } => DeviceError::BadAlign { align },
            ErrorKind::UnknownBuffer { id, phys_addr } => {
                DeviceError::UnknownBuffer { id, phys_addr }
            }
            ErrorKind::OutOfBounds {
                what,
                id,
                offset,
                len,
                size,
            } => match ACCESS_KINDS.iter().find(|k| **k == what) {
                Some(what) => DeviceError::OutOfBounds {
                    what,
                    id,
                    offset,
                    len,
                    size,
                },
                None => DeviceError::Remote {
                    addr: addr.into(),
                    detail: self.message,
                },
            },
            ErrorKind::ConfigMismatch { program, device } => {
                DeviceError::ConfigMismatch { program, device }
            }
            ErrorKind::Program => DeviceError::Program(self.message),
            ErrorKind::Unavailable { backend } => DeviceError::Unavailable {
                backend,
                source: source(self.message),
            },
            ErrorKind::Timeout { backend, detail } => DeviceError::Timeout { backend, detail },
            ErrorKind::Run { backend } => DeviceError::Run {
                backend,
                source: source(self.message),
            },
            ErrorKind::Protocol => DeviceError::Remote {
                addr: addr.into(),
                detail: self.message,
            },
        }
    }
}

/// Little-endian encoder of a message body.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn opt(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            Some(v) => self.u8(1).u64(v),
            None => self.u8(0),
        }
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        // Frames are bounded far below 4 GiB; a longer field could not be sent anyway.
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }
    fn buf(&mut self, b: &Buffer) -> &mut Self {
        self.u64(b.phys_addr).u64(b.size).u64(b.id)
    }
    fn pairs(&mut self, v: &[(String, u64)]) -> &mut Self {
        self.u32(v.len() as u32);
        for (name, value) in v {
            self.str(name).u64(*value);
        }
        self
    }
}

/// Decoder of a message body; every read checks what is left.
struct Dec<'a> {
    rest: &'a [u8],
    what: &'static str,
}

impl<'a> Dec<'a> {
    fn bad(&self, problem: impl Into<String>) -> WireError {
        WireError::Malformed {
            what: self.what,
            problem: problem.into(),
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.rest.len() < n {
            return Err(self.bad(format!("{n} more bytes expected, {} left", self.rest.len())));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn opt(&mut self) -> Result<Option<u64>, WireError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.u64()?)),
            f => Err(self.bad(format!("option flag {f} (0 or 1)"))),
        }
    }
    fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn str(&mut self) -> Result<String, WireError> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| self.bad("a string is not UTF-8"))
    }
    fn buf(&mut self) -> Result<Buffer, WireError> {
        Ok(Buffer {
            phys_addr: self.u64()?,
            size: self.u64()?,
            id: self.u64()?,
        })
    }
    fn pairs(&mut self) -> Result<Vec<(String, u64)>, WireError> {
        let n = self.u32()?;
        // No capacity from the count: a garbled count must not allocate.
        let mut v = Vec::new();
        for _ in 0..n {
            v.push((self.str()?, self.u64()?));
        }
        Ok(v)
    }
    fn end(&self) -> Result<(), WireError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.bad(format!("{} bytes after the message", self.rest.len())))
        }
    }
}

impl Request {
    /// The request's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Alloc { .. } => "alloc",
            Request::Free { .. } => "free",
            Request::Write { .. } => "write",
            Request::WriteCached { .. } => "write by hash",
            Request::Read { .. } => "read",
            Request::Flush { .. } => "flush",
            Request::Invalidate { .. } => "invalidate",
            Request::Run { .. } => "run",
            Request::Bye => "bye",
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        match self {
            Request::Hello { version, token } => {
                e.u8(0x01);
                e.0.extend_from_slice(&MAGIC);
                e.u16(*version).str(token)
            }
            Request::Alloc { size, align } => e.u8(0x02).u64(*size).u64(*align),
            Request::Free { buf } => e.u8(0x03).buf(buf),
            Request::Write { buf, offset, data } => e.u8(0x04).buf(buf).u64(*offset).bytes(data),
            Request::WriteCached {
                buf,
                offset,
                len,
                hash,
            } => e.u8(0x05).buf(buf).u64(*offset).u64(*len).u64(*hash),
            Request::Read { buf, offset, len } => e.u8(0x06).buf(buf).u64(*offset).u64(*len),
            Request::Flush { buf, offset, size } => e.u8(0x07).buf(buf).u64(*offset).u64(*size),
            Request::Invalidate { buf, offset, size } => {
                e.u8(0x08).buf(buf).u64(*offset).u64(*size)
            }
            Request::Run {
                insn_addr,
                insn_count,
                timeout,
            } => e
                .u8(0x09)
                .u64(*insn_addr)
                .u32(*insn_count)
                .opt(
                    timeout
                        .wall
                        .map(|d| d.as_nanos().min(u64::MAX as u128) as u64),
                )
                .opt(timeout.work),
            Request::Bye => e.u8(0x0a),
        };
        e.0
    }

    pub fn decode(body: &[u8]) -> Result<Request, WireError> {
        let mut d = Dec {
            rest: body,
            what: "request",
        };
        let r = match d.u8()? {
            0x01 => {
                if d.take(4)? != MAGIC {
                    return Err(d.bad("the hello does not start with VTAR (not a vta client?)"));
                }
                Request::Hello {
                    version: d.u16()?,
                    token: d.str()?,
                }
            }
            0x02 => Request::Alloc {
                size: d.u64()?,
                align: d.u64()?,
            },
            0x03 => Request::Free { buf: d.buf()? },
            0x04 => Request::Write {
                buf: d.buf()?,
                offset: d.u64()?,
                data: d.bytes()?.to_vec(),
            },
            0x05 => Request::WriteCached {
                buf: d.buf()?,
                offset: d.u64()?,
                len: d.u64()?,
                hash: d.u64()?,
            },
            0x06 => Request::Read {
                buf: d.buf()?,
                offset: d.u64()?,
                len: d.u64()?,
            },
            0x07 => Request::Flush {
                buf: d.buf()?,
                offset: d.u64()?,
                size: d.u64()?,
            },
            0x08 => Request::Invalidate {
                buf: d.buf()?,
                offset: d.u64()?,
                size: d.u64()?,
            },
            0x09 => Request::Run {
                insn_addr: d.u64()?,
                insn_count: d.u32()?,
                timeout: RunTimeout {
                    wall: d.opt()?.map(Duration::from_nanos),
                    work: d.opt()?,
                },
            },
            0x0a => Request::Bye,
            tag => return Err(d.bad(format!("unknown request tag {tag:#04x}"))),
        };
        d.end()?;
        Ok(r)
    }
}

impl Response {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        match self {
            Response::Welcome(i) => e
                .u8(0x81)
                .u16(i.version)
                .str(&i.server_id)
                .str(&i.device)
                .str(&i.config_string)
                .u64(i.isa_hash)
                .str(&i.config_json)
                .str(&i.bitstream)
                .u32(i.max_frame),
            Response::Ok => e.u8(0x82),
            Response::Buffer(b) => e.u8(0x83).buf(b),
            Response::CacheHit => e.u8(0x84),
            Response::CacheMiss => e.u8(0x85),
            Response::Data(d) => e.u8(0x86).bytes(d),
            Response::Running => e.u8(0x87),
            Response::Report(r) => e
                .u8(0x88)
                .str(&r.backend)
                .pairs(&r.counters)
                .pairs(&r.extras)
                .u64(r.wall_time.as_nanos().min(u64::MAX as u128) as u64),
            Response::Error(m) => {
                e.u8(0xee);
                match &m.kind {
                    ErrorKind::OutOfMemory {
                        requested,
                        align,
                        free,
                        largest,
                    } => e.u8(1).u64(*requested).u64(*align).u64(*free).u64(*largest),
                    ErrorKind::BadAlign { align } => e.u8(2).u64(*align),
                    ErrorKind::UnknownBuffer { id, phys_addr } => e.u8(3).u64(*id).u64(*phys_addr),
                    ErrorKind::OutOfBounds {
                        what,
                        id,
                        offset,
                        len,
                        size,
                    } => e.u8(4).str(what).u64(*id).u64(*offset).u64(*len).u64(*size),
                    ErrorKind::ConfigMismatch { program, device } => {
                        e.u8(5).str(program).str(device)
                    }
                    ErrorKind::Program => e.u8(6),
                    ErrorKind::Unavailable { backend } => e.u8(7).str(backend),
                    ErrorKind::Timeout { backend, detail } => e.u8(8).str(backend).str(detail),
                    ErrorKind::Run { backend } => e.u8(9).str(backend),
                    ErrorKind::Protocol => e.u8(0x40),
                };
                e.str(&m.message)
            }
        };
        e.0
    }

    pub fn decode(body: &[u8]) -> Result<Response, WireError> {
        let mut d = Dec {
            rest: body,
            what: "response",
        };
        let r = match d.u8()? {
            0x81 => Response::Welcome(ServerInfo {
                version: d.u16()?,
                server_id: d.str()?,
                device: d.str()?,
                config_string: d.str()?,
                isa_hash: d.u64()?,
                config_json: d.str()?,
                bitstream: d.str()?,
                max_frame: d.u32()?,
            }),
            0x82 => Response::Ok,
            0x83 => Response::Buffer(d.buf()?),
            0x84 => Response::CacheHit,
            0x85 => Response::CacheMiss,
            0x86 => Response::Data(d.bytes()?.to_vec()),
            0x87 => Response::Running,
            0x88 => Response::Report(RunReport {
                backend: d.str()?,
                counters: d.pairs()?,
                extras: d.pairs()?,
                wall_time: Duration::from_nanos(d.u64()?),
            }),
            0xee => {
                let kind = match d.u8()? {
                    1 => ErrorKind::OutOfMemory {
                        requested: d.u64()?,
                        align: d.u64()?,
                        free: d.u64()?,
                        largest: d.u64()?,
                    },
                    2 => ErrorKind::BadAlign { align: d.u64()? },
                    3 => ErrorKind::UnknownBuffer {
                        id: d.u64()?,
                        phys_addr: d.u64()?,
                    },
                    4 => ErrorKind::OutOfBounds {
                        what: d.str()?,
                        id: d.u64()?,
                        offset: d.u64()?,
                        len: d.u64()?,
                        size: d.u64()?,
                    },
                    5 => ErrorKind::ConfigMismatch {
                        program: d.str()?,
                        device: d.str()?,
                    },
                    6 => ErrorKind::Program,
                    7 => ErrorKind::Unavailable { backend: d.str()? },
                    8 => ErrorKind::Timeout {
                        backend: d.str()?,
                        detail: d.str()?,
                    },
                    9 => ErrorKind::Run { backend: d.str()? },
                    0x40 => ErrorKind::Protocol,
                    code => return Err(d.bad(format!("unknown error code {code}"))),
                };
                Response::Error(ErrorMsg {
                    kind,
                    message: d.str()?,
                })
            }
            tag => return Err(d.bad(format!("unknown response tag {tag:#04x}"))),
        };
        d.end()?;
        Ok(r)
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
