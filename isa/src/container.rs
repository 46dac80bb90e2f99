//! The program container (`.vtab`): one versioned binary file holding everything a
//! [`Program`] is — the config it was built for (so it runs without `--config`), the encoded
//! instruction stream, and the DRAM layout with initial contents.
//!
//! # Byte layout (format version 2)
//!
//! A [`frame`] with magic `VTAPROG\0` around the payload below. All integers are
//! little-endian. A `str` is a `u32` byte length followed by that many bytes of UTF-8.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `VTAPROG\0` |
//! | 8 | 4 | `u32` format version, `2` |
//! | 12 | 8 | `u64` length of the whole file in bytes |
//! | 20 | str | config string ([`HwConfig::config_string`]) |
//! | | 8 | `u64` ISA hash ([`HwConfig::isa_hash`]) |
//! | | str | config JSON ([`HwConfig::to_json`]) |
//! | | 4 | `u32` instruction count `N` |
//! | | 16·N | instructions, encoded by [`Codec`]; `dram_base` relative to the region (see [`Program`]) |
//! | | 4 | `u32` segment count `S`, then `S` segments: |
//! | | str | · name |
//! | | 1 | · `u8` dtype: 0 `i8`, 1 `u8`, 2 `i16`, 3 `i32`, 4 `u32`, 5 `uop` |
//! | | 1 | · `u8` roles: bit 0 input, bit 1 output, other bits 0 |
//! | | 4 | · `u32` rank `R` |
//! | | 8·R | · `u64` dimensions, row-major |
//! | | 8 | · `u64` byte offset in the region |
//! | | 1 | · `u8` init flag: 0 no initial data (zeros), 1 present |
//! | | 8 + L | · if present: `u64` length `L`, then `L` bytes, little-endian elements |
//! | end − 8 | 8 | `u64` FNV-1a (64-bit) checksum of every byte before it |
//!
//! Version 1 (written before the frame had its length field) is refused with a request to
//! re-assemble the program with `vta asm`.
//!
//! A reader checks the frame first ([`frame::read`]: magic, version, length, checksum), then
//! the payload's structure (every length fits it, and the last segment ends it exactly), then
//! the content (embedded config valid, its hash matching the stored one, every instruction
//! decodable, [`Program::validate`]). No input makes it panic.

pub mod frame;

use crate::config::{ConfigError, HwConfig, IdentityMismatch};
use crate::insn::Insn;
use crate::layout::{Codec, IsaError, INSN_BYTES};
use crate::program::{DType, Program, Role, Segment};
use frame::{FrameError, HEADER_BYTES};

/// The first 8 bytes of every container.
pub const MAGIC: [u8; 8] = *b"VTAPROG\0";

/// The format version this toolkit writes, and the only one it reads.
pub const FORMAT_VERSION: u32 = 2;

/// The container's frame.
const FRAME: frame::Format = frame::Format {
    magic: MAGIC,
    kind: "VTA program container",
    version: FORMAT_VERSION,
    older: "re-assemble the program with `vta asm`",
    other_file: other_file_hint,
};

/// Why a container cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("malformed container at byte {offset}: {problem}")]
    Malformed { offset: usize, problem: String },
    #[error("the embedded config is invalid: {0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    HashMismatch(#[from] IdentityMismatch),
    #[error("instruction {index}: {source}")]
    Decode { index: usize, source: IsaError },
    #[error("invalid program: {0}")]
    InvalidProgram(String),
    #[error("the program has too many {0} for the container format")]
    TooLarge(&'static str),
    #[error(
        "the program was built for config {program} but the selected config is {selected}; \
         rebuild it with `vta asm --config ...` for {selected}, or run it with the config it \
         was built for"
    )]
    WrongConfig { program: String, selected: String },
}

/// What a file that is not a program container is, when that can be told from its first
/// bytes: `": the file is empty"`, a compiled model's hint, or nothing.
pub fn other_file_hint(bytes: &[u8]) -> &'static str {
    if bytes.is_empty() {
        ": the file is empty"
    } else if bytes.starts_with(b"VTAMODEL") {
        "; it is a compiled model (VTAMODEL): run it with `vta run`"
    } else {
        ""
    }
}

