//! Symbol demangling: Rust (legacy and v0) and C++ (Itanium ABI).

/// Demangles a symbol name; returns it unchanged when it is not a mangled Rust or C++ name.
///
/// Rust names are printed without the trailing hash (`{:#}` form of `rustc-demangle`), as
/// `perf report` and most profilers show them. C++ names use `cpp_demangle` with default
/// options (parameters included, as `c++filt` prints them). A suffix such as `.cold` or
/// `.isra.0` added by GCC is kept.
pub fn demangle(raw: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if raw.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(raw.as_bytes()) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    raw.to_string()
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn cpp_names_as_cxxfilt_prints_them() {
        // Oracle: `c++filt _ZN3foo3barEi` prints `foo::bar(int)`.
        assert_eq!(demangle("_ZN3foo3barEi"), "foo::bar(int)");
        assert_eq!(demangle("_Z4workv"), "work()");
    }

    #[test]
    fn rust_names_without_hash() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    }

    #[test]
    fn plain_c_names_unchanged() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_start"), "_start");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }
}
