//! proftrust-sim (being written).
