//! `build.tcl` and `constraints/clock.xdc` for one board and config: a Vivado project-mode
//! batch flow that works on any Vivado release with the IPs it names (IP versions come from
//! `get_ipdefs` at run time; there is no `version -short` gate). With several cores
//! ([`crate::cores`]) the block design has one `vta_k` cell per core, each on its own PS slave
//! port through its own SmartConnect `data_ic_k`, and one control SmartConnect with a master
//! interface per core.

use crate::board::{Board, PsKind};
use crate::cores::CoreSlot;

/// Everything the script needs besides the board.
#[derive(Clone, Debug)]
pub struct BuildSpec {
    pub clock_mhz: u32,
    /// The accelerator's AXI data width, bits.
    pub axi_bits: u32,
    pub config_string: String,
    /// 16 hex digits.
    pub isa_hash: String,
    /// 16 hex digits of the generated RTL (vta_top.v + vta_shell.v).
    pub rtl_hash: String,
    /// Where the fit estimate came from and its figures, one line (for the manifest).
    pub fit_estimate: String,
    /// The accelerator cores, core 0 first ([`crate::cores::layout`]).
    pub cores: Vec<CoreSlot>,
}

/// The PS pins and properties for a board's choice of ports.
struct PsPorts {
    clk: &'static str,
    rst: &'static str,
    ctrl_aclk: String,
    /// One per core, in core order.
    data_aclks: Vec<String>,
    /// CONFIG.* settings, in order.
    config: Vec<(String, String)>,
    actual_mhz_property: &'static str,
}

fn ps_ports(b: &Board, s: &BuildSpec) -> PsPorts {
    let width = b.data_width_for(s.axi_bits).to_string();
    match b.ps {
        PsKind::Ps7 => {
            let mut config = vec![];
            for m in ["M_AXI_GP0", "M_AXI_GP1"] {
                let on = if b.control.port == m { "1" } else { "0" };
                config.push((format!("PCW_USE_{m}"), on.to_string()));
            }
            for c in &s.cores {
                let slave = c.data_port.trim_start_matches("S_AXI_");
                config.push((format!("PCW_USE_S_AXI_{slave}"), "1".into()));
                if slave == "ACP" {
                    config.push(("PCW_USE_DEFAULT_ACP_USER_VAL".into(), "1".into()));
                } else {
                    config.push((format!("PCW_S_AXI_{slave}_DATA_WIDTH"), width.clone()));
                }
            }
            config.push(("PCW_EN_CLK0_PORT".into(), "1".into()));
            config.push(("PCW_EN_RST0_PORT".into(), "1".into()));
            config.push((
                "PCW_FPGA0_PERIPHERAL_FREQMHZ".into(),
                s.clock_mhz.to_string(),
            ));
            PsPorts {
                clk: "FCLK_CLK0",
                rst: "FCLK_RESET0_N",
                ctrl_aclk: format!("{}_ACLK", b.control.port),
                data_aclks: s
                    .cores
                    .iter()
                    .map(|c| format!("{}_ACLK", c.data_port))
                    .collect(),
                config,
                actual_mhz_property: "PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ",
            }
        }
        PsKind::Ps8 => {
            // UG1085/PG201: HPM0_FPD = M_AXI_GP0, HPM1_FPD = GP1, HPM0_LPD = GP2;
            // HPC0/1 = S_AXI_GP0/1, HP0..3 = S_AXI_GP2..5.
            let masters = [
                ("M_AXI_HPM0_FPD", "0", "maxihpm0_fpd_aclk"),
                ("M_AXI_HPM1_FPD", "1", "maxihpm1_fpd_aclk"),
                ("M_AXI_HPM0_LPD", "2", "maxihpm0_lpd_aclk"),
            ];
            let mut config = vec![];
            let mut ctrl_aclk = String::new();
            for (name, gp, aclk) in masters {
                let on = b.control.port == name;
                if on {
                    ctrl_aclk = aclk.into();
                }
                config.push((format!("PSU__USE__M_AXI_GP{gp}"), u8::from(on).to_string()));
            }
            let slaves = [
                ("S_AXI_HPC0_FPD", "0", "saxihpc0_fpd_aclk"),
                ("S_AXI_HPC1_FPD", "1", "saxihpc1_fpd_aclk"),
                ("S_AXI_HP0_FPD", "2", "saxihp0_fpd_aclk"),
                ("S_AXI_HP1_FPD", "3", "saxihp1_fpd_aclk"),
                ("S_AXI_HP2_FPD", "4", "saxihp2_fpd_aclk"),
                ("S_AXI_HP3_FPD", "5", "saxihp3_fpd_aclk"),
            ];
            let mut data_aclks = vec![];
            for c in &s.cores {
                let (_, gp, aclk) = slaves
                    .iter()
                    .find(|x| x.0 == c.data_port)
                    .expect("board::parse and cores::layout checked the data ports");
                config.push((format!("PSU__USE__S_AXI_GP{gp}"), "1".into()));
                config.push((format!("PSU__SAXIGP{gp}__DATA_WIDTH"), width.clone()));
                data_aclks.push(aclk.to_string());
            }
            config.push(("PSU__FPGA_PL0_ENABLE".into(), "1".into()));
            config.push((
                "PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ".into(),
                s.clock_mhz.to_string(),
            ));
            PsPorts {
                clk: "pl_clk0",
                rst: "pl_resetn0",
                ctrl_aclk,
                data_aclks,
                config,
                actual_mhz_property: "PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ",
            }
        }
    }
}

