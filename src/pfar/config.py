"""`config.toml`: the kernel's settings, validated on load.

An invalid value is refused at startup with the file and the dotted key named;
nothing is guessed and nothing is rewritten.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ConfigError, ConfigErrors
from .hook_points import TOOL_POINTS, parse_point
from .key_hints import suggestion
from .vault.perms import check_private

M = TypeVar("M", bound=BaseModel)


class _Section(BaseModel):
    # strict: a string "600" or a boolean is not a number of seconds
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


_DAY = 86_400.0
_YEAR = 365 * _DAY


class RecoveryConfig(_Section):
    """The `[recovery]` section, exactly as the persistence spec §10 names it."""

    max_task_age_seconds: int = Field(600, gt=0, le=int(_YEAR))
    shutdown_timeout_seconds: float = Field(30, ge=0, le=_DAY)
    journal_retention_completed_hours: float = Field(24, ge=0, le=24 * 3650)
    journal_retention_failed_days: float = Field(7, ge=0, le=3650)
    adapter_max_retries: int = Field(5, ge=0, le=1000)
    adapter_retry_backoff_seconds: float = Field(5, ge=0, le=_DAY)
    adapter_retry_backoff_max_seconds: float = Field(60, ge=0, le=_DAY)
    # pfar's addition: kernel deaths in a row with a task in flight and no progress
    # before the owner is asked to resume or abandon it (it runs nothing until then).
    max_recovery_attempts: int = Field(3, gt=0, le=1000)


class ApprovalsConfig(_Section):
    approval_timeout_seconds: float = Field(3600, gt=0, le=_YEAR)
    credential_prompt_timeout_seconds: float = Field(600, gt=0, le=_YEAR)


class VaultBackupConfig(_Section):
    """`[vault.backup]`: backups the running kernel makes by itself (docs/vault.md)."""

    # where they go, one new directory each (`pfar-<time>`); relative to the home; unset:
    # no scheduled backups
    dir: str | None = None
    # how often; fractions go down to 0.001 (3.6 s), which only tests want
    every_hours: float = Field(24, ge=0.001, le=24 * 365)
    # the newest this many of pfar's backups in `dir` are kept, older ones removed
    keep: int = Field(7, ge=1, le=10_000)
    # a separate key (a file `pfar vault key new` made) instead of the vault's key
    key_file: str | None = None


class PostgresConfig(_Section):
    """`[vault.postgresql]`: the server the journal lives on (docs/store.md)."""

    # a libpq DSN or URL without a password: postgresql://pfar@db.home:5432/pfar
    dsn: str = Field(min_length=1)
    # the password: the name of a secret in the vault (`pfar secret set NAME`), or of an
    # environment variable; neither: libpq's own (PGPASSWORD, ~/.pgpass, no password)
    password_secret: str | None = None
    password_env: str | None = None

    @model_validator(mode="after")
    def _no_password_in_dsn(self) -> PostgresConfig:
        if dsn_has_password(self.dsn):
            raise ValueError(
                "dsn holds a password: keep it out of config.toml, in the vault "
                "(password_secret) or the environment (password_env, or PGPASSWORD)"
            )
        if self.password_secret is not None and self.password_env is not None:
            raise ValueError("give password_secret or password_env, not both")
        return self


def dsn_has_password(dsn: str) -> bool:
    """Whether a DSN (key=value or URL) carries a password."""
    from psycopg.conninfo import conninfo_to_dict  # the DSN's own parser, libpq's rules

    try:
        return bool(conninfo_to_dict(dsn).get("password"))
    except Exception as exc:
        raise ValueError(f"not a PostgreSQL DSN ({exc})") from None


class VaultConfig(_Section):
    # where the journal lives: sessions.db in the vault, or a PostgreSQL server; secrets
    # and learnings stay in the local vault either way (docs/store.md says why)
    backend: Literal["sqlite", "postgresql"] = "sqlite"
    postgresql: PostgresConfig | None = None
    # FULL: a commit survives power loss. NORMAL trades the last commits for speed.
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    # the owner is told once when the home's disk has less free than this (0: never)
    low_space_mb: int = Field(512, ge=0, le=100_000_000)
    # kept allocated in vault/reserve and deleted when a journal commit fails, so the
    # stop and the next start find room (0: none; kernel/disk.py)
    reserve_mb: int = Field(16, ge=0, le=100_000)
    backup: VaultBackupConfig = VaultBackupConfig()

    @model_validator(mode="after")
    def _postgresql_named(self) -> VaultConfig:
        if self.backend == "postgresql" and self.postgresql is None:
            raise ValueError('backend = "postgresql" needs a [vault.postgresql] dsn')
        return self


class SchedulerConfig(_Section):
    """`[scheduler]`: how many tasks run at once (docs/config.md)."""

    # tasks whose runner runs at the same time; more wait, highest template priority
    # first (then the oldest); 0: no limit. Tasks parked on the owner count for nothing
    max_concurrent: int = Field(0, ge=0, le=10_000)
    # a loop tool call waits this long for the files, repositories and hosts it declares
    # (held by another task's call); then its result is "Resource locked by another task"
    lock_timeout_seconds: float = Field(60, gt=0, le=3600)
    # a held lock's lease: renewed by its kernel every third of it; a lock whose holder
    # stopped renewing it (a frozen kernel elsewhere) is taken after it expires
    lock_lease_seconds: float = Field(60, ge=5, le=86_400)


class JournalConfig(_Section):
    cleanup_interval_hours: float = Field(24, gt=0, le=24 * 365)


class LLMRetryConfig(_Section):
    """The error table's waits (seed 001, Phase 3): immediate, 1 s, 5 s; 30 s when overloaded."""

    backoff_seconds: list[float] = Field(default_factory=lambda: [0.0, 1.0, 5.0], min_length=1)
    overloaded_wait_seconds: float = Field(30, ge=0, le=3600)
    max_retries: int = Field(3, ge=0, le=20)


