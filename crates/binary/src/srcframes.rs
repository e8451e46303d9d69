//! Source frames for profile exports: the inline chain at an address with what a PGO
//! profile keys its lines by (the function's start line, the discriminator, the linkage
//! name), as AutoFDO reads them from DWARF.
//!
//! * **Start line**: `DW_AT_decl_line` of the subprogram, followed through
//!   `DW_AT_abstract_origin` (an inlined instance) and `DW_AT_specification` (an
//!   out-of-line definition), as LLVM's symbolizer does for `DILineInfo::StartLine`. LLVM's
//!   sample profile stores line offsets relative to it.
//! * **Discriminator** of the innermost frame: the line-table row of the address; of an
//!   outer frame (a call site into which the next inner frame was inlined):
//!   `DW_AT_GNU_discriminator` of the inner frame's `DW_TAG_inlined_subroutine`.
//! * Units produced by clang encode three components in a discriminator (LLVM's
//!   `llvm/Support/Discriminator.h`: base discriminator, duplication factor, copy id, each
//!   in a prefix encoding). A sample profile keys lines by the base discriminator and
//!   AutoFDO scales counts by the duplication factor (a line unrolled k times runs 1/k as
//!   often per copy), so both are decoded for clang units; other producers' discriminators
//!   (gcc's) are plain numbers and are kept as they are with a factor of 1.

use crate::debuginfo::{DebugInfo, Reader};
use gimli::Reader as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One frame of the inline chain at an address, with the source keys of a PGO profile.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceFrame {
    /// Demangled function name.
    pub function: String,
    /// Linkage (mangled) name, or the plain name when the DWARF states none (C).
    pub linkage_name: String,
    /// Source file (innermost frame: of the address; outer frames: of the call site).
    pub file: Option<String>,
    /// Source line, same convention as `file`.
    pub line: Option<u32>,
    /// Column, when the line table states one.
    pub column: Option<u32>,
    /// Base discriminator (decoded for clang units, see the module docs).
    pub discriminator: u32,
    /// Duplication factor (clang units; 1 otherwise).
    pub duplication: u32,
    /// First line of the function this frame is in (`DW_AT_decl_line`).
    pub function_line: Option<u32>,
}

/// Line rows of one unit: (address, raw discriminator), end-of-sequence rows marked.
struct UnitRows {
    clang: bool,
    /// Sorted by address; `None` = end of a sequence (no code from here).
    rows: Vec<(u64, Option<u32>)>,
}

/// Line rows per unit (keyed by the unit's offset in `.debug_info`), built on first use.
#[derive(Default)]
pub(crate) struct RowCache(Mutex<HashMap<u64, Arc<UnitRows>>>);

/// LLVM's `getUnsignedFromPrefixEncoding` (llvm/Support/Discriminator.h): a component of
/// up to 12 bits; odd means "absent" (0).
fn prefix_decode(u: u32) -> u32 {
    if u & 1 == 1 {
        return 0;
    }
    let u = u >> 1;
    if u & 0x20 != 0 {
        ((u >> 1) & 0xfe0) | (u & 0x1f)
    } else {
        u & 0x1f
    }
}

/// LLVM's `getNextComponentInDiscriminator`.
fn next_component(d: u32) -> u32 {
    if d & 1 == 0 {
        d >> if d & 0x40 != 0 { 14 } else { 7 }
    } else {
        d >> 1
    }
}

/// (base discriminator, duplication factor) of an LLVM-encoded discriminator.
pub(crate) fn decode_llvm_discriminator(d: u32) -> (u32, u32) {
    let base = prefix_decode(d);
    let dup = prefix_decode(next_component(d));
    (base, if dup == 0 { 1 } else { dup })
}

fn decode(clang: bool, d: u32) -> (u32, u32) {
    if clang {
        decode_llvm_discriminator(d)
    } else {
        (d, 1)
    }
}

type Unit<'a> = gimli::UnitRef<'a, Reader>;

fn unit_rows(unit: Unit<'_>) -> UnitRows {
    let clang = {
        let mut entries = unit.entries();
        match entries.next_dfs() {
            Ok(Some((_, root))) => root
                .attr_value(gimli::DW_AT_producer)
                .ok()
                .flatten()
                .and_then(|v| unit.attr_string(v).ok())
                .is_some_and(|s| s.to_string_lossy().is_ok_and(|s| s.contains("clang"))),
            _ => false,
        }
    };
    let mut rows = Vec::new();
    if let Some(program) = unit.line_program.clone() {
        let mut it = program.rows();
        while let Ok(Some((_, row))) = it.next_row() {
            if row.end_sequence() {
                rows.push((row.address(), None));
            } else {
                rows.push((row.address(), Some(row.discriminator() as u32)));
            }
        }
    }
    // At an address where one sequence ends and another starts, the start wins.
    rows.sort_by_key(|&(a, d)| (a, d.is_some()));
    UnitRows { clang, rows }
}

impl UnitRows {
    fn discriminator_at(&self, addr: u64) -> u32 {
        let i = self.rows.partition_point(|&(a, _)| a <= addr);
        match i.checked_sub(1).map(|j| self.rows[j].1) {
            Some(Some(d)) => d,
            _ => 0,
        }
    }
}

