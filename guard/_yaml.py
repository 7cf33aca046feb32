"""A YAML loader for configs that refuses what a config never needs and an
attacker would use: aliases (an alias bomb expands to billions of nodes),
nesting deeper than ``MAX_NESTING`` (the composer recurses), and a key
given twice (TOML rejects it; YAML would keep the last silently)."""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node

from bus import MAX_NESTING

__all__ = ["load_yaml"]


class _Loader(yaml.SafeLoader):
    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = event.start_mark
        if isinstance(event, yaml.AliasEvent):
            raise ComposerError(None, None, "aliases (*name) are not allowed in a config", mark)
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise ComposerError(None, None, f"nesting deeper than {MAX_NESTING} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: the base class says so
            if duplicate:
                raise ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
        return super().construct_mapping(node, deep)


def load_yaml(raw: bytes) -> Any:
    """The one document in ``raw``; ``yaml.YAMLError`` (with a mark) for bad
    YAML or a refused construct, ``ValueError`` for an integer too long."""
    loader = _Loader(raw)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
