"""In-process engine adapters, one module each; only harness/adapters/specdec.py imports specdec.

Each module holds its engine's `DECLARATION` (harness.declare.EngineDecl) and its adapter class.
"""
