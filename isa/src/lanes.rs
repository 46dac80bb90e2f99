//! Element lane packing (`isa::spec`, "Data"), shared by every model of the accelerator's
//! memory: lanes little-endian in order, sub-byte lanes from the least significant bits of
//! each byte, multi-byte lanes little-endian; lanes are signed two's complement. The widths
//! are those a validated [`crate::HwConfig`] can have; any other is a caller bug and panics.

/// Unpacks `out.len()` signed lanes of `bits` (2, 4, 8 or 16) from `bytes`.
pub fn unpack_i16(bytes: &[u8], bits: u32, out: &mut [i16]) {
    match bits {
        2 => {
            for (quad, &b) in out.chunks_exact_mut(4).zip(bytes) {
                for (k, o) in quad.iter_mut().enumerate() {
                    *o = i16::from(((b << (6 - 2 * k)) as i8) >> 6);
                }
            }
        }
        4 => {
            for (pair, &b) in out.chunks_exact_mut(2).zip(bytes) {
                pair[0] = i16::from(((b << 4) as i8) >> 4);
                pair[1] = i16::from((b as i8) >> 4);
            }
        }
        8 => {
            for (o, &b) in out.iter_mut().zip(bytes) {
                *o = i16::from(b as i8);
            }
        }
        16 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = i16::from_le_bytes([c[0], c[1]]);
            }
        }
        _ => unreachable!("lane width {bits} is refused by HwConfig::validate"),
    }
}

/// Unpacks `out.len()` signed lanes of `bits` (8, 16 or 32) from `bytes`, sign-extended.
pub fn unpack_i32(bytes: &[u8], bits: u32, out: &mut [i32]) {
    match bits {
        8 => {
            for (o, &b) in out.iter_mut().zip(bytes) {
                *o = i32::from(b as i8);
            }
        }
        16 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = i32::from(i16::from_le_bytes([c[0], c[1]]));
            }
        }
        32 => {
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        _ => unreachable!("lane width {bits} is refused by HwConfig::validate"),
    }
}

/// Packs the low `bits` (2, 4, 8 or 16) of each lane of `lanes` into `out`.
pub fn pack_low(lanes: &[i32], bits: u32, out: &mut [u8]) {
    match bits {
        2 => {
            for (o, quad) in out.iter_mut().zip(lanes.chunks_exact(4)) {
                *o = quad
                    .iter()
                    .enumerate()
                    .fold(0, |b, (k, &v)| b | ((v as u8 & 3) << (2 * k)));
            }
        }
        4 => {
            for (o, pair) in out.iter_mut().zip(lanes.chunks_exact(2)) {
                *o = (pair[0] as u8 & 0x0f) | ((pair[1] as u8) << 4);
            }
        }
        8 => {
            for (o, &v) in out.iter_mut().zip(lanes) {
                *o = v as u8;
            }
        }
        16 => {
            for (o, &v) in out.chunks_exact_mut(2).zip(lanes) {
                o.copy_from_slice(&(v as u16).to_le_bytes());
            }
        }
        _ => unreachable!("lane width {bits} is refused by HwConfig::validate"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int4_lane_zero_is_the_low_nibble() {
        let mut out = [0i16; 4];
        unpack_i16(&[0x8f, 0x71], 4, &mut out);
        assert_eq!(out, [-1, -8, 1, 7]);
        let mut back = [0u8; 2];
        pack_low(&[-1, -8, 1, 7], 4, &mut back);
        assert_eq!(back, [0x8f, 0x71]);
    }

    #[test]
    fn int2_lane_zero_is_the_lowest_pair_of_bits() {
        // 0b01_00_11_10: lanes 2 (-2), 3 (-1), 0, 1 from the least significant bits up.
        let mut out = [0i16; 8];
        unpack_i16(&[0b0100_1110, 0b1110_0100], 2, &mut out);
        assert_eq!(out, [-2, -1, 0, 1, 0, 1, -2, -1]);
        let mut back = [0u8; 2];
        pack_low(&[-2, -1, 0, 1, 0, 1, -2, -1], 2, &mut back);
        assert_eq!(back, [0b0100_1110, 0b1110_0100]);
        // Only the low two bits of a lane are stored.
        pack_low(&[6, -5, 4, 1], 2, &mut back[..1]);
        assert_eq!(back[0], 0b01_00_11_10);
    }

    #[test]
    fn multi_byte_lanes_are_little_endian() {
        let mut o16 = [0i16; 2];
        unpack_i16(&[0x34, 0x12, 0xff, 0xff], 16, &mut o16);
        assert_eq!(o16, [0x1234, -1]);
        let mut o32 = [0i32; 1];
        unpack_i32(&[0x78, 0x56, 0x34, 0x82], 32, &mut o32);
        assert_eq!(o32, [0x8234_5678u32 as i32]);
        let mut b = [0u8; 4];
        pack_low(&[0x1_2345, -2], 16, &mut b);
        assert_eq!(b, [0x45, 0x23, 0xfe, 0xff]);
    }
}
