"""Storage primitives: hooked filesystem mutations, strict JSON, tensor files, typed values."""
