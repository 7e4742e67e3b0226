"""Request declarations: one table that both validates requests and becomes the OpenAPI schema.

Every route states its body and query fields here; the handlers receive values checked
against exactly these declarations, and ``openapi()`` renders the same objects.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

INT = "integer"
STR = "string"
ANY = "any"  # any JSON value, bounded only in size
_DIGITS = re.compile(r"-?[0-9]{1,40}")  # bounded: int() of thousands of digits raises


class Invalid(ValueError):
    """A request value that breaks its declaration; the message names the field."""


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
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise Invalid(f"{self.name} {self.description[0].lower()}{self.description[1:]}")
        return value

    def check_query(self, text: str) -> Any:
        """A query-string value: integers are written in plain decimal digits."""
        if self.kind == INT:
            if not _DIGITS.fullmatch(text):
                raise Invalid(f"{self.name} must be an integer, got {text!r}")
            return self.check(int(text))
        return self.check(text)

    def openapi(self) -> dict:
        schema: dict[str, Any] = {"description": self.description}
        if self.kind != ANY:
            schema["type"] = self.kind
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if self.pattern is not None:
            schema["pattern"] = self.pattern
        if self.default is not None:
            schema["default"] = self.default
        return schema


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

    def parse_body(self, raw: bytes) -> dict[str, Any]:
        """Decode and check the JSON body; unknown fields are ignored, as clients add their own."""
        if self.body is None:
            return {}
        if not raw.strip():
            data: Any = {}
        else:
            try:
                data = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                raise Invalid("body must be a JSON object; this is not valid JSON") from None
            except RecursionError:  # nesting deeper than the decoder's stack allows
                raise Invalid("body must be a JSON object; this one nests too deeply") from None
        if not isinstance(data, dict):
            raise Invalid(f"body must be a JSON object, got {_json_kind(data)}")
        out: dict[str, Any] = {}
        for f in self.body:
            if f.name in data and data[f.name] is not None:
                out[f.name] = f.check(data[f.name])
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


def openapi(routes: list[Route], title: str, version: str, description: str) -> dict:
    """The OpenAPI 3.1 document of ``routes``."""
    paths: dict[str, dict] = {}
    for r in routes:
        op: dict[str, Any] = {"operationId": r.operation, "summary": r.summary, "tags": [r.tag]}
        params = [{"name": name, "in": "path", "required": True, "schema": {"type": STR}}
                  for name in re.findall(r"\{(\w+)\}", r.path)]
        params += [{"name": f.name, "in": "query", "required": f.required,
                    "description": f.description, "schema": f.openapi()} for f in r.query]
        if params:
            op["parameters"] = params
        if r.body is not None:
            op["requestBody"] = {"required": any(f.required for f in r.body), "content": {
                "application/json": {"schema": {
                    "type": "object",
                    "properties": {f.name: f.openapi() for f in r.body},
                    "required": [f.name for f in r.body if f.required]}}}}
        if r.auth:
            op["security"] = [{"ApiKey": []}, {"Bearer": []}]
        media = "application/json" if r.json_response else "text/html"
        op["responses"] = {
            str(code): ({"description": text, "content": {media: {"schema": {"type": "object"}}}}
                        if code < 400 else
                        {"description": text, "content": {"application/json": {
                            "schema": {"$ref": f"#/components/schemas/{r.error_schema}"}}}})
            for code, text in sorted(r.responses.items())}
        paths.setdefault(r.path, {})[r.method.lower()] = op
    return {
        "openapi": "3.1.0",
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
