//! The fabric clock (FCLK0 / PL0) the accelerator runs on.
//!
//! * **Zynq-7000 (PS7)**: the Xilinx kernel's devcfg driver exports the PL clocks in sysfs
//!   (`fclk_export`, then `fclk/fclk0/set_rate`); the clock framework picks the divisors and
//!   reading `set_rate` back gives the rate it achieved. This goes through the kernel, which
//!   owns the SLCR, instead of poking the SLCR behind its back.
//! * **Zynq UltraScale+ (PS8)**: no kernel interface sets a PL clock's rate from user space
//!   (the clock framework's debugfs files are read-only unless the kernel is built with
//!   `CLOCK_ALLOW_WRITE_DEBUGFS`, which board images are not), so, as PYNQ does
//!   (`pynq/ps.py`), the divisors of `CRL_APB.PL0_REF_CTRL` (0xFF5E_00C0) are written through
//!   `/dev/mem`, sourced from the IO PLL (`IOPLL_CTRL`, 0xFF5E_0020) with the boards'
//!   33.333 MHz `PS_REF_CLK`; CLKACT is set as well (KV260 images leave it off without an
//!   overlay's device tree).

use std::path::Path;

use super::bitstream::{read_attr, write_attr};
use super::mmio::Mapping;
use super::{BoardError, BoardPaths};

/// Zynq UltraScale+ `CRL_APB` block and the registers used.
const CRL_APB: u64 = 0xff5e_0000;
const IOPLL_CTRL: usize = 0x20;
const PL0_REF_CTRL: usize = 0xc0;
/// The PS reference clock of the ZU+ boards (Ultra96, ZCU104, KV260).
const PS_REF_HZ: f64 = 33_333_333.0;

/// Which processing system drives the fabric clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ps {
    /// Zynq-7000.
    Ps7,
    /// Zynq UltraScale+.
    Ps8,
}

/// Sets FCLK0/PL0 to `mhz` and returns the rate achieved, in MHz.
pub fn set_fclk0(paths: &BoardPaths, ps: Ps, mhz: u32) -> Result<f64, BoardError> {
    match ps {
        Ps::Ps7 => set_ps7(&paths.fclk, mhz),
        Ps::Ps8 => set_ps8(&paths.dev.join("mem"), mhz),
    }
}

fn set_ps7(fclk: &Path, mhz: u32) -> Result<f64, BoardError> {
    let dir = fclk.join("fclk/fclk0");
    if !dir.exists() {
        write_attr(&fclk.join("fclk_export"), "fclk0")?;
    }
    write_attr(&dir.join("enable"), "1")?;
    write_attr(
        &dir.join("set_rate"),
        &(u64::from(mhz) * 1_000_000).to_string(),
    )?;
    let got = read_attr(&dir.join("set_rate"))?;
    let hz: f64 = got.parse().map_err(|_| BoardError::Clock {
        detail: format!(
            "{} reads '{got}', not a rate",
            dir.join("set_rate").display()
        ),
    })?;
    check_close(mhz, hz / 1e6)
}

fn set_ps8(mem: &Path, mhz: u32) -> Result<f64, BoardError> {
    let mut crl = Mapping::open(mem, CRL_APB, 0x1000, true)?;
    let pll = crl.read32(IOPLL_CTRL);
    let src = iopll_hz(pll);
    let old = crl.read32(PL0_REF_CTRL);
    if old & 0x7 != 0 {
        return Err(BoardError::Clock {
            detail: format!(
                "PL0_REF_CTRL = {old:#010x} selects source {} (not the IO PLL, the only \
                 source handled here); set the PL clock in the design instead",
                old & 0x7
            ),
        });
    }
    let (d0, d1) = divisors(src, f64::from(mhz) * 1e6);
    let new = (old & !(0x3f << 16 | 0x3f << 8)) | 1 << 24 | d1 << 16 | d0 << 8;
    crl.write32(PL0_REF_CTRL, new);
    check_close(mhz, src / f64::from(d0 * d1) / 1e6)
}

/// The IO PLL's output from `IOPLL_CTRL` (FBDIV [14:8], DIV2 [16]).
fn iopll_hz(ctrl: u32) -> f64 {
    let fbdiv = f64::from((ctrl >> 8) & 0x7f);
    let div2 = if ctrl & 1 << 16 != 0 { 2.0 } else { 1.0 };
    PS_REF_HZ * fbdiv / div2
}

/// The two 6-bit divisors (1..=63 each) whose product brings `src` closest to `target`,
/// the smaller product on a tie (the higher rate: the first found).
fn divisors(src: f64, target: f64) -> (u32, u32) {
    let mut best = (1, 1, f64::INFINITY);
    for d0 in 1..64u32 {
        for d1 in 1..64u32 {
            let err = (src / f64::from(d0 * d1) - target).abs();
            if err < best.2 - 1e-6 {
                best = (d0, d1, err);
            }
        }
    }
    (best.0, best.1)
}

/// Accepts a rate within 5% of the one asked for (the divisors' granularity), else says
/// what was achieved.
fn check_close(mhz: u32, got: f64) -> Result<f64, BoardError> {
    if (got - f64::from(mhz)).abs() <= 0.05 * f64::from(mhz) {
        Ok(got)
    } else {
        Err(BoardError::Clock {
            detail: format!(
                "asked for {mhz} MHz, the clock runs at {got:.3} MHz; build the bitstream for \
                 a rate the PS can make"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zynqmp_divisors_from_the_io_pll() {
        // IOPLL_CTRL of a ZCU104: FBDIV 90, DIV2 -> 1.5 GHz.
        let src = iopll_hz(90 << 8 | 1 << 16);
        assert!((src - 1.5e9).abs() < 1e3, "{src}");
        for (mhz, prod) in [(100, 15), (150, 10), (250, 6), (300, 5), (50, 30)] {
            let (d0, d1) = divisors(src, f64::from(mhz) * 1e6);
            assert_eq!(d0 * d1, prod, "{mhz} MHz");
            assert!(d0 < 64 && d1 < 64);
        }
        assert!(check_close(100, 99.9).is_ok());
        let e = check_close(100, 80.0).unwrap_err().to_string();
        assert!(e.contains("80.000 MHz"), "{e}");
    }

    #[test]
    fn ps8_writes_pl0_ref_ctrl_through_dev_mem() {
        let dir = std::env::temp_dir().join(format!("vta-clk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mem = dir.join("mem");
        let f = std::fs::File::create(&mem).unwrap();
        f.set_len(CRL_APB + 0x1000).unwrap();
        drop(f);
        {
            let mut crl = Mapping::open(&mem, CRL_APB, 0x1000, false).unwrap();
            crl.write32(IOPLL_CTRL, 90 << 8 | 1 << 16);
            crl.write32(PL0_REF_CTRL, 0x0005_0f00);
        }
        let got = set_ps8(&mem, 100).unwrap();
        assert!((got - 100.0).abs() < 0.1, "{got}");
        let crl = Mapping::open(&mem, CRL_APB, 0x1000, false).unwrap();
        let v = crl.read32(PL0_REF_CTRL);
        assert_eq!(v & 1 << 24, 1 << 24, "CLKACT");
        assert_eq!(((v >> 8) & 0x3f) * ((v >> 16) & 0x3f), 15);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