class LLMPrice(_Section):
    """Dollars per million tokens."""

    input: float = Field(0, ge=0)
    output: float = Field(0, ge=0)


class LocalLLMConfig(_Section):
    """An OpenAI-compatible local server (Ollama, vLLM, llama.cpp) for data above the
    cloud ceiling."""

    provider: Literal["openai"] = "openai"
    model: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key_secret: str = ""  # local servers often need none


class LLMTiers(_Section):
    """Models by tier (default: llm.model). Extraction uses `cheap`, planning `worker`,
    synthesis `worker`; a plan still invalid after its correction escalates to `planner`."""

    cheap: str = ""
    worker: str = ""
    planner: str = ""


class LLMConfig(_Section):
    provider: Literal["scripted", "anthropic", "openai"] = "scripted"
    # for the scripted provider: the response file, relative to $PFAR_HOME
    script: str = "scripts/default.toml"
    model: str = ""
    base_url: str = ""  # a gateway, a proxy, or an OpenAI-compatible server
    # the secret in secrets.db holding the API key (default: <provider>_api_key)
    api_key_secret: str = ""
    timeout_seconds: float = Field(60, gt=0, le=3600)
    max_tokens: int = Field(4096, gt=0, le=1_000_000)
    # one limit shared by every task; unset: 50 and 200,000 for a real provider,
    # no limit for the scripted one
    requests_per_minute: int | None = Field(None, gt=0)
    tokens_per_minute: int | None = Field(None, gt=0)
    # the limit's window (seconds): a minute; shorter only to test the limiter
    rate_window_seconds: float = Field(60, gt=0, le=3600)
    # data labelled above this never goes to a cloud provider without the owner's approval
    cloud_ceiling: Literal["public", "internal", "sensitive", "secret"] = "internal"
    retry: LLMRetryConfig = LLMRetryConfig()
    prices: dict[str, LLMPrice] = {}
    local: LocalLLMConfig | None = None
    tiers: LLMTiers = LLMTiers()

    @model_validator(mode="after")
    def _model_named(self) -> LLMConfig:
        if self.provider != "scripted" and not self.model:
            raise ValueError(f"provider {self.provider!r} needs llm.model (the model's name)")
        return self

    @property
    def key_secret(self) -> str:
        return self.api_key_secret or f"{self.provider}_api_key"


