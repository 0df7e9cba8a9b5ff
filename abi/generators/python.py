"""abi/gen target: python (to be written)."""

from typing import Any, Dict


def generate(api: Dict[str, Any]) -> Dict[str, str]:
    return {}
