//! The host's end of the bridge protocol over any byte stream: one request frame, one
//! response frame, checked byte by byte; long transfers split into frames of
//! [`MAX_WORDS`]; damaged or lost frames detected, the link brought back in step, and
//! requests that may safely be repeated sent again.
//!
//! The stream's reads must time out: a read that finds no byte within the stream's own
//! timeout returns `Ok(0)` or an error of kind `TimedOut` or `WouldBlock` (a serial port
//! opened with [`super::SerialPort::open`] does; so does the simulated one). That timeout
//! must be longer than the bridge's frame timeout, so that draining the line until it is
//! quiet also outlasts a frame the bridge is still waiting to complete.

use std::io::{self, Read, Write};

use super::protocol::{crc8, request, response_len, Op, Status, MAX_WORDS, RESPONSE_SYNC};
use super::SerialError;

/// Whether a request may be sent again after it was lost or damaged on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeat {
    /// Yes: reads, and writes of memory (the same bytes land again).
    Safe,
    /// No: register writes (CONTROL's start acts).
    Never,
}

/// What the link has done, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Request frames sent, repeats included.
    pub frames: u64,
    /// Requests sent again after a lost or damaged frame.
    pub repeats: u64,
    /// Bytes sent and received.
    pub bytes_out: u64,
    pub bytes_in: u64,
}

/// A request that failed on the way, and whether the bridge may still be mid-frame.
enum Failure {
    /// Bytes were lost or damaged (a timeout, a bad sync or check byte, a transport status):
    /// bring the link back in step, and repeat if allowed.
    Transport(SerialError),
    /// The bridge refused the request itself, or the stream broke: no repeat helps.
    Fatal(SerialError),
}

/// The bridge protocol over the byte stream `S`, for the port called `port` in messages.
pub struct Link<S> {
    stream: S,
    port: String,
    repeats: u32,
    stats: LinkStats,
}

impl<S: Read + Write> Link<S> {
    /// A link over `stream`; a lost or damaged request that may be repeated is sent up to
    /// `repeats` more times.
    pub fn new(stream: S, port: &str, repeats: u32) -> Link<S> {
        Link {
            stream,
            port: port.to_string(),
            repeats,
            stats: LinkStats::default(),
        }
    }

    /// The port's name.
    pub fn port(&self) -> &str {
        &self.port
    }

    /// What the link has done so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// The stream.
    pub fn stream(&self) -> &S {
        &self.stream
    }

