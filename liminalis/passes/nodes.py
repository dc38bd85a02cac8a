"""The built-in node types: generic steps any pass is assembled from.

=================== ========================== ========= ======================================
type                inputs                     output    params
=================== ========================== ========= ======================================
``select-documents`` (none)                    views     ``types``, ``folders``, ``views``
``split``           ``views``: views           texts     ``by``: sentences | sections | whole
``prompt-model``    ``items``: texts           texts     ``prompt`` ($text $title $doc_id $type
                                                         $heading $path), ``system``, ``role``,
                                                         ``max_tokens``, ``max_chars`` (cuts
                                                         $text to its head)
``parse-json``      ``items``: texts           records   ``schema`` (a small JSON Schema subset)
``write-facts``     ``records``: records       facts     ``key`` or ``key_field``,
                                                         ``value_field``
``callable``        the hook's                 the hook's ``hook``: a name given to
                                                         :meth:`NodeRegistry.register_hook`
=================== ========================== ========= ======================================

``extract-entities``, ``write-summary`` and ``tag-motifs`` are names reserved for the knowledge
module (:data:`~liminalis.passes.registry.PLACEHOLDERS`); its ``install(registry)`` adds them to
the registry of the ``Passes`` a ``KnowledgePasses`` is built on.

Prompt templates use ``string.Template`` (``$text``), not ``str.format``: a prompt asking for
JSON is full of braces.
"""

from __future__ import annotations

import json
import logging
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from liminalis.passes.registry import (
    ANY,
    CALLABLE,
    FACTS,
    RECORDS,
    TEXTS,
    VIEWS,
    DocView,
    NodeContext,
    NodeRegistry,
    Piece,
    Record,
)
from liminalis.routing.roles import BACKGROUND_ROLES
from liminalis.store.passes import Fact
from liminalis.text import split_sentences

__all__ = ["builtin_registry", "install", "check_schema", "schema_errors"]

_log = logging.getLogger(__name__)

_VIEW_KINDS = ("all", "shared", "gm", "lens")


def _strings(params: Mapping[str, Any], key: str) -> list[str]:
    value = params.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"params.{key} must be a string or a list of strings")
    return list(value)


# -- select-documents ------------------------------------------------------------------------


def _check_select(params: Mapping[str, Any]) -> None:
    _strings(params, "types")
    _strings(params, "folders")
    if params.get("views", "all") not in _VIEW_KINDS:
        raise ValueError(f"params.views must be one of {', '.join(_VIEW_KINDS)}")


def _view_kind(view: DocView) -> str:
    _, _, key = view.view_id.partition("//")
    return "shared" if not key else ("gm" if key == "gm" else "lens")


async def _select_documents(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[DocView, ...]:
    """The pending document's views the filters keep (the executor hands one document at a
    time: it alone decides what is pending)."""
    types = {t.lower() for t in _strings(ctx.params, "types")}
    folders = [f.strip("/") + "/" for f in _strings(ctx.params, "folders")]
    kind = ctx.params.get("views", "all")
    return tuple(
        v
        for v in ctx.document.views
        if (not types or v.type.lower() in types)
        and (not folders or any(v.path.startswith(f) for f in folders))
        and (kind == "all" or _view_kind(v) == kind)
    )


# -- split -----------------------------------------------------------------------------------

_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _check_split(params: Mapping[str, Any]) -> None:
    if params.get("by", "sections") not in {"sentences", "sections", "whole"}:
        raise ValueError("params.by must be sentences, sections or whole")


def _sections(text: str) -> list[tuple[str, str]]:
    """``(heading, body)`` per Markdown heading; the text before the first is its own piece."""
    heads = list(_HEADING.finditer(text))
    out: list[tuple[str, str]] = []
    start, heading = 0, ""
    for m in heads:
        if text[start : m.start()].strip():
            out.append((heading, text[start : m.start()].strip()))
        start, heading = m.start(), m.group(1).strip()
    if text[start:].strip():
        out.append((heading, text[start:].strip()))
    return out


async def _split(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Piece, ...]:
    by = ctx.params.get("by", "sections")
    out: list[Piece] = []
    for view in inputs["views"]:
        if by == "whole":
            out.append(Piece(view=view, text=view.text, heading=view.title))
        elif by == "sentences":
            for i, (s, e, _) in enumerate(split_sentences(view.text)):
                out.append(Piece(view=view, text=view.text[s:e], index=i))
        else:
            for i, (heading, body) in enumerate(_sections(view.text)):
                out.append(Piece(view=view, text=body, index=i, heading=heading))
    return tuple(out)


# -- prompt-model ----------------------------------------------------------------------------


def _check_prompt(params: Mapping[str, Any]) -> None:
    if not isinstance(params.get("prompt"), str) or not params["prompt"].strip():
        raise ValueError("params.prompt (the template, e.g. 'List the NPCs in: $text') is required")
    if not isinstance(params.get("system", ""), str):
        raise ValueError("params.system must be a string")
    role = params.get("role", "extract")
    if not isinstance(role, str) or role not in BACKGROUND_ROLES:
        raise ValueError(
            f"params.role must be a background role ({', '.join(sorted(BACKGROUND_ROLES))}), "
            f"not {role!r}"
        )
    for name in ("max_tokens", "max_chars"):
        value = params.get(name, 400)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"params.{name} must be a positive integer")


