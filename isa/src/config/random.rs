//! Random valid configs, for differential testing beyond the presets: every field is drawn
//! from the ranges [`HwConfig::validate`] accepts, and only configs it accepts are returned.
//! [`SampleBounds`] keeps them small enough to build into a Verilator model in about a minute.

use std::ops::RangeInclusive;

use super::*;
use crate::rng::Rng;

/// Limits on a random config beyond what validation demands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleBounds {
    /// Most MACs per GEMM micro-op (BATCH x BLOCK_IN x BLOCK_OUT).
    pub max_macs: u32,
    /// log2 of the depth (elements) of each of the UOP, INP, WGT and ACC buffers.
    pub log_depth: RangeInclusive<u32>,
    /// Deepest command and token queues.
    pub max_queue_depth: u32,
}

impl Default for SampleBounds {
    /// At most 256 MACs, 64 to 1024 elements per buffer and queues up to 64 deep.
    fn default() -> Self {
        SampleBounds {
            max_macs: 256,
            log_depth: 6..=10,
            max_queue_depth: 64,
        }
    }
}

/// Draws tried before [`HwConfig::random`] gives up: valid configs are common (about one
/// draw in three for the default bounds), so reaching this means the bounds admit none.
const MAX_DRAWS: u32 = 10_000;

impl HwConfig {
    /// A random valid config within `bounds`, drawn from `r`: the same seed gives the same
    /// config everywhere. Fails (naming the bounds) only when the bounds admit no valid config.
    pub fn random(r: &mut Rng, bounds: &SampleBounds) -> Result<HwConfig, String> {
        let pick = |r: &mut Rng, range: &RangeInclusive<u32>| r.range(*range.start(), *range.end());
        for _ in 0..MAX_DRAWS {
            let mut cfg = HwConfig {
                target: "sim".into(),
                hw_ver: "0.0.2".into(),
                log_inp_width: pick(r, &LOG_DATA_WIDTH_RANGE),
                log_wgt_width: pick(r, &LOG_DATA_WIDTH_RANGE),
                log_acc_width: pick(r, &LOG_ACC_WIDTH_RANGE),
                log_batch: pick(r, &LOG_BATCH_RANGE),
                log_block_in: pick(r, &LOG_BLOCK_RANGE),
                log_block_out: pick(r, &LOG_BLOCK_RANGE),
                log_uop_buff_size: 0,
                log_inp_buff_size: 0,
                log_wgt_buff_size: 0,
                log_acc_buff_size: 0,
                axi_data_width: 1
                    << pick(
                        r,
                        &(AXI_DATA_WIDTH_RANGE.start().ilog2()
                            ..=AXI_DATA_WIDTH_RANGE.end().ilog2()),
                    ),
                cmd_queue_depth: r.range(
                    *CMD_QUEUE_DEPTH_RANGE.start(),
                    bounds
                        .max_queue_depth
                        .clamp(*CMD_QUEUE_DEPTH_RANGE.start(), *CMD_QUEUE_DEPTH_RANGE.end()),
                ),
                token_queue_depth: r.range(
                    *TOKEN_QUEUE_DEPTH_RANGE.start(),
                    bounds.max_queue_depth.clamp(
                        *TOKEN_QUEUE_DEPTH_RANGE.start(),
                        *TOKEN_QUEUE_DEPTH_RANGE.end(),
                    ),
                ),
                clock_mhz: pick(r, &CLOCK_MHZ_RANGE),
                alu_mul: r.chance(50),
                alu_lut: r.chance(50),
            };
            if cfg.macs_per_uop() > u64::from(bounds.max_macs) {
                continue;
            }
            // Buffer sizes from depths, so that every buffer holds what the bounds say.
            let mut size_for = |m: MemType| {
                let elem_log = cfg.elem_bits(m).trailing_zeros();
                (pick(r, &bounds.log_depth) + elem_log).checked_sub(3)
            };
            let (Some(u), Some(i), Some(w), Some(a)) = (
                size_for(MemType::Uop),
                size_for(MemType::Inp),
                size_for(MemType::Wgt),
                size_for(MemType::Acc),
            ) else {
                continue;
            };
            (cfg.log_uop_buff_size, cfg.log_inp_buff_size) = (u, i);
            (cfg.log_wgt_buff_size, cfg.log_acc_buff_size) = (w, a);
            if cfg.validate().is_ok() {
                return Ok(cfg);
            }
        }
        Err(format!(
            "no valid config within {bounds:?} after {MAX_DRAWS} draws; widen the bounds"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_configs_are_valid_within_bounds_and_reproducible() {
        let bounds = SampleBounds::default();
        let mut r = Rng::new(7);
        let mut shapes = std::collections::HashSet::new();
        for _ in 0..200 {
            let cfg = HwConfig::random(&mut r, &bounds).unwrap();
            cfg.validate().unwrap();
            assert!(cfg.macs_per_uop() <= 256, "{cfg}");
            for m in [MemType::Uop, MemType::Inp, MemType::Wgt, MemType::Acc] {
                assert!(bounds.log_depth.contains(&cfg.log_depth(m)), "{cfg}: {m:?}");
            }
            assert!(cfg.cmd_queue_depth <= 64 && cfg.token_queue_depth <= 64);
            let again = HwConfig::from_json_str(&cfg.to_json(), "round trip").unwrap();
            assert_eq!(cfg, again);
            shapes.insert((
                cfg.log_batch,
                cfg.log_block_in,
                cfg.log_block_out,
                cfg.log_inp_width,
            ));
        }
        assert!(shapes.len() > 30, "only {} distinct shapes", shapes.len());
        let a = HwConfig::random(&mut Rng::new(3), &bounds).unwrap();
        let b = HwConfig::random(&mut Rng::new(3), &bounds).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn bounds_that_admit_nothing_are_named() {
        let bounds = SampleBounds {
            max_macs: 0,
            ..SampleBounds::default()
        };
        let e = HwConfig::random(&mut Rng::new(1), &bounds).unwrap_err();
        assert!(
            e.contains("max_macs: 0") && e.contains("widen the bounds"),
            "{e}"
        );
    }
}
