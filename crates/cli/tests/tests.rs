//! The `proftrust` binary's integration tests, one test binary (as ripgrep's `tests/tests.rs`):
//! one module per subcommand or concern. Run one module with
//! `cargo test --release -p proftrust --test cli MODULE::` (e.g. `golden::`).

mod audit;
mod check;
mod check_coverage;
mod check_health;
mod check_runs;
mod check_trust;
mod check_util;
mod conformance;
mod export;
mod golden;
mod hardening;
mod hostile;
mod inspect;
mod interrupt;
mod paths;
mod processes;
mod read;
mod real_programs;
mod record;
mod seeds;
mod simulate;
mod skid;
mod truth;
mod vpp;
