"""Settings files pfar refuses: malformed, or writable by someone else."""

from __future__ import annotations

from .base import PfarError


class ConfigError(PfarError):
    code = "config"

    def __init__(self, path: str, key: str, problem: str) -> None:
        where = f"{path}: {key}" if key else path
        super().__init__(f"{where}: {problem}")
        self.path, self.key, self.problem = path, key, problem

    @property
    def each(self) -> list[ConfigError]:
        """Every problem, one error each (`path: key: problem`)."""
        return [self]


class ConfigErrors(ConfigError):
    """Several problems in one file, reported together: one line each, with its key."""

    code = "config_errors"

    def __init__(self, errors: list[ConfigError]) -> None:
        first = errors[0]
        super().__init__(first.path, first.key, first.problem)
        self.args = ("\n".join(str(e) for e in errors),)
        self.errors = errors

    @property
    def each(self) -> list[ConfigError]:
        return list(self.errors)


class UnsafePermissions(ConfigError):
    """`path` (or `culprit`, a directory above it) can be written by someone else: loading
    it would let another local user choose what pfar runs as its owner."""

    code = "unsafe_permissions"

    def __init__(self, path: str, culprit: str, problem: str) -> None:
        fix = f"chown $(id -u) {culprit}" if "owned by" in problem else f"chmod go-w {culprit}"
        where = "it" if culprit == path else culprit
        super().__init__(
            path,
            "",
            f"refused: {where} {problem}, so another user could change what pfar runs; "
            f"fix it with `{fix}` and check the contents",
        )
        self.culprit = culprit
