"""The host: its metadata (info), its profiles (profiles), load, quiet wait and thermal state (loadwatch)."""
