"""In-process engine adapters, one module each, named after its engine ("-" as "_"); every
module here is a built-in engine (harness.core.declare lists them), and only an engine's own module
imports that engine.

Each module holds its engine's `DECLARATION` (harness.core.declare.EngineDecl) and its adapter class.
"""