class SessionsConfig(_Section):
    """Long-lived agent sessions: the external agent command each ACTIVE session runs."""

    # argv; {session_id}, {project_path} and {thread_id} are filled in
    agent_command: list[str] = []
    # appended when a session that has run before is resumed, e.g. ["--resume", "{session_id}"]
    resume_args: list[str] = []
    stop_timeout_seconds: float = Field(10, gt=0, le=3600)


class LoopPolicyConfig(_Section):
    """Layer 1 of the agentic loop's security (seed 001, 4.1): what no loop task may do,
    whatever the owner answers. A refusal is the call's result, naming the rule."""

    blocked_tools: list[str] = []
    # paths (fnmatch patterns, relative to the task's directory or absolute) no tool
    # may read or change
    protected_paths: list[str] = [".git/*", ".env", "*.pem", "*.key"]
    # built-in protected credential paths (`~/.ssh`, `~/.aws`, ... listed in
    # docs/loop.md) a loop's file tools may use anyway, e.g. ["~/.kube"]; pfar's own
    # home is always protected
    unprotect: list[str] = []
    # regular expressions: a Bash command matching one is refused
    dangerous_commands: list[str] = [
        r"\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*f?[a-zA-Z]*\s+(/|~|\$HOME)(\s|$)",
        r":\(\)\s*\{\s*:\|:&\s*\};:",
        r"\bmkfs(\.\w+)?\b",
        r"\bdd\b[^|;&]*\bof=/dev/",
        r"\b(curl|wget)\b[^|;&]*\|\s*(ba|z)?sh\b",
        r"\bgit\s+push\b[^|;&]*--force\b",
    ]
    # the built-in checks on the parsed command (policy/commands.py: rm -r of / or the
    # home, force pushes, a pipe into a shell ...), besides the patterns above
    builtin_dangerous_commands: bool = True
    # a result of outside data (a WebFetch page) suspends, until the owner's next
    # message, the standing answers and always_allow tools that would let a write run
    tainted_writes: bool = True
    # host names (their subdomains too), addresses or networks ("10.0.0.0/8") no URL
    # may reach; an address or network is compared with every address the host has
    blocked_hosts: list[str] = []
    # loopback, private, link-local ... targets a URL may reach all the same (only
    # public addresses otherwise): an address or network, "127.0.0.1:8080", "[::1]:8080",
    # or a host name as the URL spells it ("printer.lan", "printer.lan:631")
    allowed_private_hosts: list[str] = []

    @model_validator(mode="after")
    def _hosts_parse(self) -> LoopPolicyConfig:
        if self.blocked_hosts or self.allowed_private_hosts:
            from .addresses import parse_allowed, parse_blocked  # loaded when used

            for i, entry in enumerate(self.blocked_hosts):
                _entry("blocked_hosts", i, entry, parse_blocked)
            for i, entry in enumerate(self.allowed_private_hosts):
                _entry("allowed_private_hosts", i, entry, parse_allowed)
        return self


def _entry(field: str, i: int, entry: str, parse: Any) -> None:
    try:
        parse(entry)
    except ValueError as exc:
        raise ValueError(f"{field}[{i}]: {exc}") from None


class LoopAnomalyConfig(_Section):
    """Layer 3 (seed 001, 4.1): calls that are unusual, though allowed. Each is a warning to
    the owner; with `action = "ask"`, the call also waits for the owner's yes first."""

    # a task's writes started in the last minute; 0: not checked
    max_writes_per_minute: int = Field(30, ge=0, le=100_000)
    # a host no tool call of any task has reached before
    new_hosts: bool = True
    action: Literal["warn", "ask"] = "warn"


_RULE = r"^[\w.:-]+(\(.+\))?$"  # a standing answer's pattern: `Tool` or `Tool(what)`


