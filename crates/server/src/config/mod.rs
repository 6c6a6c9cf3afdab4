//! config (being written)
