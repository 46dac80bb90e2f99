//! Elementwise int8 -> int8 functions on the ALU's activation table (configs with `ALU_LUT`,
//! [`isa::spec`] 8.3): any single-input function (Sigmoid, SiLU, Tanh, HardSwish, GELU, exp,
//! ...) that the quantized graph has turned into its 256 output values.
//!
//! A layer is a table `t` with `y = t[x as u8]` for every element `x` (entry `e` is the
//! function's value at the int8 `e as i8`), exactly as [`TableActivation::reference`]
//! computes it. The program:
//!
//! 1. LOAD ACC8 of the table (a 256-byte constant segment) into `ceil(256 / LANES)` ACC rows,
//!    then one ALU LUTW that writes all 256 entries from them (spec 8.3's recipe). The
//!    table lives in the accelerator, so the rows are free again at once;
//! 2. per tile, double-buffered over the two halves of ACC like the other ALU layers: LOAD
//!    ACC8 of a run of input elements, one ALU LUT in place over them (one micro-op in a
//!    loop), STORE as int8.
//!
//! An elementwise function does not care about the tensor's shape: input and output share
//! the packed BLOCK_OUT layout, so a tile is any run of consecutive elements (channel and
//! batch padding lanes are looked up like the others; their values are never read). The
//! LUT's operand is the int8 input itself, so the table's saturation never acts.

use isa::builder::{Buf, Operand, UopLoops};
use isa::{AluOp, MemType, Uop};
use ndarray::{Array4, ArrayView4};

use super::emit::{Ctx, Dim, Dma, Pipeline};
use super::layout::ActLayout;
use super::tiling::{MAX_DMA, MAX_ITER};
use super::BackendError;
use crate::qlayer::QTable;

/// An elementwise int8 -> int8 function given by its values: `table[x as u8 as usize]` is
/// its value at `x`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableActivation {
    pub name: String,
    pub table: [i8; 256],
}

impl TableActivation {
    /// The integer reference: `y = table[x as u8]` element by element.
    pub fn reference(&self, x: ArrayView4<i8>) -> Array4<i8> {
        x.mapv(|v| self.lookup(v))
    }

    /// The layer of a plan's [`QTable`], whose entry `k` is the output for the input
    /// `k - 128`: the same function with the entries rotated to this table's order.
    pub fn from_qtable(q: &QTable) -> Result<TableActivation, String> {
        if q.table.len() != 256 {
            return Err(format!(
                "a table of {} entries instead of 256",
                q.table.len()
            ));
        }
        Ok(TableActivation {
            name: q.name.clone(),
            table: std::array::from_fn(|e| q.table[(i32::from(e as u8 as i8) + 128) as usize]),
        })
    }

    /// The function's value at `x`.
    pub fn lookup(&self, x: i8) -> i8 {
        self.table[usize::from(x as u8)]
    }

    /// The table as the bytes of its DRAM segment: the 256 entries, then zeros up to whole
    /// ACC8 elements of `lanes` bytes.
    pub fn segment_bytes(&self, lanes: usize) -> Vec<u8> {
        let mut b: Vec<u8> = self.table.iter().map(|&v| v as u8).collect();
        b.resize(table_rows(lanes) * lanes, 0);
        b
    }
}

/// ACC rows (ACC8 elements) holding the 256 entries.
pub fn table_rows(lanes: usize) -> usize {
    256usize.div_ceil(lanes)
}

fn refuse(ctx: &Ctx, layer: &str, reason: String) -> BackendError {
    BackendError::Unsupported {
        layer: layer.into(),
        config: ctx.cfg.config_string(),
        reason,
    }
}

/// Checks ahead of emission that `ctx`'s config can run a table layer (no instruction
/// emitted): it needs the activation table, room for the table's rows in ACC, and a LUTW
/// loop its fields can express.
pub fn check(ctx: &Ctx, layer: &str) -> Result<(), BackendError> {
    let cfg = &ctx.cfg;
    if !cfg.alu_lut {
        return Err(refuse(
            ctx,
            layer,
            "the config has no activation lookup table (ALU_LUT); use one with it, such as \
             the preset 'lut'"
                .into(),
        ));
    }
    let lanes = (cfg.batch() * cfg.block_out()) as usize;
    let rows = table_rows(lanes);
    let acc = cfg.depth(MemType::Acc) as usize;
    if rows > ctx.budget.acc_half || (rows > 1 && lanes >= acc) {
        return Err(refuse(
            ctx,
            layer,
            format!(
                "the table's {rows} ACC rows (and a LUTW step of {lanes} entries) do not fit \
                 an ACC of {acc} rows"
            ),
        ));
    }
    Ok(())
}

/// Writes the activation table from segment `table` (see [`TableActivation::segment_bytes`]):
/// LOAD ACC8 into ACC rows from 0, then one LUTW of all 256 entries.
pub fn emit_table_write(ctx: &mut Ctx, table: Buf) -> Result<(), BackendError> {
    let lanes = (ctx.cfg.batch() * ctx.cfg.block_out()) as usize;
    let rows = table_rows(lanes);
    ctx.load(Dma::row(MemType::Acc8, 0, table, 0, rows))?;
    let kernel = ctx.kernel(vec![Uop::default()]);
    let loops = UopLoops {
        iter_out: rows as u16,
        iter_in: lanes.min(256) as u16,
        // Entry o * LANES + i comes from lane i of row o.
        dst: (if rows > 1 { lanes as u16 } else { 0 }, 1),
        src: (1, 0),
        wgt: (0, 0),
    };
    ctx.b.alu(kernel, loops, AluOp::LutWrite, Operand::Tensor);
    ctx.stats.insns += 1;
    Ok(())
}

