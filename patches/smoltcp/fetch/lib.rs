// Intentionally empty: this crate exists only so Cargo fetches smoltcp.
