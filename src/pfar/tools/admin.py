"""admin.prompt_credential: ask the owner for a credential; the task parks until it arrives."""

from __future__ import annotations

from typing import Any, ClassVar

from ..errors import ToolFailed
from ..journal.records import Idempotency, Semantics
from .base import ToolContext, check_args

CREDENTIAL_TYPES = ("integration_token", "oauth", "api_key", "app_password")


class PromptCredential:
    """Parks its task on a credential prompt unless the vault already holds the secret.

    The runner treats this tool specially: `run` is reached only once the secret
    is in the vault, and returns where it lives, never its value.
    """

    name: ClassVar[str] = "admin.prompt_credential"
    description: ClassVar[str] = "Ask the owner for a credential and store it in the vault."
    args_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "service": {"type": "string", "minLength": 1, "description": "e.g. notion"},
            "credential_type": {"type": "string", "enum": list(CREDENTIAL_TYPES)},
            "instructions": {"type": "string", "description": "how the owner gets it"},
            "vault_ref": {
                "type": "string",
                "description": "where it is stored; default vault:<service>_token",
            },
        },
        "required": ["service"],
        "additionalProperties": False,
    }
    result_label: ClassVar[str] = "Extracted"
    parks_for_credential: ClassVar[bool] = True

    def semantics(self, args: dict[str, Any]) -> Semantics:
        return Semantics.Write

    def idempotency(self, args: dict[str, Any]) -> Idempotency:
        return Idempotency.check

    def validate(self, args: dict[str, Any]) -> None:
        check_args(self.name, self.args_schema, args)

    @staticmethod
    def vault_ref(args: dict[str, Any]) -> str:
        return str(args.get("vault_ref") or f"vault:{args['service']}_token")

    @staticmethod
    def secret_name(args: dict[str, Any]) -> str:
        return PromptCredential.vault_ref(args).removeprefix("vault:")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        name = self.secret_name(args)
        if ctx.secret(name) is None:
            raise ToolFailed(f"{self.name}: secret {name!r} is still missing")
        return {"service": args["service"], "stored": self.vault_ref(args)}

    async def check(self, args: dict[str, Any], ctx: ToolContext) -> Any | None:
        if ctx.secret(self.secret_name(args)) is None:
            return None
        return {"service": args["service"], "stored": self.vault_ref(args)}
