//! The handles of a module's memories ([`Mem`]: write ports, read ports) and child
//! instances ([`Inst`]: connecting inputs, taking outputs).

use super::*;

impl<'a> Mem<'a> {
    fn with<R>(&self, f: impl FnOnce(&Memory) -> R) -> R {
        f(&self.m.d.borrow().mems[self.idx])
    }

    /// Word width in bits.
    pub fn width(&self) -> u32 {
        self.with(|m| m.width)
    }

    /// Number of words.
    pub fn depth(&self) -> u32 {
        self.with(|m| m.depth)
    }

    /// Width of addresses: `addr_bits(depth)`.
    pub fn addr_width(&self) -> u32 {
        self.with(|m| m.addr_width)
    }

    /// Asks synthesis for distributed (LUT) RAM instead of block RAM, whatever the size: the
    /// declaration carries `(* ram_style = "distributed" *)`, which Vivado and yosys honor
    /// (a registered read port then takes the LUT-RAM's asynchronous read into a register).
    /// Simulators ignore it.
    pub fn distributed(&self) {
        self.m.d.borrow_mut().mems[self.idx].distributed = true;
    }

    #[track_caller]
    fn check_addr(&self, addr: Sig<'a>, what: &str) {
        self.m.own(addr, what);
        let (name, aw, depth) = self.with(|m| (m.name.clone(), m.addr_width, m.depth));
        if addr.width != aw {
            panic!(
                "module `{}`: width mismatch in {what} of memory `{name}`: the address `{}` is {} \
                 bits but a {depth}-word memory takes {aw}-bit addresses",
                self.m.name,
                self.m.describe(addr.node),
                addr.width
            );
        }
    }

    /// The write port: at a clock edge where `enable` (1 bit) is high, `data` is written at
    /// `addr`. A memory has exactly one write port.
    #[track_caller]
    pub fn write(&self, enable: Sig<'a>, addr: Sig<'a>, data: Sig<'a>) {
        self.write_lanes(enable, addr, data)
    }

    /// The write port with lane enables: `enable` has one bit per lane (the word splits into
    /// `enable.width()` equal lanes, lane 0 in the low bits); only enabled lanes are written.
    /// With 8-bit lanes this is the usual byte-write-enable BRAM.
    #[track_caller]
    pub fn write_lanes(&self, enable: Sig<'a>, addr: Sig<'a>, data: Sig<'a>) {
        self.check_addr(addr, "the write port");
        self.m.own(enable, "memory write enable");
        self.m.own(data, "memory write data");
        let (name, width) = self.with(|m| (m.name.clone(), m.width));
        if data.width != width {
            panic!(
                "module `{}`: width mismatch in the write port of memory `{name}`: the data `{}` is \
                 {} bits but the memory is {width} bits wide",
                self.m.name,
                self.m.describe(data.node),
                data.width
            );
        }
        if width % enable.width != 0 {
            panic!(
                "module `{}`: memory `{name}` is {width} bits wide and cannot be split into {} \
                 lanes (the width of the enable `{}`)",
                self.m.name,
                enable.width,
                self.m.describe(enable.node)
            );
        }
        self.m.d.borrow_mut().mems[self.idx].writes.push(WritePort {
            enable: enable.node,
            addr: addr.node,
            data: data.node,
            loc: Location::caller(),
        });
    }

    /// A read port that reads every cycle: the word at `addr` appears on the returned signal
    /// one clock later (registered read, as in block RAM).
    #[track_caller]
    pub fn read(&self, addr: Sig<'a>) -> Sig<'a> {
        self.read_impl(None, addr)
    }

    /// A read port with an enable: at a clock edge where `enable` is high, the word at `addr`
    /// is latched into the returned signal; otherwise it holds. Reading the address being
    /// written in the same cycle gives the old word in simulation; avoid relying on it
    /// (block RAM in simple-dual-port mode does not guarantee it).
    #[track_caller]
    pub fn read_en(&self, enable: Sig<'a>, addr: Sig<'a>) -> Sig<'a> {
        self.m.own(enable, "memory read enable");
        self.m.expect_bit(enable, "a memory read enable");
        self.read_impl(Some(enable), addr)
    }

