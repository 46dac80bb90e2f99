# vivado_stub.tcl: the Vivado Tcl commands build.tcl uses, modelled closely enough to run a
# generated project under plain tclsh and check it. Usage: tclsh vivado_stub.tcl PROJECT_DIR
#
# It records every call (PROJECT_DIR/stub_calls.txt); refuses any command, option, IP name or
# IP property not in its tables (each row cites the Xilinx document or public script it comes
# from); models the block design (cells, pins, nets, interface nets, address segments); and at
# validate_bd_design checks that every interface is connected, the PS ports the design uses are
# enabled, clocks and resets are wired, address segments are assigned without overlap and
# data widths match, for every accelerator cell (a design with several cores has one per
# core; an interface connected twice, such as two cores on one PS port, is refused when it is
# made). Environment: STUB_WNS (worst slack to report, default 0.250),
# STUB_BOARD_FILES (1 = the board part is installed).

set ::calls {}
set ::looked_up {}
proc stub_fail {msg} { error "vivado-stub: $msg" }

# ---- commands and options -------------------------------------------------------------------
# command -> {options taking a value} {flags} source
set ::commands {
    version               {{} {-short} "UG835 version"}
    create_project        {{-part} {-force} "UG835 create_project"}
    get_board_parts       {{} {-quiet} "UG835 get_board_parts"}
    set_property          {{-dict} {} "UG835 set_property"}
    current_project       {{} {} "UG835 current_project"}
    current_fileset       {{} {} "UG835 current_fileset"}
    add_files             {{-fileset} {-norecurse} "UG835 add_files"}
    update_compile_order  {{-fileset} {} "UG835 update_compile_order"}
    create_bd_design      {{} {} "UG994 ch.2 / UG835 create_bd_design"}
    get_ipdefs            {{} {-all} "UG835 get_ipdefs; FINN templates.py"}
    get_property          {{} {} "UG835 get_property"}
    create_bd_cell        {{-type -vlnv -reference} {} "UG835 create_bd_cell; UG994 Module Reference"}
    apply_bd_automation   {{-rule -config} {} "UG835 apply_bd_automation; PYNQ base.tcl"}
    get_bd_pins           {{} {} "UG835 get_bd_pins"}
    get_bd_intf_pins      {{} {} "UG835 get_bd_intf_pins"}
    connect_bd_net        {{} {} "UG835 connect_bd_net"}
    connect_bd_intf_net   {{} {} "UG835 connect_bd_intf_net"}
    get_bd_addr_spaces    {{} {} "UG835 get_bd_addr_spaces"}
    get_bd_addr_segs      {{} {} "UG835 get_bd_addr_segs"}
    assign_bd_address     {{-target_address_space -offset -range} {} "UG835 assign_bd_address (2019.2+)"}
    validate_bd_design    {{} {} "UG994 validate_bd_design"}
    save_bd_design        {{} {} "UG994 save_bd_design"}
    get_files             {{} {} "UG835 get_files"}
    make_wrapper          {{-files} {-top} "UG835 make_wrapper; PYNQ build_bitstream.tcl"}
    launch_runs           {{-jobs -to_step} {} "UG835 launch_runs; UG893"}
    wait_on_run           {{} {} "UG835 wait_on_run"}
    get_runs              {{} {} "UG835 get_runs"}
    open_run              {{} {} "UG835 open_run"}
    report_utilization    {{-file} {} "UG835 report_utilization"}
    report_timing_summary {{-max_paths -file} {} "UG835 report_timing_summary"}
    get_timing_paths      {{-max_paths -nworst} {-setup} "UG835 get_timing_paths"}
}

# IP name -> {VLNV this stub pretends to have} {allowed CONFIG.* properties} source
set ::ips {
    processing_system7 {xilinx.com:ip:processing_system7:5.5
        {PCW_USE_M_AXI_GP0 PCW_USE_M_AXI_GP1 PCW_USE_S_AXI_HP0 PCW_USE_S_AXI_HP1 PCW_USE_S_AXI_HP2
         PCW_USE_S_AXI_HP3 PCW_USE_S_AXI_ACP PCW_USE_DEFAULT_ACP_USER_VAL PCW_S_AXI_HP0_DATA_WIDTH
         PCW_S_AXI_HP1_DATA_WIDTH PCW_S_AXI_HP2_DATA_WIDTH PCW_S_AXI_HP3_DATA_WIDTH PCW_EN_CLK0_PORT
         PCW_EN_RST0_PORT PCW_FPGA0_PERIPHERAL_FREQMHZ PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ}
        "PG082; PYNQ-Z2 base.tcl; tvm-vta vivado.tcl"}
    zynq_ultra_ps_e {xilinx.com:ip:zynq_ultra_ps_e:3.5
        {PSU__USE__M_AXI_GP0 PSU__USE__M_AXI_GP1 PSU__USE__M_AXI_GP2 PSU__USE__S_AXI_GP0
         PSU__USE__S_AXI_GP1 PSU__USE__S_AXI_GP2 PSU__USE__S_AXI_GP3 PSU__USE__S_AXI_GP4
         PSU__USE__S_AXI_GP5 PSU__SAXIGP0__DATA_WIDTH PSU__SAXIGP1__DATA_WIDTH PSU__SAXIGP2__DATA_WIDTH
         PSU__SAXIGP3__DATA_WIDTH PSU__SAXIGP4__DATA_WIDTH PSU__SAXIGP5__DATA_WIDTH PSU__FPGA_PL0_ENABLE
         PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ}
        "PG201; tvm-vta vivado.tcl; FINN templates.py"}
    proc_sys_reset {xilinx.com:ip:proc_sys_reset:5.0 {} "PG164"}
    smartconnect {xilinx.com:ip:smartconnect:1.0 {NUM_SI NUM_MI} "PG247"}
}