/// Follows `DW_AT_abstract_origin` / `DW_AT_specification` (same unit) to the first DIE
/// that states `attr`; up to 4 hops.
fn attr_through_origins(
    unit: Unit<'_>,
    mut off: gimli::UnitOffset<usize>,
    attr: gimli::DwAt,
) -> Option<gimli::AttributeValue<Reader>> {
    for _ in 0..4 {
        let e = unit.entry(off).ok()?;
        if let Ok(Some(v)) = e.attr_value(attr) {
            return Some(v);
        }
        let next = [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
            .into_iter()
            .find_map(|a| match e.attr_value(a) {
                Ok(Some(gimli::AttributeValue::UnitRef(o))) => Some(o),
                _ => None,
            })?;
        off = next;
    }
    None
}

impl DebugInfo {
    /// The inline chain at `addr`, innermost first, with start lines and discriminators
    /// (module docs). Empty when there is no DWARF for `addr`.
    pub(crate) fn source_frames(&self, addr: u64) -> Vec<SourceFrame> {
        let Some(m) = self.context() else {
            return Vec::new();
        };
        let ctx = match m.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let mut raw = Vec::new();
        let Ok(mut it) = ctx.find_frames(addr).skip_all_loads() else {
            return Vec::new();
        };
        while let Ok(Some(f)) = it.next() {
            let (function, linkage_name) = match &f.function {
                Some(n) => (
                    n.demangle()
                        .map(|c| c.into_owned())
                        .unwrap_or_else(|_| "??".into()),
                    n.raw_name()
                        .map(|c| c.into_owned())
                        .unwrap_or_else(|_| "??".into()),
                ),
                None => ("??".to_string(), "??".to_string()),
            };
            let (file, line, column) = match &f.location {
                Some(l) => (l.file.map(|s| s.to_string()), l.line, l.column),
                None => (None, None, None),
            };
            raw.push((function, linkage_name, file, line, column, f.dw_die_offset));
            if raw.len() > 256 {
                break;
            }
        }
        if raw.is_empty() || (raw.len() == 1 && raw[0].0 == "??") {
            return Vec::new();
        }
        let unit = ctx.find_dwarf_and_unit(addr).skip_all_loads();
        let rows = unit.map(|u| {
            let key = u
                .header
                .offset()
                .as_debug_info_offset()
                .map_or(0, |o| o.0 as u64);
            let mut cache = match self.rows.0.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            cache
                .entry(key)
                .or_insert_with(|| Arc::new(unit_rows(u)))
                .clone()
        });
        let clang = rows.as_ref().is_some_and(|r| r.clang);
        let mut out = Vec::with_capacity(raw.len());
        for (i, (function, linkage_name, file, line, column, _)) in raw.iter().enumerate() {
            let die = raw[i].5;
            let function_line = match (unit, die) {
                (Some(u), Some(o)) => attr_through_origins(u, o, gimli::DW_AT_decl_line)
                    .and_then(|v| v.udata_value())
                    .map(|v| v as u32),
                _ => None,
            };
            // Innermost: the line table; outer: the call site of the next inner frame.
            let raw_disc = if i == 0 {
                rows.as_ref().map_or(0, |r| r.discriminator_at(addr))
            } else {
                match (unit, raw[i - 1].5) {
                    (Some(u), Some(o)) => u
                        .entry(o)
                        .ok()
                        .and_then(|e| e.attr_value(gimli::DW_AT_GNU_discriminator).ok())
                        .flatten()
                        .and_then(|v| v.udata_value())
                        .map_or(0, |v| v as u32),
                    _ => 0,
                }
            };
            let (discriminator, duplication) = decode(clang, raw_disc);
            out.push(SourceFrame {
                function: function.clone(),
                linkage_name: linkage_name.clone(),
                file: file.clone(),
                line: *line,
                column: *column,
                discriminator,
                duplication,
                function_line,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LLVM's encoder (`encodeComponent` / `encodeDiscriminator`), written from its
    /// description, to check the decoder against.
    fn encode(base: u32, dup: u32, copy: u32) -> u32 {
        let prefix = |u: u32| -> u32 {
            let u = u & 0xfff;
            if u > 0x1f {
                ((u & 0xfe0) << 1) | (u & 0x1f) | 0x20
            } else {
                u
            }
        };
        let comp = |c: u32| if c == 0 { 1 } else { prefix(c) << 1 };
        let bits = |c: u32| {
            if c == 0 {
                1
            } else if c > 0x1f {
                14
            } else {
                7
            }
        };
        let dup = if dup == 1 { 0 } else { dup };
        comp(base) | (comp(dup) << bits(base)) | (comp(copy) << (bits(base) + bits(dup)))
    }

    #[test]
    fn llvm_discriminators_decode_to_base_and_duplication() {
        for (b, d) in [
            (0, 1),
            (1, 1),
            (3, 1),
            (0, 4),
            (2, 8),
            (31, 2),
            (40, 3),
            (100, 16),
        ] {
            let enc = encode(b, d, 0);
            assert_eq!(
                decode_llvm_discriminator(enc),
                (b, d),
                "base {b} dup {d} = {enc:#x}"
            );
        }
        // Plain small discriminators from a non-clang producer stay as they are.
        assert_eq!(decode(false, 3), (3, 1));
        assert_eq!(decode(true, 0), (0, 1));
    }
}
