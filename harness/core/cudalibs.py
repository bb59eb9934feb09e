"""The CUDA libraries beneath an engine's arithmetic, whose file names carry their versions
(libcudart.so.13.0.96, libcublas.so.13.1.0.3, libcudnn.so.9.19.0.56): one table and one reading
for the host collector (harness.collect.host.info) and the report (harness.analyze.gpustack).
A bare soname (libcudnn.so.9) names only the major version: it is no version, so it reads as
nothing (the caller says "unknown")."""

from __future__ import annotations

import re

CUDA_LIBS = {"cuda_runtime": "libcudart.so.", "cublas": "libcublas.so.", "cudnn": "libcudnn.so."}
_VERSION = r"(\d+(?:\.\d+)+)"


def version_in(text: str, stem: str, whole: bool = False) -> str | None:
    """The version after `stem` in `text` (a file name when `whole`, else anywhere in it, e.g.
    /proc/self/maps), with at least a minor part; None when there is none."""
    pattern = re.escape(stem) + _VERSION
    m = re.fullmatch(pattern, text) if whole else re.search(pattern, text)
    return m.group(1) if m else None
