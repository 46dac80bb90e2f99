//! The frame shared by the toolkit's binary files — program containers (`VTAPROG\0`, this
//! module's parent) and compiled models (`VTAMODEL`, `vta_runtime::file`): what identifies a
//! file, says which format version it is, tells a truncated file from one with bytes appended,
//! and detects corruption. Each format defines only its payload.
//!
//! # Byte layout
//!
//! All integers are little-endian. `N` is the length of the whole file.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic, naming the format ([`Format::magic`]) |
//! | 8 | 4 | `u32` format version ([`Format::version`]) |
//! | 12 | 8 | `u64` `N`, the length of the whole file in bytes |
//! | 20 | N − 28 | the payload, defined by the format |
//! | N − 8 | 8 | `u64` FNV-1a (64-bit) checksum of bytes `0 .. N − 8` ([`fnv1a`]) |
//!
//! [`read`] checks, in order, and refuses with a [`FrameError`] naming the first problem:
//! an empty file; the magic (naming what the file is instead when its first bytes tell); a
//! version that no format reaches (0 or above [`MAX_PLAUSIBLE_VERSION`]: corruption); a newer
//! version (upgrade vta); an older one (the format's advice: re-assemble, recompile); the
//! length (shorter than the frame itself: corrupted; the file shorter than its length:
//! truncated; longer: trailing bytes); the checksum. A newer version is refused before
//! anything after byte 12 is read, so later versions may change all of it.

use super::fnv1a;

/// Bytes before the payload: magic, version, length.
pub const HEADER_BYTES: usize = 20;

/// Bytes after the payload: the checksum.
pub const CHECKSUM_BYTES: usize = 8;

/// Versions above this are read as corruption rather than as a newer format.
pub const MAX_PLAUSIBLE_VERSION: u32 = 0xFF;

/// One framed file format.
#[derive(Debug, Clone, Copy)]
pub struct Format {
    /// The first 8 bytes of every file.
    pub magic: [u8; 8],
    /// What such a file is, for messages: `"compiled model"`.
    pub kind: &'static str,
    /// The version this toolkit writes, and the only one it reads.
    pub version: u32,
    /// What to do with a file of an older version, for the refusal message:
    /// `"recompile the model with `vta compile`"`.
    pub older: &'static str,
    /// What a file with another magic is, when its first bytes tell (appended to the
    /// message, e.g. `"; it is a compiled model (VTAMODEL): run it with `vta run`"`), or `""`.
    pub other_file: fn(&[u8]) -> &'static str,
}

/// Why a framed file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("the file is empty: not a {kind}")]
    Empty { kind: &'static str },
    #[error(
        "not a {kind} (the file does not start with the magic bytes \"{}\"){hint}",
        magic.escape_ascii()
    )]
    WrongMagic {
        kind: &'static str,
        magic: [u8; 8],
        hint: &'static str,
    },
    #[error(
        "format version {0} is not a valid version (versions start at 1 and stay small); the \
         file is corrupted"
    )]
    BadVersion(u32),
    #[error("format version {found} is newer than this toolkit's {supported}; upgrade vta")]
    NewerVersion { found: u32, supported: u32 },
    #[error(
        "format version {found} (written by an older vta) is no longer read, this toolkit reads \
         version {supported}: {advice}"
    )]
    OlderVersion {
        found: u32,
        supported: u32,
        advice: &'static str,
    },
    #[error(
        "truncated: the file has {got} bytes, fewer than its {HEADER_BYTES}-byte header; the \
         file is incomplete or corrupted"
    )]
    TruncatedHeader { got: u64 },
    #[error(
        "the header gives the file a length of {length} bytes, less than header and checksum \
         take ({}); the file is corrupted",
        HEADER_BYTES + CHECKSUM_BYTES
    )]
    BadLength { length: u64 },
    #[error(
        "truncated: the file has {got} bytes but its header says {expected}; the file is \
         incomplete (an interrupted copy or download?)"
    )]
    Truncated { got: u64, expected: u64 },
    #[error(
        "{extra} {} after the end of the {kind} (its header says {expected} bytes); the file \
         is corrupted",
        if *extra == 1 { "byte" } else { "bytes" }
    )]
    TrailingBytes {
        kind: &'static str,
        extra: u64,
        expected: u64,
    },
    #[error(
        "checksum mismatch (stored {stored:016x}, computed {computed:016x}): the file is corrupted"
    )]
    Checksum { stored: u64, computed: u64 },
}

