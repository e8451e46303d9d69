//! The report of `inspect` (what proftrust sees in a binary: functions, basic blocks,
//! loops; for one function its CFG, simple loops, jump tables and instructions): its data,
//! which is the `--json` document (keys in field order), the text report and graphviz.

use crate::quote_name;
use proftrust_model::EdgeKind;
use serde::Serialize;
use std::fmt::Write as _;

/// What `inspect` found. Serialised, it is the `--json` contract (docs/binary.md); the
/// `#[serde(skip)]` fields feed the text report only.
#[derive(Debug, Clone, Serialize)]
pub struct InspectReport {
    /// The binary's path.
    pub binary: String,
    /// Its build-id (hex).
    pub build_id: Option<String>,
    /// Position-independent executable.
    pub pie: bool,
    /// Shared object.
    pub shared_object: bool,
    /// Has a `.symtab`.
    pub has_symtab: bool,
    /// Has DWARF (in the file or a debug file).
    pub debug_info: bool,
    /// The separate debug file used.
    pub debug_file: Option<String>,
    /// Warnings about the binary.
    pub warnings: Vec<crate::Warning>,
    /// The functions inspected (all, or the one asked for).
    pub functions: Vec<InspectFunction>,
    /// Functions in the binary.
    #[serde(skip)]
    pub function_count: usize,
    /// One function in detail (simple loops, jump tables, instructions).
    #[serde(skip)]
    pub detail: bool,
}

/// A CFG edge.
#[derive(Debug, Clone, Serialize)]
pub struct InspectEdge {
    /// Target block (none: leaves the function).
    pub to: Option<u32>,
    /// Kind.
    pub kind: EdgeKind,
}

/// A basic block.
#[derive(Debug, Clone, Serialize)]
pub struct InspectBlock {
    /// Id.
    pub id: u32,
    /// First address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// Instructions.
    pub instructions: usize,
    /// Its out-edges.
    pub successors: Vec<InspectEdge>,
}

/// A natural loop.
#[derive(Debug, Clone, Serialize)]
pub struct InspectLoop {
    /// Id.
    pub id: u32,
    /// Header block.
    pub header: u32,
    /// Header address.
    pub header_address: u64,
    /// Its blocks.
    pub blocks: Vec<u32>,
    /// Latch blocks.
    pub latches: Vec<u32>,
    /// Enclosing loop.
    pub parent: Option<u32>,
    /// Nesting depth.
    pub depth: u32,
    /// Simple loops (block ids), in detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simple_loops: Option<Vec<Vec<u32>>>,
    /// Why the simple loops were not enumerated, in detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simple_loops_error: Option<String>,
}

/// An instruction.
#[derive(Debug, Clone, Serialize)]
pub struct InspectInstr {
    /// Address.
    pub address: u64,
    /// Length in bytes.
    pub len: u32,
    /// Disassembly.
    pub text: String,
    /// Its block.
    pub block: Option<u32>,
    /// Inline frames, innermost first.
    pub frames: Vec<InspectFrame>,
}

/// An inline frame.
#[derive(Debug, Clone, Serialize)]
pub struct InspectFrame {
    /// Function.
    pub function: String,
    /// Source file.
    pub file: Option<String>,
    /// Line.
    pub line: Option<u32>,
}

/// A resolved jump table.
#[derive(Debug, Clone, Serialize)]
pub struct InspectJumpTable {
    /// The indirect jump's address.
    pub jump: u64,
    /// The table's address.
    pub table: u64,
    /// Entries.
    pub entries: u64,
    /// Targets, in table order.
    pub targets: Vec<u64>,
}

/// A function.
#[derive(Debug, Clone, Serialize)]
pub struct InspectFunction {
    /// Demangled name.
    pub name: String,
    /// Symbol name.
    pub raw_name: String,
    /// Start address.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
    /// Its blocks.
    pub blocks: Vec<InspectBlock>,
    /// Its natural loops.
    pub loops: Vec<InspectLoop>,
    /// An indirect jump could not be resolved.
    pub has_unknown_indirect: bool,
    /// Why no CFG was built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Jump tables, in detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jump_tables: Option<Vec<InspectJumpTable>>,
    /// Instructions, in detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Vec<InspectInstr>>,
    /// The CFG's edges in CFG order (from, to, kind), for graphviz.
    #[serde(skip)]
    pub edges: Vec<(u32, Option<u32>, EdgeKind)>,
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

impl InspectReport {
    /// The JSON document (keys in field order), pretty-printed, without a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The text report: the binary's summary, then a table of the functions or, in detail,
    /// each function's jump tables, blocks, loops and instructions.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        _ = writeln!(
            out,
            "{}: {}{}, build-id {}, {} functions, {}",
            quote_name(&self.binary),
            if self.shared_object {
                "shared object"
            } else if self.pie {
                "PIE executable"
            } else {
                "executable"
            },
            if self.has_symtab { "" } else { " (no .symtab)" },
            self.build_id.as_deref().unwrap_or("none"),
            self.function_count,
            match (self.debug_info, &self.debug_file) {
                (true, Some(p)) => format!("debug info in {p}"),
                (true, None) => "debug info".to_string(),
                (false, _) => "no debug info".to_string(),
            }
        );
        if !self.detail {
            _ = writeln!(
                out,
                "{:>18} {:>8} {:>7} {:>6}  name",
                "address", "size", "blocks", "loops"
            );
            for f in &self.functions {
                _ = match &f.error {
                    None => writeln!(
                        out,
                        "{:>#18x} {:>8} {:>7} {:>6}  {}{}",
                        f.address,
                        f.size,
                        f.blocks.len(),
                        f.loops.len(),
                        quote_name(&f.name),
                        if f.has_unknown_indirect {
                            "  [unresolved indirect jump]"
                        } else {
                            ""
                        }
                    ),
                    Some(e) => writeln!(
                        out,
                        "{:>#18x} {:>8} {:>7} {:>6}  {}  [{e}]",
                        f.address,
                        f.size,
                        "-",
                        "-",
                        quote_name(&f.name)
                    ),
                };
            }
            return out;
        }
        for f in &self.functions {
            render_function(&mut out, f);
        }
        out
    }

    /// Graphviz `dot`: one digraph per function with a CFG.
    pub fn render_dot(&self) -> String {
        self.functions
            .iter()
            .filter(|f| f.error.is_none())
            .map(dot)
            .collect()
    }
}

