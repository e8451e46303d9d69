//! `proftrust`: can I trust this profile? (The code is in the crate's library,
//! `proftrust_cli`.)

fn main() {
    proftrust_cli::main()
}
