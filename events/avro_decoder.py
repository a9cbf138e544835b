"""Batch decoders compiled from the codec's own batch schema.

fastavro decodes at about 0.3 us per field, most of it spent building dicts
the codec then turns into records, so a batch written under the codec's own
writer schema (the common case: everything this process and its version wrote)
is read by straight-line Python compiled from that schema instead. It reads
each EnvelopeGroup's header once and every event's fields straight into
local variables, builds the event and its Envelope (codegen.Source.construct)
and implies offset, event type and fingerprint (see EnvelopeGroup.avsc).
A second, events-only decoder serves replay: it builds no envelopes and reads
an event type that declares a row (``AclCreated.ROW``) as that tuple of its
fields, building no objects for it.

The compiled function is a fast path only: on bytes it cannot read it raises
(``Malformed``, IndexError, KeyError, UnicodeDecodeError, ...) and the codec
then decodes the batch with fastavro, which names the problem. Batches under
other (older) writer schemas always go through fastavro's schema resolution.
Schemas using something this compiler does not handle raise ``Unsupported``
when compiling, and the codec then uses fastavro for every batch.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .avro_types import branch_name, kind, min_size, resolve
from .codegen import Source
from .event_mapping import (
    ENVELOPE_ATTRS,
    Leaf,
    Node,
    emit_node,
    item_hint,
    leaves,
    member_by_symbol,
    record_class,
    record_plan,
)

__all__ = ["DecoderCompiler", "EventBranch", "Malformed", "Unsupported"]


class Unsupported(Exception):
    """The schema uses something the decoder compiler does not handle.

    Control flow, not a SecmetaError: the codec catches it and uses fastavro instead.
    """


class Malformed(Exception):
    """The bytes are not a value of the schema.

    Control flow, not a SecmetaError: the codec catches it and decodes with fastavro,
    which raises the MalformedEventError a caller sees.
    """


def _read_long(buf: bytes, p: int) -> tuple[int, int]:
    """The zigzag varint at ``p`` and the position after it."""
    b = buf[p]
    p += 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > 63:
            raise Malformed("varint longer than 10 bytes")
        b = buf[p]
        p += 1
        n |= (b & 0x7F) << shift
        shift += 7
    if n >> 64:
        raise Malformed("varint beyond 64 bits")
    return (n >> 1) ^ -(n & 1), p


def _read_length(buf: bytes, p: int) -> tuple[int, int]:
    """For a length-prefixed value at ``p``: where its content ends and where it starts."""
    n, p = _read_long(buf, p)
    if n < 0:
        raise Malformed(f"negative length {n}")
    return p + n, p


def _malformed(what: str) -> Malformed:
    return Malformed(what)


_HELPERS = {
    "_rlong": _read_long,
    "_rlen": _read_length,
    "_bad": _malformed,
    "_float": struct.Struct("<f").unpack_from,
    "_double": struct.Struct("<d").unpack_from,
}


@dataclasses.dataclass(frozen=True)
class EventBranch:
    """An event record of the batch union: how to build it and the fingerprint it implies."""

    record: dict[str, Any]
    plan: Node
    fingerprint: bytes
    row: tuple[str, ...] | None = None  # read as a tuple of these Avro fields (events-only decoders), not built


class DecoderCompiler:
    """Compiles ``decode(buf, base_offset) -> (envelopes, end position)`` for one batch schema."""

    def __init__(self, named: Mapping[str, Any]) -> None:
        self.named = named
        self.src = Source(_HELPERS)

    # -- reading values into variables --

    def _line(self, code: str, indent: int) -> None:
        self.src.line(code, indent)

    def read_long(self, var: str, indent: int, inline: bool = False) -> None:
        """Read a zigzag varint; ``inline`` spells out the multi-byte case too (timestamps)."""
        line = self._line
        line("b = buf[p]", indent)
        line("if b < 128:", indent)
        line(f"{var} = (b >> 1) ^ -(b & 1)", indent + 4)
        line("p += 1", indent + 4)
        line("else:", indent)
        if not inline:
            line(f"{var}, p = _rlong(buf, p)", indent + 4)
            return
        for code in (
            "n = b & 127",
            "s = 7",
            "p += 1",
            "while True:",
            "    b = buf[p]",
            "    p += 1",
            "    n |= (b & 127) << s",
            "    if b < 128:",
            "        break",
            "    s += 7",
            "    if s > 63:",
            "        raise _bad('varint longer than 10 bytes')",
            "if n >> 64:",
            "    raise _bad('varint beyond 64 bits')",
            f"{var} = (n >> 1) ^ -(n & 1)",
        ):
            line(code, indent + 4)

    def read_length(self, indent: int) -> None:
        """Set e to the end of the length-prefixed value at p, and p to its start."""
        line = self._line
        line("b = buf[p]", indent)
        line("if b & 129:", indent)  # a multi-byte or negative length
        line("e, p = _rlen(buf, p)", indent + 4)
        line("else:", indent)
        line("p += 1", indent + 4)
        line("e = p + (b >> 1)", indent + 4)

    def blocks(self, items: Any, indent: int, body: Callable[[int], None], pairs: bool) -> None:
        """Loop over the blocks of an array (or map) calling ``body`` once per item, inside."""
        n = self.src.temp("n")
        line = self._line
        size = min_size(items, self.named) + (1 if pairs else 0)
        line("while True:", indent)
        self.read_long(n, indent + 4)
        line(f"if not {n}:", indent + 4)
        line("break", indent + 8)
        line(f"if {n} < 0:", indent + 4)
        line(f"{n} = -{n}", indent + 8)
        self.read_long("_", indent + 8)  # the block's size in bytes
        if size == 0:  # items of zero bytes: nothing to read, but an unbounded count
            raise Unsupported("arrays of zero-byte items")
        line(f"if {n} > end - p:", indent + 4)
        line("raise _bad('an array block overruns the batch')", indent + 8)
        line(f"for _ in range({n}):", indent + 4)
        body(indent + 8)

    def read(self, schema: Any, var: str, leaf: Leaf, indent: int, reuse: bool = False) -> None:
        """Emit code reading a value of ``schema`` into ``var`` as the Python ``leaf`` wants it.

        With ``reuse`` a string equal to the one read into ``var`` before is that same
        object (``r_<var>`` must be initialised to None first).
        """
        schema = resolve(schema, self.named)
        k = kind(schema)
        line = self._line
        if k in ("int", "long"):
            self.read_long(var, indent, inline=k == "long")
        elif k == "string" and reuse:  # equal bytes as the last time: the same str object
            self.read_length(indent)
            line("r = buf[p:e]", indent)
            line(f"if r != r_{var}:", indent)
            line(f"r_{var} = r", indent + 4)
            line(f"{var} = r.decode()", indent + 4)
            line("p = e", indent)
        elif k in ("string", "bytes"):
            self.read_length(indent)
            line(f"{var} = buf[p:e]{'.decode()' if k == 'string' else ''}", indent)
            line("p = e", indent)
        elif k == "fixed":
            size = int(schema["size"])
            line(f"{var} = buf[p:p + {size}]", indent)
            line(f"p += {size}", indent)
        elif k == "enum":
            symbols = schema["symbols"]
            members = member_by_symbol(leaf.enum, symbols) if leaf.enum else tuple(symbols)
            if len(symbols) <= 64:  # indexes are one byte; other bytes are a KeyError
                table = {i << 1: m for i, m in enumerate(members)}
                line(f"{var} = {self.src.name('sym', table)}[buf[p]]", indent)
                line("p += 1", indent)
            else:
                index = self.src.temp("i")
                self.read_long(index, indent)
                line(f"if {index} < 0:", indent)
                line("raise _bad('negative enum index')", indent + 4)
                line(f"{var} = {self.src.name('sym', members)}[{index}]", indent)
        elif k == "boolean":
            line(f"{var} = buf[p] != 0", indent)
            line("p += 1", indent)
        elif k in ("float", "double"):
            line(f"{var} = _{k}(buf, p)[0]", indent)
            line(f"p += {4 if k == 'float' else 8}", indent)
        elif k == "null":
            line(f"{var} = None", indent)
        elif k == "union":
            self.union(schema, indent, lambda _, branch, at: self.read(branch, var, leaf, at))
        elif k == "record":
            cls = record_class(leaf.hint, schema)
            plan = record_plan(cls, tuple(f["name"] for f in schema["fields"]))
            self.read_record(schema, plan, var, indent)
        elif k == "array":
            item_leaf = Leaf("", item_hint(leaf.hint), None)
            item = self.src.temp("x")
            line(f"{var} = []", indent)

            def item_body(at: int) -> None:
                self.read(schema["items"], item, item_leaf, at)
                line(f"{var}.append({item})", at)

            self.blocks(schema["items"], indent, item_body, pairs=False)
            line(f"{var} = tuple({var})", indent)
        else:
            raise Unsupported(f"reading Avro {k} into a Python field")

    def read_record(self, record: dict[str, Any], plan: Node, var: str, indent: int) -> None:
        """Emit code reading ``record``'s fields and building ``plan`` from them into ``var``."""
        leaf_vars = self.read_fields(record, plan, indent)
        result = emit_node(self.src, plan, leaf_vars, indent)
        self._line(f"{var} = {result}", indent)

    def read_row(self, record: dict[str, Any], plan: Node, row: Sequence[str], var: str, indent: int) -> None:
        """Emit code reading ``record``'s fields into ``var`` as the tuple of the fields ``row`` names."""
        leaf_vars = self.read_fields(record, plan, indent)
        missing = [name for name in row if name not in leaf_vars]
        if missing:
            raise Unsupported(f"{record['name']} has no fields {missing} for its row")
        self._line(f"{var} = ({', '.join(leaf_vars[name] for name in row)},)", indent)

    def read_fields(self, record: dict[str, Any], plan: Node, indent: int) -> dict[str, str]:
        """Emit code reading the fields ``plan`` uses into variables (skipping the rest); return them by name."""
        wanted = {leaf.name: leaf for leaf in leaves(plan)}
        leaf_vars = {}
        for field in record["fields"]:
            leaf = wanted.get(field["name"])
            if leaf is None:
                self.skip(field["type"], indent, frozenset())
            else:
                leaf_vars[leaf.name] = self.src.temp()
                self.read(field["type"], leaf_vars[leaf.name], leaf, indent)
        missing = set(wanted) - set(leaf_vars)
        if missing:
            raise Unsupported(f"{record['name']} lacks fields {sorted(missing)}")
        return leaf_vars

    # -- skipping values --

    def skip(self, schema: Any, indent: int, seen: frozenset[str]) -> None:
        """Emit code stepping p over a value of ``schema``."""
        if isinstance(schema, str) and schema in self.named:
            if schema in seen:
                raise Unsupported(f"recursive type {schema}")
            seen = seen | {schema}
        schema = resolve(schema, self.named)
        k = kind(schema)
        line = self._line
        if k == "null":
            return
        if k == "boolean":
            line("p += 1", indent)
        elif k in ("int", "long", "enum"):
            line("while buf[p] & 128:", indent)
            line("p += 1", indent + 4)
            line("p += 1", indent)
        elif k in ("float", "double", "fixed"):
            size = {"float": 4, "double": 8}.get(k) or int(schema["size"])
            line(f"p += {size}", indent)
        elif k in ("string", "bytes"):
            line("p = _rlen(buf, p)[0]", indent)
        elif k == "record":
            for field in schema["fields"]:
                self.skip(field["type"], indent, seen | {schema["name"]})
        elif k in ("array", "map"):
            items = schema["items"] if k == "array" else schema["values"]

            def item_body(at: int) -> None:
                if k == "map":
                    line("p = _rlen(buf, p)[0]", at)
                self.skip(items, at, seen)

            self.blocks(items, indent, item_body, pairs=k == "map")
        elif k == "union":
            self.union(schema, indent, lambda _, branch, at: self.skip(branch, at, seen))
        else:
            raise Unsupported(f"skipping Avro {k}")

    def union(
        self, branches: Sequence[Any], indent: int, each: Callable[[int, Any, int], None]
    ) -> None:
        """Emit a dispatch on the union index at p, with ``each(index, branch, indent)``."""
        if len(branches) > 64:
            raise Unsupported("unions of more than 64 branches")
        line = self._line
        line("k = buf[p]", indent)
        line("p += 1", indent)
        for i, branch in enumerate(branches):
            line(f"{'if' if i == 0 else 'elif'} k == {i << 1}:", indent)
            line("pass", indent + 4)
            each(i, branch, indent + 4)
        line("else:", indent)
        line("raise _bad(f'union index byte {k}')", indent + 4)

    # -- the batch --

    def compile_batch(
        self,
        group: dict[str, Any],
        branches: Sequence[EventBranch],
        envelope: type | None,
        bodies: bool = False,
        rows: bool = False,
    ) -> Callable[[bytes, int], tuple[Any, int]]:
        """The decoder of ``array<group>``; ``branches`` follow the events union's order.

        With an ``envelope`` class it returns every event in its envelope; with None only the events
        (the groups' header fields are read and dropped), a branch with a ``row`` as that tuple. With
        ``bodies`` it returns ``(what it read, bodies)``: each event's record bytes as the batch holds them
        (after its union index), which are the body of the event's single-object encoding. With ``rows`` and an
        ``envelope`` class, a branch with a ``row`` is that tuple in its envelope (whose fingerprint names its type).
        """
        names = [f["name"] for f in group["fields"]]
        if "events" not in names or any(
            a not in names[: names.index("events")] for a in ENVELOPE_ATTRS
        ):
            raise Unsupported("the group's header fields must all come before its events")
        line = self._line
        line("def decode_batch(buf, off):", 0)
        line("out = []", 4)
        line("ap = out.append", 4)
        line("p = 0", 4)
        line("end = len(buf)", 4)
        for name in ENVELOPE_ATTRS:
            line(f"r_g_{name} = None", 4)
        if bodies:
            line("bodies = []", 4)
            line("ab = bodies.append", 4)

        def group_body(at: int) -> None:
            for field in group["fields"]:
                name = field["name"]
                if name in ENVELOPE_ATTRS:  # read (and checked) even when unused: as fastavro would
                    self.read(field["type"], f"g_{name}", Leaf(name, None, None), at, reuse=True)
                elif name == "events":
                    self._events(field["type"], branches, envelope, at, bodies, rows)
                else:
                    self.skip(field["type"], at, frozenset())

        self.blocks(
            {"type": "record", "name": "_", "fields": group["fields"]}, 4, group_body, False
        )
        line("return (out, bodies), p" if bodies else "return out, p", 4)
        return self.src.function("decode_batch")

    def _events(
        self, events: Any, branches: Sequence[EventBranch], envelope: type | None, indent: int,
        bodies: bool = False, rows: bool = False,
    ) -> None:
        events = resolve(events, self.named)
        union = resolve(events["items"], self.named) if kind(events) == "array" else None
        if not isinstance(union, list) or len(union) != len(branches):
            raise Unsupported("the group's events are not an array of the event union")
        for declared, branch in zip(union, branches):
            if branch_name(declared) != branch.record["name"]:
                raise Unsupported(f"union branch {branch_name(declared)} is out of order")
        args = {
            "offset": "off",
            "event": "ev",
            "fingerprint": "fp",
            **{name: f"g_{name}" for name in ENVELOPE_ATTRS},
        }
        order = [] if envelope is None else [f.name for f in dataclasses.fields(envelope)]
        if envelope is not None and set(order) != set(args):
            raise Unsupported(f"{envelope.__name__} has fields {order}")

        def event_body(at: int) -> None:
            def one(index: int, _: Any, at2: int) -> None:
                branch = branches[index]
                if bodies:
                    self._line("body_at = p", at2)
                if (envelope is None or rows) and branch.row is not None:
                    self.read_row(branch.record, branch.plan, branch.row, "ev", at2)
                else:
                    self.read_record(branch.record, branch.plan, "ev", at2)
                if envelope is not None:
                    self._line(f"fp = {self.src.name('fp', branch.fingerprint)}", at2)

            self.union(union, at, one)
            if bodies:
                self._line("ab(buf[body_at:p])", at)
            if envelope is None:
                self._line("ap(ev)", at)
                return
            result = self.src.construct(envelope, [args[name] for name in order], at)
            self._line(f"ap({result})", at)
            self._line("off += 1", at)

        self.blocks(events["items"], indent, event_body, pairs=False)