# apply_bd_automation rules and their -config keys (UG994; PYNQ base.tcl; tvm-vta vivado.tcl).
set ::rules {
    xilinx.com:bd_rule:processing_system7 {make_external apply_board_preset Master Slave}
    xilinx.com:bd_rule:zynq_ultra_ps_e {apply_board_preset}
}

proc parse_opts {cmd argv} {
    if {![dict exists $::commands $cmd]} { stub_fail "unknown command '$cmd'" }
    lassign [dict get $::commands $cmd] valued flags
    set opts [dict create]
    set pos {}
    for {set i 0} {$i < [llength $argv]} {incr i} {
        set a [lindex $argv $i]
        if {[string match -* $a] && ![string is double -strict $a]} {
            if {$a in $valued} {
                incr i
                if {$i >= [llength $argv]} { stub_fail "$cmd: option $a needs a value" }
                dict set opts $a [lindex $argv $i]
            } elseif {$a in $flags} {
                dict set opts $a 1
            } else {
                stub_fail "$cmd: option '$a' is not in the table ([lindex [dict get $::commands $cmd] 2])"
            }
        } else {
            lappend pos $a
        }
    }
    lappend ::calls [concat $cmd $argv]
    return [list $opts $pos]
}

# ---- model ----------------------------------------------------------------------------------
set ::project ""
set ::part ""
set ::board_part_set ""
set ::sources {}
set ::constrs {}
set ::bd ""
set ::cells [dict create]     ;# name -> dict type vlnv ip config
set ::pin_props [dict create] ;# pin path -> dict of CONFIG.*
set ::nets {}                 ;# list of pin-path lists
set ::intf_nets {}            ;# list of {a b}
set ::assigned {}             ;# list of {space seg offset range}
set ::validated 0
set ::saved 0
set ::top ""
set ::runs [dict create]

proc cell_config {cell key default} {
    set c [dict get $::cells $cell config]
    if {[dict exists $c $key]} { return [dict get $c $key] }
    return $default
}

# The shell's interfaces, read from its X_INTERFACE_INFO / X_INTERFACE_PARAMETER attributes.
proc module_pins {ref} {
    set f [open rtl/$ref.v]
    set text [read $f]
    close $f
    if {![regexp "module $ref\\s*\\(" $text]} { stub_fail "rtl/$ref.v defines no module $ref" }
    if {[regexp -line {^\s*(logic|always_ff|always_comb|interface)\M} $text]} {
        stub_fail "rtl/$ref.v uses SystemVerilog; a module reference top must be Verilog (UG994)"
    }
    set pins [dict create]
    foreach {- sig} [regexp -all -inline {xilinx.com:signal:clock:1.0 (\w+) CLK} $text] {
        dict set pins $sig {kind clk dir I}
    }
    foreach {- sig} [regexp -all -inline {xilinx.com:signal:reset:1.0 (\w+) RST} $text] {
        dict set pins $sig {kind rst dir I}
    }
    foreach {- param} [regexp -all -inline {X_INTERFACE_PARAMETER = "(PROTOCOL[^"]*)"} $text] {
        regexp {DATA_WIDTH (\d+)} $param - width
        regexp {PROTOCOL (\w+)} $param - proto
        set ifname ""
        # The interface this parameter block belongs to: the next X_INTERFACE_INFO after it.
        set at [string first $param $text]
        regexp -start $at {aximm:1.0 (\w+) } $text - ifname
        set mode [expr {[string match m_* $ifname] ? "master" : "slave"}]
        dict set pins $ifname [list kind intf mode $mode width $width protocol $proto]
    }
    foreach need {ap_clk ap_rst_n s_axi_ctrl m_axi_mem} {
        if {![dict exists $pins $need]} { stub_fail "vivado would not infer '$need' on module $ref (no X_INTERFACE attributes)" }
    }
    return $pins
}