/// The layer over a tensor of logical shape `shape`: `input` and `out` in the BLOCK_OUT
/// layout, `table` the table's segment. Returns the number of tiles.
pub fn emit(
    ctx: &mut Ctx,
    layer: &TableActivation,
    shape: [usize; 4],
    input: Buf,
    out: Buf,
    table: Buf,
) -> Result<usize, BackendError> {
    check(ctx, &layer.name)?;
    let elems = ActLayout::out(&ctx.cfg, shape).elems();
    let half = ctx.budget.acc_half;
    let len = half.min(MAX_ITER).min(MAX_DMA);
    let tiles: Vec<(usize, usize)> = (0..elems)
        .step_by(len)
        .map(|e0| (e0, len.min(elems - e0)))
        .collect();
    emit_table_write(ctx, table)?;
    let mut pipe: Pipeline<()> = Pipeline::new(tiles.len(), 0);
    for &(e0, n) in &tiles {
        let base = pipe.acc_half() * half;
        pipe.begin_tile(ctx, ());
        ctx.load(Dma::row(MemType::Acc8, base, input, e0, n))?;
        ctx.alu(
            AluOp::Lut,
            Operand::Tensor,
            base,
            base,
            &[Dim::new(n, 1, 1, 0)],
        )?;
        pipe.results_ready(ctx);
        ctx.store(Dma::row(MemType::Out, base, out, e0, n))?;
        pipe.end_tile(ctx);
    }
    pipe.finish()?;
    Ok(tiles.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::NetBuilder;
    use isa::HwConfig;
    use ndarray::Array4;

    /// A table that is no simple function of its input.
    fn scrambled(name: &str) -> TableActivation {
        TableActivation {
            name: name.into(),
            table: std::array::from_fn(|e| ((e * 73 + 29) % 256) as u8 as i8),
        }
    }

    fn every_int8(shape: [usize; 4]) -> Array4<i8> {
        let mut k = 0u32;
        Array4::from_shape_simple_fn(shape, || {
            k = k.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (k >> 16) as u8 as i8
        })
    }

    fn check_on(cfg: &HwConfig, shape: [usize; 4]) {
        let layer = scrambled("act");
        let mut net = NetBuilder::new(cfg).unwrap();
        let x = net.input("x", shape);
        let y = net.table_activation(&layer, x).unwrap();
        let lp = net.finish(&[y]).unwrap();
        let input = every_int8(shape);
        let mut dev = vta_sim::FsimDevice::checking_races(cfg);
        let got = lp.run(&mut dev, input.view()).unwrap();
        assert_eq!(got, layer.reference(input.view()), "{cfg} {shape:?}");
    }

    #[test]
    fn a_table_layer_is_bit_exact_on_the_functional_simulator() {
        let lut = HwConfig::preset("lut").unwrap();
        // One tile; channel padding (C = 20 of 32 lanes); several tiles over both halves.
        for shape in [[1, 16, 4, 4], [1, 20, 7, 5], [2, 48, 40, 40]] {
            check_on(&lut, shape);
        }
        // 32 lanes per row (8 table rows), batch padding.
        let batched = HwConfig {
            alu_lut: true,
            ..HwConfig::preset("batched").unwrap()
        };
        check_on(&batched, [3, 24, 5, 6]);
    }

    #[test]
    fn two_tables_in_one_program_each_see_their_own() {
        let cfg = HwConfig::preset("lut").unwrap();
        let (a, b) = (scrambled("a"), {
            let mut t = scrambled("b");
            t.table.reverse();
            t
        });
        let mut net = NetBuilder::new(&cfg).unwrap();
        let x = net.input("x", [1, 16, 8, 8]);
        let y = net.table_activation(&a, x).unwrap();
        let z = net.table_activation(&b, y).unwrap();
        let lp = net.finish(&[z]).unwrap();
        let input = every_int8([1, 16, 8, 8]);
        let mut dev = vta_sim::FsimDevice::checking_races(&cfg);
        let got = lp.run(&mut dev, input.view()).unwrap();
        let want = b.reference(a.reference(input.view()).view());
        assert_eq!(got, want);
    }

    #[test]
    fn a_plan_table_converts_with_the_same_function() {
        let q = QTable::build(
            "sig",
            "Sigmoid",
            |x| 1.0 / (1.0 + (-x).exp()),
            (0.05, 3),
            (1.0 / 255.0, -128),
            (-128, 127),
        );
        let t = TableActivation::from_qtable(&q).unwrap();
        for x in i8::MIN..=i8::MAX {
            assert_eq!(t.lookup(x), q.lookup(x), "{x}");
        }
        let short = QTable {
            table: vec![0; 255],
            ..q
        };
        assert!(TableActivation::from_qtable(&short).is_err());
    }

    #[test]
    fn a_config_without_the_table_refuses_the_layer_for_the_cpu() {
        let cfg = HwConfig::default();
        let mut net = NetBuilder::new(&cfg).unwrap();
        let x = net.input("x", [1, 16, 4, 4]);
        let e = net
            .table_activation(&scrambled("sig"), x)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("layer 'sig' cannot run on the accelerator")
                && e.contains("ALU_LUT")
                && e.contains("run it on the CPU"),
            "{e}"
        );
    }
}