/// True when `bytes` starts with the container magic.
pub fn is_container(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// FNV-1a, 64-bit, fed incrementally: the checksum of the toolkit's file formats (and of
/// [`HwConfig::isa_hash`]). Stable across platforms and versions, which a std `Hasher` does
/// not promise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// Writes the length of `bytes` (a little-endian `u64`), then `bytes`: consecutive
    /// parts hash differently however they are split.
    pub fn write_part(&mut self, bytes: &[u8]) -> &mut Self {
        self.write(&(bytes.len() as u64).to_le_bytes()).write(bytes)
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// FNV-1a (64-bit) of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    Fnv1a::new().write(bytes).finish()
}

/// FNV-1a (64-bit) of the parts, each preceded by its length ([`Fnv1a::write_part`]).
pub fn fnv1a_parts(parts: &[&[u8]]) -> u64 {
    let mut h = Fnv1a::new();
    for p in parts {
        h.write_part(p);
    }
    h.finish()
}

fn dtype_code(d: DType) -> u8 {
    match d {
        DType::I8 => 0,
        DType::U8 => 1,
        DType::I16 => 2,
        DType::I32 => 3,
        DType::U32 => 4,
        DType::Uop => 5,
    }
}

fn dtype_of(code: u8) -> Option<DType> {
    Some(match code {
        0 => DType::I8,
        1 => DType::U8,
        2 => DType::I16,
        3 => DType::I32,
        4 => DType::U32,
        5 => DType::Uop,
        _ => return None,
    })
}

const ROLE_INPUT: u8 = 1;
const ROLE_OUTPUT: u8 = 2;

fn put_u32(out: &mut Vec<u8>, v: usize, what: &'static str) -> Result<(), ContainerError> {
    let v = u32::try_from(v).map_err(|_| ContainerError::TooLarge(what))?;
    out.extend(v.to_le_bytes());
    Ok(())
}

fn put_str(out: &mut Vec<u8>, s: &str, what: &'static str) -> Result<(), ContainerError> {
    put_u32(out, s.len(), what)?;
    out.extend(s.as_bytes());
    Ok(())
}

/// Encodes a program. The program must pass [`Program::validate`].
pub fn write(p: &Program) -> Result<Vec<u8>, ContainerError> {
    p.validate().map_err(ContainerError::InvalidProgram)?;
    let cfg = &p.config;
    let stream = Codec::new(cfg)
        .encode_stream(&p.insns)
        .map_err(|e| ContainerError::InvalidProgram(e.to_string()))?;
    let mut out = frame::start(&FRAME, 256 + stream.len());
    put_str(&mut out, &cfg.config_string(), "config string bytes")?;
    out.extend(cfg.isa_hash().to_le_bytes());
    put_str(&mut out, &cfg.to_json(), "config JSON bytes")?;
    put_u32(&mut out, p.insns.len(), "instructions")?;
    out.extend(stream);
    put_u32(&mut out, p.segments.len(), "segments")?;
    for s in &p.segments {
        put_str(&mut out, &s.name, "segment name bytes")?;
        out.push(dtype_code(s.dtype));
        let roles =
            if s.role.input { ROLE_INPUT } else { 0 } | if s.role.output { ROLE_OUTPUT } else { 0 };
        out.push(roles);
        put_u32(&mut out, s.shape.len(), "segment dimensions")?;
        for &d in &s.shape {
            out.extend((d as u64).to_le_bytes());
        }
        out.extend(s.offset.to_le_bytes());
        match &s.init {
            None => out.push(0),
            Some(init) => {
                out.push(1);
                out.extend((init.len() as u64).to_le_bytes());
                out.extend(init);
            }
        }
    }
    Ok(frame::finish(out))
}

/// A bounds-checked cursor over the bytes the checksum covers; every read names what it reads
/// for the message when it runs past the payload's end.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8], ContainerError> {
        let left = self.bytes.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= left => {
                let s = &self.bytes[self.pos..self.pos + n];
                self.pos += n;
                Ok(s)
            }
            _ => Err(ContainerError::Malformed {
                offset: self.pos,
                problem: format!(
                    "{} ({n} bytes) runs past the end of the payload at byte {}",
                    what(),
                    self.bytes.len()
                ),
            }),
        }
    }
    fn array<const N: usize>(
        &mut self,
        what: &dyn Fn() -> String,
    ) -> Result<[u8; N], ContainerError> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self, what: &dyn Fn() -> String) -> Result<u8, ContainerError> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, ContainerError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, ContainerError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    /// A length-prefixed string, returned raw with its offset (UTF-8 is checked later).
    fn str(&mut self, what: &dyn Fn() -> String) -> Result<(usize, &'a [u8]), ContainerError> {
        let n = self.u32(&|| format!("the length of {}", what()))?;
        let at = self.pos;
        Ok((at, self.take(n.into(), what)?))
    }
}