# Every pin of a cell as the configured IP would have it: name -> dict kind dir|mode width.
proc cell_pins {cell} {
    set c [dict get $::cells $cell]
    set pins [dict create]
    switch -- [dict get $c ip] {
        processing_system7 {
            if {[cell_config $cell PCW_EN_CLK0_PORT 1]} { dict set pins FCLK_CLK0 {kind clk dir O} }
            if {[cell_config $cell PCW_EN_RST0_PORT 1]} { dict set pins FCLK_RESET0_N {kind rst dir O} }
            foreach m {GP0 GP1} {
                if {[cell_config $cell PCW_USE_M_AXI_$m [expr {$m eq "GP0"}]]} {
                    dict set pins M_AXI_$m {kind intf mode master width 32 protocol AXI3}
                    dict set pins M_AXI_${m}_ACLK {kind clk dir I}
                }
            }
            foreach s {HP0 HP1 HP2 HP3} {
                if {[cell_config $cell PCW_USE_S_AXI_$s 0]} {
                    dict set pins S_AXI_$s [list kind intf mode slave protocol AXI3 \
                        width [cell_config $cell PCW_S_AXI_${s}_DATA_WIDTH 64]]
                    dict set pins S_AXI_${s}_ACLK {kind clk dir I}
                }
            }
            if {[cell_config $cell PCW_USE_S_AXI_ACP 0]} {
                dict set pins S_AXI_ACP {kind intf mode slave width 64 protocol AXI3}
                dict set pins S_AXI_ACP_ACLK {kind clk dir I}
            }
        }
        zynq_ultra_ps_e {
            if {[cell_config $cell PSU__FPGA_PL0_ENABLE 0]} {
                dict set pins pl_clk0 {kind clk dir O}
                dict set pins pl_resetn0 {kind rst dir O}
            }
            foreach {gp name aclk} {0 M_AXI_HPM0_FPD maxihpm0_fpd_aclk 1 M_AXI_HPM1_FPD maxihpm1_fpd_aclk
                                    2 M_AXI_HPM0_LPD maxihpm0_lpd_aclk} {
                if {[cell_config $cell PSU__USE__M_AXI_GP$gp 0]} {
                    dict set pins $name {kind intf mode master width 128 protocol AXI4}
                    dict set pins $aclk {kind clk dir I}
                }
            }
            foreach {gp name aclk} {0 S_AXI_HPC0_FPD saxihpc0_fpd_aclk 1 S_AXI_HPC1_FPD saxihpc1_fpd_aclk
                                    2 S_AXI_HP0_FPD saxihp0_fpd_aclk 3 S_AXI_HP1_FPD saxihp1_fpd_aclk
                                    4 S_AXI_HP2_FPD saxihp2_fpd_aclk 5 S_AXI_HP3_FPD saxihp3_fpd_aclk} {
                if {[cell_config $cell PSU__USE__S_AXI_GP$gp 0]} {
                    dict set pins $name [list kind intf mode slave protocol AXI4 \
                        width [cell_config $cell PSU__SAXIGP${gp}__DATA_WIDTH 128]]
                    dict set pins $aclk {kind clk dir I}
                }
            }
        }
        proc_sys_reset {
            dict set pins slowest_sync_clk {kind clk dir I}
            dict set pins ext_reset_in {kind rst dir I}
            dict set pins peripheral_aresetn {kind rst dir O optional 1}
            dict set pins interconnect_aresetn {kind rst dir O optional 1}
        }
        smartconnect {
            dict set pins aclk {kind clk dir I}
            dict set pins aresetn {kind rst dir I}
            for {set i 0} {$i < [cell_config $cell NUM_SI 1]} {incr i} {
                dict set pins [format S%02d_AXI $i] {kind intf mode slave width any protocol any}
            }
            for {set i 0} {$i < [cell_config $cell NUM_MI 1]} {incr i} {
                dict set pins [format M%02d_AXI $i] {kind intf mode master width any protocol any}
            }
        }
        module { set pins [module_pins [dict get $c vlnv]] }
    }
    return $pins
}

proc pin_info {path} {
    lassign [split $path /] cell pin
    if {![dict exists $::cells $cell]} { stub_fail "no cell '$cell' for pin '$path'" }
    set pins [cell_pins $cell]
    if {![dict exists $pins $pin]} {
        stub_fail "cell '$cell' has no pin '$pin' as configured (has: [dict keys $pins])"
    }
    return [dict get $pins $pin]
}

# The clock frequency (MHz) the PS makes: the request, unless STUB_ACTUAL_MHZ says otherwise.
proc ps_actual_mhz {cell} {
    if {[info exists ::env(STUB_ACTUAL_MHZ)]} { return $::env(STUB_ACTUAL_MHZ) }
    if {[dict get $::cells $cell ip] eq "processing_system7"} {
        return [cell_config $cell PCW_FPGA0_PERIPHERAL_FREQMHZ 50]
    }
    return [cell_config $cell PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ 100]
}

# ---- Vivado commands ------------------------------------------------------------------------
proc version {args} { parse_opts version $args; return "2024.2" }