    #[track_caller]
    fn read_impl(&self, enable: Option<Sig<'a>>, addr: Sig<'a>) -> Sig<'a> {
        self.check_addr(addr, "a read port");
        let (name, width, nreads) = self.with(|m| (m.name.clone(), m.width, m.reads.len()));
        let data_name = if nreads == 0 {
            format!("{name}_rdata")
        } else {
            format!("{name}_rdata{nreads}")
        };
        let s = self.m.declare(
            &data_name,
            width,
            false,
            SigKind::MemData {
                mem: self.idx,
                port: nreads,
            },
            "memory read data",
        );
        let data = self.m.signal_of(s).unwrap();
        self.m.d.borrow_mut().mems[self.idx].reads.push(ReadPort {
            addr: addr.node,
            enable: enable.map(|e| e.node),
            data,
        });
        s
    }
}

impl<'a> Inst<'a> {
    /// The instantiated module.
    pub fn module(&self) -> Module {
        self.m.d.borrow().insts[self.idx].module.clone()
    }

    /// The instance name.
    pub fn name(&self) -> String {
        self.m.d.borrow().insts[self.idx].name.clone()
    }

    #[track_caller]
    fn port(&self, port: &str, dir: Dir) -> (usize, PortInfo) {
        let (module, iname) = {
            let d = self.m.d.borrow();
            (
                d.insts[self.idx].module.clone(),
                d.insts[self.idx].name.clone(),
            )
        };
        let Some(i) = module.port_index(port) else {
            let list: Vec<String> = module
                .ports()
                .iter()
                .filter(|p| p.dir == dir && p.role == PortRole::Data)
                .map(|p| p.name.clone())
                .collect();
            panic!(
                "module `{}`: instance `{iname}` of `{}` has no port `{port}` ({} ports: {})",
                self.m.name,
                module.name(),
                dir.as_str(),
                list.join(", ")
            );
        };
        let p = module.ports()[i].clone();
        if p.dir != dir {
            panic!(
                "module `{}`: port `{port}` of instance `{iname}` is an {}, not an {}",
                self.m.name,
                p.dir.as_str(),
                dir.as_str()
            );
        }
        if p.role != PortRole::Data {
            panic!(
                "module `{}`: port `{port}` of instance `{iname}` is its clock or reset, which is \
                 connected automatically",
                self.m.name
            );
        }
        (i, p)
    }

    /// Connects input `port` of the instance to `value` (same width; an integer becomes a
    /// constant). Every input must be connected exactly once.
    #[track_caller]
    pub fn connect(&self, port: &str, value: impl Into<Operand<'a>>) {
        let (i, p) = self.port(port, Dir::Input);
        let iname = self.name();
        let what = format!("connection of `{iname}.{port}`");
        let v = self.m.resolve(value.into(), p.width, p.signed, &what);
        if v.width != p.width {
            panic!(
                "module `{}`: width mismatch in {what}: the port is {} bits but the value `{}` is \
                 {} bits",
                self.m.name,
                p.width,
                self.m.describe(v.node),
                v.width
            );
        }
        self.m.d.borrow_mut().insts[self.idx]
            .conns
            .push(Connection {
                port: i,
                value: v.node,
                loc: Location::caller(),
            });
    }

    /// Output `port` of the instance, as a wire named `<instance>_<port>` in this module.
    #[track_caller]
    pub fn output(&self, port: &str) -> Sig<'a> {
        let (i, p) = self.port(port, Dir::Output);
        let existing = self.m.d.borrow().insts[self.idx]
            .outs
            .iter()
            .find(|(pi, _)| *pi == i)
            .map(|(_, s)| *s);
        if let Some(s) = existing {
            let node = self.m.d.borrow().signals[s].node;
            return self.m.sig(node);
        }
        let name = format!("{}_{}", self.name(), port);
        let s = self.m.declare(
            &name,
            p.width,
            p.signed,
            SigKind::InstOut {
                inst: self.idx,
                port: i,
            },
            "instance output",
        );
        let id = self.m.signal_of(s).unwrap();
        self.m.d.borrow_mut().insts[self.idx].outs.push((i, id));
        s
    }
}
