"""http.request: GET is a Read; POST/PUT/PATCH/DELETE are Writes carrying an Idempotency-Key."""

from __future__ import annotations

from typing import Any, ClassVar

from ..errors import ToolFailed
from ..journal.records import Idempotency, Semantics
from .base import ToolContext, check_args
from .hosts import send

_READ_METHODS = {"GET", "HEAD", "OPTIONS"}
_WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
# idempotent by HTTP's own semantics (RFC 9110 §9.2.2): repeating one has the same effect
_IDEMPOTENT_METHODS = {"PUT", "DELETE"}
_MAX_BODY = 64 * 1024


class HttpRequest:
    name: ClassVar[str] = "http.request"
    description: ClassVar[str] = (
        "HTTP request. Writes send an Idempotency-Key derived from the task and step, "
        "so a retry after a crash is recognised by the server."
    )
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1, "description": "http:// or https:// URL"},
            "method": {
                "type": "string",
                "enum": ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"],
                "default": "GET",
            },
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "header name -> value",
            },
            "body": {"type": "string", "description": "the request body as text"},
            "json": {"description": "a JSON request body (instead of body)"},
            "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "default": 30},
        },
        "required": ["url"],
        "additionalProperties": False,
        # one body: a plan giving both would have one of them silently dropped
        "not": {"required": ["body", "json"]},
    }
    result_label: ClassVar[str] = "Raw"

    def semantics(self, args: dict[str, Any]) -> Semantics:
        method = str(args.get("method", "GET")).upper()
        return Semantics.Read if method in _READ_METHODS else Semantics.Write

    # every write carries an Idempotency-Key; whether the far side honours it for a
    # POST or PATCH is the template's word (its [idempotency] trusted_key_hosts)
    sends_idempotency_key: ClassVar[bool] = True

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        method = str(args.get("method", "GET")).upper()
        if method in _READ_METHODS or method in _IDEMPOTENT_METHODS:
            return Idempotency.key
        return Idempotency.none

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        method = str(args.get("method", "GET")).upper()
        url = str(args["url"])
        headers = {str(k): str(v) for k, v in args.get("headers", {}).items()}
        for cred in ctx.credentials:  # the template's, for this host only
            if cred.tool == self.name and cred.fits_url(url):
                for name, value in cred.headers:
                    for k in [k for k in headers if k.lower() == name.lower()]:
                        del headers[k]
                    headers[name] = ctx.expand(value)
        if method in _WRITE_METHODS:
            headers.setdefault("Idempotency-Key", ctx.idempotency_key)
        kwargs: dict[str, Any] = {"headers": headers}
        if "json" in args:
            kwargs["json"] = args["json"]
        elif "body" in args:
            kwargs["content"] = str(args["body"]).encode()
        target = None
        if ctx.hosts is not None:  # the loop's rules: judged by address, sent there
            try:
                target = await ctx.hosts.target(url)
            except ToolFailed as exc:
                raise ToolFailed(f"{self.name}: {method} {url}: {exc}") from None
            for k in [k for k in headers if k.lower() == "host"]:
                del headers[k]
        timeout = float(args.get("timeout_seconds", 30))
        import httpx  # imported on first use: it costs a restart tens of milliseconds

        try:
            async with httpx.AsyncClient(timeout=timeout) as client:
                if target is None:
                    resp = await client.request(method, url, **kwargs)
                else:
                    resp = await send(client, method, target, **kwargs)
        except httpx.HTTPError as exc:
            raise ToolFailed(f"{self.name}: {method} {args['url']} failed: {exc!r}") from None
        body = resp.text[:_MAX_BODY]
        if resp.status_code >= 400:
            raise ToolFailed(
                f"{self.name}: {method} {args['url']} answered HTTP {resp.status_code}: "
                f"{body[:200]}"
            )
        return {"status": resp.status_code, "body": body}

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        return None
