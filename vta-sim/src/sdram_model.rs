//! A behavioural SDR SDRAM chip for simulating the SoC with external memory: the commands a
//! controller issues (ACTIVE, READ, WRITE, PRECHARGE one or all banks, AUTO REFRESH, LOAD
//! MODE REGISTER, NOP / deselect), banks with open rows, the CAS latency and burst length the
//! mode register sets (bursts of 1, what LiteDRAM's 1:1 SDR PHY uses), and the data masks.
//!
//! It checks what is cheap to check, in clock cycles of the simulation: a command while CKE
//! is low, an ACTIVE to a bank with an open row, a READ or WRITE of a closed bank or before
//! the mode register is loaded, a mode register load or refresh with a row open, a WRITE
//! without data driven, the controller driving DQ while the chip does, and the minimum times
//! tRCD, tRP, tRAS, tWR, tRFC, tMRD and the longest gap between refreshes. The first
//! violation raises the sticky output `fault` with its number on `fault_code` (see
//! [`FAULTS`]) and is printed with `$display`.
//!
//! The chip is clocked by the inverted controller clock, as on the board (the board top
//! drives the chip's clock pin with the SoC clock inverted, what LiteX does for its 1:1 SDR
//! PHY on ECP5): it samples the pins at the falling edge in the middle of the cycle the
//! controller's registered outputs hold them, and a READ taken at falling edge T drives its
//! data from falling edge T + CL - 1 to T + CL, which the controller's input register takes
//! at the rising edge between: the read latency LiteDRAM's generic SDR PHY expects. (A chip
//! clocked in phase with the controller would deliver the data a cycle later than that.)

use hdl::{Dir, ExternalPort, Module};

/// A chip's geometry and its datasheet minimum times, ns.
#[derive(Clone, Debug, PartialEq)]
pub struct SdramChip {
    pub row_bits: u32,
    pub col_bits: u32,
    pub bank_bits: u32,
    /// Data pins (a multiple of 8; one mask pin per 8).
    pub data_bits: u32,
    pub t_rcd_ns: f64,
    pub t_rp_ns: f64,
    pub t_ras_ns: f64,
    pub t_wr_ns: f64,
    pub t_rfc_ns: f64,
    /// The average refresh interval (64 ms / 8192 rows).
    pub t_refi_ns: f64,
}

impl SdramChip {
    /// The ULX3S's 32 MB x16 chip class (IS42S16160, MT48LC16M16A2 -75 grade): 4 banks of
    /// 8192 rows of 512 columns.
    pub fn mt48lc16m16() -> SdramChip {
        SdramChip {
            row_bits: 13,
            col_bits: 9,
            bank_bits: 2,
            data_bits: 16,
            t_rcd_ns: 20.0,
            t_rp_ns: 20.0,
            t_ras_ns: 44.0,
            t_wr_ns: 15.0,
            t_rfc_ns: 66.0,
            t_refi_ns: 64e6 / 8192.0,
        }
    }
}

/// The fault codes on `fault_code`, with what they mean.
pub const FAULTS: &[(u8, &str)] = &[
    (1, "a command while CKE is low"),
    (2, "ACTIVE to a bank whose row is open"),
    (3, "READ or WRITE of a bank with no open row"),
    (4, "READ or WRITE before the mode register was loaded"),
    (5, "LOAD MODE REGISTER or AUTO REFRESH with a row open"),
    (
        6,
        "a mode the model does not simulate (burst length not 1, CAS latency not 2 or 3)",
    ),
    (7, "WRITE without the controller driving DQ"),
    (8, "the controller drives DQ while the chip does"),
    (9, "READ or WRITE sooner than tRCD after ACTIVE"),
    (10, "ACTIVE or REFRESH sooner than tRP after PRECHARGE"),
    (11, "PRECHARGE sooner than tRAS after ACTIVE"),
    (12, "PRECHARGE sooner than tWR after WRITE"),
    (13, "a command sooner than tRFC after AUTO REFRESH"),
    (
        14,
        "a command sooner than tMRD (2 cycles) after LOAD MODE REGISTER",
    ),
    (
        15,
        "no AUTO REFRESH for more than 9 refresh intervals (tREFI) since the last",
    ),
    (16, "BURST TERMINATE (the model does not simulate it)"),
];

