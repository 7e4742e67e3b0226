"""Request declarations: one table that both validates requests and becomes the OpenAPI schema.

Every route states its body and query fields here; the handlers receive values checked
against exactly these declarations, and ``openapi()`` renders the same objects.
"""

from __future__ import annotations

__all__ = [
    "ANY", "BOOLEAN", "Field", "HandlerArgs", "INT", "INTEGER", "Invalid", "MAP", "NUMBER",
    "JSON", "NotFinite", "Route",
    "STR", "TEXT", "Unknown", "arr", "encodable", "json_value", "maybe", "obj", "openapi",
    "string",
]

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, TypedDict

from engine.errors import SokoforgeError

# A JSON value as ``json_value`` decodes one.
JSON = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]


class HandlerArgs(TypedDict, total=False):
    """A request's arguments as its route's fields parsed them (path, query and body): a
    handler reads the ones its route declares. A field some route lets out is None when left
    out; a route that requires it, or parses it otherwise, has a TypedDict of its own (the
    browser's pages, ARC's actions)."""

    action: int
    card_id: str
    episode: int | None
    episode_step: int | None
    file: str
    game: str | None
    game_id: str
    guid: str | None
    limit: int
    name: str
    opaque: JSON
    parallel: int
    reasoning: JSON
    scorecard_id: str
    session_id: str
    source: str | None
    source_url: str | None
    step: int | None
    tags: list[str] | None
    version: str | None
    x: int | None
    y: int | None


INT = "integer"
STR = "string"
ANY = "any"  # any JSON value, bounded only in size
_DIGITS = re.compile(r"-?[0-9]{1,40}")  # bounded: int() of thousands of digits raises


class Invalid(SokoforgeError, ValueError):
    """A request value that breaks its declaration; the message names the field."""