/// Starts a file of `format`: its header, the length to be filled in by [`finish`]. Append
/// the payload to the returned vector (`capacity`: the payload's expected size).
pub fn start(format: &Format, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + capacity + CHECKSUM_BYTES);
    out.extend(format.magic);
    out.extend(format.version.to_le_bytes());
    out.extend([0u8; 8]);
    out
}

/// Ends a file begun by [`start`]: fills in its length and appends the checksum.
pub fn finish(mut out: Vec<u8>) -> Vec<u8> {
    assert!(
        out.len() >= HEADER_BYTES,
        "finish() needs a file begun by start()"
    );
    let len = (out.len() + CHECKSUM_BYTES) as u64;
    out[12..HEADER_BYTES].copy_from_slice(&len.to_le_bytes());
    let sum = fnv1a(&out);
    out.extend(sum.to_le_bytes());
    out
}

/// Checks a file of `format` (see the module documentation) and returns the bytes its
/// checksum covers: the header, then the payload from byte [`HEADER_BYTES`] on.
pub fn read<'a>(format: &Format, bytes: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if bytes.is_empty() {
        return Err(FrameError::Empty { kind: format.kind });
    }
    if !bytes.starts_with(&format.magic) {
        return Err(FrameError::WrongMagic {
            kind: format.kind,
            magic: format.magic,
            hint: (format.other_file)(bytes),
        });
    }
    let got = bytes.len() as u64;
    let truncated_header = FrameError::TruncatedHeader { got };
    let version = u32::from_le_bytes(le(bytes, 8).ok_or(truncated_header.clone())?);
    // A value far beyond any version a format will reach is damage, not the future.
    if version == 0 || version > MAX_PLAUSIBLE_VERSION {
        return Err(FrameError::BadVersion(version));
    }
    if version > format.version {
        return Err(FrameError::NewerVersion {
            found: version,
            supported: format.version,
        });
    }
    if version < format.version {
        return Err(FrameError::OlderVersion {
            found: version,
            supported: format.version,
            advice: format.older,
        });
    }
    let expected = u64::from_le_bytes(le(bytes, 12).ok_or(truncated_header)?);
    if expected < (HEADER_BYTES + CHECKSUM_BYTES) as u64 {
        return Err(FrameError::BadLength { length: expected });
    }
    if got < expected {
        return Err(FrameError::Truncated { got, expected });
    }
    if got > expected {
        return Err(FrameError::TrailingBytes {
            kind: format.kind,
            extra: got - expected,
            expected,
        });
    }
    let (covered, sum) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
    let stored = u64::from_le_bytes(le(sum, 0).expect("the length check leaves 8 bytes"));
    let computed = fnv1a(covered);
    if stored != computed {
        return Err(FrameError::Checksum { stored, computed });
    }
    Ok(covered)
}

