"""Longest register-to-register paths of a yosys synth_xilinx netlist (write_json), with
logic levels and an estimated delay for a 7-series -1 part (constants below).

The timing evidence of README.md's "Generating bitstreams" (no Vivado here): per-cell delays
approximate an xc7z020 -1 with a fixed routing delay per net; no placement, no fanout.

    vta hw verilog -o v
    yosys -q -p "read_verilog v/vta_top.v; synth_xilinx -family xc7 -flatten -top vta_exec; write_json exec.json"
    python3 vta-hw/scripts/critical_path.py exec.json vta_exec [N]
"""
import json, sys, collections
sys.setrecursionlimit(100000)
NET = 0.55          # average routed net delay between cells
LUT = 0.12; MUXF = 0.30; CARRY_IN = 0.50; CARRY_CI = 0.11
FF_CQ = 0.46; BRAM_CQ = 2.45; SRL_CQ = 1.50
DSP_AP = 3.90; DSP_PCIN_P = 1.90; DSP_CP = 1.80; DSP_MREG_P = 1.90; DSP_ABREG_P = 4.20; DSP_PREG_P = 0.33
SETUP_FF = 0.10; SETUP_BRAM = 0.50; SETUP_DSP_AREG = 0.30; SETUP_DSP_MREG = 3.40; SETUP_DSP_PREG = 1.40; SETUP_DSP_PREG_FROM_A = 3.90

d = json.load(open(sys.argv[1]))
mod = d['modules'][sys.argv[2]]
cells = mod['cells']
driver = {}
for name, c in cells.items():
    for port, bits in c['connections'].items():
        if c['port_directions'].get(port) == 'output':
            for b in bits:
                if isinstance(b, int):
                    driver[b] = (name, port)
def p(c, k):
    v = c['parameters'].get(k, '0')
    return int(v, 2) if set(v) <= {'0', '1'} else int(v)
SEQ = {'FDRE', 'FDSE', 'FDCE', 'FDPE'}
memo = {}
def out_arrival(name, port):
    """(arrival ns, levels, path) at output `port` of cell `name`."""
    key = (name, port)
    if key in memo:
        return memo[key]
    memo[key] = (0, 0, ['<loop>'])
    c = cells[name]; t = c['type']
    if t in SEQ: r = (FF_CQ, 0, [name])
    elif t.startswith('RAMB'): r = (BRAM_CQ, 0, [name])
    elif t == 'SRL16E': r = (SRL_CQ, 0, [name])
    elif t in ('IBUF', 'BUFG'): r = (0.0, 0, ['port:' + name])
    elif t == 'DSP48E1':
        abreg = p(c, 'AREG') or p(c, 'BREG')
        if p(c, 'PREG'): r = (DSP_PREG_P, 0, [name + '(PREG)'])
        elif p(c, 'MREG'): r = (DSP_MREG_P, 0, [name + '(MREG)'])
        else:
            best = (DSP_ABREG_P, 0, [name + '(A/BREG)']) if abreg else (0, 0, [name])
            for ip, bits in c['connections'].items():
                if c['port_directions'].get(ip) != 'input': continue
                if ip in ('A', 'B', 'D') and abreg: continue
                dly = {'A': DSP_AP, 'B': DSP_AP, 'D': DSP_AP, 'C': DSP_CP, 'PCIN': DSP_PCIN_P}.get(ip)
                if dly is None: continue
                net = 0 if ip == 'PCIN' else NET
                a = in_arrival(bits, net)
                if a and a[0] + dly > best[0]:
                    best = (a[0] + dly, a[1] + 1, a[2] + [name + ':' + ip])
            r = best
    else:
        best = (0, 0, ['const'])
        for ip, bits in c['connections'].items():
            if c['port_directions'].get(ip) != 'input': continue
            if t == 'CARRY4':
                dly, net = (CARRY_CI, 0) if ip in ('CI', 'CYINIT') else (CARRY_IN, NET)
                lv = 0 if ip == 'CI' else 1
            elif t in ('MUXF7', 'MUXF8'):
                dly, net, lv = MUXF, (NET if ip == 'S' else 0), 1 if ip == 'S' else 0
            elif t.startswith('LUT') or t == 'INV':
                dly, net, lv = LUT, NET, 1
            else:
                dly, net, lv = 0.5, NET, 1
            a = in_arrival(bits, net)
            if a and a[0] + dly > best[0]:
                best = (a[0] + dly, a[1] + lv, a[2] + [t])
        r = best
    memo[key] = r
    return r
