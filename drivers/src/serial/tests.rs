//! The link against a bridge modelled in software (the protocol as the hardware implements
//! it, with faults on demand): transfers across frames, lost and damaged frames repeated or
//! reported, refusals, a dead line and a wrong device named in the error.

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use super::protocol::{crc8, response, Op, Status, HEADER_BYTES, REQUEST_SYNC};
use super::{Link, Repeat, SerialError};

/// What the modelled bridge does to the next response.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Sends nothing.
    Drop,
    /// Flips a bit of byte `i`.
    Flip(usize),
    /// Answers with this status (as after a lost or damaged request byte).
    Status(Status),
}

/// A bridge in software: 4 KiB of memory at 0x1000, requests parsed as the hardware does.
struct Bridge {
    mem: Vec<u32>,
    input: Vec<u8>,
    output: VecDeque<u8>,
    faults: VecDeque<Fault>,
    /// Answers nothing at all, or answers every request with these bytes.
    dead: bool,
    noise: Option<Vec<u8>>,
    frames: usize,
}

const BASE: u32 = 0x1000;

impl Bridge {
    fn new() -> Bridge {
        Bridge {
            mem: vec![0; 1024],
            input: vec![],
            output: VecDeque::new(),
            faults: VecDeque::new(),
            dead: false,
            noise: None,
            frames: 0,
        }
    }

    /// Handles the complete frame at the start of `input`, if there is one.
    fn serve(&mut self) -> bool {
        let f = &self.input;
        if f.len() < HEADER_BYTES {
            return false;
        }
        assert_eq!(f[0], REQUEST_SYNC);
        assert_eq!(f[7], crc8(0, &f[..7]), "header check byte");
        let words = f[2] as usize + 1;
        let addr = u32::from_le_bytes(f[3..7].try_into().unwrap());
        let write = f[1] == Op::Write as u8;
        let len = HEADER_BYTES + if write { 4 * words + 1 } else { 0 };
        if f.len() < len {
            return false;
        }
        let frame: Vec<u8> = self.input.drain(..len).collect();
        self.frames += 1;
        let index = addr.wrapping_sub(BASE) as usize / 4;
        let inside = addr >= BASE && index + words <= self.mem.len();
        let (status, data) = match frame[1] {
            0 => (Status::Ok, vec![]),
            _ if !inside => (Status::BadAddress, vec![]),
            1 => (Status::Ok, self.mem[index..index + words].to_vec()),
            _ => {
                let d = &frame[HEADER_BYTES..len - 1];
                assert_eq!(frame[len - 1], crc8(0, d), "data check byte");
                for (i, w) in d.chunks(4).enumerate() {
                    self.mem[index + i] = u32::from_le_bytes(w.try_into().unwrap());
                }
                (Status::Ok, vec![])
            }
        };
        let mut r = response(status, &data);
        if let Some(n) = &self.noise {
            r = n.clone();
        }
        match self.faults.pop_front() {
            None => {}
            Some(Fault::Drop) => r.clear(),
            Some(Fault::Flip(i)) => r[i] ^= 0x10,
            Some(Fault::Status(s)) => r = response(s, &[]),
        }
        if !self.dead {
            self.output.extend(r);
        }
        true
    }
}

impl Write for Bridge {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.input.extend(buf);
        while self.serve() {}
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Bridge {
    /// What the bridge has sent; a timeout when nothing (the line is quiet).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.output.is_empty() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        let n = buf.len().min(self.output.len());
        for (b, o) in buf.iter_mut().zip(self.output.drain(..n)) {
            *b = o;
        }
        Ok(n)
    }
}

fn link() -> Link<Bridge> {
    Link::new(Bridge::new(), "/dev/ttyTEST", 2)
}

#[test]
fn transfers_span_frames() {
    let mut l = link();
    let data: Vec<u32> = (0..256 + 44u32)
        .map(|i| i.wrapping_mul(0x0101_0101))
        .collect();
    l.write(BASE + 8, &data, Repeat::Safe).unwrap();
    assert_eq!(l.read(BASE + 8, data.len()).unwrap(), data);
    l.nop().unwrap();
    let s = l.stats();
    assert_eq!((s.frames, s.repeats), (5, 0));
    assert_eq!(l.stream().frames, 5);
}

#[test]
fn lost_and_damaged_responses_are_repeated_when_safe() {
    let mut l = link();
    l.stream_mut().faults.push_back(Fault::Drop);
    l.write(BASE, &[7, 8, 9], Repeat::Safe).unwrap();
    assert_eq!(l.stats().repeats, 1);
    l.stream_mut().faults.push_back(Fault::Flip(2));
    assert_eq!(l.read(BASE, 3).unwrap(), [7, 8, 9]);
    assert_eq!(l.stats().repeats, 2);
    // A timeout status (a request byte lost on the way) is repeated too.
    l.stream_mut()
        .faults
        .push_back(Fault::Status(Status::Timeout));
    assert_eq!(l.read(BASE + 4, 1).unwrap(), [8]);
    assert_eq!(l.stats().repeats, 3);
}

#[test]
fn a_register_write_is_never_repeated() {
    let mut l = link();
    l.stream_mut().faults.push_back(Fault::Drop);
    let e = l.write(BASE, &[1], Repeat::Never).unwrap_err().to_string();
    assert_eq!(
        e,
        "/dev/ttyTEST: no answer to a write of 1 word(s) at 0x00001000: expected 2 more \
         bytes of the UART bridge's response, got 0"
    );
    assert_eq!(l.stream().frames, 1, "sent once");
    // The link is usable afterwards.
    assert_eq!(l.read(BASE, 1).unwrap(), [1]);
}

#[test]
fn repeats_are_bounded() {
    let mut l = link();
    l.stream_mut().faults.extend([Fault::Flip(1); 3]);
    let e = l.read(BASE, 2).unwrap_err();
    assert!(matches!(e, SerialError::Garbled { .. }), "{e}");
    assert_eq!(l.stream().frames, 3, "sent once and repeated twice");
}

#[test]
fn a_refusal_is_not_repeated_and_says_why() {
    let mut l = link();
    let e = l.read(0x20_0000, 4).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "/dev/ttyTEST: the bridge refused a read of 4 word(s) at 0x00200000: bad address"
        ),
        "{e}"
    );
    assert_eq!(l.stream().frames, 1);
}

#[test]
fn a_dead_line_and_a_wrong_device_are_named() {
    let mut l = link();
    l.stream_mut().dead = true;
    let e = l.nop().unwrap_err().to_string();
    assert!(
        e.contains("/dev/ttyTEST: no answer to a NOP: expected 2 more bytes"),
        "{e}"
    );
    let mut l = link();
    l.stream_mut().noise = Some(b"OK\r\n".to_vec());
    let e = l.nop().unwrap_err().to_string();
    assert!(
        e.contains("the response starts with 0x4f, not the bridge's 0xa5 (a wrong baud rate"),
        "{e}"
    );
}