async def _prompt_model(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Piece, ...]:
    template = string.Template(ctx.params["prompt"])
    system = str(ctx.params.get("system", ""))
    role = str(ctx.params.get("role", "extract"))
    max_tokens = int(ctx.params.get("max_tokens", 400))
    # A whole transcript would blow a call's tokens cap: the head is what a bounded call reads.
    max_chars = ctx.params.get("max_chars")
    out: list[Piece] = []
    for piece in inputs["items"]:
        text = piece.text if max_chars is None else piece.text[: int(max_chars)]
        prompt = template.safe_substitute(
            text=text,
            title=piece.view.title,
            doc_id=piece.view.doc_id,
            type=piece.view.type,
            path=piece.view.path,
            heading=piece.heading,
        )
        reply = await ctx.complete(system=system, prompt=prompt, role=role, max_tokens=max_tokens)
        out.append(Piece(view=piece.view, text=reply, index=piece.index, heading=piece.heading))
    return tuple(out)


# -- parse-json ------------------------------------------------------------------------------

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}
_SCHEMA_KEYS = frozenset({"type", "required", "properties", "items", "enum"})


def check_schema(schema: object, where: str = "schema") -> None:
    """Refuse a schema the small validator would not understand (at save, not per document)."""
    if not isinstance(schema, dict):
        raise ValueError(f"{where} must be an object")
    unknown = set(schema) - _SCHEMA_KEYS
    if unknown:
        raise ValueError(f"{where}: unsupported keywords {sorted(unknown)}")
    if "type" in schema and schema["type"] not in _JSON_TYPES:
        raise ValueError(f"{where}.type must be one of {sorted(_JSON_TYPES)}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValueError(f"{where}.required must be a list of names")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise ValueError(f"{where}.properties must be an object")
    for name, sub in props.items():
        check_schema(sub, f"{where}.properties.{name}")
    if "items" in schema:
        check_schema(schema["items"], f"{where}.items")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise ValueError(f"{where}.enum must be a list")


def schema_errors(value: object, schema: Mapping[str, Any], where: str = "$") -> list[str]:
    """What ``value`` breaks of ``schema`` (``type``, ``required``, ``properties``, ``items``,
    ``enum``): a deliberately small subset of JSON Schema, enough to refuse a malformed reply."""
    errors: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        ok = isinstance(value, _JSON_TYPES[kind]) and not (
            kind in {"number", "integer"} and isinstance(value, bool)
        )
        if not ok:
            return [f"{where}: expected {kind}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        errors += [f"{where}: missing {r!r}" for r in schema.get("required", []) if r not in value]
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                errors += schema_errors(value[name], sub, f"{where}.{name}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{where}[{i}]")
    return errors


def _check_parse(params: Mapping[str, Any]) -> None:
    if "schema" in params:
        check_schema(params["schema"], "params.schema")


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def _json_of(text: str) -> object:
    """The JSON value in a model's reply: the whole reply, a fenced block, or the outermost
    object or array in it (models wrap JSON in prose)."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    for open_, close in (("{", "}"), ("[", "]")):
        s, e = text.find(open_), text.rfind(close)
        if 0 <= s < e:
            candidates.append(text[s : e + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except ValueError:
            continue
    raise ValueError("no JSON value in the reply")


async def _parse_json(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Record, ...]:
    """One record per JSON object (a reply that is an array gives one per element); a reply
    that is not JSON, or breaks the schema, is dropped and its error recorded in the trace."""
    schema: Mapping[str, Any] = ctx.params.get("schema", {"type": "object"})
    out: list[Record] = []
    for piece in inputs["items"]:
        where = f"{piece.view.view_id}#{piece.index}"
        try:
            value = _json_of(piece.text)
        except ValueError as exc:
            ctx.error(f"{where}: {exc}")
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict):
                ctx.error(f"{where}: expected an object, got {type(item).__name__}")
                continue
            errors = schema_errors(item, schema)
            if errors:
                ctx.error(f"{where}: " + "; ".join(errors[:3]))
                continue
            out.append(Record(view=piece.view, data=item, index=piece.index))
    return tuple(out)


# -- write-facts -----------------------------------------------------------------------------


def _check_write(params: Mapping[str, Any]) -> None:
    key, key_field = params.get("key"), params.get("key_field")
    if (key is None) == (key_field is None):
        raise ValueError("give exactly one of params.key (a fixed key) or params.key_field")
    for name in ("key", "key_field", "value_field"):
        if name in params and (not isinstance(params[name], str) or not params[name].strip()):
            raise ValueError(f"params.{name} must be a non-empty string")


async def _write_facts(ctx: NodeContext, inputs: Mapping[str, Any]) -> tuple[Fact, ...]:
    """A fact per record, with the visibility of the view the record came from: a GM view's
    facts are GM-only, a shared view's are what that view is."""
    key, key_field = ctx.params.get("key"), ctx.params.get("key_field")
    value_field = ctx.params.get("value_field")
    facts: list[Fact] = []
    for rec in inputs["records"]:
        where = f"{rec.view.view_id}#{rec.index}"
        fact_key = key if key is not None else rec.data.get(key_field)
        if not isinstance(fact_key, str) or not fact_key.strip():
            ctx.error(f"{where}: no string key in field {key_field!r}")
            continue
        if value_field is not None and value_field not in rec.data:
            ctx.error(f"{where}: no field {value_field!r}")
            continue
        value = rec.data[value_field] if value_field is not None else dict(rec.data)
        facts.append(
            Fact(
                pass_id=ctx.pass_id,
                doc_id=rec.view.doc_id,
                view_id=rec.view.view_id,
                key=fact_key.strip(),
                value=value,
                visibility=rec.view.visibility,
            )
        )
    ctx.emit(facts)
    return tuple(facts)


# -- callable --------------------------------------------------------------------------------


async def _callable(ctx: NodeContext, inputs: Mapping[str, Any]) -> Any:
    hook = ctx.registry.hooks[ctx.params["hook"]]
    return await hook.run(ctx, inputs)


def _check_callable(params: Mapping[str, Any]) -> None:
    if not isinstance(params.get("hook"), str):
        raise ValueError("params.hook must name a registered hook")


def install(registry: NodeRegistry) -> None:
    """Register the built-in node types in ``registry``."""
    builtins: Sequence[tuple[str, dict[str, str], str, Any, Any, str]] = (
        ("select-documents", {}, VIEWS, _select_documents, _check_select, "a document's views"),
        ("split", {"views": VIEWS}, TEXTS, _split, _check_split, "sentences or sections"),
        ("prompt-model", {"items": TEXTS}, TEXTS, _prompt_model, _check_prompt, "a model call"),
        ("parse-json", {"items": TEXTS}, RECORDS, _parse_json, _check_parse, "JSON records"),
        ("write-facts", {"records": RECORDS}, FACTS, _write_facts, _check_write, "facts"),
        (CALLABLE, {}, ANY, _callable, _check_callable, "a registered hook"),
    )
    for name, inputs, output, run, check, description in builtins:
        registry.register(name, inputs, output, run, check=check, description=description)


def builtin_registry() -> NodeRegistry:
    """A new registry holding the built-in node types: what an executor runs when its builder
    hands it no registry of its own. A fresh one each call, so what one caller adds stays its own."""
    registry = NodeRegistry()
    install(registry)
    return registry
