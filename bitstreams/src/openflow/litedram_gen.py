# The SDR SDRAM controller of the SoC, generated with LiteDRAM (run by `vta hw bitstream` and
# the SDRAM simulation in the tool cache's Python; see sdram.rs).
#
# usage: python3 litedram_gen.py CONFIG.json OUT.v
#
# CONFIG.json: {"name": module name, "module": LiteDRAM module class (e.g. "MT48LC16M16"),
#               "clk_freq": Hz, "data_width": AXI data bits, "address_width": AXI byte
#               address bits (log2 of the chip's bytes), "dq_bits": the chip's data bits,
#               "cl": CAS latency or null}
#
# The module (LiteDRAM's standalone generator, litedram_gen, needs a CPU or a host to run the
# SDRAM's initialization through its CSRs; this one initializes the chip in hardware):
#
#   AXI4 slave s_axi_* (no IDs) -> LiteDRAMAXI2Native -> crossbar port (data width converter)
#   -> LiteDRAMController (bank machines, refresher) -> DFI -> GENSDRPHY (1:1) -> sdram_* pins
#
# An init sequencer drives the DFI until LiteDRAM's SDR init sequence (CKE high, precharge
# all, mode register, two auto refreshes, mode register) is done, then hands the DFI to the
# controller; the AXI port is held (AxREADY low) until then. The PHY's bidirectional DQ is
# split into sdram_dq_o / sdram_dq_oe / sdram_dq_i (the board top owns the tristate), so the
# same Verilog is synthesized and simulated. The chip's clock is not made here: the board
# top drives it from the SoC clock.

import json
import math
import sys

from migen import *
from migen.fhdl import verilog

from litex.build.io import SDRTristate

from litedram import modules as litedram_modules
from litedram.common import LiteDRAMNativePort
from litedram.core.controller import ControllerSettings, LiteDRAMController
from litedram.core.crossbar import LiteDRAMCrossbar
from litedram.frontend.axi import LiteDRAMAXIPort, LiteDRAMAXI2Native
from litedram.init import get_sdram_phy_init_sequence
from litedram.phy import dfi as dfi_mod
from litedram.phy.gensdrphy import GENSDRPHY


# The split DQ pins, by the placeholder signal the PHY was given as `pads.dq`.
SPLIT_DQ = {}


class SplitSDRTristate(Module):
    """SDRTristate lowered to registered o/oe/i on separate pins (see the header)."""

    def __init__(self, io, o, oe, i, clk):
        pins = SPLIT_DQ[id(io.value)]
        k = io.start
        self.sync += [pins["o"][k].eq(o), i.eq(pins["i"][k])]
        if k == 0:
            self.sync += pins["oe"].eq(oe)


class SplitSDRTristateSpecial:
    @staticmethod
    def lower(dr):
        return SplitSDRTristate(dr.io, dr.o, dr.oe, dr.i, dr.clk)


