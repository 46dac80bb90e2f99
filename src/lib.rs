//! The `vta` command-line front end as a library: [`main_with_args`] is the whole CLI (what
//! the `vta` binary runs, and what the Python package's `vta` console script calls), and
//! [`cmd`] holds the subcommands and the helpers they share.
//!
//! Every subcommand returns the text it prints; [`main_with_args`] writes it to stdout, or
//! prints the error as `error: ...` on stderr and returns status 1 (clap's usage errors exit
//! the process with 2).

pub mod cmd;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "vta",
    version,
    about = "Co-design toolkit for VTA-class deep-learning accelerators (Apache TVM's VTA, re-done\n\
             in Rust). Describe an accelerator with a config file (VTA's vta_config.json plus\n\
             extensions) or a preset; generate its Verilog and estimate its FPGA resources;\n\
             assemble programs in VTA's bit-exact 128-bit instruction format; compile ONNX\n\
             networks; run both on the functional simulator or the cycle-accurate\n\
             Verilator simulator, a Zynq board (vta-board) or another machine (vta serve);\n\
             explore designs (vta dse); write Vivado projects for Zynq boards (PYNQ-Z1/Z2,\n\
             Ultra96-V2, ZCU104, KV260) and build bitstreams for ECP5 and Gowin boards with\n\
             the open tools (yosys, nextpnr)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show accelerator configs and the built-in presets
    #[command(subcommand)]
    Config(cmd::config::ConfigCmd),
    /// Assemble a text program into a .vtab program container
    Asm(cmd::asm::AsmArgs),
    /// Disassemble a .vtab container, a raw instruction stream or a raw micro-op stream
    Disasm(cmd::disasm::DisasmArgs),
    /// Run a program on a simulator and save its outputs
    Sim(cmd::sim::SimArgs),
    /// Measure the simulators' throughput, calibration and whole `vta run` processes
    #[command(subcommand)]
    Bench(cmd::bench::BenchCmd),
    /// Compile an ONNX model for an accelerator config into a compiled model file
    Compile(cmd::compile::CompileArgs),
    /// Run a compiled model on .npy inputs, with a per-layer breakdown
    Run(cmd::run::RunArgs),
    /// Write a reference network (ResNet-18) as an ONNX model
    Zoo(cmd::zoo::ZooArgs),
    /// Generate the accelerator's Verilog, estimate its resources, write a Zynq Vivado project
    /// or build an open-flow bitstream
    #[command(subcommand)]
    Hw(cmd::hw::HwCmd),
    /// Compile the embedded trained digits CNN, run its test digits, check and report accuracy
    Demo(cmd::demo::DemoArgs),
    /// Serve a simulated device to other machines' `--backend remote://HOST:PORT` runs
    Serve(cmd::serve::ServeArgs),
    /// Explore designs: sweep configs for a network on an FPGA part (cycles, resources, fit,
    /// Pareto front, plot)
    Dse(Box<cmd::dse::DseArgs>),
    /// Check the simulators against each other: the randomized differential campaign of the
    /// RTL against the functional simulator, sharded, with reproducers
    #[command(subcommand)]
    Check(cmd::check::CheckCmd),
}

/// Runs the CLI on `args` (the program name first, as in `std::env::args_os`) and returns
/// its exit status. Usage errors and `--help`/`--version` print and exit the process, as
/// clap does.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    ExitCode::from(cli(args))
}

/// [`main_with_args`] returning the exit status as a number (0 or 1).
pub fn cli<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::parse_from(args);
    let result = dispatch(cli.command);
    match result {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => 0,
                // A closed pipe (`vta disasm x | head`) is the reader's choice, not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "error: cannot write output: {e}");
                    1
                }
            }
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {}", message(&e));
            1
        }
    }
}

/// Runs one command and returns the text it prints (what [`main_with_args`] writes to
/// stdout) or its error; `args` start with the program name. Usage errors are returned
/// (with clap's message) instead of exiting the process. The Python package runs the
/// commands it has no library call for (`vta hw bitstream`) through this.
pub fn run_command<I, T>(args: I) -> anyhow::Result<String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(|e| anyhow::anyhow!("{}", e.render()))?;
    dispatch(cli.command)
}

fn dispatch(command: Command) -> anyhow::Result<String> {
    match command {
        Command::Config(c) => cmd::config::run(c),
        Command::Asm(a) => cmd::asm::run(a),
        Command::Disasm(d) => cmd::disasm::run(d),
        Command::Sim(s) => cmd::sim::run(s),
        Command::Bench(b) => cmd::bench::run(b),
        Command::Compile(c) => cmd::compile::run(c),
        Command::Run(r) => cmd::run::run(r),
        Command::Zoo(z) => cmd::zoo::run(z),
        Command::Demo(d) => cmd::demo::run(d),
        Command::Hw(h) => cmd::hw::run(h),
        Command::Serve(s) => cmd::serve::run(s),
        Command::Dse(d) => cmd::dse::run(*d),
        Command::Check(c) => cmd::check::run(c),
    }
}

/// The error and its causes joined by ": ", skipping causes whose text an outer message
/// already includes (many of our errors print their source themselves).
pub fn message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if msg.contains(&s) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&s);
    }
    msg
}
