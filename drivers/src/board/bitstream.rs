//! Loading a Vivado `.bit` file through the kernel's FPGA manager: the `.bit` header parsed
//! (design name, part, date, time, data length) and stripped, the configuration data put in
//! the byte order the manager needs, written under the firmware directory, then `flags` and
//! `firmware` written under `fpga_manager/fpga0` and its `state` checked.
//!
//! Byte order: a `.bit` file stores the configuration words big-endian (its sync word reads
//! `AA 99 55 66`). Both Zynq managers (`zynq-fpga` for Zynq-7000, `zynqmp-fpga` for Zynq
//! UltraScale+) take the `.bin` order, each 32-bit word byte-swapped (`66 55 99 AA`), as
//! PYNQ's `bit`-to-`bin` conversion and Xilinx's `bootgen -process_bitstream bin` produce;
//! the kernel's `zynq-fpga` refuses data whose sync word it cannot find in that order.

use std::fs;
use std::path::{Path, PathBuf};

use super::{io_err, BoardError, BoardPaths};

/// The fields of a `.bit` header and where the configuration data lies in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitHeader {
    /// Field `a`: the design name, with Vivado's `;UserID=...;Version=...` suffix.
    pub design: String,
    /// Field `b`: the part, e.g. `7z020clg400`.
    pub part: String,
    /// Field `c`: the date Vivado wrote the file.
    pub date: String,
    /// Field `d`: the time.
    pub time: String,
    /// Byte offset of the configuration data.
    pub data_offset: usize,
    /// Field `e`: length of the configuration data in bytes.
    pub data_len: usize,
}

/// The fixed start of every `.bit` file: a 9-byte field (`0F F0` x4, `00`) and the 1-word
/// field that precedes the `a` key.
const PREAMBLE: [u8; 13] = [
    0x00, 0x09, 0x0f, 0xf0, 0x0f, 0xf0, 0x0f, 0xf0, 0x0f, 0xf0, 0x00, 0x00, 0x01,
];

/// The configuration sync word as a `.bit` file stores it.
const SYNC_BIT_ORDER: [u8; 4] = [0xaa, 0x99, 0x55, 0x66];

/// Parses the header of a `.bit` file (`what` names it in errors).
pub fn parse_header(bit: &[u8], what: &str) -> Result<BitHeader, BoardError> {
    let bad = |detail: String| BoardError::Bitstream {
        file: what.to_string(),
        detail,
    };
    if bit.len() < PREAMBLE.len() || bit[..PREAMBLE.len()] != PREAMBLE {
        return Err(bad(
            "no .bit header (expected 00 09 0F F0 ...): pass the .bit file Vivado wrote, \
             not a .bin or .hwh"
                .into(),
        ));
    }
    let mut at = PREAMBLE.len();
    let text = |key: u8, at: &mut usize| -> Result<String, BoardError> {
        let field = bit
            .get(*at..*at + 3)
            .filter(|f| f[0] == key)
            .ok_or_else(|| bad(format!("field '{}' missing at byte {}", key as char, at)))?;
        let len = u16::from_be_bytes([field[1], field[2]]) as usize;
        let s = bit.get(*at + 3..*at + 3 + len).ok_or_else(|| {
            bad(format!(
                "field '{}' of {len} bytes runs past the end",
                key as char
            ))
        })?;
        *at += 3 + len;
        Ok(String::from_utf8_lossy(s)
            .trim_end_matches('\0')
            .to_string())
    };
    let design = text(b'a', &mut at)?;
    let part = text(b'b', &mut at)?;
    let date = text(b'c', &mut at)?;
    let time = text(b'd', &mut at)?;
    let e = bit
        .get(at..at + 5)
        .filter(|f| f[0] == b'e')
        .ok_or_else(|| bad(format!("field 'e' (data length) missing at byte {at}")))?;
    let data_len = u32::from_be_bytes([e[1], e[2], e[3], e[4]]) as usize;
    let data_offset = at + 5;
    let have = bit.len() - data_offset;
    if have != data_len {
        return Err(bad(format!(
            "the header announces {data_len} bytes of configuration data but the file has \
             {have} after it (truncated or corrupted copy?)"
        )));
    }
    if !data_len.is_multiple_of(4) {
        return Err(bad(format!(
            "{data_len} bytes of configuration data is not whole 32-bit words"
        )));
    }
    if !bit[data_offset..]
        .windows(4)
        .take(256)
        .any(|w| w == SYNC_BIT_ORDER)
    {
        return Err(bad(
            "no sync word (AA 99 55 66) near the start of the configuration data".into(),
        ));
    }
    Ok(BitHeader {
        design,
        part,
        date,
        time,
        data_offset,
        data_len,
    })
}