class LoopConfig(_Section):
    """The agentic loop (seed 001): its tools, permission prompts and drift limits."""

    # the tools a loop task offers its model
    tools: list[str] = ["Read", "Write", "Edit", "Bash", "Glob", "Grep", "WebFetch", "Task"]
    # layer 2: tools that never ask (reads inside the task's directory)
    always_allow: list[str] = ["Read", "Glob", "Grep"]
    # standing answers the owner writes as patterns: `Tool` (every call), `Tool(what)`
    # (exactly this), `Bash(npm run test:*)` (one command starting with these words),
    # `Write(src/*)` (a glob over the path or host); `deny` wins over `allow`
    allow: list[Annotated[str, Field(pattern=_RULE)]] = []
    deny: list[Annotated[str, Field(pattern=_RULE)]] = []
    # a permission prompt unanswered this long is a "No"
    permission_timeout_seconds: float = Field(300, gt=0, le=_YEAR)
    # one tool call's limit (Bash takes its own `timeout` up to this)
    tool_seconds: float = Field(600, gt=0, le=_DAY)
    # the model's context, in tokens, and the room kept for its answer
    context_tokens: int = Field(180_000, gt=1000, le=10_000_000)
    reserve_tokens: int = Field(16_000, gt=0, le=1_000_000)
    # turns kept word for word when older ones are summarized
    keep_recent_turns: int = Field(6, ge=2, le=1000)
    # drift detection (seed 001 defaults): past any of these the task is stopped and
    # the owner asked whether to continue
    max_iterations: int = Field(50, gt=0, le=100_000)
    max_tool_failures: int = Field(10, gt=0, le=100_000)
    max_minutes_without_progress: float = Field(10, gt=0, le=_DAY)
    # after this many failed tool calls in a row, the model is asked one tier up
    # (cheap -> worker -> planner) until a call works again; 0: never
    escalate_after_failures: int = Field(3, ge=0, le=1000)
    # an iteration above this many tokens is logged as a warning
    max_tokens_per_iteration: int = Field(50_000, gt=0, le=10_000_000)
    # learnings kept at a task's end: "keyword" (its marked sentences as said) or
    # "hybrid" (those candidates refined by the cheap tier; kept as said if it fails)
    learnings: Literal["keyword", "hybrid"] = "keyword"
    # subtasks (the Task tool) nest at most this deep
    max_depth: int = Field(3, ge=0, le=20)
    # worktrees of finished tasks: kept for a look after a failure, or removed
    keep_failed_worktrees: bool = True
    policy: LoopPolicyConfig = LoopPolicyConfig()
    anomaly: LoopAnomalyConfig = LoopAnomalyConfig()


class TelegramConfig(_Section):
    """`[channels.telegram]`: a bot in the owner's private chat (docs/telegram.md)."""

    enabled: bool = True
    # the vault secret holding the bot's token (`pfar secret set telegram_bot_token`)
    token_secret: str = "telegram_bot_token"
    # the only user obeyed; anything from anyone else is ignored and audited
    owner_user_id: int = Field(gt=0)
    # where pfar writes (default: the owner's private chat with the bot)
    chat_id: int | None = None
    api_url: str = "https://api.telegram.org"
    # getUpdates long-poll: how long one request waits for the owner's next update
    poll_timeout_seconds: int = Field(30, ge=0, le=50)


class WebhookRoute(_Section):
    """One path of the webhook listener: what arrives there becomes a task."""

    path: str = Field(pattern=r"^/[A-Za-z0-9_./-]{1,200}$")
    # the template its tasks run, or "loop" for a loop task in [channels] directory
    template: str
    # vault secrets holding the Standard Webhooks signing keys ("whsec_..."); more than
    # one while a key is rotated
    secrets: list[str] = Field(min_length=1)
    # the task's text: the whole body, or a JSON pointer into it ("/issue/title")
    text: str = "body"


class WebhooksConfig(_Section):
    """`[channels.webhooks]`: an HTTP listener for signed webhooks (docs/webhooks.md)."""

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=0, le=65535)
    max_body_bytes: int = Field(1 << 20, gt=0, le=64 << 20)
    # a webhook-timestamp further than this from now is refused (a replay)
    tolerance_seconds: int = Field(300, gt=0, le=86_400)
    # connections open at once (fewer when the open-file limit is low), and the time a
    # request has to arrive whole, headers and body: a flood of idle or slow connections
    # is refused or cut off instead of using up the kernel's file descriptors
    max_connections: int = Field(256, ge=1, le=100_000)
    request_timeout_seconds: float = Field(10, gt=0, le=3600)
    routes: list[WebhookRoute] = []