    /// The stream, e.g. to advance a simulation.
    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Sends a NOP and waits for its OK (a ping; not repeated, so that a dead line is
    /// reported after one timeout).
    pub fn nop(&mut self) -> Result<(), SerialError> {
        self.request(Op::Nop, 0, 1, &[], Repeat::Never).map(drop)
    }

    /// Reads `n` words from `addr` on, in frames of up to [`MAX_WORDS`].
    pub fn read(&mut self, addr: u32, n: usize) -> Result<Vec<u32>, SerialError> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let k = (n - out.len()).min(MAX_WORDS);
            let at = addr.wrapping_add(4 * out.len() as u32);
            out.extend(self.request(Op::Read, at, k, &[], Repeat::Safe)?);
        }
        Ok(out)
    }

    /// Writes `data` from `addr` on, in frames of up to [`MAX_WORDS`].
    pub fn write(&mut self, addr: u32, data: &[u32], repeat: Repeat) -> Result<(), SerialError> {
        for (i, chunk) in data.chunks(MAX_WORDS).enumerate() {
            let at = addr.wrapping_add((4 * MAX_WORDS * i) as u32);
            self.request(Op::Write, at, chunk.len(), chunk, repeat)?;
        }
        Ok(())
    }

    /// Reads and drops bytes until the stream has been quiet for its timeout: afterwards the
    /// bridge is between frames and nothing of an earlier exchange is on its way.
    pub fn drain(&mut self) -> Result<(), SerialError> {
        let mut buf = [0u8; 256];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => self.stats.bytes_in += n as u64,
                Err(e) if quiet(&e) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io("read from", e)),
            }
        }
    }

    /// One request, repeated after a lost or damaged frame as `repeat` allows.
    fn request(
        &mut self,
        op: Op,
        addr: u32,
        words: usize,
        data: &[u32],
        repeat: Repeat,
    ) -> Result<Vec<u32>, SerialError> {
        let frame = request(op, addr, words, data);
        let mut tries = 0;
        loop {
            match self.exchange(&frame, op, addr, words) {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Transport(e)) => {
                    self.drain()?;
                    if repeat == Repeat::Never || tries == self.repeats {
                        return Err(e);
                    }
                    tries += 1;
                    self.stats.repeats += 1;
                }
            }
        }
    }

    /// Sends `frame` and reads and checks its response.
    fn exchange(
        &mut self,
        frame: &[u8],
        op: Op,
        addr: u32,
        words: usize,
    ) -> Result<Vec<u32>, Failure> {
        let what = || describe(op, addr, words);
        self.stats.frames += 1;
        self.stats.bytes_out += frame.len() as u64;
        self.stream
            .write_all(frame)
            .and_then(|()| self.stream.flush())
            .map_err(|e| Failure::Fatal(self.io("write to", e)))?;
        let mut head = [0u8; 2];
        self.receive(&mut head, &what)?;
        if head[0] != RESPONSE_SYNC {
            return Err(Failure::Transport(self.garbled(
                &what,
                format!(
                    "the response starts with {:#04x}, not the bridge's {RESPONSE_SYNC:#04x} \
                     (a wrong baud rate, or another device on this port?)",
                    head[0]
                ),
            )));
        }
        let status = Status::from_byte(head[1]);
        let ok = status == Some(Status::Ok);
        let len = if ok { response_len(op, words) } else { 3 };
        let mut rest = vec![0u8; len - 2];
        self.receive(&mut rest, &what)?;
        let crc = crc8(crc8(0, &head), &rest[..rest.len() - 1]);
        if crc != rest[rest.len() - 1] {
            return Err(Failure::Transport(self.garbled(
                &what,
                format!(
                    "the response's check byte is {:#04x}, its bytes give {crc:#04x} (bytes \
                     damaged on the way)",
                    rest[rest.len() - 1]
                ),
            )));
        }
        match status {
            Some(Status::Ok) => Ok(rest[..rest.len() - 1]
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
                .collect()),
            Some(s) => {
                let e = SerialError::Refused {
                    port: self.port.clone(),
                    request: what(),
                    status: s.describe(),
                };
                Err(if s.is_transport() {
                    Failure::Transport(e)
                } else {
                    Failure::Fatal(e)
                })
            }
            None => Err(Failure::Transport(self.garbled(
                &what,
                format!("status byte {:#04x} is not one the bridge sends", head[1]),
            ))),
        }
    }

    /// Fills `buf` from the stream; a timeout before it is full is a lost response.
    fn receive(&mut self, buf: &mut [u8], what: &dyn Fn() -> String) -> Result<(), Failure> {
        let mut got = 0;
        while got < buf.len() {
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if quiet(&e) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::Fatal(self.io("read from", e))),
            }
        }
        self.stats.bytes_in += got as u64;
        if got < buf.len() {
            return Err(Failure::Transport(SerialError::NoAnswer {
                port: self.port.clone(),
                request: what(),
                expected: buf.len(),
                got: buf[..got].to_vec(),
            }));
        }
        Ok(())
    }

    fn garbled(&self, what: &dyn Fn() -> String, detail: String) -> SerialError {
        SerialError::Garbled {
            port: self.port.clone(),
            request: what(),
            detail,
        }
    }

    fn io(&self, what: &'static str, source: io::Error) -> SerialError {
        SerialError::Io {
            what,
            port: self.port.clone(),
            source,
        }
    }
}

/// Whether a read error means "no byte within the stream's timeout".
fn quiet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// A request, for messages: `read of 3 words at 0x10000000`.
fn describe(op: Op, addr: u32, words: usize) -> String {
    match op {
        Op::Nop => "NOP".to_string(),
        Op::Read => format!("read of {words} word(s) at {addr:#010x}"),
        Op::Write => format!("write of {words} word(s) at {addr:#010x}"),
    }
}