/// A segment as stored, before its content is checked.
struct RawSegment<'a> {
    at: usize,
    name: (usize, &'a [u8]),
    dtype: u8,
    roles: u8,
    shape: Vec<u64>,
    offset: u64,
    init: Option<&'a [u8]>,
}

fn utf8(at: usize, bytes: &[u8], what: &str) -> Result<String, ContainerError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ContainerError::Malformed {
        offset: at,
        problem: format!("{what} is not valid UTF-8"),
    })
}

/// Decodes a container, using the config embedded in it.
pub fn read(bytes: &[u8]) -> Result<Program, ContainerError> {
    let mut c = Cursor {
        bytes: frame::read(&FRAME, bytes)?,
        pos: HEADER_BYTES,
    };

    // Structure: every length must fit the payload.
    let cfg_string = c.str(&|| "the config string".into())?;
    let stored_hash = c.u64(&|| "the ISA hash".into())?;
    let cfg_json = c.str(&|| "the config JSON".into())?;
    let n_insns = c.u32(&|| "the instruction count".into())?;
    let stream = c.take(u64::from(n_insns) * INSN_BYTES as u64, &|| {
        format!("the {n_insns} instructions")
    })?;
    let n_segs = c.u32(&|| "the segment count".into())?;
    let mut raw = Vec::new();
    for i in 0..n_segs {
        let at = c.pos;
        let name = c.str(&|| format!("the name of segment {i}"))?;
        let dtype = c.u8(&|| format!("the dtype of segment {i}"))?;
        let roles = c.u8(&|| format!("the roles of segment {i}"))?;
        let rank = c.u32(&|| format!("the rank of segment {i}"))?;
        let mut shape = Vec::new();
        for d in 0..rank {
            shape.push(c.u64(&|| format!("dimension {d} of segment {i}"))?);
        }
        let offset = c.u64(&|| format!("the offset of segment {i}"))?;
        let init = match c.u8(&|| format!("the init flag of segment {i}"))? {
            0 => None,
            _ => {
                let len = c.u64(&|| format!("the init length of segment {i}"))?;
                Some(c.take(len, &|| format!("the {len} init bytes of segment {i}"))?)
            }
        };
        raw.push(RawSegment {
            at,
            name,
            dtype,
            roles,
            shape,
            offset,
            init,
        });
    }
    if c.pos != c.bytes.len() {
        return Err(ContainerError::Malformed {
            offset: c.pos,
            problem: match c.bytes.len() - c.pos {
                1 => "1 byte after the last segment, before the checksum".into(),
                n => format!("{n} bytes after the last segment, before the checksum"),
            },
        });
    }

    // Content.
    let stored_string = utf8(cfg_string.0, cfg_string.1, "the config string")?;
    let json = utf8(cfg_json.0, cfg_json.1, "the config JSON")?;
    let config = HwConfig::from_json_str(&json, "embedded in the program container")?;
    config.check_identity(&stored_string, stored_hash)?;
    let codec = Codec::new(&config);
    let insns = stream
        .chunks_exact(INSN_BYTES)
        .enumerate()
        .map(|(index, chunk)| {
            let mut b = [0u8; INSN_BYTES];
            b.copy_from_slice(chunk);
            codec
                .decode(&b)
                .map_err(|source| ContainerError::Decode { index, source })
        })
        .collect::<Result<Vec<Insn>, _>>()?;
    let mut segments = Vec::with_capacity(raw.len());
    for (i, r) in raw.into_iter().enumerate() {
        let name = utf8(r.name.0, r.name.1, &format!("the name of segment {i}"))?;
        let malformed = |problem: String| ContainerError::Malformed {
            offset: r.at,
            problem: format!("segment {i} ('{name}'): {problem}"),
        };
        let dtype = dtype_of(r.dtype)
            .ok_or_else(|| malformed(format!("unknown dtype code {}", r.dtype)))?;
        if r.roles & !(ROLE_INPUT | ROLE_OUTPUT) != 0 {
            return Err(malformed(format!("unknown role bits {:#04x}", r.roles)));
        }
        let shape = r
            .shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| malformed("a dimension does not fit this machine's usize".into()))?;
        segments.push(Segment {
            name,
            dtype,
            shape,
            role: Role {
                input: r.roles & ROLE_INPUT != 0,
                output: r.roles & ROLE_OUTPUT != 0,
            },
            offset: r.offset,
            init: r.init.map(<[u8]>::to_vec),
        });
    }
    let p = Program {
        config,
        insns,
        segments,
    };
    p.validate().map_err(ContainerError::InvalidProgram)?;
    Ok(p)
}

