"""The text of a source (``--from``, or what ``kubectl get -o json`` printed) parsed into bounded
values, as ``roofline plan --from`` reads a saved result (``wire/saved_result.py``).

JSON first, then YAML (a ``kubectl get -o yaml`` file). Either way: integers of at most
:data:`~roofline_profiler.core.plausibility.MAX_INT_DIGITS` digits (Python refuses more than 4300
with a bare ``ValueError``, and a YAML integer reaches ``int()`` unchecked), nesting at most
:data:`MAX_SOURCE_DEPTH` levels (JSON counted by a scan before parsing; YAML counted as the
parser composes each node, so neither parser recurses past it), ``NaN`` and ``Infinity`` read as
floats that the field checks refuse by name. A YAML alias is composed once and shared, never
copied, so an alias bomb costs no more than its text. Every refusal is one
:class:`UnreadableSource` line. Pure module.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from roofline_profiler.core import plausibility

#: Deepest nesting read. A RooflineProfile nests six levels (``status.nodes[].models[]``), its
#: ``metadata.managedFields`` (``kubectl --show-managed-fields``) a dozen more.
MAX_SOURCE_DEPTH = 64


class UnreadableSource(ValueError):
    """Text that is no bounded JSON or YAML document; ``str()`` is one line."""


def _check_digits(text: str) -> None:
    digits = len(text.lstrip("+-").replace("_", ""))
    if digits > plausibility.MAX_INT_DIGITS:
        raise UnreadableSource(
            f"an integer of {digits} digits (at most {plausibility.MAX_INT_DIGITS})"
        )


def _bounded_int(text: str) -> int:
    _check_digits(text)
    return int(text)


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing nesting deeper than :data:`MAX_SOURCE_DEPTH` and integers
    longer than :data:`~roofline_profiler.core.plausibility.MAX_INT_DIGITS` digits."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_SOURCE_DEPTH:
                raise UnreadableSource(f"nested over {MAX_SOURCE_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_yaml_int(self, node: Any) -> Any:
        _check_digits(str(node.value))
        return super().construct_yaml_int(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def _json(text: str) -> Any:
    """The JSON value of ``text``; ``ValueError`` when it is no JSON."""
    if plausibility.nesting_depth(text, MAX_SOURCE_DEPTH) > MAX_SOURCE_DEPTH:
        raise UnreadableSource(f"nested over {MAX_SOURCE_DEPTH} levels deep")
    return json.loads(text, parse_int=_bounded_int)


def parse_source(text: str) -> tuple[Any, str]:
    """The document ``text`` holds and its format (``json`` or ``yaml``)."""
    try:
        return _json(text), "json"
    except UnreadableSource as exc:
        if "nested" not in str(exc):
            raise
    except ValueError:
        pass
    try:
        loader = _BoundedLoader(text)  # reads the stream's first characters already
    except yaml.YAMLError:
        raise UnreadableSource("neither JSON nor YAML") from None
    try:
        return loader.get_single_data(), "yaml"
    except UnreadableSource:
        raise
    except RecursionError:
        raise UnreadableSource(f"nested over {MAX_SOURCE_DEPTH} levels deep") from None
    except (yaml.YAMLError, ValueError, TypeError, ArithmeticError):
        # PyYAML's own errors, and those of the values it constructs (a timestamp of month 13).
        raise UnreadableSource("neither JSON nor YAML") from None
    finally:
        loader.dispose()


def parse_json(text: str | bytes) -> Any:
    """The JSON document ``text`` holds (what ``kubectl get -o json`` printed)."""
    try:
        return _json(text.decode("utf-8") if isinstance(text, bytes) else text)
    except UnicodeDecodeError:
        raise UnreadableSource("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise UnreadableSource(f"not a JSON document ({exc.msg})") from None
