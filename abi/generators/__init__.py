"""The targets of abi/gen, one module each: generate(api) -> {repository path: text}."""

from . import fuzz, go, python, rust

#: (name, module), in the order abi/gen runs them.
TARGETS = [("rust", rust), ("python", python), ("go", go), ("fuzz", fuzz)]