proc create_project {args} {
    lassign [parse_opts create_project $args] o pos
    if {![dict exists $o -part]} { stub_fail "create_project without -part" }
    lassign $pos ::project dir
    set ::part [dict get $o -part]
    set ::projdir $dir
    file mkdir $dir
    return $::project
}

proc get_board_parts {args} {
    lassign [parse_opts get_board_parts $args] o pos
    if {[info exists ::env(STUB_BOARD_FILES)] && $::env(STUB_BOARD_FILES)} { return [lindex $pos 0] }
    return {}
}

proc current_project {args} { parse_opts current_project $args; return $::project }
proc current_fileset {args} { parse_opts current_fileset $args; return sources_1 }

proc add_files {args} {
    lassign [parse_opts add_files $args] o pos
    foreach f [concat {*}$pos] {
        if {![file exists $f]} { stub_fail "add_files: no file $f" }
        if {[dict exists $o -fileset] && [dict get $o -fileset] eq "constrs_1"} {
            lappend ::constrs $f
        } else {
            lappend ::sources $f
        }
    }
}

proc update_compile_order {args} { parse_opts update_compile_order $args }

proc create_bd_design {args} {
    lassign [parse_opts create_bd_design $args] o pos
    if {$::project eq ""} { stub_fail "create_bd_design before create_project" }
    set ::bd [lindex $pos 0]
}

proc get_ipdefs {args} {
    lassign [parse_opts get_ipdefs $args] o pos
    set pattern [lindex $pos 0]
    if {![regexp {^xilinx.com:ip:(\w+):\*$} $pattern - name]} {
        stub_fail "get_ipdefs '$pattern': look IPs up by name with any version (xilinx.com:ip:NAME:*)"
    }
    if {![dict exists $::ips $name]} { stub_fail "IP '$name' is not in the table" }
    lappend ::looked_up [lindex [dict get $::ips $name] 0]
    return [list ipdef:[lindex [dict get $::ips $name] 0]]
}

proc get_property {args} {
    lassign [parse_opts get_property $args] o pos
    lassign $pos name obj
    if {$name eq "VLNV"} {
        set out {}
        foreach d $obj { lappend out [string range $d 6 end] }
        return $out
    }
    if {[string match run:* $obj]} {
        set run [string range $obj 4 end]
        switch -- $name {
            PROGRESS { return [expr {[dict exists $::runs $run] ? "100%" : "0%"}] }
            DIRECTORY { return $::projdir/$::project.runs/$run }
        }
    }
    if {$name eq "SLACK" && $obj eq "timing_path"} {
        return [expr {[info exists ::env(STUB_WNS)] ? $::env(STUB_WNS) : 0.250}]
    }
    if {[string match CONFIG.* $name] && [dict exists $::cells $obj]} {
        set key [string range $name 7 end]
        check_property $obj $key
        if {$key in {PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ}} {
            return [ps_actual_mhz $obj]
        }
        return [cell_config $obj $key ""]
    }
    if {$name eq "CONFIG.FREQ_HZ" && [string match pin:* $obj]} {
        set path [string range $obj 4 end]
        lassign [split $path /] cell pin
        if {[dict get [pin_info $path] kind] ne "clk"} { stub_fail "FREQ_HZ of non-clock pin $path" }
        if {[dict get $::cells $cell type] eq "ip" && [dict get [pin_info $path] dir] eq "O"} {
            return [expr {round([ps_actual_mhz $cell] * 1e6)}]
        }
        if {[dict exists $::pin_props $path FREQ_HZ]} { return [dict get $::pin_props $path FREQ_HZ] }
        return 100000000
    }
    stub_fail "get_property $name of '$obj' is not modelled"
}

proc check_property {cell key} {
    set ip [dict get $::cells $cell ip]
    if {$ip eq "module"} { stub_fail "CONFIG.$key on module reference $cell" }
    if {$key ni [lindex [dict get $::ips $ip] 1]} {
        stub_fail "property CONFIG.$key is not in the table for $ip ([lindex [dict get $::ips $ip] 2])"
    }
}

proc set_property {args} {
    lassign [parse_opts set_property $args] o pos
    if {[dict exists $o -dict]} {
        set pairs [dict get $o -dict]
        set objs [lindex $pos 0]
    } else {
        lassign $pos name value objs
        set pairs [list $name $value]
    }
    foreach {name value} $pairs {
        if {$name eq "board_part"} { set ::board_part_set $value; continue }
        if {$name eq "top"} { set ::top $value; continue }
        if {[string match pin:* $objs] && $name eq "CONFIG.FREQ_HZ"} {
            dict set ::pin_props [string range $objs 4 end] FREQ_HZ $value
            continue
        }
        if {![string match CONFIG.* $name] || ![dict exists $::cells $objs]} {
            stub_fail "set_property $name on '$objs' is not modelled"
        }
        set key [string range $name 7 end]
        check_property $objs $key
        # PG247: a SmartConnect has 1 to 16 slave and 1 to 16 master interfaces.
        if {$key in {NUM_SI NUM_MI} && !([string is integer -strict $value] && $value >= 1 && $value <= 16)} {
            stub_fail "$objs: CONFIG.$key $value is not between 1 and 16 (PG247)"
        }
        dict set ::cells $objs config $key $value
    }
}

