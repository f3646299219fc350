// Intentionally empty: this crate exists only so Cargo fetches sel4-sys.
