//! From a parsed callgrind file to an [`ExactProfile`]: per-object load biases (given, or
//! inferred from the objects' symbols) and module-relative locations. The parser
//! ([`super::parse`]) knows nothing of this.

use super::{CallgrindProfile, PositionKind};
use crate::error::FormatError;
use proftrust_model::symbols::SymbolSource;
use proftrust_model::{
    CallCount, EdgeCount, ExactProfile, InstrCount, Location, Module, ModuleIdx, ModuleTable,
};
use std::collections::HashMap;

/// Options of [`CallgrindProfile::to_exact`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExactOptions {
    /// Biases stated by the caller, as (object path or file name, bias); they win over
    /// inference. Default: none.
    pub biases: Vec<(String, u64)>,
    /// Infer the bias of the other objects from their symbols. Default: `true`.
    pub infer_biases: bool,
}

impl Default for ExactOptions {
    fn default() -> Self {
        ExactOptions {
            biases: Vec::new(),
            infer_biases: true,
        }
    }
}

/// How the bias of an object was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BiasSource {
    /// Given by the caller.
    Given,
    /// Inferred: `agreeing` of `matched` functions found in the symbol table fit.
    Inferred {
        /// Functions whose addresses fit their symbol under this bias.
        agreeing: usize,
        /// Functions of the profile found in the symbol table.
        matched: usize,
    },
    /// No symbols (or no function matched): assumed 0, i.e. the file is already
    /// module-relative, as callgrind 3.x writes it.
    Assumed,
    /// The object is unknown (`???`): addresses stay unmapped.
    Unmapped,
}

/// The bias chosen for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectBias {
    /// Object path as the profile names it.
    pub object: String,
    /// Value subtracted from the file's addresses to get SVMAs.
    pub bias: u64,
    /// How it was found.
    pub source: BiasSource,
}

const PAGE: u64 = 0x1000;

/// Strips `@VERSION`, `@@VERSION` and callgrind's `'N` recursion suffix.
fn base_name(n: &str) -> &str {
    let n = n.split('@').next().unwrap_or(n);
    match n.rfind('\'') {
        Some(i) if n[i + 1..].bytes().all(|b| b.is_ascii_digit()) && i + 1 < n.len() => &n[..i],
        _ => n,
    }
}

impl CallgrindProfile {
    /// Whether callgrind itself wrote the file (`creator: callgrind-...`): its addresses
    /// are then module-relative already.
    fn by_callgrind(&self) -> bool {
        self.creator
            .as_deref()
            .is_some_and(|c| c.starts_with("callgrind-"))
    }

    /// Chooses the bias of every object named by the profile (see the module docs).
    pub fn biases(
        &self,
        opts: &ExactOptions,
        symbols: &dyn SymbolSource,
    ) -> Result<Vec<ObjectBias>, FormatError> {
        // Address range of every function, by object.
        let mut ranges: HashMap<u32, (u64, u64)> = HashMap::new();
        for c in &self.costs {
            let r = ranges.entry(c.function).or_insert((c.instr, c.instr));
            r.0 = r.0.min(c.instr);
            r.1 = r.1.max(c.instr);
        }
        let mut out = Vec::with_capacity(self.objects.len());
        for (oi, path) in self.objects.iter().enumerate() {
            let file_name = path.rsplit('/').next().unwrap_or(path);
            if let Some((_, b)) = opts
                .biases
                .iter()
                .find(|(k, _)| k == path || k == file_name)
            {
                out.push(ObjectBias {
                    object: path.clone(),
                    bias: *b,
                    source: BiasSource::Given,
                });
                continue;
            }
            if path == "???" || path.is_empty() {
                out.push(ObjectBias {
                    object: path.clone(),
                    bias: 0,
                    source: BiasSource::Unmapped,
                });
                continue;
            }
            let syms = if opts.infer_biases {
                symbols.symbols(path, None)
            } else {
                None
            };
            let Some(syms) = syms else {
                out.push(ObjectBias {
                    object: path.clone(),
                    bias: 0,
                    source: BiasSource::Assumed,
                });
                continue;
            };
            let mut by_name: HashMap<&str, (u64, u64)> = HashMap::new();
            for s in &syms.functions {
                if s.size > 0 {
                    by_name
                        .entry(base_name(&s.name))
                        .or_insert((s.start, s.size));
                }
            }
            // (function min, max, symbol start, size) for every matched function.
            let mut matched: Vec<(u64, u64, u64, u64)> = Vec::new();
            for (fi, f) in self.functions.iter().enumerate() {
                if f.object != Some(oi as u32) {
                    continue;
                }
                let Some(&(lo, hi)) = ranges.get(&(fi as u32)) else {
                    continue;
                };
                let n = base_name(&self.names[f.name as usize]);
                if let Some(&(start, size)) = by_name.get(n) {
                    matched.push((lo, hi, start, size));
                }
            }
            if matched.is_empty() {
                out.push(ObjectBias {
                    object: path.clone(),
                    bias: 0,
                    source: BiasSource::Assumed,
                });
                continue;
            }
            let fits = |b: u64| {
                matched
                    .iter()
                    .filter(|&&(lo, hi, s, z)| {
                        lo.checked_sub(b).is_some_and(|l| l >= s)
                            && hi.checked_sub(b).is_some_and(|h| h < s + z)
                    })
                    .count()
            };
            let mut best = (fits(0), 0u64);
            for &(lo, _, s, _) in &matched {
                if let Some(d) = lo.checked_sub(s) {
                    let b = d & !(PAGE - 1);
                    let n = fits(b);
                    if n > best.0 {
                        best = (n, b);
                    }
                }
            }
            if best.0 * 2 < matched.len() && self.by_callgrind() {
                // Callgrind writes each object's addresses minus the text bias valgrind
                // found for it, i.e. SVMAs: symbols that do not fit (a stripped object's
                // few exported names, ifunc variants under one name) change nothing.
                out.push(ObjectBias {
                    object: path.clone(),
                    bias: 0,
                    source: BiasSource::Assumed,
                });
                continue;
            }
            if best.0 * 2 < matched.len() {
                return Err(FormatError::Bias {
                    module: path.clone(),
                    detail: format!(
                        "the addresses of {} functions fit their ELF symbols under no single \
                         page-aligned load bias (best: {} of them at {:#x}); is the binary the \
                         same build that was profiled?",
                        matched.len(),
                        best.0,
                        best.1
                    ),
                });
            }
            out.push(ObjectBias {
                object: path.clone(),
                bias: best.1,
                source: BiasSource::Inferred {
                    agreeing: best.0,
                    matched: matched.len(),
                },
            });
        }
        Ok(out)
    }