proc create_bd_cell {args} {
    lassign [parse_opts create_bd_cell $args] o pos
    set name [lindex $pos 0]
    if {$::bd eq ""} { stub_fail "create_bd_cell before create_bd_design" }
    if {[dict exists $::cells $name]} { stub_fail "cell $name exists" }
    switch -- [dict get $o -type] {
        ip {
            set vlnv [dict get $o -vlnv]
            set ip [lindex [split $vlnv :] 2]
            if {![dict exists $::ips $ip] || $vlnv ni $::looked_up} {
                stub_fail "create_bd_cell: VLNV '$vlnv' not from get_ipdefs"
            }
            dict set ::cells $name [dict create type ip vlnv $vlnv ip $ip config {}]
        }
        module {
            set ref [dict get $o -reference]
            if {"rtl/$ref.v" ni $::sources} { stub_fail "module reference $ref: rtl/$ref.v not added" }
            dict set ::cells $name [dict create type module vlnv $ref ip module config {}]
            module_pins $ref
        }
        default { stub_fail "create_bd_cell -type [dict get $o -type]" }
    }
    return $name
}

proc apply_bd_automation {args} {
    lassign [parse_opts apply_bd_automation $args] o pos
    set rule [dict get $o -rule]
    if {![dict exists $::rules $rule]} { stub_fail "automation rule '$rule' is not in the table" }
    foreach {k v} [dict get $o -config] {
        if {$k ni [dict get $::rules $rule]} { stub_fail "$rule: config key '$k' is not in the table" }
    }
    if {[dict exists $o -config apply_board_preset] && [dict get $o -config apply_board_preset]
        && $::board_part_set eq ""} {
        stub_fail "apply_board_preset without a board part"
    }
}

proc get_bd_pins {args} {
    lassign [parse_opts get_bd_pins $args] o pos
    set p [lindex $pos 0]
    if {[dict get [pin_info $p] kind] eq "intf"} { stub_fail "get_bd_pins $p is an interface" }
    return pin:$p
}

proc get_bd_intf_pins {args} {
    lassign [parse_opts get_bd_intf_pins $args] o pos
    set p [lindex $pos 0]
    if {[dict get [pin_info $p] kind] ne "intf"} { stub_fail "get_bd_intf_pins $p is no interface" }
    return intf:$p
}

proc connect_bd_net {args} {
    lassign [parse_opts connect_bd_net $args] o pos
    set net {}
    set drivers 0
    foreach p $pos {
        if {![string match pin:* $p]} { stub_fail "connect_bd_net: '$p' is not a pin object" }
        set path [string range $p 4 end]
        foreach n $::nets { if {$path in $n} { stub_fail "pin $path is already on a net" } }
        if {[dict get [pin_info $path] dir] eq "O"} { incr drivers }
        lappend net $path
    }
    if {$drivers != 1} { stub_fail "net {$net} has $drivers drivers" }
    lappend ::nets $net
}

proc connect_bd_intf_net {args} {
    lassign [parse_opts connect_bd_intf_net $args] o pos
    if {[llength $pos] != 2} { stub_fail "connect_bd_intf_net takes two interfaces" }
    set ends {}
    foreach p $pos {
        set path [string range $p 5 end]
        foreach n $::intf_nets { if {$path in $n} { stub_fail "interface $path is already connected" } }
        lappend ends $path
    }
    lassign $ends a b
    set ia [pin_info $a]
    set ib [pin_info $b]
    if {[dict get $ia mode] eq [dict get $ib mode]} { stub_fail "$a and $b are both [dict get $ia mode]s" }
    set wa [dict get $ia width]
    set wb [dict get $ib width]
    if {$wa ne "any" && $wb ne "any" && $wa != $wb} {
        stub_fail "data widths differ on $a ($wa) -- $b ($wb) with no converter"
    }
    lappend ::intf_nets $ends
}

proc get_bd_addr_spaces {args} {
    lassign [parse_opts get_bd_addr_spaces $args] o pos
    set p [lindex $pos 0]
    lassign [split $p /] cell space
    if {[dict get $::cells $cell type] eq "ip" && $space eq "Data"
        && [dict get $::cells $cell ip] in {processing_system7 zynq_ultra_ps_e}} {
        return space:$p
    }
    set info [pin_info $p]
    if {[dict get $info kind] ne "intf" || [dict get $info mode] ne "master"} {
        stub_fail "no address space $p"
    }
    return space:$p
}