/// What fault `code` means.
pub fn fault_text(code: u8) -> &'static str {
    FAULTS
        .iter()
        .find(|f| f.0 == code)
        .map_or("an unknown fault", |f| f.1)
}

/// The model's module name.
pub const MODULE: &str = "sdram_chip_model";

/// The model of `chip` clocked at `clock_hz`, as an external module with the controller's
/// pin names (`sdram_*` inputs, `sdram_dq_i` output) plus `fault` and `fault_code`.
pub fn model(chip: &SdramChip, clock_hz: u32) -> Module {
    let cycles = |ns: f64| (ns * f64::from(clock_hz) / 1e9).ceil().max(1.0) as u64;
    let dw = chip.data_bits;
    let words_bits = chip.bank_bits + chip.row_bits + chip.col_bits;
    let verilog = format!(
        include_str!("sdram_model.v"),
        module = MODULE,
        ab = chip.row_bits - 1,
        bb = chip.bank_bits - 1,
        dh = dw - 1,
        mh = dw / 8 - 1,
        lanes = dw / 8,
        dw_repeat = dw,
        nb = 1u32 << chip.bank_bits,
        nb_h = (1u32 << chip.bank_bits) - 1,
        rh = chip.row_bits - 1,
        ch = chip.col_bits - 1,
        wh = words_bits - 1,
        words_minus_one = (1u64 << words_bits) - 1,
        t_rcd = cycles(chip.t_rcd_ns),
        t_rp = cycles(chip.t_rp_ns),
        t_ras = cycles(chip.t_ras_ns),
        t_wr = cycles(chip.t_wr_ns),
        t_rfc = cycles(chip.t_rfc_ns),
        t_refi_max = 9 * cycles(chip.t_refi_ns),
    );
    let port = |name: &str, dir, width| ExternalPort {
        name: name.into(),
        dir,
        width,
    };
    let mut ports = vec![];
    for one in ["cke", "cs_n", "ras_n", "cas_n", "we_n", "dq_oe"] {
        ports.push(port(&format!("sdram_{one}"), Dir::Input, 1));
    }
    ports.push(port("sdram_ba", Dir::Input, chip.bank_bits));
    ports.push(port("sdram_a", Dir::Input, chip.row_bits));
    ports.push(port("sdram_dm", Dir::Input, dw / 8));
    ports.push(port("sdram_dq_o", Dir::Input, dw));
    ports.push(port("sdram_dq_i", Dir::Output, dw));
    ports.push(port("fault", Dir::Output, 1));
    ports.push(port("fault_code", Dir::Output, 8));
    hdl::external_module(MODULE, "clk", ("rst", false), &ports, &verilog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_has_the_chip_timing_in_cycles() {
        let m = model(&SdramChip::mt48lc16m16(), 100_000_000);
        let d = hdl::Design::new(m);
        let v = d.verilog("");
        for text in [
            "localparam T_RCD = 2;",
            "localparam T_RFC = 7;",
            "localparam T_REFI_MAX = 7038;",
            "reg [15:0] mem [0:16777215];",
        ] {
            assert!(v.contains(text), "{text} missing");
        }
        assert_eq!(fault_text(3), "READ or WRITE of a bank with no open row");
    }

    /// The model alone in Verilator, reset, with CKE high and NOP on the pins.
    fn chip() -> hdl::verilator::Model {
        let d = hdl::Design::new(model(&SdramChip::mt48lc16m16(), 100_000_000));
        let cache = std::env::temp_dir().join("vta-sdram-model-test");
        let mut m = hdl::verilator::Model::build(&d, &cache, &mut |_| {}).unwrap();
        for (p, v) in [("sdram_cke", 1), ("sdram_cs_n", 0), ("sdram_ras_n", 1)] {
            let id = m.port(p);
            m.set(id, v);
        }
        for p in ["sdram_cas_n", "sdram_we_n"] {
            let id = m.port(p);
            m.set(id, 1);
        }
        m.reset(2);
        m
    }

    /// Puts command `(ras_n, cas_n, we_n)` with `bank` and `addr` on the pins for one cycle,
    /// then NOP.
    fn command(m: &mut hdl::verilator::Model, rcw: (u64, u64, u64), bank: u64, addr: u64) {
        for (p, v) in [
            ("sdram_ras_n", rcw.0),
            ("sdram_cas_n", rcw.1),
            ("sdram_we_n", rcw.2),
            ("sdram_ba", bank),
            ("sdram_a", addr),
        ] {
            let id = m.port(p);
            m.set(id, v);
        }
        m.tick();
        for p in ["sdram_ras_n", "sdram_cas_n", "sdram_we_n"] {
            let id = m.port(p);
            m.set(id, 1);
        }
    }

    const MRS: (u64, u64, u64) = (0, 0, 0);
    const ACT: (u64, u64, u64) = (0, 1, 1);
    const READ: (u64, u64, u64) = (1, 0, 1);
    const WRITE: (u64, u64, u64) = (1, 0, 0);

    fn fault(m: &hdl::verilator::Model) -> Option<u64> {
        m.get_bool(m.port("fault"))
            .then(|| m.get(m.port("fault_code")))
    }

    #[test]
    fn the_chip_stores_and_returns_data_after_cas_latency() {
        let mut m = chip();
        command(&mut m, MRS, 0, 0x20); // CAS latency 2, burst 1
        m.ticks(2);
        command(&mut m, ACT, 2, 0x123);
        m.ticks(2);
        let (dq, oe) = (m.port("sdram_dq_o"), m.port("sdram_dq_oe"));
        m.set(dq, 0xbeef);
        m.set(oe, 1);
        command(&mut m, WRITE, 2, 0x45);
        m.set(oe, 0);
        command(&mut m, READ, 2, 0x45);
        // Taken at the falling edge of that cycle, driven a cycle later (CL 2).
        let q = m.port("sdram_dq_i");
        assert_eq!(m.get(q), 0, "not yet");
        m.tick();
        assert_eq!(m.get(q), 0xbeef);
        m.tick();
        assert_eq!(m.get(q), 0, "a burst of one");
        assert_eq!(fault(&m), None);
    }

    #[test]
    fn protocol_violations_are_faults() {
        // A read of a bank with no open row.
        let mut m = chip();
        command(&mut m, MRS, 0, 0x20);
        m.ticks(2);
        command(&mut m, READ, 1, 0);
        m.tick();
        assert_eq!(fault(&m), Some(3));
        // A read sooner than tRCD (2 cycles at 100 MHz) after ACTIVE.
        let mut m = chip();
        command(&mut m, MRS, 0, 0x20);
        m.ticks(2);
        command(&mut m, ACT, 0, 7);
        command(&mut m, READ, 0, 0);
        m.tick();
        assert_eq!(fault(&m), Some(9));
        // A read before the mode register is loaded.
        let mut m = chip();
        command(&mut m, ACT, 0, 7);
        m.ticks(2);
        command(&mut m, READ, 0, 0);
        m.tick();
        assert_eq!(fault(&m), Some(4));
        // A write with no data driven.
        let mut m = chip();
        command(&mut m, MRS, 0, 0x20);
        m.ticks(2);
        command(&mut m, ACT, 0, 7);
        m.ticks(2);
        command(&mut m, WRITE, 0, 0);
        m.tick();
        assert_eq!(fault(&m), Some(7));
        // No refresh for more than 9 intervals.
        let mut m = chip();
        command(&mut m, MRS, 0, 0x20);
        m.ticks(7100);
        assert_eq!(fault(&m), Some(15));
    }
}
