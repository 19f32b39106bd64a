"""`config.toml`: the kernel's settings, validated on load.

An invalid value is refused at startup with the file and the dotted key named;
nothing is guessed and nothing is rewritten.

The modules: `root` (the whole file: `Config`, read and validated), one module per part
of the kernel a section configures (`tasks`: recovery, approvals, scheduler, journal;
`vault`; `llm`; `loop`; `channels`; `console`; `processes`: sessions, sandbox, hooks), `section`
(the sections' common base), `validation` (every bad key named) and `default_toml`
(the file a new home starts with).
"""

from .channels import (
    CHANNEL_ORDER,
    INBOUND_ONLY,
    ChannelsConfig,
    SlackConfig,
    TelegramConfig,
    WebhookRoute,
    WebhooksConfig,
    WhatsAppConfig,
)
from .console import ConsoleConfig
from .default_toml import DEFAULT_CONFIG_TOML
from .llm import LLMConfig, LLMPrice, LLMRetryConfig, LLMTiers, LocalLLMConfig
from .loop import LoopAnomalyConfig, LoopConfig, LoopPolicyConfig
from .processes import HookConfig, SandboxConfig, SessionsConfig
from .root import Config
from .tasks import ApprovalsConfig, JournalConfig, RecoveryConfig, SchedulerConfig
from .validation import validate_model
from .vault import PostgresConfig, VaultBackupConfig, VaultConfig, dsn_has_password

__all__ = [
    "CHANNEL_ORDER",
    "DEFAULT_CONFIG_TOML",
    "INBOUND_ONLY",
    "ApprovalsConfig",
    "ChannelsConfig",
    "Config",
    "ConsoleConfig",
    "HookConfig",
    "JournalConfig",
    "LLMConfig",
    "LLMPrice",
    "LLMRetryConfig",
    "LLMTiers",
    "LocalLLMConfig",
    "LoopAnomalyConfig",
    "LoopConfig",
    "LoopPolicyConfig",
    "PostgresConfig",
    "RecoveryConfig",
    "SandboxConfig",
    "SchedulerConfig",
    "SessionsConfig",
    "SlackConfig",
    "TelegramConfig",
    "VaultBackupConfig",
    "VaultConfig",
    "WebhookRoute",
    "WebhooksConfig",
    "WhatsAppConfig",
    "dsn_has_password",
    "validate_model",
]
