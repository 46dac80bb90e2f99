//! The serial backend: the SoC of an FPGA board without a CPU (`vta_hw::soc`: accelerator,
//! device memory, UART bridge) behind [`Device`](crate::Device), reached through its UART.
//!
//! * [`protocol`]: the wire protocol's constants, frames and CRC, shared with the hardware.
//! * [`Link`]: requests and responses over any `Read + Write` byte stream whose reads time
//!   out, checked byte by byte; a lost or damaged frame is detected (timeouts, sync, check
//!   bytes, the bridge's status), the line drained back into step, and safe requests
//!   repeated.
//! * [`SerialDevice`]: the [`Device`](crate::Device): the bridge's memory window carved up by
//!   the shared allocator, copies in frames of up to 256 words, the register sequence of
//!   [`crate::regs`], the run report of the board device. The same code runs on a board's
//!   port and on the simulated SoC's line (`vta_sim::soc::SimLine`).
//! * [`SerialPort`] (Linux): a tty in raw 8N1 through termios, with read timeouts.
//!
//! # Protocol, version 1
//!
//! The host speaks first; the bridge answers every request frame with one response frame.
//! Words are 32-bit and little-endian, addresses are byte addresses of the host's memory
//! map (control registers at `0x000`, the bridge's info registers at `0x100`, device memory
//! where INFO `MEM_BASE` says).
//!
//! Request: `0x5A`, op (0 NOP, 1 read, 2 write), words - 1 (1..=256 words), address (4
//! bytes), header check byte; a write then carries its words and a data check byte. A
//! check byte is the CRC-8 (polynomial 0x07, initial 0, [`protocol::crc8`]) of the header's
//! first seven bytes, or of the data bytes.
//!
//! Response: `0xA5`, status ([`protocol::Status`]), for a read that succeeds its words,
//! then the CRC-8 of everything before it.
//!
//! A read or write must stay inside one region and be word-aligned; a register write is one
//! word (held until its check byte matched, so a damaged frame never writes a register);
//! memory words are written as they arrive. A frame that stops for longer than the frame
//! timeout (INFO `FRAME_TIMEOUT` cycles, 50 ms by default) is answered with the timeout
//! status; after an error in the header the bridge waits for that much silence before it
//! answers, so that the host knows where the next frame starts.

mod device;
mod link;
#[cfg(target_os = "linux")]
mod port;
pub mod protocol;
#[cfg(test)]
mod tests;

pub use device::{BridgeInfo, SerialDevice, SerialOptions};
pub use link::{Link, LinkStats, Repeat};
#[cfg(target_os = "linux")]
pub use port::SerialPort;

/// What can go wrong on the link, named with the port and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum SerialError {
    #[error("cannot {what} {port}: {source}")]
    Io {
        what: &'static str,
        port: String,
        source: std::io::Error,
    },
    #[error("{port}: {baud} baud is not a rate this port can be set to; use one of {supported}")]
    Baud {
        port: String,
        baud: u32,
        supported: String,
    },
    #[error(
        "{port}: no answer to a {request}: expected {expected} more bytes of the UART \
         bridge's response, got {}{}",
        got.len(),
        hex(got)
    )]
    NoAnswer {
        port: String,
        request: String,
        expected: usize,
        got: Vec<u8>,
    },
    #[error("{port}: garbled response to a {request}: {detail}")]
    Garbled {
        port: String,
        request: String,
        detail: String,
    },
    #[error("{port}: the bridge refused a {request}: {status}")]
    Refused {
        port: String,
        request: String,
        status: &'static str,
    },
    #[error(
        "{port}: no VTA UART bridge answers: {detail}. Check that the board is programmed \
         with the SoC's bitstream (`vta hw verilog --soc`), that the baud rate is the one it \
         was built for, and that this is the board's serial port"
    )]
    NoBridge { port: String, detail: String },
    #[error(
        "{port}: the accelerator behind the bridge does not match: {detail}. Program the board \
         with the SoC built for this config, or run with the config it was built for"
    )]
    Identity { port: String, detail: String },
}

/// ` (3f 00 ...)`: the bytes that did arrive, for messages.
fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = bytes.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        " ({}{})",
        shown.join(" "),
        if bytes.len() > 16 { " ..." } else { "" }
    )
}