/// The clock constraint: the config's period on the PS clock pin that drives the fabric.
pub fn clock_xdc(b: &Board, s: &BuildSpec) -> String {
    let period = 1000.0 / f64::from(s.clock_mhz);
    let pin = match b.ps {
        PsKind::Ps7 => "*/PS7_i/FCLKCLK*0*",
        PsKind::Ps8 => "*/PS8_i/PLCLK*0*",
    };
    format!(
        "# The accelerator's clock: the config's CLOCK_MHZ = {mhz} (period {period:.3} ns), on the PS\n\
         # pin that drives the fabric clock. It overrides the PS IP's own constraint on that pin, so\n\
         # timing is signed off at the config's clock even where the PS PLL makes a slower one.\n\
         create_clock -period {period:.3} -name vta_clk [get_pins -hierarchical -filter {{NAME =~ {pin}}}]\n",
        mhz = s.clock_mhz
    )
}

fn tcl_quote(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        if matches!(c, '"' | '\\' | '$' | '[' | ']') {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// The whole `build.tcl`.
pub fn build_tcl(b: &Board, s: &BuildSpec) -> String {
    let p = ps_ports(b, s);
    let config: Vec<String> = p
        .config
        .iter()
        .map(|(k, v)| format!("    CONFIG.{k} {{{v}}} \\"))
        .collect();
    let automation = match b.ps {
        PsKind::Ps7 => "apply_bd_automation -rule xilinx.com:bd_rule:processing_system7 \\\n    \
                        -config [list make_external \"FIXED_IO, DDR\" apply_board_preset $use_board \\\n    \
                        Master Disable Slave Disable] $ps"
            .to_string(),
        PsKind::Ps8 => "if {$use_board} {\n    apply_bd_automation -rule xilinx.com:bd_rule:zynq_ultra_ps_e \\\n        \
                        -config {apply_board_preset \"1\"} $ps\n}"
            .to_string(),
    };
    let data_width = b.data_width_for(s.axi_bits);
    let mut cells = vec![];
    let mut data_ics = vec![];
    let mut clock_pins = vec![];
    let mut core_resets = vec![];
    let mut ic_resets = vec![];
    let mut intf_nets = vec![];
    let mut addresses = vec![];
    let mut manifest_cores = vec![];
    for (k, c) in s.cores.iter().enumerate() {
        let (v, d) = (&c.instance, format!("data_ic_{k}"));
        cells.push(format!(
            "create_bd_cell -type module -reference vta_shell {v}\n\
             set_property CONFIG.FREQ_HZ [get_property CONFIG.FREQ_HZ [get_bd_pins ps/{clk}]] \
             [get_bd_pins {v}/ap_clk]",
            clk = p.clk
        ));
        data_ics.push(format!(
            "set_property -dict [list CONFIG.NUM_SI {{1}} CONFIG.NUM_MI {{1}}] \\\n    \
             [create_bd_cell -type ip -vlnv [ipdef smartconnect] {d}]"
        ));
        clock_pins.push(format!(
            "    [get_bd_pins {v}/ap_clk] [get_bd_pins {d}/aclk] [get_bd_pins ps/{}]",
            p.data_aclks[k]
        ));
        core_resets.push(format!("    [get_bd_pins {v}/ap_rst_n]"));
        ic_resets.push(format!("    [get_bd_pins {d}/aresetn]"));
        intf_nets.push(format!(
            "connect_bd_intf_net [get_bd_intf_pins ctrl_ic/M{k:02}_AXI] [get_bd_intf_pins {v}/s_axi_ctrl]\n\
             connect_bd_intf_net [get_bd_intf_pins {v}/m_axi_mem] [get_bd_intf_pins {d}/S00_AXI]\n\
             connect_bd_intf_net [get_bd_intf_pins {d}/M00_AXI] [get_bd_intf_pins ps/{}]",
            c.data_port
        ));
        addresses.push(format!(
            "assign_bd_address -target_address_space [get_bd_addr_spaces ps/Data] \\\n    \
             -offset {base:#010X} -range $ctrl_range [get_bd_addr_segs {v}/s_axi_ctrl/*]\n\
             assign_bd_address -target_address_space [get_bd_addr_spaces {v}/m_axi_mem] \\\n    \
             [get_bd_addr_segs ps/{seg}]",
            base = c.ctrl_base,
            seg = c.segment
        ));
        manifest_cores.push(format!(
            "puts $m \"    \\{{\\\"instance\\\": \\\"{v}\\\", \\\"control_base\\\": \\\"{base:#010X}\\\", \
             \\\"control_range\\\": \\\"{range:#X}\\\", \\\"data_port\\\": \\\"{port}\\\"\\}}{comma}\"",
            base = c.ctrl_base,
            range = c.ctrl_range,
            port = c.data_port,
            comma = if k + 1 < s.cores.len() { "," } else { "" }
        ));
    }
    format!(
        r#"# build.tcl: Vivado project for the VTA accelerator on {desc}.
# Generated by `vta hw bitstream`; run from this directory:
#     vivado -mode batch -source build.tcl
# Any Vivado release with the IPs below works: their versions are looked up with get_ipdefs.
# Outputs: output/vta.bit + output/vta.hwh (for PYNQ's Overlay), output/manifest.json,
# reports/utilization.rpt, reports/timing.rpt. Fails when worst negative slack < 0.

set board         {board}
set part          {part}
set board_part    {board_part}
set config_string {config_string}
set isa_hash      {isa_hash}
set rtl_hash      {rtl_hash}
set fit_estimate  {fit}
set clock_mhz     {mhz}
set accel_width   {axi_bits}
set data_width    {data_width}
set cores         {cores}
set ctrl_range    {ctrl_range}
set jobs          [expr {{[info exists ::env(VTA_JOBS)] ? $::env(VTA_JOBS) : 4}}]

set here [file normalize [file dirname [info script]]]
cd $here
proc step {{msg}} {{ puts "vta-build: $msg"; flush stdout }}
proc fail {{msg}} {{ puts stderr "vta-build: ERROR: $msg"; exit 1 }}

# The newest VLNV of xilinx.com:ip:NAME in this Vivado (no hard-coded IP versions).
proc ipdef {{name}} {{
    set vlnvs [get_property VLNV [get_ipdefs "xilinx.com:ip:$name:*"]]
    if {{[llength $vlnvs] == 0}} {{ fail "this Vivado has no IP xilinx.com:ip:$name" }}
    return [lindex [lsort -dictionary $vlnvs] end]
}}

set vivado_version [version -short]
step "Vivado $vivado_version, part $part, config $config_string at $clock_mhz MHz"
file mkdir output reports
create_project -force vta_$board vivado -part $part
set use_board 0
if {{$board_part ne "" && [llength [get_board_parts -quiet $board_part]] > 0}} {{
    set_property board_part $board_part [current_project]
    set use_board 1
}} else {{
    step "board files for '$board_part' are not installed: using the part alone (the design uses no board I/O)"
}}
add_files -norecurse [list rtl/vta_top.v rtl/vta_shell.v]
add_files -fileset constrs_1 -norecurse constraints/clock.xdc
update_compile_order -fileset sources_1

step "block design: $cores accelerator core(s)"
create_bd_design vta
set ps [create_bd_cell -type ip -vlnv [ipdef {ps_ip}] ps]
{automation}
set_property -dict [list \
{config}
] $ps
set actual_mhz [get_property CONFIG.{actual} $ps]
if {{$actual_mhz > $clock_mhz * 1.001}} {{
    fail "the PS makes $actual_mhz MHz for the requested $clock_mhz MHz (faster than the clock constraint); choose a CLOCK_MHZ its PLL divides to exactly, e.g. 100"
}}
if {{$actual_mhz < $clock_mhz * 0.999}} {{
    step "note: the PS makes $actual_mhz MHz for the requested $clock_mhz MHz; timing is checked at $clock_mhz MHz"
}}

{cells}
set rst [create_bd_cell -type ip -vlnv [ipdef proc_sys_reset] rst_0]
set ctrl_ic [create_bd_cell -type ip -vlnv [ipdef smartconnect] ctrl_ic]
set_property -dict [list CONFIG.NUM_SI {{1}} CONFIG.NUM_MI {{{cores}}}] $ctrl_ic
{data_ics}

# One clock and one reset for everything in the fabric.
connect_bd_net [get_bd_pins ps/{clk}] [get_bd_pins rst_0/slowest_sync_clk] \
    [get_bd_pins ctrl_ic/aclk] [get_bd_pins ps/{ctrl_aclk}] \
{clock_pins}
connect_bd_net [get_bd_pins ps/{rst}] [get_bd_pins rst_0/ext_reset_in]
connect_bd_net [get_bd_pins rst_0/peripheral_aresetn] \
{core_resets}
connect_bd_net [get_bd_pins rst_0/interconnect_aresetn] [get_bd_pins ctrl_ic/aresetn] \
{ic_resets}

# Control: PS master -> SmartConnect (one master interface per core) -> each core's AXI4-Lite
# registers. Data: each core's AXI4 master ({axi_bits} bits) -> its own SmartConnect -> its own
# PS slave port ({data_width} bits), so the cores do not share a port's bandwidth.
connect_bd_intf_net [get_bd_intf_pins ps/{ctrl_port}] [get_bd_intf_pins ctrl_ic/S00_AXI]
{intf_nets}

{addresses}
validate_bd_design
save_bd_design

set bd_file [get_files vta.bd]
add_files -norecurse [make_wrapper -files $bd_file -top]
set_property top vta_wrapper [current_fileset]
update_compile_order -fileset sources_1

step "synthesis ($jobs jobs)"
launch_runs synth_1 -jobs $jobs
wait_on_run synth_1
if {{[get_property PROGRESS [get_runs synth_1]] ne "100%"}} {{
    fail "synthesis failed; see vivado/vta_$board.runs/synth_1/runme.log"
}}
step "implementation and bitstream"
launch_runs impl_1 -to_step write_bitstream -jobs $jobs
wait_on_run impl_1
if {{[get_property PROGRESS [get_runs impl_1]] ne "100%"}} {{
    fail "implementation failed; see vivado/vta_$board.runs/impl_1/runme.log"
}}

open_run impl_1
report_utilization -file reports/utilization.rpt
report_timing_summary -max_paths 10 -file reports/timing.rpt
set wns [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -setup]]
step "worst negative slack $wns ns at $clock_mhz MHz"

set m [open output/manifest.json w]
puts $m "\{{"
puts $m "  \"board\": \"$board\","
puts $m "  \"part\": \"$part\","
puts $m "  \"config_string\": \"$config_string\","
puts $m "  \"isa_hash\": \"$isa_hash\","
puts $m "  \"rtl_hash\": \"$rtl_hash\","
puts $m "  \"clock_mhz\": $clock_mhz,"
puts $m "  \"accel_axi_bits\": $accel_width,"
puts $m "  \"ps_port_bits\": $data_width,"
puts $m "  \"ps_clock_mhz\": $actual_mhz,"
puts $m "  \"vivado_version\": \"$vivado_version\","
puts $m "  \"wns_ns\": $wns,"
puts $m "  \"timing_met\": [expr {{$wns >= 0 ? "true" : "false"}}],"
puts $m "  \"fit_estimate\": \"$fit_estimate\","
puts $m "  \"cores\": \["
{manifest_cores}
puts $m "  \]"
puts $m "\}}"
close $m

if {{$wns < 0}} {{
    fail "timing not met: worst negative slack $wns ns at $clock_mhz MHz; see reports/timing.rpt (no bitstream copied out)"
}}
set bits [glob -nocomplain [file join [get_property DIRECTORY [get_runs impl_1]] *.bit]]
if {{[llength $bits] != 1}} {{ fail "no bitstream in [get_property DIRECTORY [get_runs impl_1]]" }}
file copy -force [lindex $bits 0] output/vta.bit
set hwh ""
foreach gen {{gen srcs}} {{
    set f vivado/vta_$board.$gen/sources_1/bd/vta/hw_handoff/vta.hwh
    if {{[file exists $f]}} {{ set hwh $f; break }}
}}
if {{$hwh eq ""}} {{ fail "no hardware hand-off vta.hwh under vivado/vta_$board.gen or .srcs" }}
file copy -force $hwh output/vta.hwh
step "done: output/vta.bit, output/vta.hwh, output/manifest.json"
"#,
        desc = b.description,
        board = tcl_quote(&b.name),
        part = tcl_quote(&b.part),
        board_part = tcl_quote(b.board_part.as_deref().unwrap_or("")),
        config = config.join("\n"),
        isa_hash = tcl_quote(&s.isa_hash),
        rtl_hash = tcl_quote(&s.rtl_hash),
        fit = tcl_quote(&s.fit_estimate),
        mhz = s.clock_mhz,
        axi_bits = s.axi_bits,
        cores = s.cores.len(),
        ctrl_range = b.control.range,
        ps_ip = b.ps.ip_name(),
        actual = p.actual_mhz_property,
        clk = p.clk,
        rst = p.rst,
        ctrl_aclk = p.ctrl_aclk,
        ctrl_port = b.control.port,
        cells = cells.join("\n"),
        data_ics = data_ics.join("\n"),
        clock_pins = clock_pins.join(" \\\n"),
        core_resets = core_resets.join(" \\\n"),
        ic_resets = ic_resets.join(" \\\n"),
        intf_nets = intf_nets.join("\n"),
        addresses = addresses.join("\n"),
        manifest_cores = manifest_cores.join("\n"),
        config_string = tcl_quote(&s.config_string),
    )
}