# PS DRAM segments (PG082 "Address map", PG201 / UG1085 "System addresses").
set ::ps_segments {
    S_AXI_HP0/HP0_DDR_LOWOCM {0x0 0x40000000}  S_AXI_HP1/HP1_DDR_LOWOCM {0x0 0x40000000}
    S_AXI_HP2/HP2_DDR_LOWOCM {0x0 0x40000000}  S_AXI_HP3/HP3_DDR_LOWOCM {0x0 0x40000000}
    S_AXI_ACP/ACP_DDR_LOWOCM {0x0 0x40000000}
    SAXIGP0/HPC0_DDR_LOW {0x0 0x80000000}      SAXIGP1/HPC1_DDR_LOW {0x0 0x80000000}
    SAXIGP2/HP0_DDR_LOW {0x0 0x80000000}       SAXIGP3/HP1_DDR_LOW {0x0 0x80000000}
    SAXIGP4/HP2_DDR_LOW {0x0 0x80000000}       SAXIGP5/HP3_DDR_LOW {0x0 0x80000000}
}
set ::ps_slave_of_seg {
    SAXIGP0 S_AXI_HPC0_FPD SAXIGP1 S_AXI_HPC1_FPD SAXIGP2 S_AXI_HP0_FPD
    SAXIGP3 S_AXI_HP1_FPD SAXIGP4 S_AXI_HP2_FPD SAXIGP5 S_AXI_HP3_FPD
}

proc get_bd_addr_segs {args} {
    lassign [parse_opts get_bd_addr_segs $args] o pos
    set p [lindex $pos 0]
    set parts [split $p /]
    set cell [lindex $parts 0]
    if {[dict get $::cells $cell type] eq "module"} {
        lassign $parts - intf seg
        set info [pin_info $cell/$intf]
        if {[dict get $info mode] ne "slave" || ![string match $seg reg0]} { stub_fail "no segment $p" }
        return seg:$cell/$intf/reg0
    }
    set rel [join [lrange $parts 1 end] /]
    if {![dict exists $::ps_segments $rel]} { stub_fail "no PS segment $rel in the table" }
    set slave [lindex [split $rel /] 0]
    if {[dict exists $::ps_slave_of_seg $slave]} { set slave [dict get $::ps_slave_of_seg $slave] }
    pin_info $cell/$slave
    return seg:$p
}

proc assign_bd_address {args} {
    lassign [parse_opts assign_bd_address $args] o pos
    set space [string range [dict get $o -target_address_space] 6 end]
    set seg [string range [lindex $pos 0] 4 end]
    set rel [join [lrange [split $seg /] 1 end] /]
    if {[dict exists $::ps_segments $rel]} {
        lassign [dict get $::ps_segments $rel] offset range
    } else {
        if {![dict exists $o -offset] || ![dict exists $o -range]} {
            stub_fail "assign_bd_address of $seg: give -offset and -range"
        }
        set offset [dict get $o -offset]
        set range [dict get $o -range]
    }
    if {$range & ($range - 1)} { stub_fail "$seg: range $range is not a power of two" }
    if {$offset % $range} { stub_fail "$seg: offset $offset is not aligned to its range $range" }
    foreach a $::assigned {
        lassign $a s2 g2 o2 r2
        if {$s2 eq $space && $offset < $o2 + $r2 && $o2 < $offset + $range} {
            stub_fail "$seg at $offset overlaps $g2 at $o2 in $space"
        }
    }
    lappend ::assigned [list $space $seg $offset $range]
}

# The PS master windows peripherals must sit in (PG082 "Address map"; UG1085 table 10-1).
set ::windows {
    M_AXI_GP0 {0x40000000 0x40000000} M_AXI_GP1 {0x80000000 0x40000000}
    M_AXI_HPM0_FPD {0xA0000000 0x10000000} M_AXI_HPM1_FPD {0xB0000000 0x10000000}
    M_AXI_HPM0_LPD {0x80000000 0x20000000}
}

# The intf pin on the far side of `path` (through any SmartConnect).
proc far_end {path} {
    foreach n $::intf_nets {
        if {$path ni $n} { continue }
        set other [lindex $n [expr {[lindex $n 0] eq $path}]]
        lassign [split $other /] cell pin
        if {[dict get $::cells $cell ip] eq "smartconnect"} {
            set through [expr {[string match S* $pin] ? "M00_AXI" : "S00_AXI"}]
            return [far_end $cell/$through]
        }
        return $other
    }
    return ""
}

proc net_of {path} {
    foreach n $::nets { if {$path in $n} { return $n } }
    return {}
}

