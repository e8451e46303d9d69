//! proftrust-exact (being written).
