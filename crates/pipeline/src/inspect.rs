//! `inspect`: what proftrust sees in a binary — functions, basic blocks, natural loops;
//! for one function in detail its simple loops, jump tables and instructions with their
//! inline frames.

use crate::error::{bail, Result};
use crate::Events;
use proftrust_binary::{simple_loops, Binary, Function, DEFAULT_SIMPLE_LOOP_CAP};
use proftrust_model::Cfg;
pub use proftrust_report::inspect::{
    InspectBlock, InspectEdge, InspectFrame, InspectFunction, InspectInstr, InspectJumpTable,
    InspectLoop, InspectReport,
};
use std::path::PathBuf;

/// Settings of [`execute`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct InspectOptions {
    /// The ELF executable or shared object. Default empty (an error: give one).
    pub binary: PathBuf,
    /// Only this function (raw or demangled name), in detail. Default all, in summary.
    pub function: Option<String>,
    /// Most simple loops enumerated per loop (in detail). Default
    /// [`DEFAULT_SIMPLE_LOOP_CAP`].
    pub simple_loop_cap: usize,
}

impl Default for InspectOptions {
    fn default() -> Self {
        InspectOptions {
            binary: PathBuf::new(),
            function: None,
            simple_loop_cap: DEFAULT_SIMPLE_LOOP_CAP,
        }
    }
}

/// Opens the binary and analyses its functions (or the one asked for). The binary's
/// warnings are notes of `events` (and in the report); progress goes to `events`.
pub fn execute(o: &InspectOptions, events: &dyn Events) -> Result<InspectReport> {
    let bin = Binary::open(&o.binary)?;
    for w in bin.warnings() {
        events.note(&format!("warning: {w}"));
    }
    let funcs = select(&bin, o)?;
    let detail = o.function.is_some();
    let pb = events.task(Some(funcs.len() as u64), "analysing functions");
    let mut functions = Vec::with_capacity(funcs.len());
    for f in funcs {
        let cfg = bin.cfg(f).map_err(|e| e.to_string());
        functions.push(function(&bin, f, cfg, detail, o.simple_loop_cap)?);
        pb.inc(1);
    }
    pb.finish();
    Ok(InspectReport {
        binary: bin.path().display().to_string(),
        build_id: bin.build_id().map(|b| b.to_hex()),
        pie: bin.is_pie(),
        shared_object: bin.is_shared_object(),
        has_symtab: bin.has_symtab(),
        debug_info: bin.has_debug_info(),
        debug_file: bin.debug_file().map(|p| p.display().to_string()),
        warnings: crate::warnings::all_symbols(bin.warnings().iter().cloned()),
        functions,
        function_count: bin.functions().len(),
        detail,
    })
}

/// The function asked for (with names of similar ones when it is missing), or all.
fn select<'a>(bin: &'a Binary, o: &InspectOptions) -> Result<Vec<&'a Function>> {
    let Some(name) = &o.function else {
        return Ok(bin.functions().iter().collect());
    };
    if let Some(f) = bin.function_by_name(name) {
        return Ok(vec![f]);
    }
    let close: Vec<&str> = bin
        .functions()
        .iter()
        .filter(|f| f.name.contains(name.as_str()) || f.raw_name.contains(name.as_str()))
        .map(|f| f.name.as_str())
        .take(5)
        .collect();
    if close.is_empty() {
        bail!(
            "no function named {name:?} in {} ({} functions; run `proftrust inspect {}` to list them)",
            o.binary.display(),
            bin.functions().len(),
            o.binary.display()
        );
    }
    bail!(
        "no function named {name:?} in {}; similar: {}",
        o.binary.display(),
        close.join(", ")
    );
}

/// One function's blocks and loops, and in detail its simple loops, jump tables and
/// instructions (for a function without a CFG, those that cannot be read are left out).
fn function(
    bin: &Binary,
    f: &Function,
    cfg: std::result::Result<Cfg, String>,
    detail: bool,
    cap: usize,
) -> Result<InspectFunction> {
    let (jump_tables, instructions) = if detail {
        match (&cfg, bin.jump_tables(f), bin.instructions(f)) {
            (_, Ok(jt), Ok(ins)) => (
                Some(
                    jt.into_iter()
                        .map(|t| InspectJumpTable {
                            jump: t.jump.0,
                            table: t.table.0,
                            entries: t.entries,
                            targets: t.targets.iter().map(|x| x.0).collect(),
                        })
                        .collect(),
                ),
                Some(instructions_of(bin, cfg.as_ref().ok(), ins)),
            ),
            (Ok(_), Err(e), _) | (Ok(_), _, Err(e)) => return Err(e.into()),
            (Err(_), _, _) => (None, None),
        }
    } else {
        (None, None)
    };
    let mut out = InspectFunction {
        name: f.name.clone(),
        raw_name: f.raw_name.clone(),
        address: f.start.0,
        size: f.size,
        blocks: Vec::new(),
        loops: Vec::new(),
        has_unknown_indirect: false,
        error: None,
        jump_tables,
        instructions,
        edges: Vec::new(),
    };
    let cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            out.error = Some(e);
            return Ok(out);
        }
    };
    out.blocks = cfg
        .blocks
        .iter()
        .map(|b| InspectBlock {
            id: b.id.0,
            start: b.start.0,
            end: b.end.0,
            instructions: b.len(),
            successors: cfg
                .successors(b.id)
                .map(|e| InspectEdge {
                    to: e.to.map(|t| t.0),
                    kind: e.kind,
                })
                .collect(),
        })
        .collect();
    out.loops = cfg
        .loops
        .iter()
        .map(|l| {
            let (sl, err) = if detail {
                match simple_loops(&cfg, l, cap) {
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
            InspectLoop {
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
        .collect();
    out.has_unknown_indirect = cfg.has_unknown_indirect;
    out.edges = cfg
        .edges
        .iter()
        .map(|e| (e.from.0, e.to.map(|t| t.0), e.kind))
        .collect();
    Ok(out)
}

fn instructions_of(
    bin: &Binary,
    cfg: Option<&Cfg>,
    ins: Vec<proftrust_binary::Instr>,
) -> Vec<InspectInstr> {
    ins.into_iter()
        .map(|i| InspectInstr {
            address: i.addr.0,
            len: i.len,
            block: cfg.and_then(|c| c.block_at(i.addr)).map(|b| b.0),
            frames: bin
                .frames(i.addr)
                .into_iter()
                .map(|fr| InspectFrame {
                    function: fr.function,
                    file: fr.file,
                    line: fr.line,
                })
                .collect(),
            text: i.text,
        })
        .collect()
}