    /// Converts to an [`ExactProfile`] with module-relative addresses.
    ///
    /// * instructions: the `Ir` column of every cost line (requires `positions: instr`, i.e.
    ///   `--dump-instr=yes`, and an `Ir` event); other events go to `extra_costs`;
    /// * calls: every `calls=` (site = call instruction, target = callee entry);
    /// * edges: every `jump=`/`jcnd=` with its taken count, plus, for `jcnd=`, the
    ///   fall-through edge `EXECUTED - TAKEN` to the next executed instruction of the object
    ///   (exact: nothing lies between a branch and its fall-through successor). Callgrind
    ///   records neither never-taken branches nor plain block fall-throughs, so the edge
    ///   list is not complete the way the QEMU backend's is;
    /// * `returns` stays 0 (callgrind does not count returns).
    pub fn to_exact(
        &self,
        opts: &ExactOptions,
        symbols: &dyn SymbolSource,
    ) -> Result<ExactProfile, FormatError> {
        if !self.positions.contains(&PositionKind::Instr) {
            return Err(FormatError::NotThisFormat {
                what: "callgrind file with instruction addresses",
                detail: "the file has no `instr` positions; record with `valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes`".into(),
            });
        }
        let ir = self
            .event_index("Ir")
            .ok_or_else(|| FormatError::NotThisFormat {
                what: "callgrind file with instruction counts",
                detail: format!("no `Ir` event among {:?}", self.events),
            })?;
        let biases = self.biases(opts, symbols)?;
        let mut modules = ModuleTable::default();
        let mut obj_module: Vec<Option<(ModuleIdx, u64)>> = Vec::with_capacity(biases.len());
        for b in &biases {
            if b.source == BiasSource::Unmapped {
                obj_module.push(None);
                continue;
            }
            let build_id = if opts.infer_biases {
                symbols.symbols(&b.object, None).and_then(|s| s.build_id)
            } else {
                None
            };
            let m = modules.intern(Module {
                path: b.object.clone(),
                build_id,
                load_bias: b.bias,
            });
            obj_module.push(Some((m, b.bias)));
        }
        let loc = |func: u32, addr: u64| -> Location {
            let f = &self.functions[func as usize];
            match f.object.and_then(|o| obj_module[o as usize]) {
                Some((m, bias)) => Location::new(m, addr.wrapping_sub(bias)),
                None => Location::unmapped(addr),
            }
        };
        let k = self.events.len();
        let extra_names: Vec<String> = self
            .events
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != ir)
            .map(|(_, e)| e.clone())
            .collect();
        let mut instructions = Vec::with_capacity(self.costs.len());
        let mut extra_costs = Vec::new();
        for (c, row) in self.costs.iter().zip(self.cost_values.chunks_exact(k)) {
            if row.iter().all(|&v| v == 0) {
                continue;
            }
            instructions.push(InstrCount {
                loc: loc(c.function, c.instr),
                count: row[ir],
            });
            if !extra_names.is_empty() {
                extra_costs.push(
                    row.iter()
                        .enumerate()
                        .filter(|&(i, _)| i != ir)
                        .map(|(_, &v)| v)
                        .collect(),
                );
            }
        }
        let mut e = ExactProfile {
            modules,
            instructions,
            extra_costs,
            extra_cost_names: extra_names,
            backend: "callgrind".into(),
            backend_detail: self.creator.clone().unwrap_or_default(),
            command: self
                .command
                .as_deref()
                .unwrap_or("")
                .split_ascii_whitespace()
                .map(str::to_string)
                .collect(),
            ..Default::default()
        };
        e.normalize();
        for c in &self.calls {
            e.calls.push(CallCount {
                site: loc(c.caller, c.site_instr),
                target: loc(c.callee, c.target_instr),
                count: c.count,
            });
        }
        for j in &self.jumps {
            let from = loc(j.function, j.from_instr);
            if j.taken > 0 {
                e.edges.push(EdgeCount {
                    from,
                    to: loc(j.target_function, j.to_instr),
                    count: j.taken,
                });
            }
            if let Some(ex) = j.executed {
                let fall = ex.saturating_sub(j.taken);
                if fall > 0 {
                    // The next executed instruction after the branch in the same module.
                    let i = e.instructions.partition_point(|x| x.loc <= from);
                    if let Some(next) = e
                        .instructions
                        .get(i)
                        .filter(|x| x.loc.module == from.module)
                    {
                        e.edges.push(EdgeCount {
                            from,
                            to: next.loc,
                            count: fall,
                        });
                    }
                }
            }
        }
        Ok(e)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::parse;
    use super::super::tests::HAND;
    use super::*;
    use proftrust_model::symbols::{FunctionSymbol, NoSymbols, ObjectSymbols};
    use proftrust_model::BuildId;