/// Decodes a container that must have been built for `cfg`: its ISA hash must equal
/// `cfg`'s (configs that differ only in micro-architecture, such as the bus width, run the
/// same programs). The returned program carries `cfg`, the hardware it is to run on.
pub fn read_for(bytes: &[u8], cfg: &HwConfig) -> Result<Program, ContainerError> {
    let mut p = read(bytes)?;
    if p.config.isa_hash() != cfg.isa_hash() {
        return Err(ContainerError::WrongConfig {
            program: p.config.config_string(),
            selected: cfg.config_string(),
        });
    }
    p.config = cfg.clone();
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::{AluInsn, AluOp, DepFlags, GemmInsn, MemInsn, MemType, UopLoop};
    use proptest::prelude::*;

    #[test]
    fn fnv1a_matches_the_published_vectors_and_parts_keep_their_boundaries() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(
            Fnv1a::new().write(b"foo").write(b"bar").finish(),
            fnv1a(b"foobar")
        );
        assert_ne!(fnv1a_parts(&[b"ab", b"c"]), fnv1a_parts(&[b"a", b"bc"]));
        let mut framed = 2u64.to_le_bytes().to_vec();
        framed.extend(b"ab");
        assert_eq!(fnv1a_parts(&[b"ab"]), fnv1a(&framed));
    }

    fn sample() -> Program {
        let config = HwConfig::default();
        let mut p = Program {
            config,
            insns: Vec::new(),
            segments: Vec::new(),
        };
        p.push_segment(
            "uops",
            DType::Uop,
            vec![2],
            Role::default(),
            Some(vec![1, 0, 0, 0, 2, 0, 0, 0]),
        );
        let inp = p.push_segment("x", DType::I8, vec![1, 16], Role::INPUT, None);
        let out = p.push_segment("y", DType::I8, vec![1, 16], Role::OUTPUT, None);
        let mem = |mt: MemType, dram_base: u64| MemInsn::transfer(mt, 0, dram_base as u32, 1, 1, 1);
        p.insns = vec![
            Insn::Load(mem(MemType::Uop, 0)),
            Insn::Load(mem(MemType::Inp, inp / 16)),
            Insn::Gemm(GemmInsn {
                deps: DepFlags::NONE,
                lp: UopLoop {
                    reset_reg: true,
                    uop_end: 1,
                    iter_out: 1,
                    iter_in: 1,
                    ..UopLoop::default()
                },
                wgt_factor_out: 0,
                wgt_factor_in: 0,
            }),
            Insn::Alu(AluInsn {
                deps: DepFlags {
                    push_next: true,
                    ..DepFlags::NONE
                },
                lp: UopLoop {
                    uop_end: 1,
                    iter_out: 1,
                    iter_in: 1,
                    ..UopLoop::default()
                },
                op: AluOp::Shr,
                use_imm: true,
                imm: -3,
            }),
            Insn::Store(MemInsn {
                deps: DepFlags {
                    pop_prev: true,
                    ..DepFlags::NONE
                },
                ..mem(MemType::Out, out / 16)
            }),
            Insn::Finish(DepFlags::NONE),
        ];
        p
    }

    #[test]
    fn round_trip() {
        let p = sample();
        let bytes = write(&p).unwrap();
        assert!(is_container(&bytes));
        assert_eq!(&bytes[8..12], &FORMAT_VERSION.to_le_bytes());
        assert_eq!(read(&bytes).unwrap(), p);
        assert_eq!(read_for(&bytes, &p.config).unwrap(), p);
    }

    #[test]
    fn empty_program_round_trips() {
        for (name, _, _) in crate::PRESETS {
            let p = Program {
                config: HwConfig::preset(name).unwrap(),
                insns: vec![],
                segments: vec![],
            };
            assert_eq!(read(&write(&p).unwrap()).unwrap(), p);
        }
    }

    fn reseal(bytes: &mut [u8]) {
        let n = bytes.len() - 8;
        let sum = fnv1a(&bytes[..n]);
        bytes[n..].copy_from_slice(&sum.to_le_bytes());
    }

    /// Sets the frame's length to the file's and reseals it.
    fn reframe(bytes: &mut [u8]) {
        let n = bytes.len() as u64;
        bytes[12..HEADER_BYTES].copy_from_slice(&n.to_le_bytes());
        reseal(bytes);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let p = sample();
        let good = write(&p).unwrap();

        let e = read(b"hello world, not a program").unwrap_err();
        assert!(
            matches!(e, ContainerError::Frame(FrameError::WrongMagic { .. })),
            "{e}"
        );
        let msg = read(b"VTAMODEL\x02\0\0\0").unwrap_err().to_string();
        assert!(msg.contains("it is a compiled model"), "{msg}");

        let mut newer = good.clone();
        newer[8..12].copy_from_slice(&7u32.to_le_bytes());
        let msg = read(&newer).unwrap_err().to_string();
        assert!(msg.contains("format version 7 is newer than this toolkit's 2; upgrade vta"));
        // Version 1 had no length field: refused, saying how to get a current file.
        let mut v1 = good.clone();
        v1[8..12].copy_from_slice(&1u32.to_le_bytes());
        let msg = read(&v1).unwrap_err().to_string();
        assert!(
            msg.contains("format version 1")
                && msg.contains("re-assemble the program with `vta asm`"),
            "{msg}"
        );

        let msg = read(&good[..good.len() - 20]).unwrap_err().to_string();
        assert!(msg.starts_with("truncated: the file has"), "{msg}");
        let msg = read(&good[..10]).unwrap_err().to_string();
        assert!(msg.contains("fewer than its 20-byte header"), "{msg}");

        let mut flipped = good.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x10;
        let msg = read(&flipped).unwrap_err().to_string();
        assert!(msg.contains("checksum mismatch"), "{msg}");

        let mut longer = good.clone();
        longer.push(0);
        assert!(matches!(
            read(&longer),
            Err(ContainerError::Frame(FrameError::TrailingBytes {
                extra: 1,
                ..
            }))
        ));
        // The same byte inside a valid frame is the payload's problem.
        reframe(&mut longer);
        let msg = read(&longer).unwrap_err().to_string();
        assert!(msg.contains("1 byte after the last segment"), "{msg}");
        // A payload cut short inside a valid frame names what it was reading.
        let mut cut = good[..good.len() - 12].to_vec();
        cut.extend([0u8; 8]);
        reframe(&mut cut);
        let msg = read(&cut).unwrap_err().to_string();
        assert!(msg.contains("runs past the end of the payload"), "{msg}");

        let other = HwConfig::preset("batched").unwrap();
        let msg = read_for(&good, &other).unwrap_err().to_string();
        assert!(
            msg.contains("1x16_i8w8a32_15_15_18_17")
                && msg.contains("4x8_i8w8a32_15_16_16_18")
                && msg.contains("vta asm --config"),
            "{msg}"
        );
        // Same ISA, different bus: accepted, and the program takes the given config.
        let wide = HwConfig::preset("wide-bus").unwrap();
        assert_eq!(read_for(&good, &wide).unwrap().config, wide);
    }

    #[test]
    fn content_errors_after_a_valid_checksum() {
        let p = sample();
        let good = write(&p).unwrap();
        // The ISA hash is right after the config string.
        let hash_at = HEADER_BYTES + 4 + p.config.config_string().len();
        let mut bad = good.clone();
        bad[hash_at] ^= 1;
        reseal(&mut bad);
        let msg = read(&bad).unwrap_err().to_string();
        assert!(msg.contains("the hash is corrupted"), "{msg}");
        // The stored config string's last digit, LOG_ACC_BUFF_SIZE, 17 -> 16: the message
        // names the field (the two hashes alone would look alike).
        let mut bad = good.clone();
        assert_eq!(bad[hash_at - 1], b'7');
        bad[hash_at - 1] = b'6';
        reseal(&mut bad);
        let msg = read(&bad).unwrap_err().to_string();
        assert!(msg.contains("LOG_ACC_BUFF_SIZE: 16 vs 17"), "{msg}");

        // An unknown opcode in instruction 2.
        let json_len = p.config.to_json().len();
        let insn_at = hash_at + 8 + 4 + json_len + 4;
        let mut bad = good.clone();
        bad[insn_at + 2 * 16] |= 7;
        reseal(&mut bad);
        let e = read(&bad).unwrap_err();
        assert!(matches!(e, ContainerError::Decode { index: 2, .. }), "{e}");
        assert!(e.to_string().contains("unknown opcode 7"), "{e}");

        // An embedded config that does not validate: LOG_BLOCK 11.
        let json_at = hash_at + 8 + 4;
        let json = p
            .config
            .to_json()
            .replace("\"LOG_BLOCK\": 4", "\"LOG_BLOCK\": 9");
        assert_eq!(json.len(), json_len);
        let mut bad = good.clone();
        bad[json_at..json_at + json_len].copy_from_slice(json.as_bytes());
        reseal(&mut bad);
        let e = read(&bad).unwrap_err();
        assert!(matches!(e, ContainerError::Config(_)), "{e}");
        assert!(e.to_string().contains("LOG_BLOCK"), "{e}");
    }

    #[test]
    fn invalid_programs_are_not_written() {
        let mut p = sample();
        p.segments[1].offset = 3;
        assert!(matches!(write(&p), Err(ContainerError::InvalidProgram(_))));
    }

    #[test]
    fn huge_shapes_are_refused_not_overflowed() {
        let p = sample();
        let mut bytes = write(&p).unwrap();
        // Segment "y" starts where the checksum of the same program without it would be.
        let mut q = p.clone();
        q.segments.truncate(2);
        let y_at = write(&q).unwrap().len() - 8;
        // name (4 + 1), dtype, roles, rank (4), then the first dimension.
        let dim_at = y_at + 5 + 1 + 1 + 4;
        bytes[dim_at..dim_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        reseal(&mut bytes);
        let e = read(&bytes).unwrap_err();
        assert!(
            matches!(
                e,
                ContainerError::InvalidProgram(_) | ContainerError::Malformed { .. }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("'y'"), "{e}");
    }

    fn arb_program() -> impl Strategy<Value = Program> {
        let preset = prop::sample::select(crate::PRESETS.iter().map(|p| p.0).collect::<Vec<_>>());
        preset.prop_flat_map(|name| {
            let cfg = HwConfig::preset(name).unwrap();
            let codec = Codec::new(&cfg);
            let insn =
                any::<[u8; 16]>().prop_filter_map("undecodable", move |b| codec.decode(&b).ok());
            let seg = (
                prop::sample::select(DType::ALL.to_vec()),
                prop::collection::vec(0usize..5, 0..3),
                any::<(bool, bool, bool)>(),
                any::<u64>(),
            );
            (
                Just(cfg),
                prop::collection::vec(insn, 0..20),
                prop::collection::vec(seg, 0..5),
            )
                .prop_map(|(config, insns, segs)| {
                    let mut p = Program {
                        config,
                        insns,
                        segments: vec![],
                    };
                    for (i, (dtype, shape, (input, output, init), seed)) in
                        segs.into_iter().enumerate()
                    {
                        let n: usize = shape.iter().product::<usize>() * dtype.size();
                        let data = init.then(|| {
                            (0..n)
                                .map(|k| (seed.rotate_left(k as u32 % 64) as u8) ^ k as u8)
                                .collect()
                        });
                        p.push_segment(
                            &format!("seg_{i}"),
                            dtype,
                            shape,
                            Role { input, output },
                            data,
                        );
                    }
                    p
                })
        })
    }

    proptest! {
        #[test]
        fn write_read_round_trips(p in arb_program()) {
            let bytes = write(&p).unwrap();
            let back = read(&bytes).unwrap();
            prop_assert_eq!(&back, &p);
            prop_assert_eq!(write(&back).unwrap(), bytes);
        }

        #[test]
        fn random_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..512),
                                    magic in any::<bool>()) {
            if magic && bytes.len() >= HEADER_BYTES {
                bytes[..8].copy_from_slice(&MAGIC);
                bytes[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
                reframe(&mut bytes);
            }
            let _ = read(&bytes);
        }

        #[test]
        fn truncations_are_errors(p in arb_program(), cut in any::<prop::sample::Index>()) {
            let bytes = write(&p).unwrap();
            let n = cut.index(bytes.len());
            prop_assert!(read(&bytes[..n]).is_err());
        }

        #[test]
        fn bit_flips_are_errors(p in arb_program(), at in any::<prop::sample::Index>(),
                                bit in 0u8..8) {
            let mut bytes = write(&p).unwrap();
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
            prop_assert!(read(&bytes).is_err());
        }

        #[test]
        fn resealed_corruption_never_panics(p in arb_program(),
                                            edits in prop::collection::vec(
                                                (any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
            // Corrupt content but fix the checksum, so the content checks run on garbage.
            let mut bytes = write(&p).unwrap();
            let n = bytes.len() - 8;
            for (at, v) in edits {
                let i = HEADER_BYTES + at.index(n - HEADER_BYTES);
                bytes[i] = v;
            }
            reseal(&mut bytes);
            let _ = read(&bytes);
        }
    }
}
