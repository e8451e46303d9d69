//! Runs one preset and prints its tables: `cargo run --release -p proftrust-sim --example
//! preset -- table2 [reps] [seed]` (the CLI's `proftrust simulate sampling` does the same).

use proftrust_sim::sampling::{render_text, run_preset, Preset, PresetOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map_or("table2", String::as_str);
    let mut o = PresetOptions::default();
    if let Some(r) = args.get(2).and_then(|s| s.parse().ok()) {
        o.reps = r;
    }
    if let Some(s) = args.get(3).and_then(|s| s.parse().ok()) {
        o.seed = s;
    }
    match Preset::from_name(name).and_then(|p| run_preset(p, &o)) {
        Ok(rep) => print!("{}", render_text(&rep)),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
