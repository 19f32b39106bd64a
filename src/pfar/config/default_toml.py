"""The `config.toml` a new home starts with: the main keys, at their defaults."""

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
