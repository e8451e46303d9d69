//! Newtypes that carry their unit in their name.

use serde::{Deserialize, Serialize};

macro_rules! count_newtype {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u64);

        impl std::ops::Add for $name {
            type Output = Self;
            fn add(self, o: Self) -> Self {
                Self(self.0 + o.0)
            }
        }
        impl std::ops::AddAssign for $name {
            fn add_assign(&mut self, o: Self) {
                self.0 += o.0;
            }
        }
        impl std::iter::Sum for $name {
            fn sum<I: Iterator<Item = Self>>(it: I) -> Self {
                Self(it.map(|x| x.0).sum())
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

count_newtype!(
    /// A number of retired instructions (exact executions).
    Instructions
);
count_newtype!(
    /// A number of CPU cycles (measured or modelled).
    Cycles
);
count_newtype!(
    /// A number of samples taken by a sampling profiler.
    SampleCount
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_and_sum() {
        let v = [Instructions(3), Instructions(4)];
        assert_eq!(v.iter().copied().sum::<Instructions>(), Instructions(7));
        let mut c = Cycles(1);
        c += Cycles(2);
        assert_eq!(c + Cycles(3), Cycles(6));
        assert_eq!(SampleCount(5).to_string(), "5");
    }
}