class Unknown(Invalid):
    """An id of the wrong shape: it names nothing served, so it is answered 404 like an id
    of the right shape that names nothing; ``field`` is the field that held it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class NotFinite(Invalid):
    """A number JSON cannot hold (``NaN``, ``Infinity``, or one too large for a double, such
    as ``1e999``): refused wherever it stands in a body, so it is never stored or echoed."""


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise NotFinite(f"body holds the number {text[:40]}, which is out of range; JSON numbers "
                        "must be finite")
    return number


def _no_constant(name: str) -> float:
    raise NotFinite(f"body holds {name}, which is not JSON; numbers must be finite")


def json_value(raw: bytes | str) -> Any:
    """``raw`` decoded as strict JSON: ``NotFinite`` for a non-finite number anywhere in it,
    ``ValueError`` for anything else that is not JSON."""
    return json.loads(raw, parse_float=_finite, parse_constant=_no_constant)


@dataclass(frozen=True)
class Field:
    """One body or query field: JSON type, bounds and a description."""

    name: str
    kind: str
    description: str
    required: bool = True
    minimum: int | None = None
    maximum: int | None = None
    pattern: str | None = None
    default: Any = None
    max_bytes: int | None = None  # for ANY: the compact JSON encoding's size limit
    nullable: bool = False  # a JSON null in a body is taken as the field left out
    refers_to: str | None = None  # an id of this kind of thing: a bad shape is ``Unknown``

    def check(self, value: Any) -> Any:
        """The value if it fits the declaration, else ``Invalid`` naming the field."""
        if self.kind == ANY:
            size = len(json.dumps(value, separators=(",", ":")).encode())
            if self.max_bytes is not None and size > self.max_bytes:
                raise Invalid(f"{self.name} is {size} bytes of JSON; at most {self.max_bytes}")
            return value
        if self.kind == INT:
            # bool is a subclass of int in Python; JSON true/false is not an integer here
            if isinstance(value, bool) or not isinstance(value, int):
                raise Invalid(f"{self.name} must be a JSON integer, got {_json_kind(value)}")
            if self.minimum is not None and value < self.minimum:
                raise Invalid(f"{self.name} must be at least {self.minimum}, got {value}")
            if self.maximum is not None and value > self.maximum:
                raise Invalid(f"{self.name} must be at most {self.maximum}, got {value}")
            return value
        if not isinstance(value, str):
            raise Invalid(f"{self.name} must be a JSON string, got {_json_kind(value)}")
        fits = self.pattern is None or re.fullmatch(self.pattern, value)
        if self.refers_to is not None and not (fits and encodable(value)):
            raise Unknown(f"no {self.refers_to} {value!r}", self.name)
        if not encodable(value):  # JSON escapes can spell a lone surrogate, which no store takes
            raise Invalid(f"{self.name} must be Unicode text; it holds an unpaired surrogate")
        if not fits:
            raise Invalid(f"{self.name} {self.description[0].lower()}{self.description[1:]}")
        return value

    def check_query(self, text: str) -> Any:
        """A query-string value: integers are written in plain decimal digits."""
        if self.kind == INT:
            if not _DIGITS.fullmatch(text):
                raise Invalid(f"{self.name} must be an integer, got {text!r}")
            return self.check(int(text))
        return self.check(text)

    def openapi(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"description": self.description}
        if self.kind != ANY:
            schema["type"] = self.kind
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if self.pattern is not None:
            schema["pattern"] = f"^(?:{self.pattern})$"  # JSON Schema patterns are unanchored
        if self.default is not None:
            schema["default"] = self.default
        if self.nullable:
            schema["nullable"] = True
        return schema


def encodable(text: str) -> bool:
    """Whether ``text`` is Unicode text that UTF-8 can carry (no unpaired surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class Route:
    """One operation: method, path, whether it needs a key, and its declared inputs."""

    operation: str
    method: str
    path: str
    summary: str
    auth: bool = False
    body: tuple[Field, ...] | None = None
    query: tuple[Field, ...] = ()
    responses: dict[int, str] = field(default_factory=dict)
    tag: str = "protocol"
    json_response: bool = True
    error_schema: str = "Error"  # the components schema its refusals follow
    head: bool = True  # a GET answers HEAD too, unless the GET changes something
    params: tuple[Field, ...] = ()  # the path's {parameters}, each a string of a known shape
    # the JSON schema of each 2xx answer
    bodies: dict[int, dict[str, Any]] = field(default_factory=dict)
    invalid_status: int = 422  # the status of a body or query that breaks its declaration
    store: bool = True  # it reads or writes the store, so a store that cannot be used is a 503
    # what a 2xx answer leads to: link name -> (operation, {path parameter: JSON pointer into
    # the answer}), so a client (or a fuzzer) can follow ids from one call to the next
    links: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        named = re.findall(r"\{(\w+)\}", self.path)
        if named != [f.name for f in self.params]:
            raise ValueError(f"{self.operation}: path parameters {named} are not declared in "
                             "params, in order")
        if self.json_response:
            missing = [c for c in self.responses if c < 300 and c not in self.bodies]
            if missing:
                raise ValueError(f"{self.operation}: no schema for its answers {missing}")

    def parse_path(self, match_info: Any) -> dict[str, Any]:
        """The path parameters, each of its declared shape (``Unknown`` if not)."""
        return {f.name: f.check(match_info[f.name]) for f in self.params}

    def parse_body(self, raw: bytes) -> dict[str, Any]:
        """Decode and check the JSON body; unknown fields are ignored, as clients add their own."""
        if self.body is None:
            return {}
        if not raw.strip():
            data: Any = {}
        else:
            try:
                data = json_value(raw)
            except NotFinite:  # a ValueError too, but one that says what is wrong
                raise
            except (ValueError, UnicodeDecodeError):
                raise Invalid("body must be a JSON object; this is not valid JSON") from None
            except RecursionError:  # nesting deeper than the decoder's stack allows
                raise Invalid("body must be a JSON object; this one nests too deeply") from None
        if not isinstance(data, dict):
            raise Invalid(f"body must be a JSON object, got {_json_kind(data)}")
        out: dict[str, Any] = {}
        for f in self.body:
            value = data.get(f.name)
            # null stands for "left out" only where declared nullable (or required: then the
            # refusal says it is required); elsewhere it is a value of the wrong type
            if value is not None or (f.name in data and not (f.nullable or f.required)):
                out[f.name] = f.check(value)
            elif f.required:
                raise Invalid(f"{f.name} is required")
            else:
                out[f.name] = f.default
        return out

    def parse_query(self, query: Any) -> dict[str, Any]:
        """Check the declared query parameters; a repeated parameter is refused."""
        out: dict[str, Any] = {}
        for f in self.query:
            values = query.getall(f.name, [])
            if len(values) > 1:
                raise Invalid(f"{f.name} is given {len(values)} times; give it once")
            if values:
                out[f.name] = f.check_query(values[0])
            elif f.required:
                raise Invalid(f"{f.name} is required")
            else:
                out[f.name] = f.default
        return out


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}" if len(value) < 40 else "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


# JSON schemas of answers, in the OpenAPI 3.0 dialect: its ``integer`` refuses 2.0, as the
# server does, and ``nullable`` says where null may stand
def obj(required: dict[str, dict[str, Any]], optional: dict[str, dict[str, Any]] | None = None,
        nullable: bool = False) -> dict[str, Any]:
    """An object schema: ``required`` properties always present, ``optional`` ones maybe."""
    schema: dict[str, Any] = {"type": "object", "properties": {**required, **(optional or {})}}
    if required:
        schema["required"] = list(required)
    if nullable:
        schema["nullable"] = True
    return schema