class SlackConfig(_Section):
    """`[channels.slack]`: a Slack app in Socket Mode, talking in the owner's DM (docs/slack.md)."""

    enabled: bool = True
    # vault secrets: the bot token ("xoxb-...") for the Web API, and the app-level token
    # ("xapp-...", scope connections:write) that opens the Socket Mode connection
    bot_token_secret: str = "slack_bot_token"
    app_token_secret: str = "slack_app_token"
    # the only user obeyed, in the only workspace: anything else is ignored and audited
    owner_user_id: str = Field(pattern=r"^[UW][A-Z0-9]{2,30}$")
    owner_team_id: str = Field(pattern=r"^[TE][A-Z0-9]{2,30}$")
    api_url: str = "https://slack.com"
    # after a connection was down longer than this, the owner's DM history is read for
    # what was missed (Slack redelivers an unacknowledged event only a few times)
    catch_up_after_seconds: float = Field(30, ge=0, le=86_400)
    # the Socket Mode client's ping interval (a connection silent for 4 of them is stale)
    ping_interval_seconds: float = Field(5, gt=0, le=300)


class WhatsAppConfig(_Section):
    """`[channels.whatsapp]`: the WhatsApp Business Cloud API, in the owner's chat with
    the business number (docs/whatsapp.md)."""

    enabled: bool = True
    # the only number obeyed (international format, digits only: "4915112345678")
    owner_number: str = Field(pattern=r"^[1-9][0-9]{6,15}$")
    # the business number's id in the Graph API (not the number itself)
    phone_number_id: str = Field(pattern=r"^[0-9]{1,30}$")
    # vault secrets: the Graph API access token, the app secret that signs Meta's
    # webhooks (X-Hub-Signature-256), and the verify token of the subscription handshake
    token_secret: str = "whatsapp_token"
    app_secret_secret: str = "whatsapp_app_secret"
    verify_token_secret: str = "whatsapp_verify_token"
    api_url: str = "https://graph.facebook.com/v21.0"
    # where Meta's webhooks arrive (behind a TLS-terminating proxy on the internet)
    host: str = "127.0.0.1"
    port: int = Field(8788, ge=0, le=65535)
    path: str = Field("/whatsapp", pattern=r"^/[A-Za-z0-9_./-]{0,200}$")
    max_body_bytes: int = Field(1 << 20, gt=0, le=64 << 20)
    # connections open at once (fewer when the open-file limit is low), and the time a
    # request has to arrive whole, headers and body: a flood of idle or slow connections
    # is refused or cut off instead of using up the kernel's file descriptors
    max_connections: int = Field(256, ge=1, le=100_000)
    request_timeout_seconds: float = Field(10, gt=0, le=3600)


class ChannelsConfig(_Section):
    """The owner's chat channels (seed 000 §8): each one's own section enables it, e.g.
    `[channels.telegram]`. Started after recovery, in this order: telegram, webhooks,
    slack, whatsapp; the `[recovery] adapter_*` keys set their retry backoff."""

    # a chat message that is no command: "loop" starts a loop task in `directory`;
    # a template id submits it to that template
    on_message: str = "loop"
    # a folder of its own, made when missing: not `~`, where a task would see all of it
    directory: str = "~/pfar-work"
    # a channel that is not connected this long after it was started has failed its start
    ready_timeout_seconds: float = Field(30, gt=0, le=3600)
    telegram: TelegramConfig | None = None
    webhooks: WebhooksConfig | None = None
    slack: SlackConfig | None = None
    whatsapp: WhatsAppConfig | None = None

    def receivers(self) -> list[str]:
        """The enabled channels the owner's messages go to (webhooks only take events in)."""
        return [n for n in self.enabled() if n not in INBOUND_ONLY]

    def owner_account(self, name: str) -> str:
        """The owner's account on channel `name`, the only one it obeys (kept with each
        answer given there); "" for a channel with no owner of its own."""
        if name == "telegram" and self.telegram is not None:
            return f"user {self.telegram.owner_user_id}"
        if name == "slack" and self.slack is not None:
            return f"user {self.slack.owner_user_id}"
        if name == "whatsapp" and self.whatsapp is not None:
            return f"number {self.whatsapp.owner_number}"
        return ""

    def enabled(self) -> list[str]:
        """The names of the enabled channels, in the order they start."""
        found = []
        for name in CHANNEL_ORDER:
            section = getattr(self, name, None)
            if section is not None and getattr(section, "enabled", False):
                found.append(name)
        return found