/// The configuration data of a `.bit` file in the FPGA manager's `.bin` order (each 32-bit
/// word byte-swapped), with its header.
pub fn to_bin(bit: &[u8], what: &str) -> Result<(BitHeader, Vec<u8>), BoardError> {
    let h = parse_header(bit, what)?;
    let data = &bit[h.data_offset..];
    let mut bin = Vec::with_capacity(data.len());
    for w in data.chunks_exact(4) {
        bin.extend([w[3], w[2], w[1], w[0]]);
    }
    Ok((h, bin))
}

/// Loads `bit` (read from `what`) into the fabric: writes `<firmware>/<name>.bin`, then
/// `flags` (0: full reconfiguration) and `firmware` of the FPGA manager, and checks that
/// its `state` reads `operating`. Returns the header and the firmware file written.
pub fn load(
    paths: &BoardPaths,
    bit: &[u8],
    what: &str,
    name: &str,
) -> Result<(BitHeader, PathBuf), BoardError> {
    let (header, bin) = to_bin(bit, what)?;
    if name.is_empty() || name.contains('/') {
        return Err(BoardError::Bitstream {
            file: what.into(),
            detail: format!("firmware name '{name}' must be a plain file name"),
        });
    }
    let fw = paths.firmware.join(format!("{name}.bin"));
    fs::write(&fw, &bin).map_err(|e| io_err("write the firmware file", &fw, e))?;
    let mgr = paths.fpga_manager();
    write_attr(&mgr.join("flags"), "0")?;
    write_attr(&mgr.join("firmware"), &format!("{name}.bin"))?;
    let state = read_attr(&mgr.join("state"))?;
    if state != "operating" {
        return Err(BoardError::FpgaState {
            state,
            firmware: fw,
            manager: mgr,
        });
    }
    Ok((header, fw))
}

/// Writes a sysfs attribute (one write of the whole value, as `echo` does).
pub(crate) fn write_attr(path: &Path, value: &str) -> Result<(), BoardError> {
    fs::write(path, value).map_err(|e| io_err("write", path, e))
}

/// Reads a sysfs attribute, trimmed.
pub(crate) fn read_attr(path: &Path) -> Result<String, BoardError> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| io_err("read", path, e))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A `.bit` file as Vivado writes it, around `data`.
    pub(crate) fn bit_file(data: &[u8]) -> Vec<u8> {
        let mut b = PREAMBLE.to_vec();
        for (key, s) in [
            (b'a', "vta_top;UserID=0XFFFFFFFF;Version=2023.2"),
            (b'b', "7z020clg400"),
            (b'c', "2025/01/31"),
            (b'd', "12:34:56"),
        ] {
            b.push(key);
            b.extend((s.len() as u16 + 1).to_be_bytes());
            b.extend(s.as_bytes());
            b.push(0);
        }
        b.push(b'e');
        b.extend((data.len() as u32).to_be_bytes());
        b.extend(data);
        b
    }

    pub(crate) const DATA: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xaa, 0x99, 0x55, 0x66, 0x20, 0x00, 0x00, 0x00, 0x30, 0x02, 0x20,
        0x01,
    ];

    #[test]
    fn header_fields_and_swapped_words() {
        let (h, bin) = to_bin(&bit_file(&DATA), "t.bit").unwrap();
        assert_eq!(h.design, "vta_top;UserID=0XFFFFFFFF;Version=2023.2");
        assert_eq!(
            (h.part.as_str(), h.date.as_str(), h.time.as_str()),
            ("7z020clg400", "2025/01/31", "12:34:56")
        );
        assert_eq!(h.data_len, 16);
        assert_eq!(
            bin,
            [
                0xff, 0xff, 0xff, 0xff, 0x66, 0x55, 0x99, 0xaa, 0, 0, 0, 0x20, 0x01, 0x20, 0x02,
                0x30
            ]
        );
    }

    #[test]
    fn bad_files_are_named_with_the_problem() {
        let e = parse_header(b"\x66\x55\x99\xaa", "x.bin")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.bin") && e.contains("no .bit header"), "{e}");
        let mut cut = bit_file(&DATA);
        cut.truncate(cut.len() - 4);
        let e = parse_header(&cut, "cut.bit").unwrap_err().to_string();
        assert!(
            e.contains("announces 16 bytes") && e.contains("has 12"),
            "{e}"
        );
        let e = parse_header(&bit_file(&[0; 8]), "z.bit")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no sync word"), "{e}");
    }
}
