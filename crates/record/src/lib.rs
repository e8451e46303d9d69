//! proftrust-record (being written).
