//! The UART bridge's wire protocol, version 1: the address map the host sees, the frames, the
//! status codes and the check bytes. The hardware (`vta_hw::soc`) is built from these
//! constants and [`SerialDevice`](super::SerialDevice) speaks them; the module docs of
//! [`crate::serial`] describe the protocol in prose.

/// First byte of every request.
pub const REQUEST_SYNC: u8 = 0x5a;
/// First byte of every response.
pub const RESPONSE_SYNC: u8 = 0xa5;

/// Bytes of a request header: sync, op, words - 1, address (4, little-endian), check byte.
pub const HEADER_BYTES: usize = 8;
/// Most 32-bit words one frame reads or writes.
pub const MAX_WORDS: usize = 256;

/// What a request asks for (the header's second byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Nothing: the bridge answers OK (a ping, and a way to find the frame boundary).
    Nop = 0,
    /// Read words from the address.
    Read = 1,
    /// Write the words that follow the header.
    Write = 2,
}

/// The status byte of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done.
    Ok = 0,
    /// The header's check byte did not match: nothing was done.
    HeaderCheck = 1,
    /// The data's check byte did not match: a register write was not done; a memory range
    /// may hold the received (bad) data.
    DataCheck = 2,
    /// The frame stopped for longer than the bridge's frame timeout (a lost byte): a register
    /// write was not done; a memory write may be partly done.
    Timeout = 3,
    /// The op byte is not a known op.
    BadOp = 4,
    /// The address is not word-aligned, the words do not lie inside one region, the region
    /// is read-only, or a register write is longer than one word.
    BadAddress = 5,
    /// A slave answered a write with an error response.
    BusError = 6,
}

impl Status {
    /// The status of a status byte, if it is one.
    pub fn from_byte(b: u8) -> Option<Status> {
        Some(match b {
            0 => Status::Ok,
            1 => Status::HeaderCheck,
            2 => Status::DataCheck,
            3 => Status::Timeout,
            4 => Status::BadOp,
            5 => Status::BadAddress,
            6 => Status::BusError,
            _ => return None,
        })
    }

    /// Whether the frame may have been damaged on the way, so that sending it again may
    /// succeed (as opposed to a request the bridge refuses as such).
    pub fn is_transport(self) -> bool {
        matches!(
            self,
            Status::HeaderCheck | Status::DataCheck | Status::Timeout
        )
    }

    /// What the status means, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::HeaderCheck => "the header's check byte did not match (bytes damaged or lost)",
            Status::DataCheck => "the data's check byte did not match (bytes damaged or lost)",
            Status::Timeout => "the frame stopped half-way (bytes lost)",
            Status::BadOp => "unknown op",
            Status::BadAddress => {
                "bad address (unaligned, outside a region, crossing regions, read-only, or a \
                 register write of more than one word)"
            }
            Status::BusError => "a slave answered with an error response",
        }
    }
}

/// The accelerator's control registers (`vta_top`'s AXI4-Lite port, the map of
/// [`crate::regs`]): `0x000..0x100`.
pub const CONTROL_BASE: u32 = 0x000;
/// Bytes of the control region.
pub const CONTROL_BYTES: u32 = 0x100;
/// The bridge's own read-only registers: `0x100..0x120`.
pub const INFO_BASE: u32 = 0x100;
/// Bytes of the info region.
pub const INFO_BYTES: u32 = 0x20;

