//! The remote runner (TVM RPC's role): one [`Device`](crate::Device) served over TCP by
//! [`serve`], used from another machine or process through [`RemoteDevice`], which is a
//! `Device` itself, so everything built on the trait (`run_program`, compiled models) runs
//! remotely unchanged. This module owns the protocol, its framing and its limits; std only.
//!
//! # Protocol, version 1
//!
//! Everything is little-endian. A connection carries **frames**: `len: u32`, then `len` bytes
//! of body (`1 <= len <=` the receiver's limit; the server's, [`DEFAULT_MAX_FRAME`] unless set,
//! is in its welcome). A frame longer than the limit is refused from its length alone.
//! A body is a tag byte and the tag's fields, with nothing after them. Field types:
//! `u8`, `u16`, `u32`, `u64`; `str` = `u32` byte count + UTF-8 bytes; `bytes` = `u32` count
//! + bytes; `opt` = `u8` 0 (none) or 1 followed by a `u64`; `buffer` = `phys_addr: u64,
//! size: u64, id: u64`; `pairs` = `u32` count, then per pair `name: str, value: u64`.
//!
//! The client speaks first and the server answers each request with one response, in order
//! (a run with two). Requests:
//!
//! | tag    | request      | fields                                                     | answer |
//! |--------|--------------|------------------------------------------------------------|--------|
//! | `0x01` | hello        | `b"VTAR"`, `version: u16`, `token: str`                    | welcome |
//! | `0x02` | alloc        | `size: u64, align: u64`                                    | buffer |
//! | `0x03` | free         | `buffer`                                                   | ok |
//! | `0x04` | write        | `buffer, offset: u64, data: bytes`                         | ok |
//! | `0x05` | write by hash| `buffer, offset: u64, len: u64, fnv1a: u64`                | cache hit / miss |
//! | `0x06` | read         | `buffer, offset: u64, len: u64`                            | data |
//! | `0x07` | flush        | `buffer, offset: u64, size: u64`                           | ok |
//! | `0x08` | invalidate   | `buffer, offset: u64, size: u64`                           | ok |
//! | `0x09` | run          | `insn_addr: u64, insn_count: u32, wall_ns: opt, work: opt` | running, then report |
//! | `0x0a` | bye          | —                                                          | ok, then the server closes |
//!
//! Responses:
//!
//! | tag    | response   | fields |
//! |--------|------------|--------|
//! | `0x81` | welcome    | `version: u16, server_id: str, device: str, config_string: str, isa_hash: u64, config_json: str, bitstream: str, max_frame: u32` |
//! | `0x82` | ok         | — |
//! | `0x83` | buffer     | `buffer` |
//! | `0x84` | cache hit  | — (the server wrote its copy of the blob) |
//! | `0x85` | cache miss | — (send the data with a write) |
//! | `0x86` | data       | `bytes` |
//! | `0x87` | running    | — (the device took the run from the queue) |
//! | `0x88` | report     | `backend: str, counters: pairs, extras: pairs, wall_ns: u64` |
//! | `0xee` | error      | `code: u8`, the code's fields, `message: str` |
//!
//! Error codes and fields, each becoming that [`DeviceError`](crate::DeviceError) variant on
//! the client: 1 out of memory (`requested, align, free, largest: u64`), 2 bad align
//! (`align: u64`), 3 unknown buffer (`id, phys_addr: u64`), 4 out of bounds (`what: str, id,
//! offset, len, size: u64`), 5 config mismatch (`program, device: str`), 6 program, 7 backend
//! unavailable (`backend: str`), 8 timeout (`backend, detail: str`), 9 run failed
//! (`backend: str`), `0x40` protocol (none: a refused hello, a bad frame, a busy server;
//! [`DeviceError::Remote`](crate::DeviceError::Remote) on the client). `message` is the text
//! the server printed (for 6, 7 and 9 the text of the failure's cause).
//!
//! # Sessions and limits
//!
//! The hello must come within 10 s and carry the server's token (compared in constant time;
//! a mismatch is refused with an error saying so). A bad frame or an unknown tag is answered
//! with a protocol error and closes that connection only. Each connection may use only the
//! buffers it allocated; when it says bye or goes away, the server frees what it left
//! allocated. Requests of all connections run one at a time on the device, in arrival order.
//! At most `max_clients` connections are served at once (8 by default); the next
//! `max_waiting` (64) wait, first come first served, up to `queue_timeout` (5 minutes) for a
//! session to end, their hello unanswered until then; beyond those, or after that wait, the
//! hello is answered with a protocol error starting `server busy:`, which the client retries
//! with backoff until its `busy_timeout`.
//!
//! **Upload by content hash**: the client sends a write of [`CACHE_MIN_BYTES`] or more first
//! as "write by hash" (FNV-1a of the bytes, and their length); the server, which keeps the
//! blobs of such writes in a cache bounded in bytes (least recently used out), copies its own
//! on a hit, and on a miss the client sends the data. Writes and reads longer than a frame
//! travel in pieces. Anyone holding the token is trusted: FNV-1a is not a cryptographic hash.

/// How a refused hello's message starts when the server is full (the client retries those).
const BUSY: &str = "server busy:";

mod admission;
mod cache;
mod client;
mod server;
pub mod wire;

pub use cache::BlobCache;
pub use client::{RemoteDevice, RemoteOptions};
pub use server::{serve, Log, ServeOptions};
pub use wire::ServerInfo;

/// The protocol version this build speaks; a hello with another is refused.
pub const PROTOCOL_VERSION: u16 = 1;
/// The port `vta serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 9091;
/// Longest frame body a server accepts unless configured otherwise.
pub const DEFAULT_MAX_FRAME: u32 = 8 << 20;
/// Writes (and pieces of writes) this long or longer are offered by content hash first.
pub const CACHE_MIN_BYTES: u64 = 64 << 10;
/// The environment variable holding the shared secret, for clients and `vta serve`.
pub const TOKEN_ENV: &str = "VTA_REMOTE_TOKEN";