# the seed's start order (§8.3), after the CLI
CHANNEL_ORDER = ("telegram", "webhooks", "slack", "whatsapp")
INBOUND_ONLY = frozenset({"webhooks"})


class SandboxConfig(_Section):
    """`[sandbox]` (R7): commands run in a bubblewrap sandbox (docs/sandbox.md)."""

    enabled: bool = False
    # the network inside a sandbox (off: only the loopback of its own namespace)
    network: bool = False
    # variables of the kernel's environment a sandboxed command gets besides PATH, HOME,
    # USER, LANG, TERM, TZ ... (e.g. a session agent's "ANTHROPIC_API_KEY"); the rest
    # (agent sockets, tokens exported where `pfar run` started) stays out
    pass_env: list[str] = []


class HookConfig(_Section):
    """One `[[hooks]]` entry: a handler at a hook point (docs/hooks.md)."""

    point: str
    command: str | None = None  # a shell command: the event on stdin, a decision on stdout
    python: str | None = None  # module:function
    timeout_seconds: float = Field(10, gt=0, le=600)
    tools: list[str] = []  # at a tool's points: only for these tools (empty: every tool)

    @model_validator(mode="after")
    def _one_handler(self) -> HookConfig:
        point = parse_point(self.point)  # ValueError naming the points
        if (self.command is None) == (self.python is None):
            raise ValueError("give exactly one of command or python")
        if self.command is not None and not self.command.strip():
            raise ValueError("command is empty")
        if self.tools and point not in TOOL_POINTS:
            raise ValueError(f"tools is only for a tool's hook points, and {point} is none")
        return self


class Config(_Section):
    recovery: RecoveryConfig = RecoveryConfig()
    approvals: ApprovalsConfig = ApprovalsConfig()
    vault: VaultConfig = VaultConfig()
    journal: JournalConfig = JournalConfig()
    llm: LLMConfig = LLMConfig()
    sessions: SessionsConfig = SessionsConfig()
    loop: LoopConfig = LoopConfig()
    channels: ChannelsConfig = ChannelsConfig()
    sandbox: SandboxConfig = SandboxConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    hooks: list[HookConfig] = []

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


def validate_model(
    model: type[M], data: object, path: Path, context: dict[str, Any] | None = None
) -> M:
    """Validate `data`; on failure raise ConfigError naming every bad key, each with its
    problem (one fix-and-retry round per file, not one per mistake)."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        errors = [_problem(path, err, model) for err in exc.errors()]
    raise errors[0] if len(errors) == 1 else ConfigErrors(errors)


def _problem(path: Path, err: Mapping[str, Any], model: type[BaseModel]) -> ConfigError:
    # one of `ValidationError.errors()` (pydantic-core's ErrorDetails: not imported, as
    # pydantic-core is pydantic's dependency, not pfar's)
    key = ".".join(str(p) for p in err["loc"])
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key" + suggestion(model, err["loc"])
    elif err["type"] == "value_error":  # our own validators' words, without pydantic's prefix
        msg = msg.removeprefix("Value error, ")
    return ConfigError(str(path), key, msg)


DEFAULT_CONFIG_TOML = """\
# pfar kernel configuration. Every key is optional; these are the defaults.

[recovery]
max_task_age_seconds = 600          # older unfinished tasks are abandoned on restart
shutdown_timeout_seconds = 30       # SIGTERM waits this long for in-flight tasks
journal_retention_completed_hours = 24
journal_retention_failed_days = 7
adapter_max_retries = 5
adapter_retry_backoff_seconds = 5
adapter_retry_backoff_max_seconds = 60
max_recovery_attempts = 3           # kernel deaths in a row a task is in flight for, with no
                                    # progress, before its owner is asked: resume or abandon

[approvals]
approval_timeout_seconds = 3600
credential_prompt_timeout_seconds = 600

[vault]
synchronous = "FULL"

[llm]
provider = "scripted"
script = "scripts/default.toml"

[sessions]
# the agent each ACTIVE session runs, e.g. ["my-agent", "--project", "{project_path}"]
agent_command = []
resume_args = []
"""