/// INFO: identifies the bridge, reads [`ID_VALUE`].
pub const INFO_ID: u32 = INFO_BASE;
/// INFO: byte address of the device memory (where the accelerator sees it too).
pub const INFO_MEM_BASE: u32 = INFO_BASE + 0x04;
/// INFO: bytes of device memory.
pub const INFO_MEM_BYTES: u32 = INFO_BASE + 0x08;
/// INFO: the clock frequency the SoC was built for, in Hz.
pub const INFO_CLOCK_HZ: u32 = INFO_BASE + 0x0c;
/// INFO: the baud rate the SoC was built for.
pub const INFO_BAUD: u32 = INFO_BASE + 0x10;
/// INFO: clock cycles of silence after which the bridge abandons a frame.
pub const INFO_FRAME_TIMEOUT: u32 = INFO_BASE + 0x14;
/// INFO: characters received with a bad stop bit, or lost to a full receive buffer, since
/// reset (wraps at 2^32).
pub const INFO_RX_ERRORS: u32 = INFO_BASE + 0x18;
/// INFO: frames answered with a status other than OK since reset (wraps at 2^32).
pub const INFO_FRAME_ERRORS: u32 = INFO_BASE + 0x1c;

/// What [`INFO_ID`] reads: `"VTU"` in the top bytes and the protocol version (1) in the low
/// byte.
pub const ID_VALUE: u32 = 0x5654_5501;

/// The CRC-8 of `bytes` continuing from `crc`: polynomial x^8 + x^2 + x + 1 (0x07), MSB
/// first, no reflection, no final XOR (CRC-8/SMBUS when `crc` starts at 0).
pub fn crc8(mut crc: u8, bytes: &[u8]) -> u8 {
    for &b in bytes {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x07
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A request frame: header, and for a write the data words and the data's check byte.
/// `words` is 1..=[`MAX_WORDS`] (for a write, `data.len()`).
pub fn request(op: Op, addr: u32, words: usize, data: &[u32]) -> Vec<u8> {
    assert!(
        (1..=MAX_WORDS).contains(&words),
        "a frame carries 1..={MAX_WORDS} words, not {words}"
    );
    let mut f = Vec::with_capacity(HEADER_BYTES + 4 * data.len() + 1);
    f.extend([REQUEST_SYNC, op as u8, (words - 1) as u8]);
    f.extend(addr.to_le_bytes());
    f.push(crc8(0, &f));
    if op == Op::Write {
        assert_eq!(data.len(), words, "a write carries its words");
        let start = f.len();
        for w in data {
            f.extend(w.to_le_bytes());
        }
        f.push(crc8(0, &f[start..]));
    }
    f
}

/// Bytes of the response to a request that succeeds: sync, status, the data of a read,
/// check byte.
pub fn response_len(op: Op, words: usize) -> usize {
    3 + if op == Op::Read { 4 * words } else { 0 }
}

/// A response the way the bridge builds it: sync, status, the words (a read that succeeds),
/// and the CRC-8 of all of them.
pub fn response(status: Status, data: &[u32]) -> Vec<u8> {
    let mut f = vec![RESPONSE_SYNC, status as u8];
    for w in data {
        f.extend(w.to_le_bytes());
    }
    f.push(crc8(0, &f));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc8_is_crc8_smbus() {
        // The catalogue's check value: CRC-8/SMBUS of "123456789" is 0xF4.
        assert_eq!(crc8(0, b"123456789"), 0xf4);
        // A message followed by its CRC has CRC 0.
        let c = crc8(0, b"frame");
        assert_eq!(crc8(c, &[c]), 0);
    }

    #[test]
    fn frames_are_laid_out_as_documented() {
        let r = request(Op::Read, 0x1000_0010, 3, &[]);
        assert_eq!(r[..7], [0x5a, 1, 2, 0x10, 0x00, 0x00, 0x10]);
        assert_eq!(r[7], crc8(0, &r[..7]));
        assert_eq!(r.len(), HEADER_BYTES);
        let w = request(Op::Write, 0x08, 1, &[0xdead_beef]);
        assert_eq!(w[8..12], [0xef, 0xbe, 0xad, 0xde]);
        assert_eq!(w[12], crc8(0, &w[8..12]));
        assert_eq!(response(Status::Ok, &[7]).len(), response_len(Op::Read, 1));
        assert_eq!(response(Status::Ok, &[]).len(), response_len(Op::Write, 5));
        for b in 0..=255u8 {
            if let Some(s) = Status::from_byte(b) {
                assert_eq!(s as u8, b);
            }
        }
    }
}
