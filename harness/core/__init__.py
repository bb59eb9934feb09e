"""The bottom layer: the one-line error type, the record/result schema (msgspec) and what an
engine declares about itself."""