def arr(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def maybe(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null."""
    return {**schema, "nullable": True}


def string(pattern: str | None = None, enum: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if pattern is not None:
        schema["pattern"] = f"^(?:{pattern})$"
    if enum is not None:
        schema["enum"] = enum
    return schema


INTEGER = {"type": "integer"}
NUMBER = {"type": "number"}
BOOLEAN = {"type": "boolean"}
TEXT = {"type": "string"}
MAP = {"type": "object"}

_AUTO_STATUS = {400: "a body that is not what its Content-Encoding says, or that holds a "
                     "non-finite number (NaN, Infinity, 1e999)",
                401: "missing or unknown key", 404: "nothing served under this path",
                408: "the body did not arrive in time", 413: "request body too large",
                415: "a body in a Content-Encoding other than gzip (or x-gzip)",
                503: "the store cannot be used now (its disk full or failing, its file replaced "
                     "under the server): the detail says which, and nothing was changed"}


def _responses(r: Route) -> dict[int, str]:
    """Every status the route can answer: its declared ones, and those its inputs bring."""
    out = dict(r.responses)
    if r.auth:
        out.setdefault(401, _AUTO_STATUS[401])
    if r.params:
        out.setdefault(404, _AUTO_STATUS[404])
    if r.body is not None:
        out.setdefault(400, _AUTO_STATUS[400])
        out.setdefault(408, _AUTO_STATUS[408])
        out.setdefault(413, _AUTO_STATUS[413])
        out.setdefault(415, _AUTO_STATUS[415])
        out.setdefault(r.invalid_status, "malformed body: not a JSON object, or a field that "
                       "breaks its declaration")
    if r.query:
        out.setdefault(r.invalid_status, "a query parameter that breaks its declaration")
    if r.store:
        out.setdefault(503, _AUTO_STATUS[503])
    return out


def _response(r: Route, code: int, text: str) -> dict[str, Any]:
    if code >= 400:
        answer: dict[str, Any] = {"description": text, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{r.error_schema}"}}}}
        if not r.json_response:  # a page says why it cannot be shown as a page
            answer["content"]["text/html"] = {"schema": TEXT}
        if code == 429:
            answer["headers"] = {"Retry-After": {
                "description": "seconds until trying again makes sense", "required": True,
                "schema": {"type": "integer", "minimum": 0}}}
        return answer
    if not r.json_response:
        return {"description": text, "content": {"text/html": {"schema": TEXT}}}
    answer = {"description": text, "content": {"application/json": {"schema": r.bodies[code]}}}
    if r.links:
        answer["links"] = {name: {"operationId": op, "parameters": {
            param: f"$response.body#{pointer}" for param, pointer in params.items()}}
            for name, (op, params) in r.links.items()}
    return answer


def openapi(routes: list[Route], title: str, version: str, description: str) -> dict[str, Any]:
    """The OpenAPI 3.0 document of ``routes``: every input and every answer the server gives."""
    paths: dict[str, dict[str, Any]] = {}
    for r in routes:
        op: dict[str, Any] = {"operationId": r.operation, "summary": r.summary, "tags": [r.tag]}
        params = [{"name": f.name, "in": "path", "required": True,
                   "description": f.description, "schema": f.openapi()} for f in r.params]
        params += [{"name": f.name, "in": "query", "required": f.required,
                    "description": f.description, "schema": f.openapi()} for f in r.query]
        if params:
            op["parameters"] = params
        if r.body is not None:
            op["requestBody"] = {"required": any(f.required for f in r.body), "content": {
                "application/json": {"schema": {
                    "type": "object",
                    "properties": {f.name: f.openapi() for f in r.body},
                    **({"required": [f.name for f in r.body if f.required]}
                       if any(f.required for f in r.body) else {})}}}}
        if r.auth:
            op["security"] = [{"ApiKey": []}, {"Bearer": []}]
        op["responses"] = {str(code): _response(r, code, text)
                           for code, text in sorted(_responses(r).items())}
        paths.setdefault(r.path, {})[r.method.lower()] = op
    return {
        "openapi": "3.0.3",
        "info": {"title": title, "version": version, "description": description},
        "paths": paths,
        "components": {
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["detail"], "properties": {
                    "detail": {"type": "string", "description": "what was wrong and what to do"}}},
                "ArcError": {"type": "object", "required": ["error", "message"], "properties": {
                    "error": {"type": "string", "description": "the ARC-AGI-3 API's error code"},
                    "message": {"type": "string",
                                "description": "what was wrong and what to do"}}}}},
    }
