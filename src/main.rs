//! `vta`: the command-line front end of the toolkit (the CLI itself is the library's
//! [`vta::main_with_args`], shared with the Python package's `vta` command).

fn main() -> std::process::ExitCode {
    vta::main_with_args(std::env::args_os())
}
