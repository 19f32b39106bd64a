"""The whole `config.toml`: one Config of every section, read and validated at once."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import model_validator

from ..errors import ConfigError
from ..vault.perms import check_private
from .budget import BudgetConfig
from .channels import ChannelsConfig
from .console import ConsoleConfig
from .llm import LLMConfig
from .loop import LoopConfig
from .mcp import McpConfig
from .processes import HookConfig, SandboxConfig, SessionsConfig
from .section import Section
from .tasks import ApprovalsConfig, JournalConfig, RecoveryConfig, SchedulerConfig
from .validation import validate_model
from .vault import VaultConfig


class Config(Section):
    recovery: RecoveryConfig = RecoveryConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    vault: VaultConfig = VaultConfig()
    journal: JournalConfig = JournalConfig()
    llm: LLMConfig = LLMConfig()
    sessions: SessionsConfig = SessionsConfig()
    loop: LoopConfig = LoopConfig()
    mcp: McpConfig = McpConfig()
    channels: ChannelsConfig = ChannelsConfig()
    sandbox: SandboxConfig = SandboxConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    console: ConsoleConfig = ConsoleConfig()
    hooks: list[HookConfig] = []
    budget: BudgetConfig = BudgetConfig()

    @model_validator(mode="after")
    def _thinking_fits_a_loop_call(self) -> Config:
        # a loop call's max_tokens is the least of the two keys: a budget at or above it
        # would pass [llm]'s own check and then fail every model call of every loop task
        limit = min(self.llm.max_tokens, self.loop.reserve_tokens)
        for tier, budget in self.llm.tiers.thinking().items():
            if budget >= limit:
                raise ValueError(
                    f"llm.tiers.{tier}.thinking.budget_tokens ({budget}) must be less than "
                    f"both llm.max_tokens ({self.llm.max_tokens}) and loop.reserve_tokens "
                    f"({self.loop.reserve_tokens}): a loop call's answer gets the lesser "
                    "of the two, and the thinking is part of it"
                )
        return self

    @classmethod
    def load(cls, path: Path) -> Config:
        """Read and validate `path`; a missing file means all defaults."""
        if not path.exists():
            return cls()
        check_private(path)  # settings another user could edit are refused, not trusted
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(str(path), "", f"not valid TOML: {exc}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(str(path), "", f"cannot be read: {exc}") from None
        return validate_model(cls, data, path)