fn render_function(out: &mut String, f: &InspectFunction) {
    _ = writeln!(
        out,
        "\nfunction {} at {:#x}, {} bytes",
        quote_name(&f.name),
        f.address,
        f.size
    );
    if let Some(e) = &f.error {
        _ = writeln!(out, "  cannot build its CFG: {e}");
        return;
    }
    if f.has_unknown_indirect {
        _ = writeln!(
            out,
            "  note: an indirect jump could not be resolved; its targets are unknown"
        );
    }
    for t in f.jump_tables.iter().flatten() {
        let mut ts: Vec<String> = t.targets.iter().map(|x| format!("{x:#x}")).collect();
        ts.dedup();
        _ = writeln!(
            out,
            "  jump table at {:#x} for jmp at {:#x}: {} entries -> {}",
            t.table,
            t.jump,
            t.entries,
            ts.join(" ")
        );
    }
    _ = writeln!(out, "  blocks:");
    for b in &f.blocks {
        let succ: Vec<String> = b
            .successors
            .iter()
            .map(|e| match e.to {
                Some(t) => format!("{}:B{}", kind_name(e.kind), t),
                None => kind_name(e.kind).to_string(),
            })
            .collect();
        _ = writeln!(
            out,
            "    B{:<4} {:#x}..{:#x} {:>3} instrs  -> {}",
            b.id,
            b.start,
            b.end,
            b.instructions,
            succ.join(", ")
        );
    }
    let start = |id: u32| f.blocks.get(id as usize).map_or(0, |b| b.start);
    _ = writeln!(out, "  loops:");
    if f.loops.is_empty() {
        _ = writeln!(out, "    none");
    }
    for l in &f.loops {
        let blocks: Vec<String> = l.blocks.iter().map(|b| format!("B{b}")).collect();
        _ = writeln!(
            out,
            "    L{} header B{} ({:#x}) depth {}{}: {}",
            l.id,
            l.header,
            l.header_address,
            l.depth,
            l.parent.map(|p| format!(" in L{p}")).unwrap_or_default(),
            blocks.join(" ")
        );
        if let Some(e) = &l.simple_loops_error {
            _ = writeln!(out, "      {e}");
        }
        for s in l.simple_loops.iter().flatten() {
            let p: Vec<String> = s.iter().map(|b| format!("{:#x}", start(*b))).collect();
            _ = writeln!(out, "      simple loop: {}", p.join(" -> "));
        }
    }
    _ = writeln!(out, "  instructions:");
    let mut last_frames = String::new();
    for i in f.instructions.iter().flatten() {
        let mut fs = String::new();
        for (k, fr) in i.frames.iter().enumerate() {
            if k > 0 {
                fs.push_str(" <- ");
            }
            _ = write!(fs, "{}", fr.function);
            if let (Some(file), Some(line)) = (&fr.file, fr.line) {
                let short = file.rsplit('/').next().unwrap_or(file);
                _ = write!(fs, " {short}:{line}");
            }
        }
        if fs != last_frames {
            _ = writeln!(out, "      ; {}", quote_name(&fs));
            last_frames = fs;
        }
        let block = i.block.map_or_else(|| "-".into(), |b| format!("B{b}"));
        _ = writeln!(out, "    {:>5} {:#x}: {}", block, i.address, i.text);
    }
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz for one CFG: a node per block (label: address and instruction count), an edge
/// per CFG edge labelled by kind; edges leaving the function go to one `exit` node.
fn dot(f: &InspectFunction) -> String {
    let mut s = String::new();
    _ = writeln!(s, "digraph \"{}\" {{", dot_escape(&f.name));
    _ = writeln!(s, "  label=\"{} @ {:#x}\";", dot_escape(&f.name), f.address);
    _ = writeln!(s, "  node [shape=box, fontname=monospace];");
    let headers: Vec<u32> = f.loops.iter().map(|l| l.header).collect();
    for b in &f.blocks {
        let style = if headers.contains(&b.id) {
            ", style=bold"
        } else {
            ""
        };
        _ = writeln!(
            s,
            "  b{} [label=\"B{} {:#x}\\n{} instrs\"{}];",
            b.id, b.id, b.start, b.instructions, style
        );
    }
    let mut need_exit = false;
    for (from, to, kind) in &f.edges {
        let to = match to {
            Some(t) => format!("b{t}"),
            None => {
                need_exit = true;
                "exit".to_string()
            }
        };
        _ = writeln!(s, "  b{} -> {} [label=\"{}\"];", from, to, kind_name(*kind));
    }
    if need_exit {
        _ = writeln!(s, "  exit [shape=ellipse, label=\"exit/return/unknown\"];");
    }
    s.push_str("}\n");
    s
}