proc validate_bd_design {args} {
    parse_opts validate_bd_design $args
    set clock_net {}
    dict for {cell c} $::cells {
        dict for {pin info} [cell_pins $cell] {
            set path $cell/$pin
            switch -- [dict get $info kind] {
                intf {
                    if {[far_end $path] eq ""} { stub_fail "interface $path is not connected" }
                }
                clk - rst {
                    set net [net_of $path]
                    if {$net eq "" && ![dict exists $info optional]} {
                        stub_fail "[dict get $info kind] pin $path is not connected"
                    }
                    if {[dict get $info kind] eq "clk" && $net ne ""} {
                        if {$clock_net ne "" && $net ne $clock_net} { stub_fail "more than one clock net" }
                        set clock_net $net
                    }
                    foreach p $net {
                        if {[dict get [pin_info $p] kind] ne [dict get $info kind]} {
                            stub_fail "$path ([dict get $info kind]) is wired to $p"
                        }
                    }
                }
            }
        }
    }
    # The accelerator's clock parameter must equal the PS clock it is wired to.
    foreach {cell c} $::cells {
        if {[dict get $c type] ne "module"} { continue }
        set declared [expr {[dict exists $::pin_props $cell/ap_clk FREQ_HZ]
            ? [dict get $::pin_props $cell/ap_clk FREQ_HZ] : 100000000}]
        foreach p [net_of $cell/ap_clk] {
            lassign [split $p /] pc
            if {[dict get [pin_info $p] dir] eq "O"} {
                set actual [expr {round([ps_actual_mhz $pc] * 1e6)}]
                if {$declared != $actual} {
                    stub_fail "FREQ_HZ of $cell/ap_clk is $declared but its clock runs at $actual"
                }
            }
        }
        # Control: a PS master reaches s_axi_ctrl; its segment sits in that master's window.
        set master [far_end $cell/s_axi_ctrl]
        lassign [split $master /] pscell psport
        set seg [lsearch -inline -index 1 $::assigned $cell/s_axi_ctrl/reg0]
        if {$seg eq ""} { stub_fail "$cell/s_axi_ctrl/reg0 has no address" }
        if {[lindex $seg 0] ne "$pscell/Data"} { stub_fail "$cell/s_axi_ctrl/reg0 assigned in [lindex $seg 0]" }
        lassign [dict get $::windows $psport] wbase wsize
        lassign $seg - - offset range
        if {$offset < $wbase || $offset + $range > $wbase + $wsize} {
            stub_fail "$cell registers at $offset are outside the $psport window"
        }
        # Data: the master's address space maps the DRAM segment of the PS port it reaches.
        set slave [far_end $cell/m_axi_mem]
        set ok 0
        foreach a $::assigned {
            if {[lindex $a 0] ne "$cell/m_axi_mem"} { continue }
            set segslave [lindex [split [lindex $a 1] /] 1]
            if {[dict exists $::ps_slave_of_seg $segslave]} { set segslave [dict get $::ps_slave_of_seg $segslave] }
            if {"$pscell/$segslave" eq $slave} { set ok 1 }
        }
        if {!$ok} { stub_fail "$cell/m_axi_mem reaches $slave but no DRAM segment of it is assigned" }
    }
    set ::validated 1
}

proc save_bd_design {args} { parse_opts save_bd_design $args; set ::saved 1 }

proc get_files {args} {
    lassign [parse_opts get_files $args] o pos
    if {[lindex $pos 0] ne "$::bd.bd"} { stub_fail "get_files [lindex $pos 0]: no such file" }
    return $::projdir/$::project.srcs/sources_1/bd/$::bd/$::bd.bd
}

proc make_wrapper {args} {
    lassign [parse_opts make_wrapper $args] o pos
    if {!$::validated || !$::saved} { stub_fail "make_wrapper before validate_bd_design/save_bd_design" }
    set dir $::projdir/$::project.gen/sources_1/bd/$::bd/hdl
    file mkdir $dir
    set f $dir/${::bd}_wrapper.v
    set h [open $f w]
    puts $h "module ${::bd}_wrapper (); endmodule"
    close $h
    return $f
}

proc get_runs {args} { lassign [parse_opts get_runs $args] o pos; return run:[lindex $pos 0] }

proc launch_runs {args} {
    lassign [parse_opts launch_runs $args] o pos
    set run [lindex $pos 0]
    if {$::top ne "${::bd}_wrapper"} { stub_fail "launch_runs with top '$::top', not the wrapper" }
    check_xdc
    if {$run eq "impl_1"} {
        if {![dict exists $::runs synth_1]} { stub_fail "impl_1 before synth_1" }
        if {[dict get $o -to_step] ne "write_bitstream"} { stub_fail "impl_1 must run to write_bitstream" }
        set dir $::projdir/$::project.runs/impl_1
        file mkdir $dir
        set h [open $dir/${::bd}_wrapper.bit w]; puts $h "stub bitstream"; close $h
        write_hwh
    }
    dict set ::runs $run 1
}

