//! The fit pre-check: a config's resource estimate against a board part's resources, before
//! any vendor tool runs. Two estimates feed it:
//!
//! * [`scratchpad_bram36`], instant and analytic: the block RAM the five scratchpads need when
//!   each is one memory mapped at its best RAMB36 aspect ratio (what synthesis tools do for
//!   memories this large). It refuses configs whose buffers alone overflow the part.
//! * a synthesis estimate ([`Estimate`], from `vta hw report --json`, i.e. yosys
//!   `synth_xilinx`) for LUTs, flip-flops, DSPs and block RAM of the whole design.

use isa::{HwConfig, MemType};

use crate::board::Resources;

/// A resource estimate and where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// e.g. "yosys 0.23 synth_xilinx -family xc7 (cached ...)".
    pub source: String,
    pub luts: u64,
    pub ffs: u64,
    pub dsps: u64,
    /// 36 Kb block-RAM tiles (RAMB18 count as halves).
    pub bram36: f64,
    pub urams: u64,
}

/// One resource's use against the part.
#[derive(Clone, Debug, PartialEq)]
pub struct Usage {
    pub resource: &'static str,
    pub used: f64,
    pub available: u64,
}

impl Usage {
    /// Used share of the part, percent.
    pub fn percent(&self) -> f64 {
        if self.available == 0 {
            if self.used > 0.0 {
                f64::INFINITY
            } else {
                0.0
            }
        } else {
            100.0 * self.used / self.available as f64
        }
    }
}

/// A config that does not fit.
#[derive(Debug, thiserror::Error)]
#[error(
    "the config does not fit {part}: {resource} needs {used} but the part has {available} \
     ({over} over, {percent:.0}% of the part; estimate: {estimate}). Choose a smaller config \
     (fewer GEMM lanes, smaller scratchpads), fewer --cores or a larger board"
)]
pub struct DoesNotFit {
    pub part: String,
    pub resource: &'static str,
    pub used: String,
    pub available: u64,
    pub over: String,
    pub percent: f64,
    pub estimate: String,
}

fn fmt(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Every resource of `e` against `r`; the first one over the part is an error naming it and
/// the margin.
pub fn check(e: &Estimate, r: &Resources, part: &str) -> Result<Vec<Usage>, Box<DoesNotFit>> {
    let rows = vec![
        Usage {
            resource: "LUT",
            used: e.luts as f64,
            available: r.luts,
        },
        Usage {
            resource: "FF",
            used: e.ffs as f64,
            available: r.ffs,
        },
        Usage {
            resource: "DSP",
            used: e.dsps as f64,
            available: r.dsps,
        },
        Usage {
            resource: "BRAM36",
            used: e.bram36,
            available: r.bram36,
        },
        Usage {
            resource: "URAM",
            used: e.urams as f64,
            available: r.urams,
        },
    ];
    if let Some(u) = rows.iter().find(|u| u.used > u.available as f64) {
        return Err(Box::new(DoesNotFit {
            part: part.into(),
            resource: u.resource,
            used: fmt(u.used),
            available: u.available,
            over: fmt(u.used - u.available as f64),
            percent: u.percent(),
            estimate: e.source.clone(),
        }));
    }
    Ok(rows)
}

/// The estimate of `cores` copies of the design `e` estimates: every core is a whole
/// accelerator, so each resource is `cores` times one core's (the SmartConnects between them
/// are not counted, as they are not for one core).
pub fn for_cores(e: &Estimate, cores: u32) -> Estimate {
    if cores == 1 {
        return e.clone();
    }
    let n = u64::from(cores);
    Estimate {
        source: format!("{cores} cores x ({})", e.source),
        luts: e.luts * n,
        ffs: e.ffs * n,
        dsps: e.dsps * n,
        bram36: e.bram36 * f64::from(cores),
        urams: e.urams * n,
    }
}

/// RAMB36 aspect ratios (depth, data width incl. parity bits), UG473 table 1-4 / UG573
/// (the 72-bit one is simple dual port, which a one-write one-read scratchpad is).
const RAMB36_SHAPES: &[(u64, u64)] = &[
    (32768, 1),
    (16384, 2),
    (8192, 4),
    (4096, 9),
    (2048, 18),
    (1024, 36),
    (512, 72),
];

/// 36 Kb tiles for a `depth` x `width` memory at its best aspect ratio, counting a half
/// tile (RAMB18) when half the depth suffices.
pub fn bram36_for(depth: u64, width: u64) -> f64 {
    RAMB36_SHAPES
        .iter()
        .map(|&(d, w)| {
            let wide = width.div_ceil(w) as f64;
            if depth <= d / 2 {
                wide / 2.0
            } else {
                depth.div_ceil(d) as f64 * wide
            }
        })
        .fold(f64::INFINITY, f64::min)
}

/// Block RAM of the UOP, INP, WGT, ACC and OUT scratchpads, each as one memory.
pub fn scratchpad_bram36(cfg: &HwConfig) -> f64 {
    [
        MemType::Uop,
        MemType::Inp,
        MemType::Wgt,
        MemType::Acc,
        MemType::Out,
    ]
    .iter()
    .map(|&m| bram36_for(u64::from(cfg.depth(m)), u64::from(cfg.elem_bits(m))))
    .sum()
}

/// The analytic scratchpad estimate as an [`Estimate`] with only block RAM filled in.
pub fn scratchpad_estimate(cfg: &HwConfig) -> Estimate {
    Estimate {
        source: "analytic: the five scratchpads, each one memory at its best RAMB36 \
                 aspect ratio (logic not counted)"
            .into(),
        luts: 0,
        ffs: 0,
        dsps: 0,
        bram36: scratchpad_bram36(cfg),
        urams: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board;

    #[test]
    fn bram_shapes() {
        // 512 x 72: one tile; 2048 x 128: 15 RAMB18 in 2048 x 9 (parity bits hold data).
        assert_eq!(bram36_for(512, 72), 1.0);
        assert_eq!(bram36_for(2048, 128), 7.5);
        // 512 x 32 fits a RAMB18 (512x36).
        assert_eq!(bram36_for(512, 32), 0.5);
        // The default config: UOP 8 (8192 x 32), INP 7.5 (2048 x 128), WGT 57 (1024 x 2048),
        // ACC 28.5 (2048 x 512), OUT 7.5 (2048 x 128).
        assert_eq!(scratchpad_bram36(&HwConfig::default()), 108.5);
    }

    #[test]
    fn overflow_names_the_resource_and_margin() {
        let z1 = board::load("pynq-z1").unwrap();
        let mut e = scratchpad_estimate(&HwConfig::default());
        assert!(check(&e, &z1.resources, &z1.part).is_ok());
        e.bram36 = 150.5;
        let err = check(&e, &z1.resources, &z1.part).unwrap_err().to_string();
        assert!(
            err.contains("BRAM36 needs 150.5")
                && err.contains("has 140")
                && err.contains("10.5 over"),
            "{err}"
        );
        e.bram36 = 1.0;
        e.dsps = 111;
        assert!(check(&e, &z1.resources, &z1.part).is_ok());
        let two = for_cores(&e, 2);
        assert_eq!((two.dsps, two.bram36), (222, 2.0));
        let err = check(&two, &z1.resources, &z1.part)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("DSP needs 222")
                && err.contains("2 cores x (analytic")
                && err.contains("fewer --cores"),
            "{err}"
        );
        e.dsps = 221;
        let err = check(&e, &z1.resources, &z1.part).unwrap_err().to_string();
        assert!(
            err.contains("DSP needs 221") && err.contains("1 over"),
            "{err}"
        );
    }
}
