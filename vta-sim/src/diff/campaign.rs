//! The differential campaign as data: a fixed, numbered list of units, each one program seed
//! on one config, all derived from one campaign seed, so that any unit can be run again alone
//! and a campaign split into shards gives the same units as one run.
//!
//! Units are numbered config by config (unit `c * programs + j` is program `j` on config `c`);
//! a shard is a contiguous block of that order ([`Campaign::shard`]), so it needs the
//! Verilator models of only the configs its block touches.

use std::ops::Range;

use isa::config::SampleBounds;
use isa::rng::Rng;
use isa::HwConfig;

use super::DiffError;

/// Where a config of the campaign comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// A built-in preset, by name.
    Preset(String),
    /// A random valid config ([`random_config`]) drawn from this seed.
    Random(u64),
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::Preset(name) => write!(f, "preset {name}"),
            ConfigSource::Random(seed) => write!(f, "random config {seed}"),
        }
    }
}

impl ConfigSource {
    /// The config.
    pub fn config(&self) -> Result<HwConfig, DiffError> {
        match self {
            ConfigSource::Preset(name) => {
                HwConfig::preset(name).map_err(|e| DiffError::Config(e.to_string()))
            }
            ConfigSource::Random(seed) => random_config(*seed),
        }
    }

    /// The config seed, for a random config.
    pub fn seed(&self) -> Option<u64> {
        match self {
            ConfigSource::Random(seed) => Some(*seed),
            ConfigSource::Preset(_) => None,
        }
    }
}

/// The bounds of the campaign's random configs: `HwConfig::random`'s defaults with at least
/// 128 elements per buffer, small enough to build into a Verilator model in about a minute.
pub fn random_bounds() -> SampleBounds {
    SampleBounds {
        log_depth: 7..=10,
        ..Default::default()
    }
}

/// The random config of `seed` (within [`random_bounds`]).
pub fn random_config(seed: u64) -> Result<HwConfig, DiffError> {
    HwConfig::random(&mut Rng::new(seed), &random_bounds())
        .map_err(|e| DiffError::Config(format!("random config {seed}: {e}")))
}

/// The seed of the `c`-th random config of the campaign of `seed`.
pub fn config_seed(seed: u64, c: u64) -> u64 {
    seed.wrapping_mul(0x9e37_79b9).wrapping_add(c)
}

/// The generator seed of program `j` on `cfg` in the campaign of `seed`: distinct per program,
/// and per config (through the config's ISA hash), so configs do not share programs' draws.
pub fn program_seed(seed: u64, cfg: &HwConfig, j: u64) -> u64 {
    seed.wrapping_mul(1_000_003).wrapping_add(j + 1) ^ cfg.isa_hash()
}

/// A campaign: `programs` programs on each of `configs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Campaign {
    pub seed: u64,
    pub configs: Vec<ConfigSource>,
    pub programs: u64,
}

/// One unit of a campaign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Which of the campaign's configs.
    pub config: usize,
    /// Which program on that config (from 0).
    pub program: u64,
}

impl Campaign {
    /// The given presets, then `random` random configs ([`config_seed`]), `programs` programs
    /// each.
    pub fn new(seed: u64, presets: &[String], random: u64, programs: u64) -> Campaign {
        let configs = presets
            .iter()
            .map(|p| ConfigSource::Preset(p.clone()))
            .chain((0..random).map(|c| ConfigSource::Random(config_seed(seed, c))))
            .collect();
        Campaign {
            seed,
            configs,
            programs,
        }
    }

    /// How many units there are.
    pub fn len(&self) -> u64 {
        self.configs.len() as u64 * self.programs
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Unit `index` (below [`Campaign::len`]).
    pub fn unit(&self, index: u64) -> Unit {
        Unit {
            config: (index / self.programs) as usize,
            program: index % self.programs,
        }
    }

    /// The units of shard `index` of `count` (index below count): the `index`-th of `count`
    /// contiguous blocks of nearly equal size (sizes differ by at most one); together the
    /// shards are every unit once.
    pub fn shard(&self, index: u64, count: u64) -> Range<u64> {
        let n = self.len() as u128;
        let at = |i: u64| (n * i as u128 / count as u128) as u64;
        at(index)..at(index + 1)
    }
}