/// The `N` bytes at `at`, if the file has them.
fn le<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at + N)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TEST: Format = Format {
        magic: *b"TESTFMT\0",
        kind: "test file",
        version: 3,
        older: "rebuild it",
        other_file: |b| {
            if b.starts_with(b"OTHER") {
                "; it is another file"
            } else {
                ""
            }
        },
    };

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut out = start(&TEST, payload.len());
        out.extend(payload);
        finish(out)
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let f = framed(b"abc");
        assert_eq!(f.len(), 20 + 3 + 8);
        assert_eq!(&f[..8], b"TESTFMT\0");
        assert_eq!(&f[8..12], &3u32.to_le_bytes());
        assert_eq!(&f[12..20], &31u64.to_le_bytes());
        assert_eq!(&f[20..23], b"abc");
        assert_eq!(&f[23..], &fnv1a(&f[..23]).to_le_bytes());
        assert_eq!(read(&TEST, &f).unwrap(), &f[..23]);
        assert_eq!(read(&TEST, &framed(b"")).unwrap().len(), HEADER_BYTES);
    }

    fn with(f: &[u8], at: usize, v: &[u8]) -> Vec<u8> {
        let mut f = f.to_vec();
        f[at..at + v.len()].copy_from_slice(v);
        f
    }

    /// Rewrites the checksum, so that a test reaches the check after it.
    fn reseal(mut f: Vec<u8>) -> Vec<u8> {
        let n = f.len() - 8;
        let sum = fnv1a(&f[..n]);
        f[n..].copy_from_slice(&sum.to_le_bytes());
        f
    }

    #[test]
    fn each_problem_has_its_error_and_message() {
        let good = framed(b"payload");
        let err = |b: &[u8]| read(&TEST, b).unwrap_err();
        let msg = |b: &[u8]| err(b).to_string();

        assert_eq!(msg(b""), "the file is empty: not a test file");
        assert_eq!(
            msg(b"OTHER file"),
            "not a test file (the file does not start with the magic bytes \"TESTFMT\\x00\"); \
             it is another file"
        );
        assert!(matches!(
            err(b"nothing"),
            FrameError::WrongMagic { hint: "", .. }
        ));
        assert!(matches!(
            err(&good[..10]),
            FrameError::TruncatedHeader { got: 10 }
        ));
        assert!(matches!(
            err(&good[..15]),
            FrameError::TruncatedHeader { got: 15 }
        ));
        for v in [0u32, 256, u32::MAX] {
            let e = err(&with(&good, 8, &v.to_le_bytes()));
            assert_eq!(e, FrameError::BadVersion(v));
            assert!(e.to_string().contains("corrupted"), "{e}");
        }
        // The version is judged before the (here missing) length.
        assert_eq!(
            msg(&with(&good, 8, &4u32.to_le_bytes())[..12]),
            "format version 4 is newer than this toolkit's 3; upgrade vta"
        );
        assert_eq!(
            msg(&with(&good, 8, &2u32.to_le_bytes())),
            "format version 2 (written by an older vta) is no longer read, this toolkit reads \
             version 3: rebuild it"
        );
        assert!(matches!(
            err(&with(&good, 12, &27u64.to_le_bytes())),
            FrameError::BadLength { length: 27 }
        ));
        assert_eq!(
            err(&good[..good.len() - 1]),
            FrameError::Truncated {
                got: good.len() as u64 - 1,
                expected: good.len() as u64
            }
        );
        let mut longer = good.clone();
        longer.push(0);
        assert!(msg(&longer).starts_with("1 byte after the end of the test file"));
        longer.push(0);
        assert!(msg(&longer).starts_with("2 bytes after the end of the test file"));
        let flipped = with(&good, 21, b"X");
        assert!(matches!(err(&flipped), FrameError::Checksum { .. }));
        assert!(read(&TEST, &reseal(flipped)).is_ok());
    }

    proptest! {
        #[test]
        fn payloads_round_trip(payload in prop::collection::vec(any::<u8>(), 0..200)) {
            let f = framed(&payload);
            prop_assert_eq!(&read(&TEST, &f).unwrap()[HEADER_BYTES..], &payload[..]);
        }

        #[test]
        fn any_damage_is_an_error(payload in prop::collection::vec(any::<u8>(), 0..64),
                                  at in any::<prop::sample::Index>(), bit in 0u8..8,
                                  cut in any::<prop::sample::Index>()) {
            let f = framed(&payload);
            let mut flipped = f.clone();
            flipped[at.index(f.len())] ^= 1 << bit;
            prop_assert!(read(&TEST, &flipped).is_err());
            prop_assert!(read(&TEST, &f[..cut.index(f.len())]).is_err());
        }

        #[test]
        fn random_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..64),
                                    magic in any::<bool>()) {
            if magic && bytes.len() >= 8 {
                bytes[..8].copy_from_slice(&TEST.magic);
            }
            let _ = read(&TEST, &bytes);
        }
    }
}