class Pads:
    def __init__(self, addressbits, bankbits, databits):
        self.a = Signal(addressbits, name="sdram_a")
        self.ba = Signal(bankbits, name="sdram_ba")
        self.cs_n = Signal(name="sdram_cs_n")
        self.cke = Signal(name="sdram_cke")
        self.ras_n = Signal(name="sdram_ras_n")
        self.cas_n = Signal(name="sdram_cas_n")
        self.we_n = Signal(name="sdram_we_n")
        self.dm = Signal(databits // 8, name="sdram_dm")
        self.dq = Signal(databits)  # placeholder, see SplitSDRTristate
        self.dq_o = Signal(databits, name="sdram_dq_o")
        self.dq_oe = Signal(name="sdram_dq_oe")
        self.dq_i = Signal(databits, name="sdram_dq_i")
        SPLIT_DQ[id(self.dq)] = {"o": self.dq_o, "oe": self.dq_oe, "i": self.dq_i}

    def pins(self):
        return [self.a, self.ba, self.cs_n, self.cke, self.ras_n, self.cas_n, self.we_n,
                self.dm, self.dq_o, self.dq_oe, self.dq_i]


class InitSequencer(Module):
    """Plays LiteDRAM's init sequence onto a DFI phase; `done` when finished."""

    def __init__(self, phase, sequence, clk_freq):
        self.done = Signal()
        self.cke = Signal()
        # (cke, command?, address, bank, ras_n, cas_n, we_n, cycles to wait after it)
        settle = math.ceil(100e-9 * clk_freq) + 2  # > tRP, tRFC, tMRD of SDR parts
        steps = []
        for _comment, a, ba, cmd, delay in sequence:
            if "DFII_CONTROL_CKE" in cmd:
                # Power-up: 200 us of stable clock before the first command.
                wait = max(delay, math.ceil(200e-6 * clk_freq))
                steps.append((1, 0, 0, 0, 1, 1, 1, wait))
                continue
            ras = "DFII_COMMAND_RAS" in cmd
            cas = "DFII_COMMAND_CAS" in cmd
            we = "DFII_COMMAND_WE" in cmd
            steps.append((1, 1, a, ba, int(not ras), int(not cas), int(not we),
                          max(delay, settle)))
        n = len(steps)
        step = Signal(max=n + 1)
        wait = Signal(max=max(s[7] for s in steps) + 2)
        issue = Signal()
        cke = Signal()
        self.comb += [self.done.eq(step == n), self.cke.eq(cke)]
        cases = {}
        for k, (c, is_cmd, a, ba, ras_n, cas_n, we_n, w) in enumerate(steps):
            cases[k] = [
                phase.address.eq(a), phase.bank.eq(ba),
                phase.cs_n.eq(~(issue & is_cmd)),
                phase.ras_n.eq(ras_n | ~issue), phase.cas_n.eq(cas_n | ~issue),
                phase.we_n.eq(we_n | ~issue),
            ]
        self.comb += [
            issue.eq(~self.done & (wait == 0)),
            phase.cke.eq(cke),
            phase.rddata_en.eq(0), phase.wrdata_en.eq(0),
            Case(step, cases),
        ]
        waits = Array([s[7] for s in steps])
        self.sync += If(~self.done,
            If(wait == 0,
                cke.eq(1),
                wait.eq(waits[step]),
            ).Elif(wait == 1,
                step.eq(step + 1),
                wait.eq(0),
            ).Else(
                wait.eq(wait - 1),
            )
        )


class Core(Module):
    def __init__(self, cfg):
        clk_freq = float(cfg["clk_freq"])
        dw = cfg["data_width"]
        aw = cfg["address_width"]
        sdram_module = getattr(litedram_modules, cfg["module"])(clk_freq, "1:1")
        geom = sdram_module.geom_settings
        self.clk = Signal(name="clk")
        self.rst = Signal(name="rst")
        self.clock_domains.cd_sys = ClockDomain()
        self.comb += [self.cd_sys.clk.eq(self.clk), self.cd_sys.rst.eq(self.rst)]

        # PHY and controller.
        dq_bits = cfg["dq_bits"]
        pads = Pads(geom.addressbits, geom.bankbits, dq_bits)
        self.pads = pads
        self.submodules.phy = phy = GENSDRPHY(pads, sys_clk_freq=clk_freq, cl=cfg.get("cl"))
        self.submodules.controller = controller = LiteDRAMController(
            phy_settings=phy.settings,
            geom_settings=geom,
            timing_settings=sdram_module.timing_settings,
            clk_freq=clk_freq,
            controller_settings=ControllerSettings())
        self.submodules.crossbar = crossbar = LiteDRAMCrossbar(controller.interface)

        # Init sequencer, then the controller, on the PHY's DFI.
        init_dfi = dfi_mod.Interface(geom.addressbits, geom.bankbits, phy.settings.nranks,
                                     phy.settings.dfi_databits, phy.settings.nphases)
        sequence, _ = get_sdram_phy_init_sequence(phy.settings, sdram_module.timing_settings)
        self.submodules.init = init = InitSequencer(init_dfi.p0, sequence, clk_freq)
        ready = Signal()
        self.sync += ready.eq(init.done)
        self.comb += [
            If(ready,
                controller.dfi.connect(phy.dfi),
            ).Else(
                init_dfi.connect(phy.dfi),
            ),
            phy.dfi.p0.cke.eq(init.cke),
        ]

        # AXI user port.
        port = crossbar.get_port(data_width=dw)
        axi = LiteDRAMAXIPort(data_width=dw, address_width=port.address_width + log2_int(dw // 8), id_width=1)
        self.submodules.axi2native = LiteDRAMAXI2Native(axi, port)
        self.ios = {self.clk, self.rst} | set(pads.pins())

        def inp(name, w):
            s = Signal(w, name="s_axi_" + name)
            self.ios.add(s)
            return s

        def out(name, w, value):
            s = Signal(w, name="s_axi_" + name)
            self.ios.add(s)
            self.comb += s.eq(value)
            return s

        araddr = inp("araddr", 32)
        awaddr = inp("awaddr", 32)
        arvalid = inp("arvalid", 1)
        awvalid = inp("awvalid", 1)
        self.comb += [
            axi.ar.addr.eq(araddr[:len(axi.ar.addr)]),
            axi.ar.len.eq(inp("arlen", 8)),
            axi.ar.size.eq(inp("arsize", 3)),
            axi.ar.burst.eq(inp("arburst", 2)),
            axi.ar.valid.eq(arvalid & ready),
            axi.ar.id.eq(0),
            axi.r.ready.eq(inp("rready", 1)),
            axi.aw.addr.eq(awaddr[:len(axi.aw.addr)]),
            axi.aw.len.eq(inp("awlen", 8)),
            axi.aw.size.eq(inp("awsize", 3)),
            axi.aw.burst.eq(inp("awburst", 2)),
            axi.aw.valid.eq(awvalid & ready),
            axi.aw.id.eq(0),
            axi.w.data.eq(inp("wdata", dw)),
            axi.w.strb.eq(inp("wstrb", dw // 8)),
            axi.w.last.eq(inp("wlast", 1)),
            axi.w.valid.eq(inp("wvalid", 1)),
            axi.b.ready.eq(inp("bready", 1)),
        ]
        out("arready", 1, axi.ar.ready & ready)
        out("rdata", dw, axi.r.data)
        out("rresp", 2, axi.r.resp)
        out("rlast", 1, axi.r.last)
        out("rvalid", 1, axi.r.valid)
        out("awready", 1, axi.aw.ready & ready)
        out("wready", 1, axi.w.ready)
        out("bresp", 2, axi.b.resp)
        out("bvalid", 1, axi.b.valid)
        assert aw <= 32 and (1 << aw) == sdram_module.nrows * sdram_module.ncols * sdram_module.nbanks * dq_bits // 8


def main():
    cfg = json.load(open(sys.argv[1]))
    core = Core(cfg)
    overrides = {SDRTristate: SplitSDRTristateSpecial}
    out = verilog.convert(core, ios=core.ios, name=cfg["name"], special_overrides=overrides,
                          create_clock_domains=False)
    out.write(sys.argv[2])


if __name__ == "__main__":
    main()
