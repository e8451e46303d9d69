//! `proftrust`: can I trust this profile?
//!
//! One thin binary over the library crates. Each subcommand lives in `cmd/<name>.rs` with its
//! own clap `Args` struct, which it turns into the library's plain options structs; libraries
//! never see clap. Errors are `anyhow` here only; [`main`] prints them with their hints and
//! exits with status 2.

mod cmd;
mod util;

use clap::{Parser, Subcommand};

/// Tells whether a sampling profile can be trusted, and fixes it when it cannot.
#[derive(Debug, Parser)]
#[command(name = "proftrust", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// More detail on stderr (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// No progress bars or notes on stderr; errors are still printed.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    // Each helper adds one variant here and one arm in `run` below; keep them alphabetical.
}

fn run(cli: Cli) -> anyhow::Result<()> {
    util::set_verbosity(cli.verbose, cli.quiet);
    match cli.command {}
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        util::print_error(&e);
        std::process::exit(2);
    }
}
