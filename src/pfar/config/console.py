"""`[console]`: the web console the kernel serves (docs/console.md)."""

from __future__ import annotations

import ipaddress

from pydantic import Field, model_validator

from .section import Section


class ConsoleConfig(Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8788, ge=0, le=65535)  # 0: a free port (`pfar console` says which)
    # serving beyond loopback: with TLS (both files), or with this flag and a warning
    # in the log at every start (a home network behind a router the owner trusts)
    tls_certificate: str | None = None
    tls_key: str | None = None
    allow_plain_http_beyond_loopback: bool = False
    # how long a login lasts, and the largest request body taken
    session_hours: float = Field(12, gt=0, le=24 * 30)
    max_body_bytes: int = Field(64 << 10, ge=1024, le=1 << 20)

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def tls(self) -> bool:
        return self.tls_certificate is not None

    @model_validator(mode="after")
    def _safe_to_bind(self) -> ConsoleConfig:
        if (self.tls_certificate is None) != (self.tls_key is None):
            raise ValueError("tls_certificate and tls_key go together: give both, or neither")
        if not self.loopback and not self.tls and not self.allow_plain_http_beyond_loopback:
            raise ValueError(
                f"host {self.host!r} is beyond loopback: the owner's token and session would "
                "cross the network in the clear; give tls_certificate and tls_key, or set "
                "allow_plain_http_beyond_loopback = true on a network you trust"
            )
        return self
