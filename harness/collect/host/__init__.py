"""The host: its metadata (info), its profiles (profiles), load, quiet gate and thermal state (loadwatch)."""