# The clock constraint carries the period of the PS clock request.
proc check_xdc {} {
    set xdc [lsearch -inline $::constrs *clock.xdc]
    if {$xdc eq ""} { stub_fail "no clock constraint file in constrs_1" }
    set f [open $xdc]; set text [read $f]; close $f
    if {![regexp {create_clock -period ([0-9.]+) -name \w+ \[get_pins -hierarchical -filter \{NAME =~ ([^\}]+)\}\]} $text - period pin]} {
        stub_fail "$xdc has no create_clock on a PS clock pin"
    }
    dict for {cell c} $::cells {
        switch -- [dict get $c ip] {
            processing_system7 { set want [cell_config $cell PCW_FPGA0_PERIPHERAL_FREQMHZ 50]; set pat */PS7_i/FCLKCLK* }
            zynq_ultra_ps_e { set want [cell_config $cell PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ 100]; set pat */PS8_i/PLCLK* }
            default { continue }
        }
        if {abs($period - 1000.0 / $want) > 0.0005} { stub_fail "$xdc period $period ns is not 1000/$want MHz" }
        if {![string match $pat $pin]} { stub_fail "$xdc constrains $pin, not the [dict get $c ip] clock" }
    }
}

# A hand-off file as Vivado writes it (the parts the board runtime reads).
proc write_hwh {} {
    set dir $::projdir/$::project.gen/sources_1/bd/$::bd/hw_handoff
    file mkdir $dir
    set h [open $dir/$::bd.hwh w]
    puts $h "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\" ?>\n<EDKSYSTEM>\n  <MODULES>"
    dict for {cell c} $::cells {
        # A module reference's VLNV is xilinx.com:module_ref:NAME:1.0 in a hand-off file.
        set vlnv [dict get $c vlnv]
        if {[dict get $c type] eq "module"} { set vlnv xilinx.com:module_ref:$vlnv:1.0 }
        puts $h "    <MODULE INSTANCE=\"$cell\" VLNV=\"$vlnv\">\n      <PORTS>"
        foreach p [dict keys [cell_pins $cell]] {
            if {[dict get [pin_info $cell/$p] kind] ne "clk" || [dict get [pin_info $cell/$p] dir] ne "I"} { continue }
            set hz [get_property CONFIG.FREQ_HZ pin:$cell/$p]
            foreach q [net_of $cell/$p] {
                if {[dict get [pin_info $q] dir] eq "O"} { set hz [get_property CONFIG.FREQ_HZ pin:$q] }
            }
            puts $h "        <PORT CLKFREQUENCY=\"$hz\" DIR=\"I\" NAME=\"$p\" SIGIS=\"clk\"/>"
        }
        puts $h "      </PORTS>"
        if {[dict get $c ip] in {processing_system7 zynq_ultra_ps_e}} {
            puts $h "      <MEMORYMAP>"
            foreach a $::assigned {
                lassign $a space seg offset range
                lassign [split $seg /] target intf
                set master [lindex [split [far_end $target/$intf] /] 1]
                if {$space ne "$cell/Data"} { continue }
                puts $h [format "        <MEMRANGE BASEVALUE=\"0x%08X\" HIGHVALUE=\"0x%08X\" INSTANCE=\"%s\" MASTERBUSINTERFACE=\"%s\" MEMTYPE=\"REGISTER\"/>" $offset [expr {$offset + $range - 1}] $target $master]
            }
            puts $h "      </MEMORYMAP>"
        }
        puts $h "    </MODULE>"
    }
    puts $h "  </MODULES>\n</EDKSYSTEM>"
    close $h
}

proc wait_on_run {args} { parse_opts wait_on_run $args }
proc open_run {args} {
    lassign [parse_opts open_run $args] o pos
    if {![dict exists $::runs [lindex $pos 0]]} { stub_fail "open_run of a run never launched" }
}
proc report_utilization {args} {
    lassign [parse_opts report_utilization $args] o pos
    set h [open [dict get $o -file] w]; puts $h "| Slice LUTs | 1 | 0 | 53200 | 0.01 |"; close $h
}
proc report_timing_summary {args} {
    lassign [parse_opts report_timing_summary $args] o pos
    set h [open [dict get $o -file] w]; puts $h "stub timing report"; close $h
}
proc get_timing_paths {args} { parse_opts get_timing_paths $args; return timing_path }

# Anything else Vivado-like is refused: Tcl's unknown handler is where it would land.
rename unknown tcl_unknown
proc unknown {args} { stub_fail "unknown command '[lindex $args 0]' (not in the stub's table)" }

# ---- run ------------------------------------------------------------------------------------
set dir [lindex $argv 0]
cd $dir
set status [catch {source build.tcl} err]
set h [open stub_calls.txt w]
foreach c $::calls { puts $h $c }
close $h
if {$status} {
    puts stderr $err
    exit 1
}
if {![file exists output/vta.bit] || ![file exists output/vta.hwh] || ![file exists output/manifest.json]} {
    puts stderr "vivado-stub: build.tcl finished without output/vta.bit, vta.hwh and manifest.json"
    exit 1
}
puts "vivado-stub: OK ([llength $::calls] Vivado calls, [dict size $::cells] cells, [llength $::intf_nets] interface nets)"
