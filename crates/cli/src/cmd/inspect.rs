//! `proftrust inspect BINARY [--function NAME] [--dot] [--json]`: what proftrust sees in a
//! binary: functions, basic blocks, loops; with `--function`, its CFG, simple loops and
//! instructions; with `--dot`, graphviz.
//!
//! JSON contract (kept stable): top level `functions`, each with `name`, `address`, `size`,
//! `blocks` (array) and `loops` (array). Addresses are numbers (SVMAs, as `nm` and
//! `objdump` print them in hex).

use crate::util;
use anyhow::{bail, Context};
use proftrust_binary::{simple_loops, Binary, Function, DEFAULT_SIMPLE_LOOP_CAP};
use proftrust_model::{Cfg, EdgeKind};
use proftrust_report::quote_name;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `proftrust inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// ELF executable or shared object to inspect.
    binary: PathBuf,
    /// Only this function (raw or demangled name): its CFG, simple loops and instructions.
    #[arg(long)]
    function: Option<String>,
    /// Print graphviz `dot` (one digraph per function) instead of text.
    #[arg(long, conflicts_with = "json")]
    dot: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Most simple loops enumerated per loop (with --function).
    /// 1 to 100000.
    #[arg(long, default_value_t = DEFAULT_SIMPLE_LOOP_CAP, value_parser = crate::args::int::<usize>(1, 100_000))]
    simple_loop_cap: usize,
}

#[derive(Serialize)]
struct JsonReport {
    binary: String,
    build_id: Option<String>,
    pie: bool,
    shared_object: bool,
    has_symtab: bool,
    debug_info: bool,
    debug_file: Option<String>,
    warnings: Vec<String>,
    functions: Vec<JsonFunction>,
}

#[derive(Serialize)]
struct JsonEdge {
    to: Option<u32>,
    kind: EdgeKind,
}

#[derive(Serialize)]
struct JsonBlock {
    id: u32,
    start: u64,
    end: u64,
    instructions: usize,
    successors: Vec<JsonEdge>,
}

#[derive(Serialize)]
struct JsonLoop {
    id: u32,
    header: u32,
    header_address: u64,
    blocks: Vec<u32>,
    latches: Vec<u32>,
    parent: Option<u32>,
    depth: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    simple_loops: Option<Vec<Vec<u32>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    simple_loops_error: Option<String>,
}

#[derive(Serialize)]
struct JsonInstr {
    address: u64,
    len: u32,
    text: String,
    block: Option<u32>,
    frames: Vec<JsonFrame>,
}

#[derive(Serialize)]
struct JsonFrame {
    function: String,
    file: Option<String>,
    line: Option<u32>,
}

#[derive(Serialize)]
struct JsonJumpTable {
    jump: u64,
    table: u64,
    entries: u64,
    targets: Vec<u64>,
}

#[derive(Serialize)]
struct JsonFunction {
    name: String,
    raw_name: String,
    address: u64,
    size: u64,
    blocks: Vec<JsonBlock>,
    loops: Vec<JsonLoop>,
    has_unknown_indirect: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jump_tables: Option<Vec<JsonJumpTable>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<Vec<JsonInstr>>,
}

/// Runs `proftrust inspect`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let bin = Binary::open(&a.binary)?;
    for w in bin.warnings() {
        util::note(format_args!("warning: {w}"));
    }
    let funcs: Vec<&Function> = match &a.function {
        Some(name) => match bin.function_by_name(name) {
            Some(f) => vec![f],
            None => {
                let close: Vec<&str> = bin
                    .functions()
                    .iter()
                    .filter(|f| {
                        f.name.contains(name.as_str()) || f.raw_name.contains(name.as_str())
                    })
                    .map(|f| f.name.as_str())
                    .take(5)
                    .collect();
                if close.is_empty() {
                    bail!(
                        "no function named {name:?} in {} ({} functions; run `proftrust inspect {}` to list them)",
                        a.binary.display(),
                        bin.functions().len(),
                        a.binary.display()
                    );
                }
                bail!(
                    "no function named {name:?} in {}; similar: {}",
                    a.binary.display(),
                    close.join(", ")
                );
            }
        },
        None => bin.functions().iter().collect(),
    };
    let detail = a.function.is_some();
    let pb = util::progress(Some(funcs.len() as u64), "analysing functions");
    let mut analysed: Vec<(&Function, Result<Cfg, String>)> = Vec::with_capacity(funcs.len());
    for f in funcs {
        analysed.push((f, bin.cfg(f).map_err(|e| e.to_string())));
        pb.inc(1);
    }
    pb.finish_and_clear();

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if a.json {
        let report = json_report(&bin, &analysed, detail, a.simple_loop_cap)?;
        serde_json::to_writer_pretty(&mut out, &report).context("cannot write JSON")?;
        writeln!(out)?;
    } else if a.dot {
        for (f, cfg) in &analysed {
            if let Ok(cfg) = cfg {
                out.write_all(dot(f, cfg).as_bytes())?;
            }
        }
    } else {
        text_report(&mut out, &bin, &analysed, detail, a.simple_loop_cap)?;
    }
    out.flush()?;
    Ok(())
}

fn json_report(
    bin: &Binary,
    analysed: &[(&Function, Result<Cfg, String>)],
    detail: bool,
    cap: usize,
) -> anyhow::Result<JsonReport> {
    let mut functions = Vec::with_capacity(analysed.len());
    for (f, cfg) in analysed {
        let (blocks, loops, unknown, error) = match cfg {
            Ok(cfg) => (
                cfg.blocks
                    .iter()
                    .map(|b| JsonBlock {
                        id: b.id.0,
                        start: b.start.0,
                        end: b.end.0,
                        instructions: b.len(),
                        successors: cfg
                            .successors(b.id)
                            .map(|e| JsonEdge {
                                to: e.to.map(|t| t.0),
                                kind: e.kind,
                            })
                            .collect(),
                    })
                    .collect(),
                cfg.loops
                    .iter()
                    .map(|l| {
                        let (sl, err) = if detail {
                            match simple_loops(cfg, l, cap) {
                                Ok(v) => (
                                    Some(
                                        v.iter()
                                            .map(|s| s.blocks.iter().map(|b| b.0).collect())
                                            .collect(),
                                    ),
                                    None,
                                ),
                                Err(e) => (None, Some(e.to_string())),
                            }
                        } else {
                            (None, None)
                        };
                        JsonLoop {
                            id: l.id.0,
                            header: l.header.0,
                            header_address: cfg.block(l.header).start.0,
                            blocks: l.blocks.iter().map(|b| b.0).collect(),
                            latches: l.latches.iter().map(|b| b.0).collect(),
                            parent: l.parent.map(|p| p.0),
                            depth: l.depth,
                            simple_loops: sl,
                            simple_loops_error: err,
                        }
                    })
                    .collect(),
                cfg.has_unknown_indirect,
                None,
            ),
            Err(e) => (Vec::new(), Vec::new(), false, Some(e.clone())),
        };
        let (jump_tables, instructions) = if detail {
            let jt = bin
                .jump_tables(f)?
                .into_iter()
                .map(|t| JsonJumpTable {
                    jump: t.jump.0,
                    table: t.table.0,
                    entries: t.entries,
                    targets: t.targets.iter().map(|x| x.0).collect(),
                })
                .collect();
            let ins = bin
                .instructions(f)?
                .into_iter()
                .map(|i| JsonInstr {
                    address: i.addr.0,
                    len: i.len,
                    block: cfg
                        .as_ref()
                        .ok()
                        .and_then(|c| c.block_at(i.addr))
                        .map(|b| b.0),
                    frames: bin
                        .frames(i.addr)
                        .into_iter()
                        .map(|fr| JsonFrame {
                            function: fr.function,
                            file: fr.file,
                            line: fr.line,
                        })
                        .collect(),
                    text: i.text,
                })
                .collect();
            (Some(jt), Some(ins))
        } else {
            (None, None)
        };
        functions.push(JsonFunction {
            name: f.name.clone(),
            raw_name: f.raw_name.clone(),
            address: f.start.0,
            size: f.size,
            blocks,
            loops,
            has_unknown_indirect: unknown,
            error,
            jump_tables,
            instructions,
        });
    }
    Ok(JsonReport {
        binary: bin.path().display().to_string(),
        build_id: bin.build_id().map(|b| b.to_hex()),
        pie: bin.is_pie(),
        shared_object: bin.is_shared_object(),
        has_symtab: bin.has_symtab(),
        debug_info: bin.has_debug_info(),
        debug_file: bin.debug_file().map(|p| p.display().to_string()),
        warnings: bin.warnings().to_vec(),
        functions,
    })
}

fn kind_name(k: EdgeKind) -> &'static str {
    match k {
        EdgeKind::FallThrough => "fall-through",
        EdgeKind::Taken => "taken",
        EdgeKind::Unconditional => "jump",
        EdgeKind::IndirectResolved => "table",
        EdgeKind::IndirectUnknown => "indirect?",
        EdgeKind::Return => "return",
        EdgeKind::Exit => "exit",
    }
}

fn text_report(
    out: &mut impl Write,
    bin: &Binary,
    analysed: &[(&Function, Result<Cfg, String>)],
    detail: bool,
    cap: usize,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "{}: {}{}, build-id {}, {} functions, {}",
        quote_name(&bin.path().display().to_string()),
        if bin.is_shared_object() {
            "shared object"
        } else if bin.is_pie() {
            "PIE executable"
        } else {
            "executable"
        },
        if bin.has_symtab() {
            ""
        } else {
            " (no .symtab)"
        },
        bin.build_id()
            .map(|b| b.to_hex())
            .unwrap_or_else(|| "none".into()),
        bin.functions().len(),
        match (bin.has_debug_info(), bin.debug_file()) {
            (true, Some(p)) => format!("debug info in {}", p.display()),
            (true, None) => "debug info".to_string(),
            (false, _) => "no debug info".to_string(),
        }
    )?;
    if !detail {
        writeln!(
            out,
            "{:>18} {:>8} {:>7} {:>6}  name",
            "address", "size", "blocks", "loops"
        )?;
        for (f, cfg) in analysed {
            match cfg {
                Ok(c) => writeln!(
                    out,
                    "{:>#18x} {:>8} {:>7} {:>6}  {}{}",
                    f.start.0,
                    f.size,
                    c.blocks.len(),
                    c.loops.len(),
                    quote_name(&f.name),
                    if c.has_unknown_indirect {
                        "  [unresolved indirect jump]"
                    } else {
                        ""
                    }
                )?,
                Err(e) => writeln!(
                    out,
                    "{:>#18x} {:>8} {:>7} {:>6}  {}  [{e}]",
                    f.start.0,
                    f.size,
                    "-",
                    "-",
                    quote_name(&f.name)
                )?,
            }
        }
        return Ok(());
    }
    for (f, cfg) in analysed {
        writeln!(
            out,
            "\nfunction {} at {:#x}, {} bytes",
            quote_name(&f.name),
            f.start.0,
            f.size
        )?;
        let cfg = match cfg {
            Ok(c) => c,
            Err(e) => {
                writeln!(out, "  cannot build its CFG: {e}")?;
                continue;
            }
        };
        if cfg.has_unknown_indirect {
            writeln!(
                out,
                "  note: an indirect jump could not be resolved; its targets are unknown"
            )?;
        }
        for t in bin.jump_tables(f)? {
            let mut ts: Vec<String> = t.targets.iter().map(|x| format!("{:#x}", x.0)).collect();
            ts.dedup();
            writeln!(
                out,
                "  jump table at {:#x} for jmp at {:#x}: {} entries -> {}",
                t.table.0,
                t.jump.0,
                t.entries,
                ts.join(" ")
            )?;
        }
        writeln!(out, "  blocks:")?;
        for b in &cfg.blocks {
            let succ: Vec<String> = cfg
                .successors(b.id)
                .map(|e| match e.to {
                    Some(t) => format!("{}:B{}", kind_name(e.kind), t.0),
                    None => kind_name(e.kind).to_string(),
                })
                .collect();
            writeln!(
                out,
                "    B{:<4} {:#x}..{:#x} {:>3} instrs  -> {}",
                b.id.0,
                b.start.0,
                b.end.0,
                b.len(),
                succ.join(", ")
            )?;
        }
        writeln!(out, "  loops:")?;
        if cfg.loops.is_empty() {
            writeln!(out, "    none")?;
        }
        for l in &cfg.loops {
            let blocks: Vec<String> = l.blocks.iter().map(|b| format!("B{}", b.0)).collect();
            writeln!(
                out,
                "    L{} header B{} ({:#x}) depth {}{}: {}",
                l.id.0,
                l.header.0,
                cfg.block(l.header).start.0,
                l.depth,
                l.parent
                    .map(|p| format!(" in L{}", p.0))
                    .unwrap_or_default(),
                blocks.join(" ")
            )?;
            match simple_loops(cfg, l, cap) {
                Ok(v) => {
                    for s in v {
                        let p: Vec<String> = s
                            .blocks
                            .iter()
                            .map(|b| format!("{:#x}", cfg.block(*b).start.0))
                            .collect();
                        writeln!(out, "      simple loop: {}", p.join(" -> "))?;
                    }
                }
                Err(e) => writeln!(out, "      {e}")?,
            }
        }
        writeln!(out, "  instructions:")?;
        let mut last_frames = String::new();
        for i in bin.instructions(f)? {
            let frames = bin.frames(i.addr);
            let mut fs = String::new();
            for (k, fr) in frames.iter().enumerate() {
                if k > 0 {
                    fs.push_str(" <- ");
                }
                let _ = write!(fs, "{}", fr.function);
                if let (Some(file), Some(line)) = (&fr.file, fr.line) {
                    let short = file.rsplit('/').next().unwrap_or(file);
                    let _ = write!(fs, " {short}:{line}");
                }
            }
            if fs != last_frames {
                writeln!(out, "      ; {}", quote_name(&fs))?;
                last_frames = fs;
            }
            let block = cfg
                .block_at(i.addr)
                .map(|b| format!("B{}", b.0))
                .unwrap_or_else(|| "-".into());
            writeln!(out, "    {:>5} {:#x}: {}", block, i.addr.0, i.text)?;
        }
    }
    Ok(())
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz for one CFG: a node per block (label: address and instruction count), an edge
/// per CFG edge labelled by kind; edges leaving the function go to one `exit` node.
fn dot(f: &Function, cfg: &Cfg) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "digraph \"{}\" {{", dot_escape(&f.name));
    let _ = writeln!(s, "  label=\"{} @ {:#x}\";", dot_escape(&f.name), f.start.0);
    let _ = writeln!(s, "  node [shape=box, fontname=monospace];");
    let headers: Vec<u32> = cfg.loops.iter().map(|l| l.header.0).collect();
    for b in &cfg.blocks {
        let style = if headers.contains(&b.id.0) {
            ", style=bold"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  b{} [label=\"B{} {:#x}\\n{} instrs\"{}];",
            b.id.0,
            b.id.0,
            b.start.0,
            b.len(),
            style
        );
    }
    let mut need_exit = false;
    for e in &cfg.edges {
        let to = match e.to {
            Some(t) => format!("b{}", t.0),
            None => {
                need_exit = true;
                "exit".to_string()
            }
        };
        let _ = writeln!(
            s,
            "  b{} -> {} [label=\"{}\"];",
            e.from.0,
            to,
            kind_name(e.kind)
        );
    }
    if need_exit {
        let _ = writeln!(s, "  exit [shape=ellipse, label=\"exit/return/unknown\"];");
    }
    s.push_str("}\n");
    s
}