    #[test]
    fn hand_written_to_exact() {
        let p = parse(HAND).unwrap();
        let e = p.to_exact(&ExactOptions::default(), &NoSymbols).unwrap();
        assert_eq!(e.total_instructions, 34);
        assert_eq!(e.extra_cost_names, vec!["D1mr"]);
        let m = ModuleIdx(0);
        assert_eq!(e.count_at(Location::new(m, 0x1000)), 9);
        assert_eq!(e.count_at(Location::new(m, 0x2003)), 9);
        assert_eq!(e.calls.len(), 2);
        assert_eq!(e.calls[0].target, Location::new(m, 0x2000));
        // jcnd: 3 taken to 0x1000; the 1 fall-through goes to the next executed
        // instruction of the module after 0x100b, which in this hand file is 0x2000.
        assert!(e.edges.contains(&EdgeCount {
            from: Location::new(m, 0x100b),
            to: Location::new(m, 0x1000),
            count: 3
        }));
        assert_eq!(e.backend, "callgrind");
        assert_eq!(e.command, vec!["./prog", "arg"]);
    }

    pub(in crate::callgrind) struct Syms;
    impl SymbolSource for Syms {
        fn symbols(&self, path: &str, _: Option<&BuildId>) -> Option<ObjectSymbols> {
            (path == "/bin/prog").then(|| ObjectSymbols {
                build_id: None,
                functions: vec![
                    FunctionSymbol {
                        name: "main".into(),
                        start: 0x1000,
                        size: 0x30,
                    },
                    FunctionSymbol {
                        name: "helper".into(),
                        start: 0x2000,
                        size: 0x10,
                    },
                ],
            })
        }
    }

    #[test]
    fn bias_inference_runtime_and_relative() {
        let p = parse(HAND).unwrap();
        let b = p.biases(&ExactOptions::default(), &Syms).unwrap();
        assert_eq!(b[0].bias, 0);
        assert_eq!(
            b[0].source,
            BiasSource::Inferred {
                agreeing: 2,
                matched: 2
            }
        );
        // The same file with runtime addresses of a PIE loaded at 0x108000.
        let shifted = HAND
            .replace("0x1000", "0x109000")
            .replace("0x2000", "0x10a000");
        let p = parse(&shifted).unwrap();
        let b = p.biases(&ExactOptions::default(), &Syms).unwrap();
        assert_eq!(b[0].bias, 0x108000);
        let e = p.to_exact(&ExactOptions::default(), &Syms).unwrap();
        assert_eq!(e.count_at(Location::new(ModuleIdx(0), 0x1000)), 9);
        let mut given = ExactOptions::default();
        given.biases.push(("prog".into(), 0x108000));
        assert_eq!(
            p.biases(&given, &NoSymbols).unwrap()[0].source,
            BiasSource::Given
        );
    }
}