def in_arrival(bits, net):
    best = None
    for b in bits:
        if not isinstance(b, int) or b not in driver: continue
        a = out_arrival(*driver[b])
        a = (a[0] + net, a[1], a[2])
        if best is None or a[0] > best[0]: best = a
    return best
ends = []
for name, c in cells.items():
    t = c['type']
    for ip, bits in c['connections'].items():
        if c['port_directions'].get(ip) != 'input' or ip in ('C', 'CLK', 'CLKARDCLK', 'CLKBWRCLK') and t != 'DSP48E1': continue
        if t in SEQ: setup = SETUP_FF
        elif t.startswith('RAMB'): setup = SETUP_BRAM
        elif t == 'SRL16E': setup = SETUP_FF
        elif t == 'DSP48E1':
            if ip in ('A', 'B', 'D') and (p(c, 'AREG') or p(c, 'BREG')): setup = SETUP_DSP_AREG
            elif ip in ('A', 'B', 'D') and p(c, 'MREG'): setup = SETUP_DSP_MREG
            elif ip in ('A', 'B', 'D') and p(c, 'PREG'): setup = SETUP_DSP_PREG_FROM_A
            elif ip in ('C', 'PCIN') and p(c, 'PREG'): setup = SETUP_DSP_PREG
            else: continue
        elif t == 'OBUF': setup = 0.0
        else: continue
        net = 0 if ip == 'PCIN' else NET
        a = in_arrival(bits, net)
        if a: ends.append((a[0] + setup, a[1], a[2] + [name + ':' + ip], t))
ends.sort(key=lambda e: -e[0])
internal = [e for e in ends if not e[2][0].startswith('port:') and e[3] != 'OBUF']
print('worst estimated register-to-register paths (ns, levels):')
seen = 0
for e in internal[:int(sys.argv[3]) if len(sys.argv) > 3 else 8]:
    short = lambda x: 'DSP48E1' + x[x.rfind(':'):] if 'mul' in x and ':' in x and '$mul' in x else x
    print(f"{e[0]:6.2f} ns {e[1]:3d} lv  {cells[e[2][0].split('(')[0]]['type'] if e[2][0].split('(')[0] in cells else e[2][0]} | " + ' '.join(short(x) for x in e[2][1:-1]) + ' | ' + e[3] + ':' + e[2][-1].rsplit(':',1)[1])
maxlv = max(internal, key=lambda e: e[1])
print(f"max logic levels {maxlv[1]} ({maxlv[0]:.2f} ns): {maxlv[2][0]} -> {maxlv[2][-1]}")
nodsp = [e for e in internal if not any('DSP48E1' in x or '$mul' in x for x in e[2])]
if nodsp:
    e = nodsp[0]
    print(f"worst path without a DSP: {e[0]:.2f} ns {e[1]} lv  " + ' '.join(x for x in e[2][1:-1] if len(x) < 12) + f" | {e[3]}")
bram = [e for e in internal if e[2][0] in cells and cells[e[2][0]]['type'].startswith('RAMB')]
if bram:
    e = bram[0]
    print(f"worst path from a block RAM: {e[0]:.2f} ns {e[1]} lv  " + ' '.join(x if len(x) < 12 else 'DSP48E1' for x in e[2][1:-1]) + f" | {e[3]}")
dsp = [e for e in internal if any('$mul' in x for x in e[2])]
if dsp:
    e = dsp[0]
    print(f"worst path through a DSP48E1: {e[0]:.2f} ns {e[1]} lv  {e[2][0][:40]} | " + ' '.join(x if len(x) < 12 else 'DSP48E1' + x[x.rfind(':'):] for x in e[2][1:-1]) + f" | {e[3]}")
