//! The UART host link of the SoC (`vta_hw::soc`): its wire protocol ([`protocol`]).
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

pub mod protocol;
