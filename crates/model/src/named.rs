//! Enums named by a fixed word (on the command line, in reports): one table per enum, in
//! the crate that owns the enum, which its `FromStr` and `Display` read and the CLI turns
//! into a flag's possible values (`proftrust_cli::args::named`) instead of a copy of the
//! enum.

/// An enum whose values have fixed names.
pub trait Named: Sized + Copy + PartialEq + 'static {
    /// Every value with its name and a one-line description, in the order `--help` lists
    /// them.
    const ALL: &'static [(Self, &'static str, &'static str)];

    /// The name of `self`.
    fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(v, _, _)| *v == self)
            .map_or("", |(_, n, _)| n)
    }

    /// The value named `s`, else an error listing the names.
    fn from_name(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(_, n, _)| *n == s)
            .map(|(v, _, _)| *v)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(_, n, _)| *n).collect();
                format!("{s:?} is not one of {}", names.join(", "))
            })
    }
}

/// `FromStr` and `Display` of a [`Named`] enum, by its names.
#[macro_export]
macro_rules! named_from_str {
    ($t:ty) => {
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                <$t as $crate::named::Named>::from_name(s)
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::named::Named::name(*self))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Named;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Colour {
        Red,
        DarkBlue,
    }
    impl Named for Colour {
        const ALL: &'static [(Self, &'static str, &'static str)] = &[
            (Colour::Red, "red", "Red."),
            (Colour::DarkBlue, "dark-blue", "Blue."),
        ];
    }
    crate::named_from_str!(Colour);

    #[test]
    fn names_round_trip_and_unknown_names_are_listed() {
        assert_eq!("dark-blue".parse::<Colour>(), Ok(Colour::DarkBlue));
        assert_eq!(Colour::Red.to_string(), "red");
        assert_eq!(
            "green".parse::<Colour>(),
            Err("\"green\" is not one of red, dark-blue".to_string())
        );
    }
}
